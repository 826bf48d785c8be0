//! The verdict on one finished worker, made once: the agent's own verdict (its `RESULT:` line
//! and exit status) or its failure class, then the runner's check of a claimed PASS.

use super::reason::FailReason;
use crate::backend::verdict::{Exit, Verdict, Warning, verdict};
use crate::backend::{AgentFailure, classify_for};
use crate::evidence::verifier::{Review, ReviewOutcome};
use crate::state::Evidence;
use crate::text::last_line;
pub use crate::text::one_line;
use crate::verify::Check;
use crate::worker::{Finished, SpawnError};

/// What a worker's task hands back: the process's end, what it said, and (for a claimed PASS
/// on a runnable criterion) the runner's check.
#[derive(Debug)]
pub struct Ran {
    pub finished: Finished,
    /// The agent failed, not the criterion (auth, limits, crash, …).
    pub failure: Option<AgentFailure>,
    /// The agent's verdict, from its output and exit status.
    pub verdict: Verdict,
    /// Warnings about its output (RESULT lines for other criteria, refused connections,
    /// refused writes).
    pub warnings: Vec<crate::run::warning::Warning>,
    pub check: Option<Result<Check, SpawnError>>,
    /// Files the criterion's Verify command runs that the attempt changed: the command was
    /// not run as evidence.
    pub protected: Vec<String>,
    /// Without lanes: what of the PRD's orders changed while it worked (then refused).
    pub prd_changed: Vec<String>,
    /// The independent verifier's review of a claimed PASS no command could check.
    pub review: Option<Review>,
    /// The question it asked about its own criterion (`QUESTION: <id> <text>`).
    pub question: Option<String>,
}

impl Ran {
    /// Reads a finished worker once: its failure class and its verdict.
    pub fn read(id: &str, finished: Finished, now_s: i64) -> Ran {
        let f = &finished;
        let failure = classify_for(f.outcome.agent, &f.exit, &f.outcome, &f.stderr_tail, now_s);
        let (verdict, mut said) = verdict(id, &f.exit, &f.outcome);
        let (question, asked_others) = crate::backend::verdict::question(id, &f.exit, &f.outcome);
        said.extend(asked_others);
        if question.is_some() && !matches!(verdict, Verdict::Fail(_)) {
            said.push(Warning::ResultBesideQuestion { id: id.to_string() });
        }
        let mut warnings: Vec<crate::run::warning::Warning> =
            said.into_iter().map(Into::into).collect();
        warnings.extend(f.refusals.warning(id).map(Into::into));
        warnings.extend(f.refusals.net.warning(id).map(Into::into));
        Ran {
            failure,
            verdict,
            warnings,
            check: None,
            protected: Vec::new(),
            prd_changed: Vec::new(),
            review: None,
            question,
            finished,
        }
    }

    /// Whether the runner should check this worker's work before it counts (a worker that
    /// asked a question waits for the answer instead).
    pub fn claims_pass(&self) -> bool {
        self.failure.is_none() && self.verdict.is_pass() && self.question.is_none()
    }
}

/// What a worker's run comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// Ended by the runner (Ctrl-C, stop): not an attempt. `while_checking`: the worker itself
    /// finished, so what it cost counts.
    Cancelled {
        while_checking: bool,
    },
    /// The agent could not work; not the criterion's attempt.
    AgentFailure(AgentFailure),
    Pass(Evidence),
    /// The worker asked a person (`QUESTION:`): the criterion parks until answered; not an
    /// attempt.
    Question(String),
    /// The agent said PASS and its Verify command cannot run here (this check of it): the
    /// agent's verdict counts.
    PassUnverifiable(Check),
    Fail(FailReason),
}

impl Judgement {
    pub fn passes(&self) -> bool {
        matches!(self, Judgement::Pass(_) | Judgement::PassUnverifiable(_))
    }
}

/// Judges a worker that ran (`Ok`) or could not be started (`Err`). An agent program the
/// system refuses to start (bad `#!` line, wrong format, no exec permission) is an agent
/// failure that stops the run, not an attempt at the criterion.
pub fn judge(ran: &Result<Ran, SpawnError>) -> Judgement {
    match ran {
        Ok(r) => judge_ran(r),
        Err(e) => match crate::backend::classify::cannot_start(&e.program, &e.source) {
            Some(f) => Judgement::AgentFailure(f),
            None => Judgement::Fail(FailReason::NotStarted {
                program: e.program.clone(),
                error: e.source.to_string(),
                errno: e.source.raw_os_error(),
            }),
        },
    }
}

/// Judges a worker that ran.
pub fn judge_ran(ran: &Ran) -> Judgement {
    if ran.finished.exit == Exit::Cancelled {
        return Judgement::Cancelled {
            while_checking: false,
        };
    }
    if matches!(&ran.check, Some(Ok(c)) if c.cancelled()) {
        return Judgement::Cancelled {
            while_checking: true,
        };
    }
    if let Some(f) = &ran.failure {
        return Judgement::AgentFailure(f.clone());
    }
    if let Some(q) = &ran.question {
        return Judgement::Question(q.clone());
    }
    if !ran.prd_changed.is_empty() {
        return Judgement::Fail(FailReason::PrdChanged {
            what: ran.prd_changed.clone(),
        });
    }
    match (&ran.verdict, &ran.check) {
        (Verdict::Fail(reason), _) => {
            Judgement::Fail(FailReason::Worker(reason.clone().with_stderr(
                last_line(&ran.finished.stderr_tail).map(|l| one_line(l, 200)),
            )))
        }
        (Verdict::Pass, Some(Ok(c))) if c.passed() => Judgement::Pass(Evidence::Checked),
        (Verdict::Pass, Some(Ok(c))) if c.unrunnable() => match &ran.review {
            Some(r) => reviewed(r),
            None => Judgement::PassUnverifiable(c.clone()),
        },
        // It measured nothing: no evidence either way; only a review can pass it.
        (Verdict::Pass, Some(Ok(c))) if c.ran_no_test.is_some() => match &ran.review {
            Some(r) => reviewed(r),
            None => Judgement::Fail(FailReason::check(c)),
        },
        (Verdict::Pass, Some(Ok(c))) => Judgement::Fail(FailReason::VerifyFailed {
            command: c.command.clone(),
            exit: c.exit.clone(),
            tail: c.tail.clone(),
        }),
        (Verdict::Pass, Some(Err(e))) => Judgement::Fail(FailReason::VerifyNotRun {
            error: e.to_string(),
        }),
        (Verdict::Pass, None) => match (&ran.review, ran.protected.is_empty()) {
            (Some(r), _) => reviewed(r),
            (None, true) => Judgement::Pass(Evidence::Claimed),
            (None, false) => Judgement::Fail(FailReason::ProtectedChanged {
                files: ran.protected.clone(),
            }),
        },
    }
}

/// What a verifier's review makes of a claimed PASS.
fn reviewed(r: &Review) -> Judgement {
    match &r.outcome {
        ReviewOutcome::Agreed { .. } => Judgement::Pass(Evidence::Reviewed),
        ReviewOutcome::Disagreed { reasons } => Judgement::Fail(FailReason::VerifierRejected {
            setup: r.setup.to_string(),
            reasons: reasons.clone(),
        }),
        ReviewOutcome::NoVerdict(why) => Judgement::Fail(FailReason::NotReviewed {
            why: why.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Outcome;
    use std::time::Duration;

    fn finished(exit: Exit, text: &str, stderr: &str) -> Finished {
        Finished {
            exit,
            outcome: Outcome {
                final_text: Some(text.into()),
                has_result: true,
                ..Outcome::default()
            },
            stderr_tail: stderr.into(),
            duration: Duration::from_millis(5),
            pid: 42,
            output_bytes: 0,
            refusals: Default::default(),
        }
    }

    fn check(code: i32) -> Check {
        Check {
            command: "make test".into(),
            exit: Exit::Code { code },
            tail: "boom".into(),
            duration: Duration::ZERO,
            log: "v.log".into(),
            ran_no_test: None,
            refused: Default::default(),
        }
    }

    const OK: Exit = Exit::Code { code: 0 };

    #[test]
    fn a_claimed_pass_is_checked_before_it_counts() {
        let mut ran = Ran::read("ISC-1", finished(OK, "RESULT: ISC-1 PASS", ""), 0);
        assert!(ran.claims_pass());
        assert_eq!(
            judge(&Ok(Ran { ..ran_clone(&ran) })),
            Judgement::Pass(Evidence::Claimed)
        );
        ran.check = Some(Ok(check(0)));
        assert_eq!(
            judge(&Ok(ran_clone(&ran))),
            Judgement::Pass(Evidence::Checked)
        );
        ran.check = Some(Ok(check(1)));
        let Judgement::Fail(r) = judge(&Ok(ran)) else {
            panic!("a failing check fails the attempt")
        };
        let r = r.to_string();
        assert!(
            r.starts_with(
                "the agent said PASS, but its Verify command `make test` exited with status 1"
            ),
            "{r}"
        );
    }

    #[test]
    fn generic_failures_get_the_last_stderr_line_and_cancels_are_not_attempts() {
        let ran = Ran::read(
            "ISC-1",
            finished(OK, "no verdict here", "warn\nlast words\n"),
            0,
        );
        let Judgement::Fail(r) = judge(&Ok(ran)) else {
            panic!("no RESULT line fails the attempt")
        };
        assert_eq!(
            r.to_string(),
            "no `RESULT: ISC-1 PASS|FAIL` line in the agent's final message (stderr: last words)"
        );
        let ran = Ran::read("ISC-1", finished(Exit::Cancelled, "", ""), 0);
        assert_eq!(
            judge(&Ok(ran)),
            Judgement::Cancelled {
                while_checking: false
            }
        );
        let ran = Ran::read(
            "ISC-1",
            finished(Exit::TimedOut { after_secs: 2 }, "", ""),
            0,
        );
        assert!(
            matches!(judge(&Ok(ran)), Judgement::AgentFailure(f) if f.kind == crate::backend::Kind::Timeout)
        );
    }

    #[test]
    fn a_question_parks_instead_of_a_verdict_and_is_never_checked() {
        let asked = "Hm.\nQUESTION: ISC-1 Cents or euros?\nRESULT: ISC-1 PASS";
        let ran = Ran::read("ISC-1", finished(OK, asked, ""), 0);
        assert!(
            !ran.claims_pass(),
            "nothing to check: it waits for the answer"
        );
        assert!(
            ran.warnings
                .contains(&Warning::ResultBesideQuestion { id: "ISC-1".into() }.into()),
            "{:?}",
            ran.warnings
        );
        assert_eq!(
            judge(&Ok(ran)),
            Judgement::Question("Cents or euros?".into())
        );
        // Another criterion's question parks nothing: the verdict stands.
        let ran = Ran::read(
            "ISC-1",
            finished(OK, "QUESTION: ISC-2 skip?\nRESULT: ISC-1 FAIL: no", ""),
            0,
        );
        assert!(matches!(judge(&Ok(ran)), Judgement::Fail(r) if r.to_string() == "no"));
        // A timed-out worker asked nothing.
        let ran = Ran::read(
            "ISC-1",
            finished(Exit::TimedOut { after_secs: 2 }, asked, ""),
            0,
        );
        assert!(matches!(judge(&Ok(ran)), Judgement::AgentFailure(_)));
    }

    #[test]
    fn an_agent_that_cannot_be_started_is_an_agent_failure_not_an_attempt() {
        let err = |errno: nix::errno::Errno| {
            Err(SpawnError {
                program: "./agent.sh".into(),
                source: std::io::Error::from_raw_os_error(errno as i32),
            })
        };
        let Judgement::AgentFailure(f) = judge(&err(nix::errno::Errno::ENOEXEC)) else {
            panic!("an exec format error is an agent failure")
        };
        assert_eq!(f.kind, crate::backend::Kind::CannotStart);
        assert!(
            f.text.starts_with("failed to start `./agent.sh`"),
            "{}",
            f.text
        );
        // Out of processes for a moment: the attempt fails, the run goes on.
        assert!(matches!(
            judge(&err(nix::errno::Errno::EAGAIN)),
            Judgement::Fail(_)
        ));
    }

    fn ran_clone(r: &Ran) -> Ran {
        Ran {
            finished: r.finished.clone(),
            failure: r.failure.clone(),
            verdict: r.verdict.clone(),
            warnings: r.warnings.clone(),
            check: match &r.check {
                Some(Ok(c)) => Some(Ok(c.clone())),
                _ => None,
            },
            protected: r.protected.clone(),
            prd_changed: r.prd_changed.clone(),
            review: r.review.clone(),
            question: r.question.clone(),
        }
    }
}
