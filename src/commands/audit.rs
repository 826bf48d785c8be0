//! `prdloop audit <PRD>`: do the ticks still hold? Every `checked` tick's command (from its
//! receipt in the PRD's latest session) is run again on the checkout as it is now, in a
//! throw-away copy (never the user's files); `reviewed` and `claimed` ticks are listed for
//! what they are, a receipt of another command than the criterion's Verify now as `stale`.
//! Exit 0 when every checked tick holds, 1 when one does not (or is stale), 9 when there are
//! ticks and not one could be checked again (a warning says so: in `--json`, the last line).

use std::path::Path;

use anyhow::Result;

use super::warning::{Warning, WarningLine};
use crate::config::{AuditSettings, Exec};
use crate::evidence::receipt::Receipt;
use crate::exit::Exit;
use crate::report::json::Version;
use crate::run::reason::FailReason;
use crate::state::{Evidence, SessionState};
use crate::verify::copy::Copy;
use crate::verify::{self, Check};
use crate::worker::Cancel;
use crate::{exit, outln, report};

/// What became of one tick.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "finding")]
enum Finding {
    /// Its command passes again.
    Holds { command: String },
    /// Its command fails now (`why`: as a run's `regression` event says it).
    Regressed {
        command: String,
        why: FailReason,
        /// How it ended, in words (as a run's events carry `reason` beside `why`).
        reason: String,
    },
    /// Its command cannot run here (not installed; `why`: `verify_not_run`).
    CannotRun {
        command: String,
        why: FailReason,
        reason: String,
    },
    /// Its receipt is for another method than the criterion's Verify now: not re-run (it
    /// would vouch for a check the PRD no longer asks for). `now`: the current command,
    /// when there is one.
    Stale {
        command: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        now: Option<String>,
    },
    /// An independent verifier agreed; no command to run again.
    Reviewed { by: String },
    /// Only the worker's word.
    Claimed,
    /// Ticked before prdloop ran, or no receipt was kept.
    NoReceipt,
}

/// One tick's line of `audit --json` (`"event": "audit"`).
#[derive(Debug, serde::Serialize)]
#[serde(tag = "event", rename = "audit")]
struct Row {
    id: String,
    #[serde(flatten)]
    finding: Finding,
    version: Version,
}

impl Finding {
    /// Its command cannot run here: `reason` says why.
    fn cannot_run(command: String, reason: String) -> Finding {
        Finding::CannotRun {
            command,
            why: FailReason::VerifyNotRun {
                error: reason.clone(),
            },
            reason,
        }
    }
}

pub fn audit(s: &AuditSettings) -> Result<Exit> {
    let (path, exec, json) = (s.prd.clone(), &s.exec, s.json);
    let doc = crate::commands::load_prd(&path)?;
    let paths = &exec.paths;
    let canon = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    let state = SessionState::latest(&paths.state_dir, &canon)
        .or_else(|| SessionState::latest(&paths.state_dir, &path));
    let receipts: std::collections::HashMap<String, Receipt> = state
        .as_ref()
        .map(|s| {
            s.criteria
                .iter()
                .filter_map(|c| c.receipt.clone().map(|r| (c.id.clone(), r)))
                .collect()
        })
        .unwrap_or_default();
    let ticked: Vec<&crate::prd::Criterion> = doc.criteria.iter().filter(|c| c.checked).collect();
    // The command each checked receipt holds, and the criterion's own now: a receipt is
    // re-run only while they are the same.
    let recorded = |c: &crate::prd::Criterion| -> Option<(String, Option<String>)> {
        let r = receipts.get(&c.id)?;
        let check = r
            .check
            .as_ref()
            .filter(|_| r.evidence == Evidence::Checked)?;
        let now = c.command(&exec.verify_types).map(str::to_string);
        Some((check.command.clone(), now))
    };
    let to_run: Vec<(String, String)> = ticked
        .iter()
        .filter_map(|c| {
            let (command, now) = recorded(c)?;
            (now.as_deref() == Some(command.as_str())).then(|| (c.id.clone(), command))
        })
        .collect();
    let copy = if to_run.is_empty() {
        None
    } else {
        Some(Copy::of(&paths.workdir, "audit")?)
    };
    let checks = match &copy {
        Some(copy) => run_all(copy, &to_run, exec, &path)?,
        None => Vec::new(),
    };
    let mut rows = Vec::new();
    for c in &ticked {
        let finding = match receipts.get(&c.id) {
            None => Finding::NoReceipt,
            Some(r) => match r.evidence() {
                Evidence::Checked if !to_run.iter().any(|(id, _)| *id == c.id) => {
                    match recorded(c) {
                        Some((command, now)) => Finding::Stale { command, now },
                        None => Finding::NoReceipt,
                    }
                }
                Evidence::Checked => match checks.iter().find(|(id, _)| *id == c.id) {
                    Some((_, Ok(check))) if check.passed() => Finding::Holds {
                        command: check.command.clone(),
                    },
                    Some((_, Ok(check))) if check.unrunnable() => {
                        Finding::cannot_run(check.command.clone(), check.reason())
                    }
                    Some((_, Ok(check))) => Finding::Regressed {
                        command: check.command.clone(),
                        why: FailReason::regression(check),
                        reason: check.reason(),
                    },
                    Some((_, Err(e))) => Finding::cannot_run(
                        r.check
                            .as_ref()
                            .map(|x| x.command.clone())
                            .unwrap_or_default(),
                        e.to_string(),
                    ),
                    None => Finding::NoReceipt,
                },
                Evidence::Reviewed => Finding::Reviewed {
                    by: r
                        .review
                        .as_ref()
                        .map(|x| x.setup.clone())
                        .unwrap_or_default(),
                },
                Evidence::Claimed => Finding::Claimed,
                Evidence::Before => Finding::NoReceipt,
            },
        };
        rows.push(Row {
            id: c.id.clone(),
            finding,
            version: Version,
        });
    }
    let failing = rows
        .iter()
        .filter(|r| {
            matches!(
                r.finding,
                Finding::Regressed { .. } | Finding::CannotRun { .. } | Finding::Stale { .. }
            )
        })
        .count();
    // Ticks, and not one could be checked again: passing would vouch for nothing.
    let vouchless =
        (failing == 0 && !rows.is_empty() && to_run.is_empty()).then(|| Warning::NothingVouches {
            prd: path.clone(),
            state_dir: paths.state_dir.clone(),
        });
    print(&path, &rows, vouchless.as_ref(), json)?;
    Ok(if failing > 0 {
        exit::Exit::Failure
    } else if let Some(w) = vouchless {
        report::warn(w);
        exit::Exit::Unchecked
    } else {
        exit::Exit::Success
    })
}

/// The rows, and in `--json` the warning as the last line (people read it on stderr).
fn print(path: &Path, rows: &[Row], warning: Option<&Warning>, json: bool) -> Result<()> {
    let mut out = String::new();
    if json {
        for r in rows {
            report::json::push_report_line(&mut out, r)?;
        }
        if let Some(w) = warning {
            report::json::push_report_line(&mut out, &WarningLine::of(w))?;
        }
        report::stdout(&out)?;
        return Ok(());
    }
    let count = |f: fn(&Finding) -> bool| rows.iter().filter(|r| f(&r.finding)).count();
    for r in rows {
        let line = match &r.finding {
            Finding::Holds { command } => format!("holds      `{command}` passes again"),
            Finding::Regressed {
                command, reason, ..
            } => {
                format!(
                    "REGRESSED  `{command}`: {}",
                    crate::text::one_line(reason, 300)
                )
            }
            Finding::CannotRun {
                command, reason, ..
            } => {
                format!(
                    "cannot run `{command}` here: {}",
                    crate::text::one_line(reason, 200)
                )
            }
            Finding::Stale { command, now } => match now {
                Some(now) => format!(
                    "stale      ticked for `{command}`, but its Verify is `{now}` now: not re-run"
                ),
                None => format!(
                    "stale      ticked for `{command}`, but it has no Verify command now: not re-run"
                ),
            },
            Finding::Reviewed { by } => {
                format!("reviewed   by an independent verifier ({by}); no command to run")
            }
            Finding::Claimed => "claimed    only the worker said so".to_string(),
            Finding::NoReceipt => "no receipt ticked before prdloop's run, or by hand".to_string(),
        };
        outln!(out, "  {:<16} {line}", r.id);
    }
    outln!(
        out,
        "{}: {} ticked · {} checked and holding · {} regressed · {} cannot run here · {}{} reviewed · {} claimed · {} without a receipt",
        path.display(),
        rows.len(),
        count(|f| matches!(f, Finding::Holds { .. })),
        count(|f| matches!(f, Finding::Regressed { .. })),
        count(|f| matches!(f, Finding::CannotRun { .. })),
        match count(|f| matches!(f, Finding::Stale { .. })) {
            0 => String::new(),
            n => format!("{n} stale · "),
        },
        count(|f| matches!(f, Finding::Reviewed { .. })),
        count(|f| matches!(f, Finding::Claimed)),
        count(|f| matches!(f, Finding::NoReceipt)),
    );
    report::stdout(&out)?;
    Ok(())
}

type Ran = Vec<(
    String,
    std::result::Result<Check, crate::worker::SpawnError>,
)>;

fn run_all(copy: &Copy, to_run: &[(String, String)], exec: &Exec, prd: &Path) -> Result<Ran> {
    // The commands run code workers wrote: under a worker's rules for the copy, where the
    // kernel can sandbox.
    let mut sandbox = crate::config::Sandboxing::new(&Default::default(), [])?;
    let _ = sandbox.decide();
    let settings = verify::Settings::new(
        copy.workdir.clone(),
        exec.verify_timeout,
        exec.kill_grace,
        None,
        prd,
    )
    .sandboxed(sandbox.check_rules(copy.top()));
    let logs = copy.scratch().join("logs");
    let jobs = to_run
        .iter()
        .map(|(id, command)| {
            settings.job(
                id,
                command,
                logs.join(format!("{}.log", crate::text::file_safe(id))),
            )
        })
        .collect();
    let rt = super::runtime()?;
    Ok(rt.block_on(async {
        let (_tx, rx) = tokio::sync::watch::channel(Cancel::None);
        verify::check_many(jobs, 1, rx).await
    }))
}
