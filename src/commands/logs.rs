//! `prdloop logs`: a worker's log rendered for people (assistant text, tool calls and their
//! results, the final result), the latest attempt by default; `-f` follows a running worker,
//! `--raw` prints the stream as written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::backend::Agent;
use crate::config::LogsSettings as Settings;
use crate::exit::Exit;
use crate::report::dim;
use crate::run::log_name::{LogKind, LogName};
use crate::state::SessionState;
use crate::worker::output_log::{self, Written};
use crate::{exit, report};

/// One worker log of a session, found by its name ([`LogName`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct LogFile {
    path: PathBuf,
    name: LogName,
}

fn parse_name(path: &Path) -> Option<LogFile> {
    let name = LogName::parse(path.file_name()?.to_str()?)?;
    (name.kind == LogKind::Worker).then(|| LogFile {
        path: path.to_path_buf(),
        name,
    })
}

/// The log to show: the criterion's given attempt, else its latest one; without a criterion,
/// the log written last.
fn pick(dir: &Path, s: &Settings) -> Result<LogFile> {
    let mut logs: Vec<(LogFile, Written)> = output_log::list(dir)
        .with_context(|| format!("failed to read the log folder `{}`", dir.display()))?
        .into_iter()
        .filter_map(|l| Some((parse_name(&l.path)?, l.written)))
        .filter(|(f, _)| s.criterion.as_deref().is_none_or(|c| f.name.is_of(c)))
        .filter(|(f, _)| s.attempt.is_none_or(|a| a == f.name.attempt))
        .collect();
    logs.sort_by_key(|(f, m)| {
        (
            *m,
            f.name.attempt,
            f.name.retry,
            f.name.iteration,
            f.name.sample,
        )
    });
    let what = match (&s.criterion, s.attempt) {
        (Some(c), Some(a)) => format!("attempt {a} of {c}"),
        (Some(c), None) => c.to_string(),
        (None, _) => "any criterion".to_string(),
    };
    logs.pop()
        .map(|(f, _)| f)
        .ok_or_else(|| anyhow::anyhow!("no worker log for {what} in `{}`", dir.display()))
}

/// How much of a log is read at a time.
const PIECE: u64 = 256 * 1024;

/// `prdloop logs <PRD> [<criterion>]`.
pub fn logs(s: &Settings) -> Result<Exit> {
    let prd = &s.prd;
    let Some(session) = SessionState::latest(&s.state_dir, prd) else {
        report::error(format!(
            "no session of {} in {}; logs are kept there by `prdloop run`",
            prd.display(),
            s.state_dir.display()
        ));
        return Ok(exit::Exit::Usage);
    };
    let dir = PathBuf::from(&session.log_dir);
    let log = match pick(&dir, s) {
        Ok(l) => l,
        Err(e) => {
            report::error(format!("{e:#}"));
            return Ok(exit::Exit::Usage);
        }
    };
    report::eline(&dim(&format!(
        "{} · attempt {}{} · iteration {} · {}",
        log.name.id,
        log.name.attempt,
        log.name
            .sample
            .map(|k| format!(" · sample {k}"))
            .unwrap_or_default(),
        log.name.iteration,
        log.path.display()
    )));
    let agent = session.log_agent(&log.name.to_string());
    let mut log_bytes = output_log::Follow::open(&log.path)
        .with_context(|| format!("failed to open `{}`", log.path.display()))?;
    // Line by line, printed as read: a log of any size streams through in constant memory.
    // A line still being written is completed on a later round.
    let mut line = Vec::new();
    let mut ended = false;
    loop {
        let piece = log_bytes.next(PIECE)?;
        if !piece.is_empty() {
            for part in piece.split_inclusive(|&b| b == b'\n') {
                line.extend_from_slice(part);
                if let Some(done) = line.strip_suffix(b"\n") {
                    ended |= show(agent, done, s.raw)?;
                    line.clear();
                }
            }
            continue;
        }
        // At the end of the log for now.
        if !s.follow || ended || !still_running(prd, &session.session_id) {
            if !line.is_empty() {
                show(agent, &line, s.raw)?;
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(exit::Exit::Success)
}

/// Prints one line of the log `agent` wrote (rendered unless `raw`); says whether it was the
/// result.
fn show(agent: Agent, line: &[u8], raw: bool) -> Result<bool> {
    let line = String::from_utf8_lossy(line);
    let is_result = serde_json::from_str::<Value>(&line)
        .is_ok_and(|v| v.get("type").and_then(Value::as_str) == Some("result"));
    let shown = if raw {
        Some(line.into_owned())
    } else {
        crate::backend::render::render_line(agent, &line)
    };
    if let Some(l) = shown {
        report::stdout(&format!("{l}\n"))?;
    }
    Ok(is_result)
}

/// Whether the session still holds the PRD's lock (its workers may still write).
fn still_running(prd: &Path, session: &str) -> bool {
    crate::state::lock_holder(prd)
        .ok()
        .flatten()
        .is_some_and(|h| h.session_id == session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_names_and_other_lines() {
        let f = parse_name(Path::new("/x/iter3-ISC-A-1-attempt2.log"))
            .unwrap()
            .name;
        assert_eq!((f.iteration, f.id.as_str(), f.attempt), (3, "ISC-A-1", 2));
        assert!(parse_name(Path::new("/x/iter3-ISC-A-1-attempt2-verify.log")).is_none());
        assert!(parse_name(Path::new("/x/iter3-ISC-A-1-attempt2-verifier.log")).is_none());
        let r = parse_name(Path::new("/x/iter1-ISC-A-1-attempt1-retry2.log"))
            .unwrap()
            .name;
        assert_eq!((r.attempt, r.retry), (1, 2));
        // A best-of-N sample's log is a worker log too.
        let b = parse_name(Path::new("/x/iter1-ISC-A-1-attempt1-sample2.log"))
            .unwrap()
            .name;
        assert_eq!((b.attempt, b.sample), (1, Some(2)));
        assert!(parse_name(Path::new("/x/attempts.jsonl")).is_none());
    }

    #[test]
    fn the_latest_attempt_of_a_criterion_is_picked() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "iter1-ISC-A-1-attempt1.log",
            "iter2-ISC-A-1-attempt2.log",
            "iter1-ISC-B-1-attempt1.log",
        ] {
            std::fs::write(dir.path().join(name), "x\n").unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        let s = |criterion: Option<&str>, attempt| Settings {
            prd: dir.path().join("PRD.md"),
            criterion: criterion.map(String::from),
            attempt,
            follow: false,
            raw: false,
            state_dir: dir.path().to_path_buf(),
        };
        assert_eq!(
            pick(dir.path(), &s(Some("ISC-A-1"), None))
                .unwrap()
                .name
                .attempt,
            2
        );
        assert_eq!(
            pick(dir.path(), &s(Some("ISC-A-1"), Some(1)))
                .unwrap()
                .name
                .iteration,
            1
        );
        assert_eq!(pick(dir.path(), &s(None, None)).unwrap().name.id, "ISC-B-1");
        assert!(pick(dir.path(), &s(Some("ISC-Z-9"), None)).is_err());
    }
}
