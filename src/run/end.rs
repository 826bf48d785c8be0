//! How a run ends: the reason, its exit code, the `loopStatus` and PAI phase it leaves, the word
//! in the state's `summary` and the session name, the headline of the summary and the
//! notification text.

use crate::exit;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Complete,
    /// Only `Verify: Custom` criteria fail: a person must check them.
    Blocked,
    /// What is left is parked on workers' questions (and Custom criteria): a person must
    /// answer (`prdloop answer`).
    Questions,
    MaxIterations,
    Stalled,
    /// `loopStatus: paused` set by someone else, or `prdloop pause`.
    PausedByRequest,
    /// `loopStatus: stopped` set by someone else, or `prdloop stop`.
    StoppedByRequest,
    /// Ctrl-C, SIGTERM or SIGHUP.
    Interrupted,
    /// The agent cannot work (authentication or billing).
    AgentFatal,
    /// `--max-cost` reached.
    Budget,
    /// `--max-time` reached.
    TimeLimit,
    /// `--max-wait` spent waiting out limits.
    MaxWait,
    /// A worker's git worktree could not be made ready (isolated workers).
    Worktree,
}

/// What the end's texts need to know about the run.
#[derive(Debug, Clone, Copy)]
pub struct Tally<'a> {
    pub passing: usize,
    pub total: usize,
    pub iterations: u64,
    pub stall: u64,
    /// Why the run stopped early (budget, time, agent failure), if it did.
    pub reason: &'a str,
    pub title: &'a str,
}

/// How the headline should look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Warn,
    Bad,
}

impl End {
    pub fn exit(self) -> exit::Exit {
        match self {
            End::Complete => exit::Exit::Success,
            End::Blocked => exit::Exit::Blocked,
            End::Questions => exit::Exit::Questions,
            End::Interrupted => exit::Exit::Interrupted,
            End::AgentFatal => exit::Exit::AgentFatal,
            End::Worktree => exit::Exit::Io,
            _ => exit::Exit::Failure,
        }
    }

    pub fn loop_status(self) -> &'static str {
        match self {
            End::Complete | End::Blocked => "completed",
            End::MaxIterations | End::Stalled => "failed",
            End::PausedByRequest
            | End::Interrupted
            | End::AgentFatal
            | End::Worktree
            | End::Budget
            | End::TimeLimit
            | End::MaxWait
            | End::Questions => "paused",
            End::StoppedByRequest => "stopped",
        }
    }

    /// The word in PAI's `summary` and the session name: the loop status, but `blocked`
    /// where the loop completed with only Custom criteria left.
    pub fn word(self) -> &'static str {
        match self {
            End::Blocked => "blocked",
            End::Questions => "questions",
            other => other.loop_status(),
        }
    }

    /// The session name's form: `COMPLETE`, `BLOCKED`, `FAILED`, `PAUSED`, `STOPPED`.
    pub fn word_upper(self) -> String {
        match self {
            End::Complete => "COMPLETE".into(),
            other => other.word().to_ascii_uppercase(),
        }
    }

    /// For a run that worked part of a PRD (a shard) whose other criteria still fail: its end
    /// as far as the PRD's front matter goes. `Complete` and `Blocked` become `self` (the
    /// loop failed to finish the PRD); other ends stay.
    pub fn min_status(self, end: End) -> End {
        match end {
            End::Complete | End::Blocked => self,
            other => other,
        }
    }

    /// The PRD's `status` this end sets, if any.
    pub fn prd_status(self) -> Option<&'static str> {
        match self {
            End::Complete => Some("COMPLETE"),
            End::Blocked => Some("BLOCKED"),
            _ => None,
        }
    }

    /// PAI's `currentPhase` after the run.
    pub fn phase(self) -> &'static str {
        match self {
            End::Complete => "COMPLETE",
            End::PausedByRequest
            | End::Interrupted
            | End::AgentFatal
            | End::Worktree
            | End::Budget
            | End::TimeLimit
            | End::MaxWait
            | End::Questions => "PLAN",
            _ => "VERIFY",
        }
    }

    /// The summary's first line.
    pub fn headline(self, t: &Tally, failing: &[String]) -> (String, Tone) {
        let (p, n) = (t.passing, t.total);
        match self {
            End::Complete => (format!("complete: all {n} criteria pass"), Tone::Good),
            End::Blocked if failing.is_empty() && !t.reason.is_empty() => (
                format!(
                    "blocked: {p}/{n} pass, but {}; the file is not marked complete",
                    t.reason
                ),
                Tone::Warn,
            ),
            End::Blocked => (
                format!(
                    "blocked: {p}/{n} pass; the rest need a person (Verify: Custom): {}",
                    failing.join(", ")
                ),
                Tone::Warn,
            ),
            End::Questions => (
                format!(
                    "waiting for answers: {p}/{n} pass; the rest wait for a person's answer \
                     (prdloop answer) or need a person (Verify: Custom): {}",
                    failing.join(", ")
                ),
                Tone::Warn,
            ),
            End::MaxIterations => (
                format!(
                    "not complete: {p}/{n} pass after {} iteration(s) (the -n limit)",
                    t.iterations
                ),
                Tone::Bad,
            ),
            End::Stalled => (
                format!(
                    "stalled: {p}/{n} pass; no progress in {} iteration(s)",
                    t.stall
                ),
                Tone::Bad,
            ),
            End::PausedByRequest => (format!("paused by request: {p}/{n} pass"), Tone::Warn),
            End::StoppedByRequest => (format!("stopped by request: {p}/{n} pass"), Tone::Warn),
            End::Interrupted => (
                format!("interrupted: {p}/{n} pass; the PRD is paused"),
                Tone::Warn,
            ),
            End::AgentFatal | End::Worktree | End::Budget | End::TimeLimit | End::MaxWait => (
                format!("stopped: {}; {p}/{n} pass; the PRD is paused", t.reason),
                Tone::Bad,
            ),
        }
    }

    /// The notification sent at the end (PAI's voice messages).
    pub fn notification(self, t: &Tally) -> String {
        let (p, n, title, reason) = (t.passing, t.total, t.title, t.reason);
        match self {
            End::Complete => format!("Loop complete on {title}. All {n} criteria passing."),
            End::Blocked => {
                format!("Loop blocked on {title}. {p} of {n} passing; the rest need a person.")
            }
            End::Questions => format!(
                "Loop on {title} waits for answers. {p} of {n} passing; workers asked questions only a person can answer."
            ),
            End::MaxIterations => {
                format!("Loop reached its iteration limit on {title}. {p} of {n} passing.")
            }
            End::Stalled => format!(
                "Loop stalled on {title}. {p} of {n} passing, no progress in {} iterations.",
                t.stall
            ),
            End::PausedByRequest | End::Interrupted => {
                format!("Loop paused on {title}. {p} of {n} passing.")
            }
            End::StoppedByRequest => format!("Loop stopped on {title}. {p} of {n} passing."),
            End::AgentFatal => format!("Loop stopped on {title}: the agent cannot work. {reason}."),
            End::Worktree | End::Budget | End::TimeLimit | End::MaxWait => {
                format!("Loop paused on {title}: {reason}. {p} of {n} passing.")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_codes_and_statuses_agree() {
        assert_eq!(End::Complete.exit().code(), 0);
        assert_eq!(End::Blocked.exit().code(), 4);
        assert_eq!(End::Blocked.loop_status(), "completed");
        assert_eq!(End::Blocked.word(), "blocked");
        assert_eq!(End::Stalled.word_upper(), "FAILED");
        assert_eq!(End::Interrupted.exit().code(), 130);
        assert_eq!(
            (
                End::Questions.exit().code(),
                End::Questions.word(),
                End::Questions.loop_status()
            ),
            (8, "questions", "paused")
        );
        assert_eq!(End::AgentFatal.exit().code(), 5);
        assert_eq!(End::Budget.phase(), "PLAN");
        assert_eq!(End::MaxIterations.phase(), "VERIFY");
        let t = Tally {
            passing: 2,
            total: 3,
            iterations: 4,
            stall: 3,
            reason: "spent $1",
            title: "T",
        };
        assert_eq!(
            End::Budget.headline(&t, &[]).0,
            "stopped: spent $1; 2/3 pass; the PRD is paused"
        );
        assert_eq!(
            End::MaxIterations.headline(&t, &[]).0,
            "not complete: 2/3 pass after 4 iteration(s) (the -n limit)"
        );
    }
}
