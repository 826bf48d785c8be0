//! The run's warnings, as `RunEvent::Warning` carries them: one variant per kind, either an
//! owner module's typed warning or what the run's core and dispatcher say themselves, with
//! typed fields. Its text is its `Display`, which the reporter prints after `warning:`.

pub mod prd;
pub mod store;

use std::fmt;
use std::path::PathBuf;

use crate::run::reason::StopReason;

/// One warning of the run.
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    Isolation(crate::isolation::Warning),
    /// What a worker's final text said that is not taken.
    Verdict(crate::backend::verdict::Warning),
    Store(store::Warning),
    /// A sync of the PRD.
    Prd(prd::Warning),
    /// Connections the network policy refused a worker or a check.
    NetRefused(crate::worker::network::Refused),
    /// Writes the sandbox refused a worker.
    SandboxRefused(crate::worker::sandbox::Refused),
    /// A notification target fails.
    Notify(crate::notify::Failing),
    /// `--junit`: the file could not be written (the error names it).
    JunitNotWritten {
        error: String,
    },
    /// GitHub's job summary file: the file system's error.
    SummaryNotAppended {
        path: PathBuf,
        error: String,
    },
    /// A criterion's Verify command changed during the run; the pinned one still decides.
    VerifyChanged {
        prd: PathBuf,
        line: usize,
        id: String,
        now: Option<String>,
        pinned: String,
    },
    /// A criterion's Verify command could not be started: the program, and the operating
    /// system's error.
    CheckNotRun {
        id: String,
        program: String,
        error: String,
    },
    /// A ticked criterion whose check at the start measured nothing (its reason, on one line).
    TickedMeasuredNothing {
        id: String,
        reason: String,
    },
    /// A ticked criterion whose check fails at the start; the author's tick stands.
    TickedCheckFails {
        id: String,
        reason: String,
    },
    /// A criterion whose own check passes at the start, left open until `need`, which it
    /// needs and which fails, passes.
    NeedFails {
        id: String,
        need: String,
    },
    /// A criterion whose Verify command cannot run here: the agent's verdict counts.
    Unverifiable {
        id: String,
        why: String,
    },
    /// `--stall`: no criterion newly passed in `stall` iterations in a row.
    Stalled {
        stall: u64,
        limit: u64,
    },
    /// The criterion a lane was to run next is gone from the PRD.
    NoLongerInPrd {
        id: String,
    },
    /// A pass that landed before a crash whose record cannot be read (the parser's error).
    RecoveredUnreadable {
        label: String,
        error: String,
    },
    /// A pass that landed before a crash, for a criterion gone from the PRD.
    RecoveredGone {
        id: String,
    },
    /// Waiting would pass `--max-wait`: the run stops, for this.
    OverMaxWait(StopReason),
    /// The worker for `id` was refused these tools.
    ToolsRefused {
        id: String,
        tools: Vec<String>,
    },
    /// A question could not be kept in the questions file (its error).
    QuestionNotKept {
        path: PathBuf,
        error: String,
    },
    /// Notifications still queued at exit, dropped after `bound_ms`.
    NotificationsDropped {
        dropped: usize,
        bound_ms: u64,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Isolation(w) => w.fmt(f),
            Warning::Verdict(w) => w.fmt(f),
            Warning::Store(w) => w.fmt(f),
            Warning::Prd(w) => w.fmt(f),
            Warning::NetRefused(w) => w.fmt(f),
            Warning::SandboxRefused(w) => w.fmt(f),
            Warning::Notify(w) => w.fmt(f),
            Warning::JunitNotWritten { error } => f.write_str(error),
            Warning::SummaryNotAppended { path, error } => write!(
                f,
                "failed to append the job summary to {}: {error}",
                path.display()
            ),
            Warning::VerifyChanged {
                prd,
                line,
                id,
                now,
                pinned,
            } => {
                let now = now
                    .as_ref()
                    .map_or_else(|| "none".to_string(), |n| format!("`{n}`"));
                write!(
                    f,
                    "{}:{line}: the Verify command of {id} changed during the run (now {now}); the original (`{pinned}`) still decides",
                    prd.display()
                )
            }
            Warning::CheckNotRun { id, program, error } => write!(
                f,
                "could not run the Verify command of {id}: failed to start `{program}`: {error}"
            ),
            Warning::TickedMeasuredNothing { id, reason } => write!(
                f,
                "{id} is ticked, but its check measured nothing: {reason} (left as it is)"
            ),
            Warning::TickedCheckFails { id, reason } => write!(
                f,
                "{id} is ticked but its check fails now: {reason} (left ticked; --recheck unticks it)"
            ),
            Warning::NeedFails { id, need } => write!(
                f,
                "{id}'s check passes already, but it needs {need}, which fails: left open until {need} passes"
            ),
            Warning::Unverifiable { id, why } => write!(
                f,
                "{id} cannot be verified here: {why}; the agent's verdict counts for it"
            ),
            Warning::Stalled { stall, limit } => write!(
                f,
                "no criterion newly passed in {stall} iteration(s) in a row (--stall {limit}); stopping"
            ),
            Warning::NoLongerInPrd { id } => write!(f, "{id} is no longer in the PRD; skipped"),
            Warning::RecoveredUnreadable { label, error } => write!(
                f,
                "{label}'s work landed before a crash, but the record of its pass cannot be read ({error}): it is not credited"
            ),
            Warning::RecoveredGone { id } => write!(
                f,
                "{id}'s work landed before a crash, but {id} is no longer in the PRD: its pass is not credited"
            ),
            Warning::OverMaxWait(why) => {
                write!(f, "{why}; stopping with the state saved for resume")
            }
            Warning::ToolsRefused { id, tools } => write!(
                f,
                "the worker for {id} was refused tools ({}); check --permission-mode and --allowed-tools",
                tools.join(", ")
            ),
            Warning::QuestionNotKept { path, error } => write!(
                f,
                "the question could not be kept in {} ({error}): it is in this run's state only",
                path.display()
            ),
            Warning::NotificationsDropped { dropped, bound_ms } => write!(
                f,
                "{dropped} notification(s) were dropped at exit: their targets had not taken them within {:.1} s",
                *bound_ms as f64 / 1000.0
            ),
        }
    }
}

macro_rules! from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl From<$t> for Warning {
            fn from(w: $t) -> Warning {
                Warning::$v(w)
            }
        })*
    };
}

from! {
    crate::isolation::Warning => Isolation,
    crate::backend::verdict::Warning => Verdict,
    store::Warning => Store,
    prd::Warning => Prd,
    crate::worker::network::Refused => NetRefused,
    crate::worker::sandbox::Refused => SandboxRefused,
    crate::notify::Failing => Notify,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of the run's own warnings are the ones it said with `format!` before they
    /// were typed (the human output must not change).
    #[test]
    fn each_says_what_it_always_said() {
        let said = [
            (
                Warning::VerifyChanged {
                    prd: "/w/PRD.md".into(),
                    line: 5,
                    id: "ISC-A-1".into(),
                    now: None,
                    pinned: "true".into(),
                },
                "/w/PRD.md:5: the Verify command of ISC-A-1 changed during the run (now none); the original (`true`) still decides",
            ),
            (
                Warning::CheckNotRun {
                    id: "ISC-A-1".into(),
                    program: "sh".into(),
                    error: "No such file or directory (os error 2)".into(),
                },
                "could not run the Verify command of ISC-A-1: failed to start `sh`: No such file or directory (os error 2)",
            ),
            (
                Warning::TickedMeasuredNothing {
                    id: "ISC-A-1".into(),
                    reason: "no test ran".into(),
                },
                "ISC-A-1 is ticked, but its check measured nothing: no test ran (left as it is)",
            ),
            (
                Warning::TickedCheckFails {
                    id: "ISC-A-1".into(),
                    reason: "exit 1".into(),
                },
                "ISC-A-1 is ticked but its check fails now: exit 1 (left ticked; --recheck unticks it)",
            ),
            (
                Warning::NeedFails {
                    id: "ISC-A-2".into(),
                    need: "ISC-A-1".into(),
                },
                "ISC-A-2's check passes already, but it needs ISC-A-1, which fails: left open until ISC-A-1 passes",
            ),
            (
                Warning::Unverifiable {
                    id: "ISC-A-1".into(),
                    why: "no docker".into(),
                },
                "ISC-A-1 cannot be verified here: no docker; the agent's verdict counts for it",
            ),
            (
                Warning::Stalled { stall: 3, limit: 3 },
                "no criterion newly passed in 3 iteration(s) in a row (--stall 3); stopping",
            ),
            (
                Warning::NoLongerInPrd {
                    id: "ISC-A-1".into(),
                },
                "ISC-A-1 is no longer in the PRD; skipped",
            ),
            (
                Warning::RecoveredUnreadable {
                    label: "lane 2".into(),
                    error: "EOF".into(),
                },
                "lane 2's work landed before a crash, but the record of its pass cannot be read (EOF): it is not credited",
            ),
            (
                Warning::RecoveredGone {
                    id: "ISC-A-1".into(),
                },
                "ISC-A-1's work landed before a crash, but ISC-A-1 is no longer in the PRD: its pass is not credited",
            ),
            (
                Warning::ToolsRefused {
                    id: "ISC-A-1".into(),
                    tools: vec!["Bash".into(), "Write".into()],
                },
                "the worker for ISC-A-1 was refused tools (Bash, Write); check --permission-mode and --allowed-tools",
            ),
            (
                Warning::QuestionNotKept {
                    path: "/w/questions.md".into(),
                    error: "read-only".into(),
                },
                "the question could not be kept in /w/questions.md (read-only): it is in this run's state only",
            ),
            (
                Warning::NotificationsDropped {
                    dropped: 2,
                    bound_ms: 300,
                },
                "2 notification(s) were dropped at exit: their targets had not taken them within 0.3 s",
            ),
            (
                Warning::JunitNotWritten {
                    error: "writing /w/j.xml: denied".into(),
                },
                "writing /w/j.xml: denied",
            ),
            (
                Warning::SummaryNotAppended {
                    path: "/w/summary.md".into(),
                    error: "denied".into(),
                },
                "failed to append the job summary to /w/summary.md: denied",
            ),
        ];
        for (w, text) in said {
            assert_eq!(w.to_string(), text);
        }
    }

    /// A wrapped warning says its owner's words.
    #[test]
    fn a_wrapped_warning_says_its_owners_words() {
        let net = crate::worker::network::NetRefusals {
            hosts: vec![("evil.example:443".into(), 2)],
        };
        let w: Warning = net.check_warning("ISC-A-1").unwrap().into();
        assert_eq!(
            w.to_string(),
            "the network policy refused ISC-A-1's check 2 connection(s): evil.example:443 (2)"
        );
        let w: Warning = crate::notify::Failing {
            target: "ntfy".into(),
            error: "timeout".into(),
        }
        .into();
        assert_eq!(
            w.to_string(),
            "notifications to ntfy fail (timeout); the loop goes on without them"
        );
    }
}
