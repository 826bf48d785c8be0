//! More of the loop's decisions driven through `handle_event` and `fill_lanes` with made-up
//! events (see `tests.rs` for the helpers): retries up to `-n` with and without the barrier,
//! the stall limit, questions, the PRD read from disk, requests, limits on time and waiting,
//! the runner's own checks, workers lost or never started. No process, file or clock.

use crate::run::judge::judge;
use crate::run::reason::{FailReason, StopReason};
use crate::run::warning::Warning;
use std::path::PathBuf;
use std::time::Duration;

use super::tests::{cfg, core, done, ended, launched, limited};
use super::{Core, Now, Step};
use crate::backend::verdict::Exit;
use crate::config::RunConfig;
use crate::prd::Prd;
use crate::run::end::End;
use crate::run::event::SyncReport;
use crate::run::event::{CheckPurpose, Effects, Ending, Flush, LoopEvent, RunEvent, Slot};
use crate::worker::{Cancel, SpawnError};

fn later(now: Now, secs: u64) -> Now {
    Now {
        at: now.at + Duration::from_secs(secs),
        ms: now.ms + secs * 1000,
    }
}

fn prd(criteria: &[&str]) -> Prd {
    Prd::parse(format!("# T\n\n## CRITERIA\n\n{}\n", criteria.join("\n"))).unwrap()
}

/// A run with no barrier (`--rounds continuous`), its flow begun.
fn flow(mut cfg: RunConfig, criteria: &[&str]) -> (Core, Now) {
    cfg.rounds = crate::config::Rounds::Continuous;
    let now = Now::current();
    let mut c = Core::new(cfg, "s-1".into(), prd(criteria), now);
    let _ = c.begin_rounds(now);
    (c, now)
}

/// What the dispatcher does after each event of a flow: ends each round that closed. Returns
/// the end one of them asked for, and how many rounds ended.
fn close_rounds(c: &mut Core, now: Now) -> (Option<End>, usize) {
    let (mut asked, mut closed) = (None, 0);
    while c.round_closed() {
        let (gained, r) = c.end_iteration(now);
        closed += r
            .said()
            .iter()
            .filter(|e| matches!(e, RunEvent::IterationEnded { .. }))
            .count();
        let (end, _) = c.after_iteration(gained);
        asked = asked.or(end);
        let _ = c.next_round(end, now);
    }
    (asked, closed)
}

fn notices(r: &Effects) -> Vec<String> {
    r.said()
        .iter()
        .filter_map(|e| match e {
            RunEvent::Notice(m) => Some(m.to_string()),
            _ => None,
        })
        .collect()
}

fn warnings(r: &Effects) -> Vec<&Warning> {
    r.said()
        .iter()
        .filter_map(|e| match e {
            RunEvent::Warning(w) => Some(w),
            _ => None,
        })
        .collect()
}

/// The warnings in `r`, in the words the run says them.
fn warning_texts(r: &Effects) -> Vec<String> {
    warnings(r).iter().map(|w| w.to_string()).collect()
}

fn check(code: i32) -> crate::verify::Check {
    crate::verify::Check {
        command: "true".into(),
        exit: Exit::Code { code },
        tail: String::new(),
        duration: Duration::from_millis(5),
        log: PathBuf::from("/s/check.log"),
        ran_no_test: None,
        refused: Default::default(),
    }
}

#[test]
fn a_failed_criterion_gets_one_attempt_per_iteration_up_to_n_then_the_run_ends() {
    let mut cfg = cfg();
    cfg.max_iterations = Some(2);
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a"]);
    for attempt in 1..=2 {
        let r = c.fill_lanes(now);
        assert_eq!(launched(&r), [(0, "ISC-A-1")]);
        assert_eq!(r.launches()[0].attempt, attempt);
        let r = c.handle_event(
            done(0, "ISC-A-1", "RESULT: ISC-A-1 FAIL: still red", now),
            now,
        );
        assert!(matches!(ended(&r)[..], [("ISC-A-1", Ending::Fail(_))]));
        assert!(
            c.fill_lanes(now).launches().is_empty(),
            "one attempt per iteration"
        );
        assert!(c.round_closed());
        let (gained, _) = c.end_iteration(now);
        assert_eq!(c.after_iteration(gained).0, None);
        if attempt == 1 {
            let _ = c.next_round(None, now);
            assert!(c.rounds.is_open(), "the next iteration opens");
        }
    }
    assert_eq!(c.next_step(), Step::End(End::MaxIterations));
    let rec = c.ledger.get("ISC-A-1").unwrap();
    assert_eq!(rec.attempts, 2);
    assert_eq!(rec.last_failure.as_deref(), Some("still red"));
}

#[test]
fn the_stall_limit_ends_the_run_after_iterations_that_gained_nothing() {
    let mut cfg = cfg();
    cfg.stall = 2;
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a"]);
    for round in 1..=2 {
        let _ = c.fill_lanes(now);
        let _ = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 FAIL: no", now), now);
        let (gained, _) = c.end_iteration(now);
        let (end, r) = c.after_iteration(gained);
        if round == 1 {
            assert_eq!(end, None);
            let _ = c.next_round(end, now);
        } else {
            assert_eq!(end, Some(End::Stalled));
            assert_eq!(warnings(&r), [&Warning::Stalled { stall: 2, limit: 2 }]);
            assert_eq!(
                warning_texts(&r),
                ["no criterion newly passed in 2 iteration(s) in a row (--stall 2); stopping"]
            );
        }
    }
}

#[test]
fn with_the_barrier_a_retry_waits_for_the_iteration_without_it_the_lane_retries_at_once() {
    // (Was the integration test `without_the_barrier_a_retry_starts_while_slow_work_runs`,
    // which timed a sleeping fake agent.)
    let criteria = ["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"];
    let fail = |now| done(0, "ISC-A-1", "RESULT: ISC-A-1 FAIL: no", now);

    let (mut c, now) = core(cfg(), &criteria);
    assert_eq!(launched(&c.fill_lanes(now)).len(), 2);
    let _ = c.handle_event(fail(now), now);
    assert!(c.fill_lanes(now).launches().is_empty(), "B still runs");
    assert!(!c.settled());

    let (mut c, now) = flow(cfg(), &criteria);
    assert_eq!(launched(&c.fill_lanes(now)).len(), 2);
    let _ = c.handle_event(fail(now), now);
    assert_eq!(close_rounds(&mut c, now).0, None);
    let r = c.fill_lanes(now);
    assert_eq!(launched(&r), [(0, "ISC-A-1")], "while B still runs");
    assert_eq!(r.launches()[0].attempt, 2);
    // Iterations still count rounds of attempts: the retry is iteration 2.
    assert_eq!(r.launches()[0].iteration, 2);
}

#[test]
fn in_the_flow_a_failing_criterion_runs_out_of_attempts_and_the_run_ends() {
    let mut cfg = cfg();
    cfg.max_iterations = Some(3);
    cfg.agents = 1;
    cfg.stall = 0;
    let (mut c, now) = flow(cfg, &["- [ ] ISC-A-1: a"]);
    for attempt in 1..=3 {
        let r = c.fill_lanes(now);
        assert_eq!(launched(&r), [(0, "ISC-A-1")]);
        assert_eq!(r.launches()[0].attempt, attempt);
        let _ = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 FAIL: no", now), now);
        // A round per attempt.
        assert_eq!(close_rounds(&mut c, now), (None, 1));
    }
    assert!(c.fill_lanes(now).launches().is_empty());
    assert!(c.settled());
    assert_eq!(c.next_step(), Step::End(End::MaxIterations));
    assert_eq!(c.ledger.get("ISC-A-1").unwrap().attempts, 3);
}

#[test]
fn a_question_parks_its_criterion_the_lane_goes_on_and_the_run_ends_waiting_for_the_answer() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    assert_eq!(launched(&c.fill_lanes(now)), [(0, "ISC-A-1")]);
    let r = c.handle_event(
        done(0, "ISC-A-1", "QUESTION: ISC-A-1 Cents or euros?", now),
        now,
    );
    assert!(matches!(ended(&r)[..], [("ISC-A-1", Ending::Question(q))] if q == "Cents or euros?"));
    assert!(r.said().iter().any(|e| matches!(
        e,
        RunEvent::Asked { id, question, .. } if id == "ISC-A-1" && question == "Cents or euros?"
    )));
    assert_eq!(r.asks().len(), 1, "for the question book");
    assert_eq!(r.asks()[0].criterion, "ISC-A-1");
    // The question is said, then the worker's end; the attempt is recorded, then the
    // question filed.
    assert_eq!(r.kinds(), ["say", "say", "record", "ask"]);
    assert!(matches!(r.said()[0], RunEvent::Asked { .. }));
    // The state document lists it, for `status` and the dashboard, with the book's path.
    let saved = c.state_document("", now);
    assert_eq!(saved.questions.len(), 1);
    assert_eq!(
        saved.questions_file.as_deref(),
        Some(c.book_path().to_str().unwrap())
    );
    assert!(c.parked("ISC-A-1"));
    assert_eq!(
        c.ledger.get("ISC-A-1").unwrap().attempts,
        0,
        "not an attempt"
    );
    // The lane takes its next criterion; the parked one does not start again.
    assert_eq!(launched(&c.fill_lanes(now)), [(0, "ISC-A-2")]);
    let _ = c.handle_event(done(0, "ISC-A-2", "RESULT: ISC-A-2 PASS", now), now);
    assert!(c.fill_lanes(now).launches().is_empty());
    assert!(c.settled());
    let (gained, _) = c.end_iteration(now);
    assert_eq!(c.after_iteration(gained).0, None);
    assert_eq!(c.next_step(), Step::End(End::Questions));
    assert_eq!(
        c.open_questions(),
        [("ISC-A-1".to_string(), "Cents or euros?".to_string())]
    );
}

#[test]
fn an_answer_read_from_the_book_unparks_the_criterion_into_the_running_iteration() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    let _ = c.fill_lanes(now);
    let r = c.handle_event(done(0, "ISC-A-1", "QUESTION: ISC-A-1 Cents?", now), now);
    let _ = c.fill_lanes(now);
    // The dispatcher wrote the question into the book, `prdloop answer` answered it, and
    // the dispatcher read the book again.
    let mut book = crate::questions::Book {
        prd: "/w/PRD.md".into(),
        questions: r.asks().into_iter().cloned().collect(),
    };
    book.answer("ISC-A-1", "Cents.", now.ms).unwrap();
    let r = c.handle_event(LoopEvent::Questions(book), now);
    assert!(r.said().iter().any(|e| matches!(
        e,
        RunEvent::Answered { id, answer } if id == "ISC-A-1" && answer == "Cents."
    )));
    assert!(!c.parked("ISC-A-1"));
    let _ = c.handle_event(done(0, "ISC-A-2", "RESULT: ISC-A-2 PASS", now), now);
    let r = c.fill_lanes(now);
    assert_eq!(launched(&r), [(0, "ISC-A-1")], "in this iteration");
    assert_eq!(r.launches()[0].attempt, 1);
}

#[test]
fn a_tick_only_asks_for_the_prd_and_the_request_file_to_be_read() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a"]);
    let _ = c.fill_lanes(now);
    let r = c.handle_event(LoopEvent::Tick, now);
    assert_eq!(r.kinds(), ["poll"]);
    assert_eq!(r.flushed(), None);
}

#[test]
fn the_prd_read_from_disk_passes_on_its_warnings_and_a_stop_set_in_it() {
    let (mut c, now) = core(
        cfg(),
        &["- [ ] ISC-A-1: a | Verify: CLI: `true`", "- [ ] ISC-A-2: b"],
    );
    let _ = c.fill_lanes(now);
    // Someone edited the PRD: ISC-A-1's command changed, and `loopStatus: stopped` was set.
    let edited = || {
        prd(&[
            "- [ ] ISC-A-1: a | Verify: CLI: `false`",
            "- [ ] ISC-A-2: b",
        ])
    };
    let dropped: Warning = crate::run::warning::prd::Warning::Dropped {
        path: PathBuf::from("/w/PRD.md"),
        id: "ISC-A-9".into(),
    }
    .into();
    let r = c.handle_event(
        LoopEvent::Disk(Box::new(SyncReport {
            warnings: vec![dropped.clone()],
            request: Some(End::StoppedByRequest),
            changed_on_disk: true,
            doc: Some(edited()),
            ..SyncReport::default()
        })),
        now,
    );
    assert_eq!(warnings(&r)[0], &dropped, "the sync's own warning first");
    assert_eq!(
        warning_texts(&r),
        [
            dropped.to_string().as_str(),
            "/w/PRD.md:5: the Verify command of ISC-A-1 changed during the run (now `false`); the original (`true`) still decides",
        ]
    );
    assert_eq!(
        notices(&r),
        ["stop requested in the PRD: stopping the workers"]
    );
    assert_eq!(r.cancelled(), Some(Cancel::Graceful));
    assert!(c.fill_lanes(now).launches().is_empty());
    // The core took the PRD the report carried.
    assert!(c.doc.text().contains("CLI: `false`"));
    // Warned once.
    let again = SyncReport {
        changed_on_disk: true,
        doc: Some(edited()),
        ..SyncReport::default()
    };
    let r = c.handle_event(LoopEvent::Disk(Box::new(again)), now);
    assert!(r.said().is_empty(), "{:?}", r.said());
}

#[test]
fn a_pause_request_lets_the_running_worker_land_and_then_ends_the_run_paused() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    let _ = c.fill_lanes(now);
    let r = c.handle_event(LoopEvent::Request(End::PausedByRequest), now);
    assert_eq!(
        notices(&r),
        ["pause requested in the PRD: letting running workers finish"]
    );
    let _ = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    assert!(c.ledger.passing("ISC-A-1"), "its pass counts");
    assert!(
        c.fill_lanes(now).launches().is_empty(),
        "ISC-A-2 does not start"
    );
    assert!(c.settled());
    let (gained, _) = c.end_iteration(now);
    assert_eq!(c.after_iteration(gained).0, Some(End::PausedByRequest));
}

#[test]
fn a_cancelled_worker_after_ctrl_c_is_no_attempt_and_the_run_ends_interrupted() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a"]);
    let _ = c.fill_lanes(now);
    let _ = c.handle_event(LoopEvent::Signal, now);
    let LoopEvent::WorkerDone(mut d) = done(0, "ISC-A-1", "", now) else {
        unreachable!()
    };
    d.ran.as_mut().unwrap().finished.exit = Exit::Cancelled;
    d.judgement = judge(&d.ran);
    let r = c.handle_event(LoopEvent::WorkerDone(d), now);
    assert!(matches!(ended(&r)[..], [("ISC-A-1", Ending::Cancelled)]));
    assert!(r.records().is_empty(), "nothing for the attempts log");
    assert_eq!(c.ledger.get("ISC-A-1").unwrap().attempts, 0);
    assert!(c.settled());
    let (gained, _) = c.end_iteration(now);
    assert_eq!(c.after_iteration(gained).0, Some(End::Interrupted));
}

#[test]
fn a_worker_that_could_not_start_is_a_failed_attempt_with_no_log_and_the_lane_goes_on() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    let _ = c.fill_lanes(now);
    let LoopEvent::WorkerDone(mut d) = done(0, "ISC-A-1", "", now) else {
        unreachable!()
    };
    d.ran = Err(SpawnError {
        program: "claude".into(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    });
    d.judgement = judge(&d.ran);
    let r = c.handle_event(LoopEvent::WorkerDone(d), now);
    assert!(matches!(
        ended(&r)[..],
        [("ISC-A-1", Ending::NotStarted(_))]
    ));
    assert!(r.records().is_empty(), "it never ran: no attempt record");
    let rec = c.ledger.get("ISC-A-1").unwrap();
    assert_eq!(rec.attempts, 1);
    assert!(rec.last_log.is_none());
    assert_eq!(launched(&c.fill_lanes(now)), [(0, "ISC-A-2")]);
}

#[test]
fn a_lost_worker_task_is_an_internal_error_for_its_criterion_and_frees_the_lane() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    let _ = c.fill_lanes(now);
    let r = c.handle_event(
        LoopEvent::WorkerLost {
            slot: Slot::new(0, 0),
            id: "ISC-A-1".into(),
            why: "task panicked".into(),
        },
        now,
    );
    assert!(r.said().iter().any(|e| matches!(
        e,
        RunEvent::Error(m) if m == "ISC-A-1: internal error while running the worker: task panicked"
    )));
    let rec = c.ledger.get("ISC-A-1").unwrap();
    assert_eq!(rec.attempts, 1);
    assert!(!rec.passing);
    assert_eq!(launched(&c.fill_lanes(now)), [(0, "ISC-A-2")]);
}

#[test]
fn the_time_limit_stops_launching_when_the_next_worker_could_pass_it() {
    let mut cfg = cfg();
    cfg.max_time = Some(Duration::from_secs(60));
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    let _ = c.fill_lanes(now);
    let _ = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    // 30s in, the next worker fits (they take 10ms); 61s in, the limit is passed.
    assert_eq!(launched(&c.fill_lanes(later(now, 30))), [(0, "ISC-A-2")]);
    let _ = c.handle_event(done(0, "ISC-A-2", "RESULT: ISC-A-2 FAIL: no", now), now);
    let (gained, _) = c.end_iteration(now);
    let (end, _) = c.after_iteration(gained);
    let _ = c.next_round(end, now);
    let r = c.fill_lanes(later(now, 61));
    assert!(r.launches().is_empty());
    assert_eq!(
        notices(&r),
        [
            "time: ran 1m 01s of --max-time 1m 00s; the next worker could pass it (about 0.0s each); no new workers"
        ]
    );
    let _ = c.end_iteration(now);
    assert_eq!(c.next_step(), Step::End(End::TimeLimit));
}

#[test]
fn a_usage_limit_that_resets_after_max_wait_stops_the_run_instead_of_pausing() {
    let mut cfg = cfg();
    cfg.max_wait = Duration::from_secs(600);
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a"]);
    let _ = c.fill_lanes(now);
    let r = c.handle_event(limited(0, "ISC-A-1", 3600, now), now);
    assert!(
        !r.said()
            .iter()
            .any(|e| matches!(e, RunEvent::Paused { .. })),
        "no pause"
    );
    assert_eq!(warnings(&r).len(), 1, "{:?}", r.said());
    assert!(
        matches!(
            warnings(&r)[..],
            [Warning::OverMaxWait(StopReason::MaxWait { .. })]
        ),
        "{:?}",
        warnings(&r)
    );
    assert!(
        warning_texts(&r)[0].ends_with("; stopping with the state saved for resume"),
        "{:?}",
        warning_texts(&r)
    );
    assert!(c.fill_lanes(now).launches().is_empty());
    let _ = c.end_iteration(now);
    assert_eq!(c.next_step(), Step::End(End::MaxWait));
    let rec = c.ledger.get("ISC-A-1").unwrap();
    assert_eq!((rec.attempts, rec.agent_failures), (0, 1));
}

#[test]
fn start_checks_tick_what_passes_already_and_only_the_rest_is_worked_on() {
    let now = Now::current();
    let mut c = Core::new(
        cfg(),
        "s-1".into(),
        prd(&[
            "- [ ] ISC-A-1: a | Verify: CLI: `true`",
            "- [ ] ISC-A-2: b | Verify: CLI: `false`",
        ]),
        now,
    );
    let r = c.start_checks();
    let (purpose, jobs) = r.checks().expect("checks to run");
    assert_eq!(purpose, CheckPurpose::Start);
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["ISC-A-1", "ISC-A-2"]);
    let r = c.handle_event(
        LoopEvent::ChecksDone {
            purpose: CheckPurpose::Start,
            results: vec![
                ("ISC-A-1".into(), Ok(check(0))),
                ("ISC-A-2".into(), Ok(check(1))),
            ],
        },
        now,
    );
    assert!(r.said().iter().any(|e| matches!(
        e,
        RunEvent::StartCheck { id, failed: None } if id == "ISC-A-1"
    )));
    assert_eq!(r.flushed(), Some(Flush::Now));
    assert!(c.ledger.passing("ISC-A-1"));
    assert!(!c.ledger.passing("ISC-A-2"));
    assert_eq!(c.next_step(), Step::Iterate);
    let _ = c.begin_rounds(now);
    assert_eq!(launched(&c.fill_lanes(now)), [(0, "ISC-A-2")]);
}

#[test]
fn a_regression_check_that_fails_unticks_the_box_and_takes_back_the_gain() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a | Verify: CLI: `true`"]);
    let _ = c.fill_lanes(now);
    let LoopEvent::WorkerDone(mut d) = done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now) else {
        unreachable!()
    };
    d.ran.as_mut().unwrap().check = Some(Ok(check(0)));
    d.judgement = judge(&d.ran);
    let _ = c.handle_event(LoopEvent::WorkerDone(d), now);
    assert!(c.ledger.passing("ISC-A-1"));
    let r = c.regression_checks();
    let (purpose, jobs) = r.checks().expect("the ticked criterion is checked again");
    assert_eq!(purpose, CheckPurpose::Regression);
    assert_eq!(jobs.len(), 1);
    let r = c.handle_event(
        LoopEvent::ChecksDone {
            purpose: CheckPurpose::Regression,
            results: vec![("ISC-A-1".into(), Ok(check(1)))],
        },
        now,
    );
    assert!(r.said().iter().any(|e| matches!(
        e,
        RunEvent::Regressed { id, reason } if id == "ISC-A-1" && matches!(reason, FailReason::Regression { .. })
    )));
    assert!(!c.ledger.passing("ISC-A-1"));
    let (gained, _) = c.end_iteration(now);
    assert_eq!(gained, 0, "the pass was taken back");
    assert_eq!(c.ledger.get("ISC-A-1").unwrap().regressions, 1);
    let (end, _) = c.after_iteration(gained);
    let _ = c.next_round(end, now);
    assert_eq!(
        launched(&c.fill_lanes(now)),
        [(0, "ISC-A-1")],
        "worked on again in the next iteration"
    );
}

mod limits;
mod rounds;

/// Without the barrier, each passing attempt's duration tells the flow what a criterion of
/// unknown duration takes: an isolated attempt's too, which comes to the core merged already.
#[test]
fn in_the_flow_a_passing_attempt_is_observed_once_whether_its_work_was_merged_or_not() {
    let (mut c, now) = flow(cfg(), &["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]);
    let r = c.fill_lanes(now);
    assert_eq!(launched(&r), [(0, "ISC-A-1"), (1, "ISC-B-1")]);
    // Not isolated: no work, no landing.
    let _ = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    // Isolated: its work was taken and merged before the core heard of it.
    let LoopEvent::WorkerDone(mut d) = done(1, "ISC-B-1", "RESULT: ISC-B-1 PASS", now) else {
        unreachable!()
    };
    d.work = Some(crate::run::event::Work {
        base: "b".into(),
        commit: "c".into(),
        kept: "refs/prdloop/x".into(),
        diff_lines: 1,
        files: vec!["b.txt".into()],
    });
    d.landing = Some(crate::isolation::Landing::Merged {
        files: vec!["b.txt".into()],
        commit: None,
        note: None,
        undo: None,
    });
    let r = c.handle_event(LoopEvent::WorkerDone(d), now);
    assert!(matches!(ended(&r)[..], [("ISC-B-1", Ending::Pass(_))]));
    assert_eq!(c.schedule.passes_observed(), 2);
}

#[test]
fn a_worker_started_event_records_its_pid_and_says_its_start() {
    let (mut c, now) = core(cfg(), &["- [ ] ISC-A-1: a"]);
    let r = c.fill_lanes(now);
    let l = &r.launches()[0];
    let started = LoopEvent::WorkerStarted {
        lane: l.lane,
        id: l.id.clone(),
        iteration: l.iteration,
        attempt: l.attempt,
        sample: None,
        pid: Some(4242),
    };
    let r = c.handle_event(started, now);
    assert!(matches!(
        &r.said()[..],
        [RunEvent::WorkerStarted { id, pid: Some(4242), attempt: 1, .. }] if id == "ISC-A-1"
    ));
    assert_eq!(c.pai.agents[0].pid, Some(4242));
}

/// A claimed pass whose `severity: critical` Test Strategy probe fails, the same for a single
/// attempt and for every sample of a best-of-N attempt: the product is down, and each says so.
#[test]
fn a_failing_critical_probe_is_said_alike_for_a_single_attempt_and_for_samples() {
    let text = "# T\n\n## Criteria\n\n- [ ] ISC-1: up\n\n## Test Strategy\n\
        | isc | type | check | threshold | tool | anchors_to | severity |\n\
        |-----|------|-------|-----------|------|------------|----------|\n\
        | ISC-1 | bash | it answers | all | `test -f up` | literal | critical |\n";
    let critical = |r: &Effects| {
        ended(r)
            .iter()
            .any(|(_, e)| matches!(e, Ending::Fail(FailReason::CriticalProbe { .. })))
    };
    let claimed = |d: &mut crate::run::event::WorkerDone| {
        d.ran.as_mut().unwrap().check = Some(Ok(check(1)));
        d.judgement = judge(&d.ran);
    };
    for samples in [1, 3] {
        let mut cfg = super::tests::cfg();
        cfg.agents = 1;
        cfg.samples.n = samples;
        let now = Now::current();
        let mut c = Core::new(
            cfg,
            "s-1".into(),
            Prd::parse(text.to_string()).unwrap(),
            now,
        );
        let _ = c.begin_rounds(now);
        assert_eq!(c.fill_lanes(now).launches().len(), samples as usize);
        for k in 0..samples {
            let event = if samples == 1 {
                done(0, "ISC-1", "RESULT: ISC-1 PASS", now)
            } else {
                super::tests::sample(k, "ISC-1", "RESULT: ISC-1 PASS", now)
            };
            let LoopEvent::WorkerDone(mut d) = event else {
                unreachable!()
            };
            claimed(&mut d);
            let r = c.handle_event(LoopEvent::WorkerDone(d), now);
            assert!(
                critical(&r),
                "{samples} sample(s), sample {k}: {:?}",
                ended(&r)
            );
        }
    }
}
