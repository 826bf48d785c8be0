//! Launching: for each idle lane, its next criterion, when no pause, request, stop or limit
//! forbids it, and how many samples: an [`Assignment`], which [`super::build`] makes into
//! one worker per sample.

use super::build::{Assignment, Sample};
use super::{Core, Now};
use crate::run::event::{Effect, Effects, Flush, RunEvent, SampleTag, Slot};
use crate::run::limits::{Spending, launch_blocked};
use crate::run::prompt;
use crate::run::reason::Notice;
use crate::run::warning::Warning;
use crate::state::AgentStatus;

/// Fills the idle lanes: decides, per idle lane, the next criterion's attempt when no pause,
/// request, stop or limit forbids it.
pub(in crate::run) fn fill(core: &mut Core, now: Now) -> Effects {
    let mut r = Effects::default();
    // Started after the lines about this pass (each worker's start line follows its start),
    // one after the other: they share the checkout as their base.
    let mut launches = Vec::new();
    if !core.rounds.is_open() {
        return r;
    }
    // What ended is settled first: a criterion put back is ready again.
    core.settle_flow();
    let paused = core.pause_until().is_some_and(|t| t > now.at);
    if !core.may_launch() || paused {
        return r;
    }
    // Workers running now and those this pass starts: their expected cost counts against
    // --max-cost before they have reported it.
    let (sampled_lanes, samples) = core.sampling.running();
    let mut in_flight = (core.schedule.busy_lanes() - sampled_lanes + samples) as u32;
    for lane in core.schedule.idle_lanes() {
        let Some(id) = core.schedule.next_for_lane(lane) else {
            continue;
        };
        let Some(c) = core.doc.criterion(&id).cloned() else {
            r.say(RunEvent::Warning(Warning::NoLongerInPrd { id: id.clone() }));
            core.schedule.forget(lane, &id);
            continue;
        };
        let spending = Spending {
            cost: core.ledger.total_cost,
            workers_done: core.ledger.workers_done,
            worker_time: core.ledger.worker_time,
            elapsed: core.elapsed(now),
            running: in_flight,
        };
        if let Some(why) = launch_blocked(core.cfg.max_cost, core.cfg.max_time, &spending) {
            r.say(RunEvent::Notice(Notice::NoNewWorkers(why.clone())));
            core.brakes.stop_for(why);
            core.schedule.requeue(lane, &id);
            break;
        }
        let count = sample_count(core, &id, &spending, now, &mut r);
        in_flight += count;
        let a = assignment(core, lane, c);
        core.attempt_started(lane, &id, a.iteration, now);
        if core.cfg.samples.n > 1 {
            core.sampling
                .start(lane, crate::run::samples::SampleSet::new(&id, count));
        }
        launches.extend(sample_launches(core, &a, count, now));
        lane_busy(core, lane, &id, now);
    }
    if !launches.is_empty() {
        r.extend(launches);
        r.flush(Flush::Soon);
    }
    r
}

/// How many samples the attempt of `id` runs: all of `--best-of`'s, or under `--best-of auto`
/// what its domain's record says, as many as fit under `--max-cost` (said when fewer).
fn sample_count(core: &Core, id: &str, spending: &Spending, now: Now, r: &mut Effects) -> u32 {
    let mean = spending.each();
    let (_, want) = core.samples_for(id, now);
    let count = samples_that_fit(want, core.cfg.max_cost, spending.committed(), mean);
    if count < want {
        r.say(RunEvent::Notice(Notice::SamplesCut {
            id: id.to_string(),
            count,
            want,
            max_cost: core.cfg.max_cost.unwrap_or_default(),
            per_worker: mean,
        }));
    }
    count
}

/// What `lane`'s attempt of `criterion` is: its iteration, its number, what the last one
/// said, its command.
fn assignment(core: &Core, lane: usize, criterion: crate::prd::Criterion) -> Assignment {
    let id = criterion.id.as_str();
    let rec = core.ledger.get(id);
    Assignment {
        lane,
        iteration: core.iteration_of(id),
        attempt: core.ledger.next_attempt(id),
        // A retry after an agent failure keeps the attempt number: its log gets its own name
        // so that the failed try's log is kept.
        retry: rec.map_or(0, |r| r.agent_failures_this_attempt),
        previous: rec.and_then(|rec| {
            rec.last_failure.clone().map(|text| prompt::Previous {
                text,
                stuck: rec.last_failure_stuck,
            })
        }),
        command: core.command_for(id).map(String::from),
        criterion,
    }
}

/// One worker per sample of the attempt `a`, each on its set-up (recorded for its slot).
fn sample_launches(core: &mut Core, a: &Assignment, count: u32, now: Now) -> Vec<Effect> {
    let mut launches = Vec::new();
    for k in 0..count {
        let setup = core.setup_for(&a.criterion.id, k, now).cloned();
        let label = core.label_of(setup.as_ref());
        core.slot_setup.insert(Slot::new(a.lane, k), label.clone());
        let sample = Sample {
            k,
            of: count,
            setup,
            label,
        };
        launches.push(Effect::Launch(Box::new(super::build::launch(
            core, a, &sample,
        ))));
    }
    launches
}

/// PAI's record of `lane` (an agent): working on `id` since `now`.
fn lane_busy(core: &mut Core, lane: usize, id: &str, now: Now) {
    if let Some(a) = core.pai.agents.get_mut(lane) {
        a.status = AgentStatus::Active;
        a.current_criterion = Some(id.to_string());
        a.started_at = Some(now.ms);
        a.finished_at = None;
        a.pid = None;
    }
}

/// A launched worker got its pid (recorded so that a run taking over after a crash can end
/// it), or none (it could not start): its start is said.
pub(super) fn started(
    core: &mut Core,
    lane: usize,
    id: String,
    (iteration, attempt): (u64, u32),
    sample: Option<SampleTag>,
    pid: Option<u32>,
) -> Effects {
    if let Some(a) = core.pai.agents.get_mut(lane) {
        a.pid = pid;
    }
    let setup = (core.ladder.is_on() && sample.is_none())
        .then(|| core.slot_setup.get(&Slot::new(lane, 0)).cloned())
        .flatten();
    let mut r = Effects::default();
    r.say(RunEvent::WorkerStarted {
        iteration,
        lane,
        id,
        attempt,
        pid,
        sample,
        setup,
    });
    r
}

/// How many of an attempt's `n` samples may start under `--max-cost`: those whose expected
/// cost (`each`, the mean per worker so far) still fits on top of `committed` (spent, plus
/// what running workers are expected to cost); at least one (the caller checked that one
/// does).
fn samples_that_fit(n: u32, max_cost: Option<f64>, committed: f64, each: f64) -> u32 {
    let Some(max) = max_cost else {
        return n;
    };
    if each <= 0.0 {
        return n;
    }
    let fit = ((max - committed) / each).floor();
    (fit.max(1.0) as u32).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_start_only_while_their_expected_cost_fits() {
        // Nothing known yet: all of them.
        assert_eq!(samples_that_fit(3, Some(1.0), 0.0, 0.0), 3);
        assert_eq!(samples_that_fit(3, None, 5.0, 1.0), 3);
        // $0.10 each, $0.50 committed of $0.75: two more fit.
        assert_eq!(samples_that_fit(3, Some(0.75), 0.5, 0.1), 2);
        assert_eq!(samples_that_fit(3, Some(2.0), 0.5, 0.1), 3);
        // Never zero: the caller stops the run when not even one fits.
        assert_eq!(samples_that_fit(3, Some(0.55), 0.5, 0.1), 1);
    }
}
