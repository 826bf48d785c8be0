//! Best-of-N applied to the run: which sample wins, what the attempt comes to.

use std::collections::HashMap;
use std::time::Duration;

use super::apply::spent_of;
use super::{Core, Now};
use crate::config::Select;
use crate::isolation::Landing;
use crate::run::event::{Effect, Effects, Ending, Flush, SampleTag, Slot, WorkerDone};
use crate::run::judge::Judgement;
use crate::run::ledger::{Failure, Spent};
use crate::run::reason::FailReason;
use crate::run::samples::SampleSet;
use crate::run::spend::Judged;

/// Best-of-N's bookkeeping: each lane's samples of the attempt it runs, and the passing
/// samples whose work is being merged (the core picked them; the landing comes back as
/// `LoopEvent::Landed`).
#[derive(Debug, Default)]
pub(in crate::run) struct Sampling {
    sets: HashMap<usize, SampleSet>,
    landing: HashMap<Slot, Box<WorkerDone>>,
}

impl Sampling {
    /// A lane's attempt runs as `set`.
    pub fn start(&mut self, lane: usize, set: SampleSet) {
        self.sets.insert(lane, set);
    }

    /// Whether the lane's attempt runs as samples.
    pub fn runs(&self, lane: usize) -> bool {
        self.sets.contains_key(&lane)
    }

    pub fn set_mut(&mut self, lane: usize) -> Option<&mut SampleSet> {
        self.sets.get_mut(&lane)
    }

    /// The lane's attempt is over: its set.
    pub fn finish(&mut self, lane: usize) -> Option<SampleSet> {
        self.sets.remove(&lane)
    }

    /// How many lanes run samples, and how many samples run on them.
    pub fn running(&self) -> (usize, usize) {
        let samples = self.sets.values().map(|s| s.running as usize).sum();
        (self.sets.len(), samples)
    }

    /// A winning sample's work is being merged.
    pub fn landing(&mut self, d: WorkerDone) {
        self.landing.insert(Slot::of(&d), Box::new(d));
    }

    /// The merge of the sample in `slot` came back: the sample.
    pub fn landed(&mut self, slot: Slot) -> Option<Box<WorkerDone>> {
        self.landing.remove(&slot)
    }

    /// No lane runs samples.
    #[cfg(test)]
    pub fn is_idle(&self) -> bool {
        self.sets.is_empty()
    }
}

impl Core {
    /// A sample came back.
    pub(in crate::run) fn sample_done(&mut self, d: WorkerDone, now: Now) -> Effects {
        let mut r = Effects::default();
        let lane = d.lane;
        let Some(group) = self.sampling.set_mut(lane) else {
            return r;
        };
        group.running = group.running.saturating_sub(1);
        group.last_log = Some(d.log.clone());
        if let Some(why) = &d.unprepared {
            r.extend(self.stop_for_worktree(&d, why));
            r.extend(self.settle(lane, now));
            return r;
        }
        let (spent, duration) = spent_of(&d);
        let judgement = self.judged(&d);
        for w in super::apply::worker_warnings(&d) {
            r.say(w);
        }
        let counted_spend = !matches!(
            judgement,
            Judgement::Cancelled {
                while_checking: false
            }
        );
        if counted_spend && d.ran.is_ok() {
            self.ledger.worker_ran(duration);
            self.ledger.spend(&d.id, spent);
            self.add_to_iteration(&spent, false, false);
        }
        if d.ran.is_ok() {
            // An ended sibling ran too (its time counts), but its work was not judged.
            let judged = match &judgement {
                Judgement::Pass(_) | Judgement::PassUnverifiable(_) => Judged::Passed,
                Judgement::Fail(_) => Judged::Failed,
                // A question parks the criterion: no attempt, nothing judged.
                Judgement::AgentFailure(_)
                | Judgement::Cancelled { .. }
                | Judgement::Question(_) => Judged::Not,
            };
            self.tally(&d, &spent, judged);
        }
        let setup = self.setup_ran(&d);
        let group = self.sampling.set_mut(lane).expect("checked");
        let ending = match judgement {
            Judgement::Cancelled { .. } => {
                if group.winner.is_some() {
                    Ending::Sibling
                } else {
                    Ending::Cancelled
                }
            }
            Judgement::AgentFailure(failure) => {
                let exit = d.ran.as_ref().ok().map(|ran| &ran.finished.exit);
                let reason = FailReason::agent(&failure, exit);
                group.agent_failures += 1;
                self.ledger
                    .agent_failed(&d.id, &failure, reason.to_string(), d.log.clone());
                r.extend(self.agent_failed_on(&failure, &setup, now));
                Ending::Agent(reason, failure)
            }
            Judgement::Fail(reason) => {
                group.failures.push(tagged(&d, &reason));
                super::apply::failed(&d, reason)
            }
            Judgement::Question(q) => {
                group.question = Some(q.clone());
                Ending::Question(q)
            }
            Judgement::Pass(_) | Judgement::PassUnverifiable(_) => {
                if group.winner.is_some() {
                    Ending::NotSelected
                } else {
                    // Merged (or ranked) before it can count.
                    group.candidates.push(d);
                    r.extend(self.settle(lane, now));
                    return r;
                }
            }
        };
        let mut d = d;
        if !matches!(ending, Ending::Cancelled | Ending::Sibling) {
            super::apply::discard(&mut d);
        }
        r.extend(self.sample_said(&d, ending, spent, duration, now));
        r.extend(self.settle(lane, now));
        r
    }

    /// A sample's task panicked: a failed sample.
    pub(in crate::run) fn sample_lost(
        &mut self,
        lane: usize,
        reason: &FailReason,
        now: Now,
    ) -> Effects {
        if let Some(group) = self.sampling.set_mut(lane) {
            group.running = group.running.saturating_sub(1);
            group.failures.push(Failure::of(reason));
        }
        self.settle(lane, now)
    }

    /// A sample's merge came back.
    pub(in crate::run) fn sample_landed(&mut self, d: WorkerDone, now: Now) -> Effects {
        let mut r = Effects::default();
        let lane = d.lane;
        let (spent, duration) = spent_of(&d);
        let landing = d.landing.clone().unwrap_or(Landing::Unchanged);
        let Some(group) = self.sampling.set_mut(lane) else {
            return r;
        };
        group.landing = false;
        let ending = match landing.failure() {
            Some(_) => {
                let reason = FailReason::NotLanded {
                    landing: landing.clone(),
                };
                group.failures.push(tagged(&d, &reason));
                Ending::Fail(reason)
            }
            None => {
                let by = match &d.judgement {
                    Judgement::Pass(by) => *by,
                    _ => crate::state::Evidence::Claimed,
                };
                let t = d.sample.clone().expect("a sample");
                group.winner = Some(t.clone());
                if group.running > 0 {
                    r.push(Effect::CancelLane(lane));
                }
                self.ledger.attempt_passed(&d.id, by, d.log.clone());
                self.tally_pass(&d);
                let receipt = self.receipt(&d, by, &spent, now);
                self.ledger.set_receipt(&d.id, receipt);
                self.ledger.landed(&d.id, landing.clone());
                self.add_to_iteration(&Spent::default(), true, true);
                self.brakes.worked();
                self.won(&d.id, &t);
                Ending::Pass(by)
            }
        };
        r.extend(self.sample_said(&d, ending, spent, duration, now));
        r.extend(self.settle(lane, now));
        r
    }

    /// The sample's line and then its record in the attempts log.
    fn sample_said(
        &mut self,
        d: &WorkerDone,
        ending: Ending,
        spent: Spent,
        duration: Duration,
        now: Now,
    ) -> Effects {
        let mut r = Effects::default();
        let record = d.ran.as_ref().ok().map(|ran| {
            self.counts
                .refusals(&d.id, &super::record::refused_in(d, &ran.finished));
            self.record(d, &ending, &spent, &ran.finished, now)
        });
        let cost = d
            .ran
            .as_ref()
            .ok()
            .and_then(|ran| ran.finished.outcome.cost_usd);
        r.say(super::apply::ended(d, ending, duration, cost));
        r.extend(record.map(|rec| Effect::Record(Box::new(rec))));
        r.flush(Flush::Soon);
        r
    }

    /// What the group does next: merge a candidate, or (every sample back, nothing being
    /// merged) end the attempt.
    fn settle(&mut self, lane: usize, now: Now) -> Effects {
        let mut r = Effects::default();
        let select = self.cfg.samples.select;
        let Some(group) = self.sampling.set_mut(lane) else {
            return r;
        };
        if group.landing {
            return r;
        }
        let ready = match select {
            Select::First => true,
            Select::Best => group.running == 0,
        };
        if group.winner.is_none() && ready && !group.candidates.is_empty() {
            let i = match select {
                Select::First => 0,
                Select::Best => (0..group.candidates.len())
                    .min_by_key(|&i| rank_key(&group.candidates[i]))
                    .unwrap_or(0),
            };
            let d = group.candidates.remove(i);
            group.landing = true;
            r.extend(self.request_landing(d, now));
            return r;
        }
        if group.running > 0 {
            return r;
        }
        // Every sample is back and nothing is being merged: the attempt is over.
        let group = self.sampling.finish(lane).expect("checked");
        let setup = self.slot_setup.get(&Slot::new(lane, 0)).cloned();
        for mut d in group.candidates {
            super::apply::discard(&mut d);
            let (spent, duration) = spent_of(&d);
            r.extend(self.sample_said(&d, Ending::NotSelected, spent, duration, now));
        }
        self.lane_idle(lane, now);
        if group.winner.is_none() {
            if let Some(q) = &group.question {
                // No sample passed and one asked: the criterion waits for the answer.
                let question = self.asked(&group.id, q, now, &mut r);
                r.push(Effect::Ask(question));
            } else if group.failures.is_empty() {
                // Ended, or only their agents failed: not an attempt. Tried again (when
                // the run goes on).
                self.schedule.requeue(lane, &group.id);
            } else {
                self.ledger.attempt_failed(
                    &group.id,
                    Failure::joined(&group.failures),
                    group.last_log.clone(),
                );
                if let Some(e) = setup.and_then(|s| self.climb(&group.id, &s)) {
                    r.say(e);
                }
                self.add_to_iteration(&Spent::default(), false, true);
            }
        }
        r.flush(Flush::Soon);
        r
    }

    /// Best-of-N with `--mix`: criteria won per set-up, most first.
    pub(in crate::run) fn setup_wins(&self) -> Vec<(String, u32)> {
        if self.cfg.samples.mix.is_empty() {
            return Vec::new();
        }
        let mut v: Vec<(String, u32)> = self
            .pai
            .best_of
            .as_ref()
            .map(|b| b.wins.iter().map(|(k, n)| (k.clone(), *n)).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    fn won(&mut self, id: &str, t: &SampleTag) {
        let best = self.pai.best_of.get_or_insert_with(Default::default);
        let setup = t.setup.clone().unwrap_or_else(|| "default".to_string());
        *best.wins.entry(setup).or_insert(0) += 1;
        best.won_by.insert(id.to_string(), t.describe());
        self.ledger.won_by(id, t.describe());
    }
}

/// `--select best`'s order: fewest other criteria broken, then the smallest diff, the lowest
/// cost, the lowest sample number.
fn rank_key(d: &WorkerDone) -> (usize, u64, u64, u32) {
    let (spent, _) = spent_of(d);
    (
        d.broken.unwrap_or(0),
        d.work.as_ref().map_or(u64::MAX, |w| w.diff_lines),
        (spent.cost * 1e9) as u64,
        d.sample.as_ref().map_or(0, |t| t.k),
    )
}

/// A sample's failure, named by its sample.
fn tagged(d: &WorkerDone, reason: &FailReason) -> Failure {
    let own = Failure::of(reason);
    Failure {
        text: format!("{}: {}", tag(d), own.text),
        ..own
    }
}

fn tag(d: &WorkerDone) -> String {
    d.sample
        .as_ref()
        .map_or_else(|| "the worker".to_string(), SampleTag::describe)
}
