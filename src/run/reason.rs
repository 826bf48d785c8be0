//! Why things happened, as typed values: why an attempt failed ([`FailReason`]), why a run
//! stopped early ([`StopReason`]) and the loop's own notices ([`Notice`]). Each is decided
//! where the loop decides it and carried as it is; its words are its `Display`, here and
//! nowhere else (the reporter's lines, the summary, the state file's text fields all use it).
//! `--json` carries each as `{"kind": …, …}` (serde) beside the words, its fields camelCase
//! as every `--json` key is.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::backend::Kind;
use crate::backend::verdict::{Exit, WorkerFail};
use crate::isolation::Landing;
use crate::report::duration;
use crate::text::one_line;

/// Why an attempt failed (or, for an agent failure, why the worker did not count).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum FailReason {
    /// The agent said PASS, but its Verify command failed (`tail`: its output's last lines).
    VerifyFailed {
        command: String,
        exit: Exit,
        tail: String,
    },
    /// Its Verify command fails (the check before the first iteration).
    CheckFailed {
        command: String,
        exit: Exit,
        tail: String,
    },
    /// A criterion that passed before fails its Verify command now.
    Regression {
        command: String,
        exit: Exit,
        tail: String,
    },
    /// Its Verify command ended well, but the test runners it ran say they ran no test (at
    /// an attempt's check, before the first iteration, or as a regression).
    RanNoTest { command: String, why: String },
    /// The agent said PASS and its Verify command could not be run at all.
    VerifyNotRun { error: String },
    /// The attempt changed files its Verify command runs.
    ProtectedChanged { files: Vec<String> },
    /// Without lanes, the PRD's orders changed during the attempt (its criteria's text or
    /// Verify methods, its `prdloop:` map): refused, and put back as they were.
    PrdChanged { what: Vec<String> },
    /// The independent verifier found the claimed PASS not done.
    VerifierRejected { setup: String, reasons: String },
    /// The claimed PASS could not be reviewed.
    NotReviewed { why: String },
    /// The worker could not be started (`errno`: the system's error number).
    NotStarted {
        program: String,
        error: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        errno: Option<i32>,
    },
    /// It passed, but its work did not reach the checkout.
    NotLanded { landing: Landing },
    /// A `severity: critical` Test Strategy probe fails: the product is down.
    CriticalProbe { reason: Box<FailReason> },
    /// The worker's task failed inside prdloop.
    Internal { error: String },
    /// The worker ran past `--timeout` (`text`: what the agent failure said).
    #[serde(rename = "timed_out")]
    AgentTimedOut { after_ms: u64, text: String },
    /// The agent failed, not the criterion (auth, limits, crash, …).
    AgentFailed { failure: Kind, text: String },
    /// The worker's own verdict (its exit and its `RESULT:` line).
    #[serde(untagged)]
    Worker(WorkerFail),
}

impl FailReason {
    /// An agent failure's reason: `timed_out` with how long it ran when it was a timeout.
    pub fn agent(failure: &crate::backend::AgentFailure, exit: Option<&Exit>) -> FailReason {
        match (failure.kind, exit) {
            (Kind::Timeout, Some(Exit::TimedOut { after_secs })) => FailReason::AgentTimedOut {
                after_ms: after_secs * 1000,
                text: failure.text.clone(),
            },
            _ => FailReason::AgentFailed {
                failure: failure.kind,
                text: failure.text.clone(),
            },
        }
    }
}

impl FailReason {
    /// A worker ended by `--stuck-after` (alone, or as the critical probe's cause).
    pub fn is_stuck(&self) -> bool {
        match self {
            FailReason::Worker(WorkerFail::Stuck { .. }) => true,
            FailReason::CriticalProbe { reason } => reason.is_stuck(),
            _ => false,
        }
    }

    /// A criterion's check before the first iteration that fails.
    pub fn check(c: &crate::verify::Check) -> FailReason {
        if let Some(r) = FailReason::ran_no_test(c) {
            return r;
        }
        FailReason::CheckFailed {
            command: c.command.clone(),
            exit: c.exit.clone(),
            tail: c.tail.clone(),
        }
    }

    /// A passing criterion's check that fails now.
    pub fn regression(c: &crate::verify::Check) -> FailReason {
        if let Some(r) = FailReason::ran_no_test(c) {
            return r;
        }
        FailReason::Regression {
            command: c.command.clone(),
            exit: c.exit.clone(),
            tail: c.tail.clone(),
        }
    }

    /// A check that ended well but ran no test.
    pub fn ran_no_test(c: &crate::verify::Check) -> Option<FailReason> {
        c.ran_no_test.as_ref().map(|why| FailReason::RanNoTest {
            command: c.command.clone(),
            why: why.clone(),
        })
    }
}

impl From<WorkerFail> for FailReason {
    fn from(w: WorkerFail) -> FailReason {
        FailReason::Worker(w)
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailReason::VerifyFailed {
                command,
                exit,
                tail,
            } => write!(
                f,
                "the agent said PASS, but its Verify command {}",
                crate::verify::describe(command, exit, tail)
            ),
            FailReason::CheckFailed {
                command,
                exit,
                tail,
            } => write!(f, "{}", crate::verify::describe(command, exit, tail)),
            FailReason::Regression {
                command,
                exit,
                tail,
            } => write!(
                f,
                "regression: {}",
                crate::verify::describe(command, exit, tail)
            ),
            FailReason::RanNoTest { command, why } => write!(
                f,
                "its Verify command {}",
                crate::verify::ran_nothing(command, why)
            ),
            FailReason::VerifyNotRun { error } => {
                write!(f, "the Verify command could not be run: {error}")
            }
            FailReason::ProtectedChanged { files } => write!(
                f,
                "the attempt changed {}, which its Verify command runs: that command is no \
                 evidence of this attempt's work; leave the check's files as they are",
                files.join(", ")
            ),
            FailReason::PrdChanged { what } => write!(
                f,
                "the PRD's orders changed during the attempt ({}): without lanes a worker \
                 writes the PRD, so the attempt is refused and they are put back as they were; \
                 leave the PRD's criteria and its prdloop: map as they are",
                what.join(", ")
            ),
            FailReason::VerifierRejected { setup, reasons } => write!(
                f,
                "the independent verifier ({setup}) found it not done: {reasons}"
            ),
            FailReason::NotReviewed { why } => write!(
                f,
                "the claimed PASS could not be reviewed ({why}); a claim alone does not pass"
            ),
            FailReason::NotStarted { program, error, .. } => {
                write!(f, "failed to start `{program}`: {error}")
            }
            FailReason::NotLanded { landing } => {
                write!(f, "{}", landing.failure().unwrap_or_default())
            }
            FailReason::CriticalProbe { reason } => write!(
                f,
                "its `severity: critical` probe fails (by its Test Strategy the product is down): {reason}"
            ),
            FailReason::Internal { error } => {
                write!(f, "internal error while running the worker: {error}")
            }
            FailReason::AgentTimedOut { text, .. } => {
                write!(f, "{}: {}", Kind::Timeout.label(), one_line(text, 300))
            }
            FailReason::AgentFailed { failure, text } => {
                write!(f, "{}: {}", failure.label(), one_line(text, 300))
            }
            FailReason::Worker(w) => write!(f, "{w}"),
        }
    }
}

/// Why a run stopped before its criteria were done (or, `Blocked`, why it is not complete).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum StopReason {
    /// `--max-cost`: the next worker could pass it.
    BudgetReached {
        /// What the workers that ended reported.
        spent_usd: f64,
        /// Workers running, and what they are expected to cost (not spent yet).
        running: u32,
        running_usd: f64,
        max_usd: f64,
        next_usd: f64,
    },
    /// `--max-time`: the next worker could pass it.
    TimeLimit {
        ran_ms: u64,
        max_ms: u64,
        next_ms: u64,
    },
    /// The agent cannot work (auth, billing, cannot start).
    AgentFailure { failure: Kind, text: String },
    /// Another sub-loop's agent cannot work (`prdloop run A.md B.md`).
    AgentFailureElsewhere {
        prd: String,
        reason: Box<StopReason>,
    },
    /// Waiting out limits would pass `--max-wait`.
    MaxWait {
        label: String,
        extension_ms: u64,
        max_wait_ms: u64,
        waited_ms: u64,
    },
    /// A worker's git worktree could not be made ready.
    Worktree { criterion: String, error: String },
    /// `--stall`: no criterion newly passed in this many iterations in a row.
    Stalled { iterations: u64 },
    /// Everything else passes, but open boxes prdloop cannot read (`file:line`), or an ISA's
    /// `## Not yet specified`, are left.
    Unfinished {
        unreadable: Vec<String>,
        unspecified: Vec<String>,
    },
}

impl StopReason {
    /// How the run ends for it.
    pub fn end(&self) -> super::end::End {
        use super::end::End;
        match self {
            StopReason::BudgetReached { .. } => End::Budget,
            StopReason::TimeLimit { .. } => End::TimeLimit,
            StopReason::AgentFailure { .. } | StopReason::AgentFailureElsewhere { .. } => {
                End::AgentFatal
            }
            StopReason::MaxWait { .. } => End::MaxWait,
            StopReason::Worktree { .. } => End::Worktree,
            StopReason::Stalled { .. } => End::Stalled,
            StopReason::Unfinished { .. } => End::Blocked,
        }
    }
}

fn ms(ms: u64) -> String {
    duration(Duration::from_millis(ms))
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::BudgetReached {
                spent_usd,
                running,
                running_usd,
                max_usd,
                next_usd,
            } => {
                write!(f, "spent ${spent_usd:.4} of --max-cost ${max_usd:.2}")?;
                if *running > 0 {
                    write!(
                        f,
                        ", ${running_usd:.4} more expected from {running} running worker(s)"
                    )?;
                }
                write!(
                    f,
                    "; the next worker could pass it (about ${next_usd:.4} each)"
                )
            }
            StopReason::TimeLimit {
                ran_ms,
                max_ms,
                next_ms,
            } => write!(
                f,
                "ran {} of --max-time {}; the next worker could pass it (about {} each)",
                ms(*ran_ms),
                ms(*max_ms),
                ms(*next_ms)
            ),
            StopReason::AgentFailure { failure, text } => {
                write!(f, "{}: {}", failure.label(), one_line(text, 300))
            }
            StopReason::AgentFailureElsewhere { prd, reason } => {
                write!(f, "the agent cannot work (in {prd}: {reason})")
            }
            StopReason::MaxWait {
                label,
                extension_ms,
                max_wait_ms,
                waited_ms,
            } => write!(
                f,
                "{label} again; waiting {} more would pass --max-wait {} (already waited {})",
                ms(*extension_ms),
                ms(*max_wait_ms),
                ms(*waited_ms)
            ),
            StopReason::Worktree { criterion, error } => write!(
                f,
                "the worktree for {criterion} could not be made ready: {error}"
            ),
            StopReason::Stalled { iterations } => write!(
                f,
                "no criterion newly passed in {iterations} iteration(s) in a row"
            ),
            StopReason::Unfinished {
                unreadable,
                unspecified,
            } => {
                let (u, s) = (unreadable.join(", "), unspecified.join(", "));
                match (unreadable.is_empty(), unspecified.is_empty()) {
                    (false, true) => {
                        write!(f, "open boxes prdloop cannot read are left ({u})")
                    }
                    (true, false) => {
                        write!(f, "`## Not yet specified` still holds open questions ({s})")
                    }
                    _ => write!(
                        f,
                        "open boxes prdloop cannot read are left ({u}), and `## Not yet specified` still holds open questions ({s})"
                    ),
                }
            }
        }
    }
}

/// The loop's notices: a state change worth a line of its own.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// `--max-cost` or `--max-time` stops new workers.
    NoNewWorkers(StopReason),
    /// `--max-cost` lets only some of an attempt's samples start.
    SamplesCut {
        id: String,
        count: u32,
        want: u32,
        max_cost: f64,
        per_worker: f64,
    },
    StopRequested,
    PauseRequested,
    Resuming,
    /// The first Ctrl-C (`grace`: how long workers get).
    Interrupted {
        grace: Duration,
    },
    /// The second Ctrl-C.
    KillingNow,
    /// A criterion passed in the earlier session but its box never reached the PRD.
    TickedFromEarlier {
        id: String,
    },
    /// `--escalate`: a criterion's next attempts run on the next set-up.
    Escalated {
        id: String,
        failed: u32,
        from: String,
        to: String,
        after: u32,
    },
    /// `--fallback`: a set-up's usage limit hands its work to the next one.
    FallsBack {
        setup: String,
        to: String,
    },
    /// Isolated lanes kept after the run (`--keep-worktrees`).
    LanesKept {
        root: std::path::PathBuf,
    },
    /// Isolated workers: where the lanes are and where work lands.
    Isolation {
        root: std::path::PathBuf,
        top: std::path::PathBuf,
        commit: bool,
    },
    /// Lanes left by runs that did not clean up were removed (`pinned`: what they held).
    Swept {
        removed: usize,
        pinned: Vec<String>,
    },
    /// What the isolation or sandbox set-up said (the fall-back to one folder, what it
    /// recovered), in its words.
    Said(String),
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::NoNewWorkers(why) => {
                let label = match why {
                    StopReason::BudgetReached { .. } => "budget",
                    _ => "time",
                };
                write!(f, "{label}: {why}; no new workers")
            }
            Notice::SamplesCut {
                id,
                count,
                want,
                max_cost,
                per_worker,
            } => write!(
                f,
                "budget: {count} of {want} samples of {id} start (--max-cost ${max_cost:.2}, about ${per_worker:.4} per worker)"
            ),
            Notice::StopRequested => write!(f, "stop requested in the PRD: stopping the workers"),
            Notice::PauseRequested => write!(
                f,
                "pause requested in the PRD: letting running workers finish"
            ),
            Notice::Resuming => write!(f, "resuming: workers start again"),
            Notice::Interrupted { grace } => write!(
                f,
                "interrupted: stopping the workers (up to {} grace); press Ctrl-C again to kill them now",
                duration(*grace)
            ),
            Notice::KillingNow => write!(f, "killing the workers now"),
            Notice::TickedFromEarlier { id } => write!(
                f,
                "{id} passed in the earlier session but its box never reached the PRD; ticked now"
            ),
            Notice::Escalated {
                id,
                failed,
                from,
                to,
                after,
            } => write!(
                f,
                "{id} failed {failed} attempt(s) on {from}: its next attempts run on {to} (--escalate-after {after})"
            ),
            Notice::FallsBack { setup, to } => write!(
                f,
                "{setup}: usage limit reached; its work goes to {to} until the limit resets (--fallback)"
            ),
            Notice::LanesKept { root } => write!(
                f,
                "lanes kept in {} (`prdloop clean` removes them)",
                root.display()
            ),
            Notice::Isolation { root, top, commit } => write!(
                f,
                "isolation: a repository of its own per lane (in {}); each passing criterion's work is merged into {}{}",
                root.display(),
                top.display(),
                if *commit {
                    " and committed"
                } else {
                    ", uncommitted"
                }
            ),
            Notice::Swept { removed, pinned } => {
                let kept = if pinned.is_empty() {
                    String::new()
                } else {
                    format!("; what they held is kept as {}", pinned.join(", "))
                };
                write!(
                    f,
                    "removed {removed} lane(s) left by runs that ended without cleaning up{kept}"
                )
            }
            Notice::Said(text) => write!(f, "{text}"),
        }
    }
}

#[cfg(test)]
mod tests;
