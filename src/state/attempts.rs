//! The attempts log (`<session>.logs/attempts.jsonl`): one JSON line per worker attempt.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::*;

/// One worker attempt, kept in the state file's history.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    pub iteration: u64,
    pub criterion: String,
    pub agent: usize,
    pub started_at: u64,
    pub finished_at: u64,
    pub verdict: AttemptVerdict,
    /// The agent failure's kind (`auth`, `rate_limit`, `usage_limit`, `overloaded`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_failure: Option<crate::backend::AgentFailure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `reason` typed, as `--json`'s `why` (`{"kind": …, …}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<serde_json::Value>,
    pub exit: serde_json::Value,
    pub cost_usd: f64,
    pub usage: Usage,
    pub turns: u64,
    /// Tools the agent was refused (claude's `permission_denials`): a sign that the
    /// permission flags do not let it work.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permission_denials: Vec<String>,
    pub log: String,
    /// The coding agent that ran this attempt (`claude`, `codex`, …; `agent` is the lane).
    /// Absent in attempts logged before agents could be chosen (they were claude's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<crate::backend::Agent>,
    /// `--escalate`: the set-up it ran (`claude:opus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    /// What the agent did not report (`cost`, `tokens`): their fields above are 0 then, not
    /// a measured 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_reported: Vec<String>,
    /// With isolated workers, what became of a passing attempt's work: merged (with the
    /// files), unchanged, conflict (with the files and the ref it is kept under), error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landing: Option<crate::isolation::Landing>,
    /// Best-of-N: this worker's sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<SampleRecord>,
    /// The independent verifier's review of its claimed PASS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<crate::evidence::receipt::ReviewReceipt>,
    /// A pass: what earned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::evidence::receipt::Receipt>,
    /// A sandboxed worker: the writes its output says the sandbox refused (see
    /// `worker::sandbox::Refusals`: read from the output, not a kernel log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_writes: Option<RefusedWrites>,
    /// A sandboxed worker under `--network agent`: the hosts its proxy refused it, and its
    /// Verify command's proxy refused that.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_connections: Vec<RefusedConnection>,
    /// A stuck worker: what it kept repeating, for how long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stuck: Option<crate::backend::stuck::Stuck>,
    /// The question it asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The files the attempt's work touched (isolated workers): its criterion's footprint,
    /// which keeps overlapping criteria out of other lanes while it runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub footprint: Vec<String>,
}

/// Writes the sandbox refused a worker, as its output tells of them.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RefusedWrites {
    /// Lines of output that say a write outside the worker's writable set was refused.
    pub lines: u32,
    /// The paths they name (the first few, each once).
    pub paths: Vec<String>,
}

/// Connections the network policy refused an attempt (its worker and its Verify command), to one host.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RefusedConnection {
    /// `host:port`.
    pub host: String,
    /// How many times.
    pub count: u32,
}

/// Connections the network policy refused one criterion's workers, to one host, in a run.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetRefusal {
    pub criterion: String,
    /// `host:port`.
    pub host: String,
    pub count: u32,
}

/// Best-of-N: one sample of an attempt.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SampleRecord {
    /// From 1.
    pub number: u32,
    /// How many samples the attempt ran.
    pub of: u32,
    /// The `--mix` set-up it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    /// Its work was the one merged.
    pub selected: bool,
    /// Ended because a sibling won.
    pub ended_as_sibling: bool,
    /// Lines added and removed against its base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff_lines: Option<u64>,
    /// `--select best`: other passing criteria whose Verify commands failed in its worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<usize>,
}

/// Appends one attempt to the attempts log (JSON Lines).
pub fn append_attempt(path: &Path, rec: &AttemptRecord) -> Result<()> {
    AttemptsLog::new(path.to_path_buf()).append(rec)
}

/// A run's attempts log, open for appending from its first record on (opening it, and
/// making its folder, for each attempt was a visible part of the runner's cost per worker).
/// A write that fails closes it: the next record opens it again.
pub struct AttemptsLog {
    path: PathBuf,
    file: Option<File>,
}

impl AttemptsLog {
    pub fn new(path: PathBuf) -> AttemptsLog {
        AttemptsLog { path, file: None }
    }

    /// Appends one attempt, as one line written whole.
    pub fn append(&mut self, rec: &AttemptRecord) -> Result<()> {
        let mut line = serde_json::to_string(rec)?;
        line.push('\n');
        // The file kept open must still be the one at the path: a log deleted or replaced
        // during the run is made again, as it was when each record opened it.
        if self.file.as_ref().is_some_and(|f| !is_at(f, &self.path)) {
            self.file = None;
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(open_for_append(&self.path)?),
        };
        let written = file
            .write_all(line.as_bytes())
            .with_context(|| format!("failed to append to `{}`", self.path.display()));
        if written.is_err() {
            self.file = None;
        }
        written
    }
}

/// Whether `file` is the file at `path` (one `stat`).
fn is_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(open), Ok(there)) => open.dev() == there.dev() && open.ino() == there.ino(),
        _ => false,
    }
}

fn open_for_append(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    File::options()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("failed to open `{}`", path.display()))
}

impl SessionState {
    /// The agent that wrote the session's worker log `name` (a file name in its log folder):
    /// as its attempt records it; else the agent of the run's workers (an attempt still
    /// running); else claude, whose were the sessions logged before agents could be chosen.
    pub fn log_agent(&self, name: &str) -> crate::backend::Agent {
        read_attempts(Path::new(&self.attempts_log))
            .into_iter()
            .rev()
            .find(|r| Path::new(&r.log).file_name().is_some_and(|f| f == name))
            .and_then(|r| r.agent_name)
            .or(self.worker_agent)
            .unwrap_or_default()
    }
}

/// The largest attempts log read (half a million attempts).
const READ_AT_MOST: u64 = 256 << 20;

/// Reads an attempts log; lines that do not parse (a torn last line after a crash) are skipped.
/// Its path comes from a state file, which a worker may have written in PAI's layout: only a
/// regular file is read (not a link's target, a FIFO or a device), no larger than
/// [`READ_AT_MOST`].
pub fn read_attempts(path: &Path) -> Vec<AttemptRecord> {
    let Ok(bytes) = crate::fsutil::read_regular(path, READ_AT_MOST) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Agent;

    #[test]
    fn only_a_regular_file_is_read_as_an_attempts_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("attempts.jsonl");
        let rec = AttemptRecord {
            criterion: "ISC-A-1".into(),
            ..AttemptRecord::default()
        };
        append_attempt(&log, &rec).unwrap();
        // A torn last line, and bytes that are not UTF-8, cost only their own lines.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"\xff\xfe\n{\"criterion\": \"ISC-")
            .unwrap();
        assert_eq!(read_attempts(&log).len(), 1);
        // What a worker could plant where a state file points: a link, a FIFO (which would
        // block a read for ever), a device.
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&log, &link).unwrap();
        assert!(read_attempts(&link).is_empty());
        let fifo = dir.path().join("fifo.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read_attempts(&fifo).is_empty());
        assert!(read_attempts(Path::new("/dev/zero")).is_empty());
    }

    #[test]
    fn a_log_is_of_the_agent_its_attempt_records() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("attempts.jsonl");
        let rec = |name: &str, agent| AttemptRecord {
            log: dir.path().join(name).display().to_string(),
            agent_name: agent,
            ..AttemptRecord::default()
        };
        append_attempt(&log, &rec("iter1-ISC-1-attempt1.log", Some(Agent::Codex))).unwrap();
        append_attempt(&log, &rec("iter1-ISC-2-attempt1.log", None)).unwrap();
        let session = SessionState {
            attempts_log: log.display().to_string(),
            worker_agent: Some(Agent::Gemini),
            ..SessionState::default()
        };
        assert_eq!(session.log_agent("iter1-ISC-1-attempt1.log"), Agent::Codex);
        // Not recorded (older records) or still running: the run's agent.
        assert_eq!(session.log_agent("iter1-ISC-2-attempt1.log"), Agent::Gemini);
        assert_eq!(session.log_agent("iter2-ISC-1-attempt2.log"), Agent::Gemini);
        // A session from before agents could be chosen was claude's.
        let old = SessionState {
            attempts_log: log.display().to_string(),
            ..SessionState::default()
        };
        assert_eq!(old.log_agent("iter1-ISC-2-attempt1.log"), Agent::Claude);
    }

    #[test]
    fn a_log_deleted_or_replaced_during_the_run_is_made_again_and_keeps_every_later_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs").join("attempts.jsonl");
        let rec = |id: &str| AttemptRecord {
            criterion: id.into(),
            ..AttemptRecord::default()
        };
        let mut log = AttemptsLog::new(path.clone());
        log.append(&rec("ISC-1")).unwrap();
        std::fs::remove_file(&path).unwrap();
        log.append(&rec("ISC-2")).unwrap();
        let ids = |p: &Path| -> Vec<String> {
            read_attempts(p).into_iter().map(|r| r.criterion).collect()
        };
        assert_eq!(ids(&path), ["ISC-2"], "deleted: made again");
        // Replaced by another file (a rotation): the records go to the new one.
        std::fs::rename(&path, dir.path().join("old.jsonl")).unwrap();
        std::fs::write(&path, "").unwrap();
        log.append(&rec("ISC-3")).unwrap();
        assert_eq!(ids(&path), ["ISC-3"]);
        assert_eq!(ids(&dir.path().join("old.jsonl")), ["ISC-2"]);
    }
}
