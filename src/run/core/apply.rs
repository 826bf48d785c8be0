//! Applying a finished worker to the run: the verdict into the ledger and the box, the
//! attempt into the attempts log, and agent failures into a stop (auth, billing) or a pause of
//! every lane (rate and usage limits, overload).

use crate::run::warning::Warning;
use std::time::Duration;

use super::{Core, Now};
use crate::backend::verdict::Exit;
use crate::backend::{AgentFailure, Kind};
use crate::isolation::Landing;
use crate::run::event::{
    Effect, Effects, Ending, Flush, LandJob, LoopEvent, RunEvent, Slot, WorkerDone, WorkerEnded,
};
use crate::run::judge::Judgement;
use crate::run::ledger::{Failure, Spent};
use crate::run::limits::{Pause, PauseInput, backoff, pause_for};
use crate::run::reason::{FailReason, StopReason};
use crate::run::spend::Judged;
use crate::state::{AgentStatus, Evidence};
use crate::worker::Cancel;

impl Core {
    pub(in crate::run) fn lane_idle(&mut self, lane: usize, now: Now) {
        self.schedule.lane_ended(lane);
        if let Some(a) = self.pai.agents.get_mut(lane) {
            a.status = AgentStatus::Active;
            a.current_criterion = None;
            a.finished_at = Some(now.ms);
            a.pid = None;
        }
    }

    /// A worker's task panicked: an internal error for its criterion; the lane goes on.
    pub(in crate::run) fn worker_lost(
        &mut self,
        slot: Slot,
        id: &str,
        why: &str,
        now: Now,
    ) -> Effects {
        let mut r = Effects::default();
        let lane = slot.lane;
        let reason = FailReason::Internal {
            error: why.to_string(),
        };
        if self.sampling.runs(lane) {
            // One sample lost: the others go on.
            r.say(RunEvent::Error(format!(
                "{id} (sample {}): {reason}",
                slot.sample + 1
            )));
            r.extend(self.sample_lost(lane, &reason, now));
            return r;
        }
        self.lane_idle(lane, now);
        self.ledger.attempt_failed(id, Failure::of(&reason), None);
        r.say(RunEvent::Error(format!("{id}: {reason}")));
        r.flush(Flush::Soon);
        r
    }

    /// Applies one worker's result.
    pub(in crate::run) fn worker_done(&mut self, d: WorkerDone, now: Now) -> Effects {
        self.touched(&d);
        if d.sample.is_some() {
            return self.sample_done(d, now);
        }
        // A passing attempt's work was merged by the dispatcher before this
        // (`attempt::lands`); what that came to decides.
        self.count_conflict(&d);
        let mut d = d;
        if !d.judgement.passes() {
            discard(&mut d);
        }
        let mut r = Effects::default();
        // A question is filed after the attempt's record (below).
        let mut question = None;
        self.lane_idle(d.lane, now);
        if let Some(why) = &d.unprepared {
            // Not an attempt: the run cannot go on without worktrees.
            return self.worktree_failed(&d, why);
        }
        if let Some(l) = &d.landing {
            self.ledger.landed(&d.id, l.clone());
        }
        let judgement = self.judged(&d);
        let finished = d.ran.as_ref().ok().map(|ran| &ran.finished);
        // Said for every worker that ran, before what its ending leads to (as for a sample).
        for w in worker_warnings(&d) {
            r.say(w);
        }
        let (spent, duration) = spent_of(&d);
        let setup = self.setup_ran(&d);
        let ending = match judgement {
            Judgement::Cancelled { while_checking } => {
                if while_checking {
                    // The worker itself finished: what it cost counts.
                    self.ledger.spend(&d.id, spent);
                    self.tally(&d, &spent, Judged::Not);
                    self.add_to_iteration(&spent, false, false);
                }
                r.say(ended(
                    &d,
                    if while_checking {
                        Ending::CancelledWhileChecking
                    } else {
                        Ending::Cancelled
                    },
                    duration,
                    None,
                ));
                r.flush(Flush::Soon);
                return r;
            }
            Judgement::AgentFailure(failure) => {
                self.ledger.worker_ran(duration);
                self.ledger.spend(&d.id, spent);
                self.tally(&d, &spent, Judged::Not);
                self.add_to_iteration(&spent, false, false);
                let reason = FailReason::agent(&failure, finished.map(|f| &f.exit));
                self.ledger
                    .agent_failed(&d.id, &failure, reason.to_string(), d.log.clone());
                r.extend(self.agent_failed_on(&failure, &setup, now));
                if failure.kind.is_transient() {
                    self.schedule.requeue(d.lane, &d.id);
                }
                Ending::Agent(reason, failure)
            }
            Judgement::Question(q) => {
                // Not an attempt; what it cost counts.
                self.ledger.worker_ran(duration);
                self.ledger.spend(&d.id, spent);
                // Its cost counts in the cost per pass; not judged.
                self.tally(&d, &spent, Judged::Not);
                self.add_to_iteration(&spent, false, false);
                self.ledger.set_last_log(&d.id, d.log.clone());
                question = Some(self.asked(&d.id, &q, now, &mut r));
                Ending::Question(q)
            }
            Judgement::PassUnverifiable(why) => {
                r.extend(self.unverifiable(&d.id, &why.reason()));
                self.passed(&d, Evidence::Claimed, spent, duration, now)
            }
            Judgement::Pass(by) => self.passed(&d, by, spent, duration, now),
            Judgement::Fail(reason) => {
                if let Some(f) = finished {
                    self.ledger.worker_ran(f.duration);
                    self.ledger.spend(&d.id, spent);
                    self.tally(&d, &spent, Judged::Failed);
                }
                self.ledger.attempt_failed(
                    &d.id,
                    Failure::of(&reason),
                    finished.map(|_| d.log.clone()),
                );
                if let Some(e) = self.climb(&d.id, &setup) {
                    r.say(e);
                }
                self.add_to_iteration(&spent, false, true);
                self.brakes.worked();
                match &d.ran {
                    Ok(_) => failed(&d, reason),
                    Err(_) => Ending::NotStarted(reason),
                }
            }
        };
        let record = finished.map(|f| {
            self.counts
                .refusals(&d.id, &super::record::refused_in(&d, f));
            self.record(&d, &ending, &spent, f, now)
        });
        let cost = finished.and_then(|f| f.outcome.cost_usd);
        r.say(ended(&d, ending, duration, cost));
        // Recorded after its line, and before its question is filed.
        r.extend(record.map(|rec| Effect::Record(Box::new(rec))));
        r.extend(question.map(Effect::Ask));
        r.flush(Flush::Soon);
        r
    }

    /// A single attempt passed (`by`): its run, cost and pass count, with its receipt.
    fn passed(
        &mut self,
        d: &WorkerDone,
        by: Evidence,
        spent: Spent,
        duration: Duration,
        now: Now,
    ) -> Ending {
        self.ledger.worker_ran(duration);
        self.ledger.spend(&d.id, spent);
        self.tally(d, &spent, Judged::Passed);
        self.tally_pass(d);
        self.ledger.attempt_passed(&d.id, by, d.log.clone());
        let receipt = self.receipt(d, by, &spent, now);
        self.ledger.set_receipt(&d.id, receipt);
        self.add_to_iteration(&spent, true, true);
        self.brakes.worked();
        Ending::Pass(by)
    }

    /// What a worker's result comes to, the same for a single attempt and for a sample: its
    /// judgement, except that a pass whose work could not reach the checkout is a failed
    /// attempt, and a failure whose check was a failing `severity: critical` Test Strategy
    /// probe says the product is down.
    pub(super) fn judged(&self, d: &WorkerDone) -> Judgement {
        let mut judgement = d.judgement.clone();
        if judgement.passes()
            && let Some(landing) = d.landing.as_ref().filter(|l| l.failure().is_some())
        {
            judgement = Judgement::Fail(FailReason::NotLanded {
                landing: landing.clone(),
            });
        }
        if let Judgement::Fail(why) = &mut judgement
            && matches!(&d.ran, Ok(ran) if matches!(&ran.check, Some(Ok(c)) if !c.passed()))
            && self
                .doc
                .criterion(&d.id)
                .is_some_and(|c| c.verify.is_none() && c.probe.as_ref().is_some_and(|p| p.critical))
        {
            *why = FailReason::CriticalProbe {
                reason: Box::new(why.clone()),
            };
        }
        judgement
    }

    /// The commit message of a criterion's landing (with `--commit`).
    pub(in crate::run) fn landing_title(&self, id: &str) -> String {
        self.doc.criterion(id).map_or_else(
            || id.to_string(),
            |c| format!("{}: {}", c.id, c.description),
        )
    }

    /// Another lane's work got to the checkout first: the files join this criterion's
    /// footprint.
    fn count_conflict(&mut self, d: &WorkerDone) {
        if let Some(Landing::Conflict { files, .. }) = &d.landing {
            self.counts.conflict();
            self.schedule.touched(&d.id, files);
        }
    }

    /// Best-of-N: the winning sample's work is merged before its pass counts
    /// (`LoopEvent::Landed`).
    pub(in crate::run) fn request_landing(&mut self, d: WorkerDone, now: Now) -> Effects {
        let mut r = Effects::default();
        let title = self.landing_title(&d.id);
        if let Some(work) = d.work.clone() {
            r.push(Effect::Land(LandJob {
                slot: Slot::of(&d),
                work,
                id: d.id.clone(),
                title,
                credit: self.credit_of(&d, now),
            }));
        }
        self.sampling.landing(d);
        r
    }

    /// A best-of-N sample's merge came back: the sample is applied with it.
    pub(in crate::run) fn landed(&mut self, slot: Slot, landing: Landing, now: Now) -> Effects {
        let Some(mut d) = self.sampling.landed(slot) else {
            return Effects::default();
        };
        d.landing = Some(landing);
        self.count_conflict(&d);
        self.sample_landed(*d, now)
    }

    fn worktree_failed(&mut self, d: &WorkerDone, why: &str) -> Effects {
        self.schedule.requeue(d.lane, &d.id);
        self.stop_for_worktree(d, why)
    }

    /// A worktree that cannot be made ready stops the run (not an attempt: retrying cannot
    /// help until the repository is fixed).
    pub(in crate::run) fn stop_for_worktree(&mut self, d: &WorkerDone, why: &str) -> Effects {
        let mut r = Effects::default();
        let what = StopReason::Worktree {
            criterion: d.id.clone(),
            error: why.to_string(),
        };
        let said = format!(
            "{what} — fix the repository (or run with --isolation none), then `prdloop resume {}`",
            self.cfg.prd_path.display()
        );
        if self.brakes.stop_for(what) {
            r.say(RunEvent::Error(said));
            r.cancel(Cancel::Graceful);
        }
        r.flush(Flush::Soon);
        r
    }

    /// What a worker cost and gained counts in its attempt's iteration (with `--rounds
    /// continuous`, maybe a round ahead of the open one).
    pub(in crate::run) fn add_to_iteration(&mut self, s: &Spent, passed: bool, counted: bool) {
        if let Some(it) = self.rounds.applying_mut() {
            it.cost += s.cost;
            it.usage.add(&s.usage);
            if passed {
                it.gained += 1;
            }
            if counted {
                it.attempts += 1;
            }
        }
    }

    /// Acts on an agent failure: fatal ones stop the run; transient ones pause every lane.
    pub(in crate::run) fn on_agent_failure(&mut self, failure: &AgentFailure, now: Now) -> Effects {
        let mut r = Effects::default();
        let kind = failure.kind;
        if kind.is_fatal() {
            let advice = match kind {
                Kind::Auth => format!("{}, then run again", self.cfg.agent.agent.login_advice()),
                _ => kind.advice().to_string(),
            };
            let what = StopReason::AgentFailure {
                failure: kind,
                text: failure.text.clone(),
            };
            let said = format!("{what} — the agent cannot work, retrying cannot help; {advice}");
            if self.brakes.stop_for(what) {
                r.say(RunEvent::Error(said));
                r.cancel(Cancel::Graceful);
            }
            return r;
        }
        if !kind.is_transient() {
            return r;
        }
        let decision = pause_for(PauseInput {
            resets_at: failure.resets_at,
            now_s: now.secs(),
            backoff: backoff(
                self.cfg.retry_backoff,
                self.brakes.back_off(),
                fastrand::f64(),
            ),
            remaining: self
                .brakes
                .pause_until()
                .filter(|t| *t > now.at)
                .map(|t| t - now.at),
            waited: self.brakes.waited(),
            max_wait: self.cfg.max_wait,
            label: kind.label(),
        });
        match decision {
            Pause::Covered => {}
            Pause::OverMaxWait(why) => {
                let said = Warning::OverMaxWait(why.clone());
                if self.brakes.stop_for(why) {
                    r.say(RunEvent::Warning(said));
                }
            }
            Pause::Until { delay, extension } => {
                self.brakes.wait(extension);
                let until_ms = now.ms + delay.as_millis() as u64;
                self.brakes.pause_to(now.at + delay, until_ms);
                r.say(RunEvent::Paused {
                    label: kind.label().to_string(),
                    until_ms,
                    delay,
                });
                r.flush(Flush::Soon);
            }
        }
        r
    }
}

/// The warnings a worker's result carries, the same for a single attempt and for a sample:
/// its own (what reading its output found), its check's refused connections, and the tools
/// its agent was refused.
pub(in crate::run) fn worker_warnings(d: &WorkerDone) -> Vec<RunEvent> {
    let Ok(ran) = &d.ran else {
        return Vec::new();
    };
    let mut w: Vec<RunEvent> = ran
        .warnings
        .iter()
        .cloned()
        .map(RunEvent::Warning)
        .collect();
    if let Some(Ok(c)) = &ran.check {
        w.extend(
            c.refused
                .check_warning(&d.id)
                .map(|n| RunEvent::Warning(n.into())),
        );
    }
    let denied = &ran.finished.outcome.permission_denials;
    if !denied.is_empty() {
        w.push(RunEvent::Warning(Warning::ToolsRefused {
            id: d.id.clone(),
            tools: denied.clone(),
        }));
    }
    w
}

/// A failed attempt's ending: stuck when `--stuck-after` ended it.
pub(in crate::run) fn failed(d: &WorkerDone, reason: FailReason) -> Ending {
    match &d.ran {
        Ok(r) if matches!(r.finished.exit, Exit::Stuck(_)) => Ending::Stuck(reason),
        _ => Ending::Fail(reason),
    }
}

/// What a finished worker cost and how long it ran.
pub(in crate::run) fn spent_of(d: &WorkerDone) -> (Spent, Duration) {
    match &d.ran {
        Ok(ran) => {
            let f = &ran.finished;
            let mut usage = f.outcome.usage;
            let mut cost = f.outcome.cost_usd.unwrap_or(0.0);
            let review = ran.review.as_ref().map(|r| (r.cost, r.usage));
            if let Some((c, u)) = &review {
                cost += c;
                usage.add(u);
            }
            (
                Spent {
                    cost,
                    usage,
                    turns: f.outcome.num_turns.unwrap_or(0),
                    time: f.duration,
                    review,
                },
                f.duration,
            )
        }
        Err(_) => (Spent::default(), Duration::ZERO),
    }
}

/// A worker whose work is not merged (it failed, or another sample won): its work is
/// recorded as discarded, with where it is kept.
pub(in crate::run) fn discard(d: &mut WorkerDone) {
    if d.landing.is_none()
        && let Some(w) = &d.work
    {
        d.landing = Some(Landing::Discarded {
            files: w.files.clone(),
            kept: w.kept.clone(),
        });
    }
}

pub(in crate::run) fn ended(
    d: &WorkerDone,
    ending: Ending,
    duration: Duration,
    cost: Option<f64>,
) -> RunEvent {
    RunEvent::WorkerEnded(Box::new(WorkerEnded {
        iteration: d.iteration,
        lane: d.lane,
        id: d.id.clone(),
        ending,
        duration,
        cost,
        log: d.log.clone(),
        landing: d.landing.clone(),
        sample: d.sample.clone(),
    }))
}

/// The event for a worker whose task came back with a panic.
pub(in crate::run) fn lost(slot: Slot, id: String, why: String) -> LoopEvent {
    LoopEvent::WorkerLost { slot, id, why }
}
