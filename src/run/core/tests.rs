//! The loop's decisions driven through `handle_event` with made-up events: no processes, no
//! clocks but the `Now` passed in, and no files except where a test says it drives the real
//! PRD writer (on a temporary file) to see what the core takes from it.

use std::path::PathBuf;
use std::time::Duration;

use super::{Core, Now, Step};
use crate::backend::verdict::Exit;
use crate::backend::{AgentOptions, ClaudeOptions, Outcome};
use crate::config::RunConfig;
use crate::prd::Prd;
use crate::run::end::End;
use crate::run::event::{
    CheckPurpose, Effect, Effects, Ending, Flush, LandJob, Launch, LoopEvent, RunEvent, WorkerDone,
};
use crate::run::judge::{Ran, judge};
use crate::worker::{Cancel, Finished};

mod best_of;
mod parents;

/// What a list of effects holds, by kind, for the assertions (their order is asserted where
/// it matters, on `iter`).
impl Effects {
    pub(super) fn iter(&self) -> std::slice::Iter<'_, Effect> {
        self.into_iter()
    }

    /// The kinds of its effects, in their order, flushes left out (`say`, `launch`, …).
    pub(super) fn kinds(&self) -> Vec<&'static str> {
        self.iter()
            .filter_map(|e| {
                Some(match e {
                    Effect::Say(_) => "say",
                    Effect::Record(_) => "record",
                    Effect::Ask(_) => "ask",
                    Effect::Cancel(_) => "cancel",
                    Effect::CancelLane(_) => "cancel lane",
                    Effect::ExitNow => "exit now",
                    Effect::Launch(_) => "launch",
                    Effect::Edit(..) => "edit",
                    Effect::Flush(_) => return None,
                    Effect::Land(_) => "land",
                    Effect::RunChecks(..) => "run checks",
                    Effect::Poll => "poll",
                })
            })
            .collect()
    }

    /// What `pick` takes from each effect, in their order.
    fn pick<'a, T>(&'a self, pick: impl FnMut(&'a Effect) -> Option<T>) -> Vec<T> {
        self.iter().filter_map(pick).collect()
    }

    pub(super) fn said(&self) -> Vec<&RunEvent> {
        self.pick(|e| match e {
            Effect::Say(e) => Some(e),
            _ => None,
        })
    }

    pub(super) fn launches(&self) -> Vec<&Launch> {
        self.pick(|e| match e {
            Effect::Launch(l) => Some(l.as_ref()),
            _ => None,
        })
    }

    /// The strongest cancel.
    pub(super) fn cancelled(&self) -> Option<Cancel> {
        self.pick(|e| match e {
            Effect::Cancel(c) => Some(*c),
            _ => None,
        })
        .into_iter()
        .max()
    }

    /// The strongest flush (the write the list makes).
    pub(super) fn flushed(&self) -> Option<Flush> {
        self.pick(|e| match e {
            Effect::Flush(f) => Some(*f),
            _ => None,
        })
        .into_iter()
        .max()
    }

    pub(super) fn records(&self) -> Vec<&crate::state::AttemptRecord> {
        self.pick(|e| match e {
            Effect::Record(r) => Some(r.as_ref()),
            _ => None,
        })
    }

    pub(super) fn asks(&self) -> Vec<&crate::questions::Question> {
        self.pick(|e| match e {
            Effect::Ask(q) => Some(q),
            _ => None,
        })
    }

    /// The Verify commands it runs (one batch at most).
    pub(super) fn checks(&self) -> Option<(CheckPurpose, &[crate::verify::Job])> {
        let batches = self.pick(|e| match e {
            Effect::RunChecks(p, jobs) => Some((*p, jobs.as_slice())),
            _ => None,
        });
        assert!(batches.len() <= 1, "one batch of checks at most");
        batches.into_iter().next()
    }

    pub(super) fn lands(&self) -> Vec<&LandJob> {
        self.pick(|e| match e {
            Effect::Land(j) => Some(j),
            _ => None,
        })
    }

    pub(super) fn cancelled_lanes(&self) -> Vec<usize> {
        self.pick(|e| match e {
            Effect::CancelLane(lane) => Some(*lane),
            _ => None,
        })
    }

    pub(super) fn exits(&self) -> bool {
        self.iter().any(|e| matches!(e, Effect::ExitNow))
    }
}

pub(super) fn cfg() -> RunConfig {
    RunConfig {
        given: Default::default(),
        prd_path: "/w/PRD.md".into(),
        agents: 2,
        max_iterations: None,
        timeout: Duration::from_secs(60),
        stuck_after: crate::backend::stuck::StuckAfter::OFF,
        kill_grace: Duration::from_secs(1),
        stall: 3,
        // These tests drive PAI's iterations (the barrier's rounds) by hand.
        rounds: crate::config::Rounds::Barrier,
        verify: true,
        recheck: false,
        verify_timeout: Duration::from_secs(60),
        verify_types: Default::default(),
        protect: Vec::new(),
        max_cost: None,
        max_time: None,
        max_wait: Duration::from_secs(3600),
        retry_backoff: Duration::from_secs(30),
        workdir: "/w".into(),
        state_dir: "/s".into(),
        session_names: "/s/names.json".into(),
        agent: AgentOptions::claude(ClaudeOptions {
            bin: "claude".into(),
            model: None,
            permission_mode: None,
            max_turns: None,
            allowed_tools: String::new(),
            extra_args: Vec::new(),
        }),
        notify: Default::default(),
        json: false,
        ci: Default::default(),
        isolation: Default::default(),
        samples: Default::default(),
        verifier: Default::default(),
        progress: crate::config::Progress::Lines,
        scope: None,
        sandbox: Default::default(),
    }
}

pub(super) fn core(cfg: RunConfig, criteria: &[&str]) -> (Core, Now) {
    let text = format!("# T\n\n## CRITERIA\n\n{}\n", criteria.join("\n"));
    let now = Now::current();
    let mut c = Core::new(cfg, "s-1".into(), Prd::parse(text).unwrap(), now);
    let _ = c.begin_rounds(now);
    (c, now)
}

pub(super) fn launched(r: &Effects) -> Vec<(usize, &str)> {
    r.launches()
        .iter()
        .map(|l| (l.lane, l.id.as_str()))
        .collect()
}

/// A worker that ran and printed `text` as its result (cost $0.001).
pub(super) fn done(lane: usize, id: &str, text: &str, now: Now) -> LoopEvent {
    let outcome = Outcome {
        final_text: Some(text.into()),
        has_result: true,
        cost_usd: Some(0.001),
        ..Outcome::default()
    };
    let finished = Finished {
        exit: Exit::Code { code: 0 },
        outcome,
        stderr_tail: String::new(),
        duration: Duration::from_millis(10),
        pid: 4242,
        output_bytes: 0,
        refusals: Default::default(),
    };
    let ran = Ok(Ran::read(id, finished, now.secs()));
    LoopEvent::WorkerDone(Box::new(WorkerDone {
        judgement: judge(&ran),
        lane,
        id: id.into(),
        iteration: 1,
        started_at: now.ms,
        log: PathBuf::from(format!("/s/{id}.log")),
        ran,
        landing: None,
        unprepared: None,
        sample: None,
        work: None,
        broken: None,
    }))
}

/// A worker whose agent hit a usage limit that resets in `secs`.
pub(super) fn limited(lane: usize, id: &str, secs: i64, now: Now) -> LoopEvent {
    let LoopEvent::WorkerDone(mut d) = done(lane, id, "", now) else {
        unreachable!()
    };
    let ran = d.ran.as_mut().unwrap();
    ran.finished.exit = Exit::Code { code: 1 };
    ran.finished.outcome.is_error = true;
    ran.finished.outcome.final_text = Some("You've hit your limit · resets 4pm (UTC)".into());
    ran.finished.outcome.rate_limit_status = Some("rejected".into());
    ran.finished.outcome.rate_limit_resets_at = Some(now.secs() + secs);
    *ran = Ran::read(id, ran.finished.clone(), now.secs());
    d.judgement = judge(&d.ran);
    LoopEvent::WorkerDone(d)
}

pub(super) fn ended(r: &Effects) -> Vec<(&str, &Ending)> {
    r.said()
        .iter()
        .filter_map(|e| match e {
            RunEvent::WorkerEnded(w) => Some((w.id.as_str(), &w.ending)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_pass_ticks_records_the_attempt_and_the_lane_takes_its_next_criterion() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    let r = c.fill_lanes(now);
    assert_eq!(launched(&r), [(0, "ISC-A-1")], "one domain, one lane");
    assert_eq!(r.flushed(), Some(Flush::Soon));
    let r = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    assert!(matches!(ended(&r)[..], [("ISC-A-1", Ending::Pass(_))]));
    assert_eq!(r.records().len(), 1, "one line for the attempts log");
    assert_eq!(
        r.flushed(),
        Some(Flush::Soon),
        "written within the coalescing window"
    );
    assert!(c.ledger.passing("ISC-A-1"));
    assert_eq!(launched(&c.fill_lanes(now)), [(0, "ISC-A-2")]);
    let r = c.handle_event(done(0, "ISC-A-2", "RESULT: ISC-A-2 FAIL: red", now), now);
    assert!(matches!(ended(&r)[..], [("ISC-A-2", Ending::Fail(why))] if why.to_string() == "red"));
    assert!(c.settled());
    let (gained, _) = c.end_iteration(now);
    assert_eq!(gained, 1);
    assert_eq!(c.ledger.get("ISC-A-2").unwrap().attempts, 1);
}

#[test]
fn a_usage_limit_pauses_every_lane_until_the_reset_and_retries_without_counting() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]);
    assert_eq!(launched(&c.fill_lanes(now)).len(), 2);
    let r = c.handle_event(limited(0, "ISC-A-1", 10, now), now);
    assert!(
        r.said().iter().any(
            |e| matches!(e, RunEvent::Paused { delay, .. } if *delay == Duration::from_secs(11))
        )
    );
    // The state document says the pause the lanes keep (from the one owner of pauses).
    assert_eq!(
        c.state_document("", now).paused_until,
        Some(now.ms + 11_000)
    );
    let _ = c.handle_event(done(1, "ISC-B-1", "RESULT: ISC-B-1 PASS", now), now);
    assert!(c.fill_lanes(now).launches().is_empty(), "every lane waits");
    let later = Now {
        at: now.at + Duration::from_secs(12),
        ms: now.ms + 12_000,
    };
    let _ = c.handle_event(LoopEvent::PauseOver, later);
    assert_eq!(c.state_document("", later).paused_until, None);
    assert_eq!(launched(&c.fill_lanes(later)), [(0, "ISC-A-1")], "retried");
    let rec = c.ledger.get("ISC-A-1").unwrap();
    assert_eq!((rec.attempts, rec.agent_failures), (0, 1));
}

#[test]
fn an_auth_failure_stops_the_run_and_ends_the_other_workers() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]);
    let _ = c.fill_lanes(now);
    let LoopEvent::WorkerDone(mut d) = done(0, "ISC-A-1", "", now) else {
        unreachable!()
    };
    let ran = d.ran.as_mut().unwrap();
    ran.finished.exit = Exit::Code { code: 1 };
    ran.finished.outcome.is_error = true;
    ran.finished.outcome.api_error_status = Some(401);
    ran.finished.outcome.final_text = Some("Invalid API key · Fix external API key".into());
    *ran = Ran::read("ISC-A-1", ran.finished.clone(), now.secs());
    d.judgement = judge(&d.ran);
    let r = c.handle_event(LoopEvent::WorkerDone(d), now);
    assert_eq!(r.cancelled(), Some(Cancel::Graceful));
    assert!(c.fill_lanes(now).launches().is_empty());
    let _ = c.handle_event(done(1, "ISC-B-1", "", now), now);
    let _ = c.end_iteration(now);
    assert_eq!(c.next_step(), Step::End(End::AgentFatal));
}

#[test]
fn ctrl_c_stops_gracefully_then_kills_then_exits() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a"]);
    let _ = c.fill_lanes(now);
    let first = c.handle_event(LoopEvent::Signal, now);
    assert_eq!(first.cancelled(), Some(Cancel::Graceful));
    assert!(c.fill_lanes(now).launches().is_empty());
    assert_eq!(
        c.handle_event(LoopEvent::Signal, now).cancelled(),
        Some(Cancel::Kill)
    );
    // The third: the PRD says paused in the write the exit makes, so its edit comes first.
    let third = c.handle_event(LoopEvent::Signal, now);
    assert_eq!(third.kinds().last(), Some(&"exit now"));
    assert!(
        third.kinds()[..third.kinds().len() - 1]
            .iter()
            .all(|k| *k == "edit")
    );
    assert!(third.exits());
}

#[test]
fn the_lines_about_a_pass_of_the_lanes_come_before_its_workers_start() {
    let mut cfg = cfg();
    cfg.max_cost = Some(0.0035);
    let (mut c, now) = core(
        cfg,
        &[
            "- [ ] ISC-A-1: a",
            "- [ ] ISC-A-2: b",
            "- [ ] ISC-B-1: c",
            "- [ ] ISC-B-2: d",
        ],
    );
    assert_eq!(launched(&c.fill_lanes(now)).len(), 2);
    let _ = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    let _ = c.handle_event(done(1, "ISC-B-1", "RESULT: ISC-B-1 PASS", now), now);
    // One more fits under --max-cost, not two: the budget's notice is decided after the
    // first launch, and said before it (the start lines follow the launches).
    let r = c.fill_lanes(now);
    assert_eq!(r.kinds(), ["say", "launch"]);
    assert_eq!(r.flushed(), Some(Flush::Soon));
}

#[test]
fn the_budget_stops_launching_before_the_next_worker_could_pass_it() {
    let mut cfg = cfg();
    cfg.max_cost = Some(0.0015);
    cfg.agents = 1;
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    let _ = c.fill_lanes(now);
    let _ = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    let r = c.fill_lanes(now);
    assert!(r.launches().is_empty());
    assert!(r.said().iter().any(
        |e| matches!(e, RunEvent::Notice(m) if m.to_string().starts_with("budget: spent $0.0010 of --max-cost $0.00"))
    ));
    let _ = c.end_iteration(now);
    assert_eq!(c.next_step(), Step::End(End::Budget));
}

#[test]
fn a_stop_request_ends_the_workers_and_a_pause_request_lets_them_finish() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a"]);
    let _ = c.fill_lanes(now);
    let r = c.handle_event(LoopEvent::Request(End::PausedByRequest), now);
    assert_eq!(r.cancelled(), None);
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a"]);
    let _ = c.fill_lanes(now);
    let r = c.handle_event(LoopEvent::Request(End::StoppedByRequest), now);
    assert_eq!(r.cancelled(), Some(Cancel::Graceful));
    assert!(c.fill_lanes(now).launches().is_empty());
}

#[test]
fn a_pass_whose_work_conflicts_is_a_failed_attempt_with_the_files_named() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a"]);
    let r = c.fill_lanes(now);
    assert_eq!(launched(&r), vec![(0, "ISC-A-1")]);
    let LoopEvent::WorkerDone(mut d) = done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now) else {
        unreachable!()
    };
    d.landing = Some(crate::isolation::Landing::Conflict {
        files: vec!["src/a.rs".into()],
        kept: "refs/prdloop/s-1/ISC-A-1/1".into(),
        theirs: "-old\n+new".into(),
    });
    let r = c.handle_event(LoopEvent::WorkerDone(d), now);
    assert!(!c.ledger.passing("ISC-A-1"));
    let why = c
        .ledger
        .get("ISC-A-1")
        .and_then(|r| r.last_failure.clone())
        .unwrap();
    assert!(why.starts_with("merge conflict in src/a.rs"), "{why}");
    assert!(why.contains("refs/prdloop/s-1/ISC-A-1/1"), "{why}");
    assert_eq!(r.records().len(), 1);
    assert!(r.records()[0].landing.is_some());
}

/// Sample `k` of 3 of an attempt at `id` in lane 0, that printed `text`; with work to merge.
pub(super) fn sample(k: u32, id: &str, text: &str, now: Now) -> LoopEvent {
    let LoopEvent::WorkerDone(mut d) = done(0, id, text, now) else {
        unreachable!()
    };
    d.sample = Some(crate::run::event::SampleTag {
        k,
        n: 3,
        setup: None,
    });
    d.work = Some(crate::run::event::Work {
        base: "b".into(),
        commit: format!("c{k}"),
        kept: format!("refs/prdloop/s-1/{id}/1-s{}", k + 1),
        diff_lines: u64::from(10 - k),
        files: vec!["a".into()],
    });
    LoopEvent::WorkerDone(d)
}

fn cancelled(k: u32, id: &str, now: Now) -> LoopEvent {
    let LoopEvent::WorkerDone(mut d) = sample(k, id, "", now) else {
        unreachable!()
    };
    d.ran.as_mut().unwrap().finished.exit = Exit::Cancelled;
    d.judgement = judge(&d.ran);
    LoopEvent::WorkerDone(d)
}

fn merged() -> crate::isolation::Landing {
    crate::isolation::Landing::Merged {
        files: vec!["a".into()],
        commit: None,
        note: None,
        undo: None,
    }
}

#[test]
fn the_cost_cap_counts_the_workers_a_pass_starts_across_lanes() {
    let mut cfg = cfg();
    cfg.agents = 2;
    cfg.samples.n = 2;
    cfg.max_cost = Some(0.0095);
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]);
    // $0.008 spent by 8 workers: $0.001 each; room for one more worker in all.
    c.ledger.total_cost = 0.008;
    c.ledger.workers_done = 8;
    let r = c.fill_lanes(now);
    assert_eq!(launched(&r), vec![(0, "ISC-A-1")]);
    assert!(c.brakes.stop().is_some());
}
