use super::*;
use crate::prd::Prd;

fn flow(body: &str, lanes: usize, limit: u32) -> (Flow, Prd) {
    let p = Prd::parse(format!("# T\n\n## CRITERIA\n\n{body}")).unwrap();
    let g = Graph::of(&p).unwrap();
    let work = p.criteria.iter().map(|c| Work::of(c, 1)).collect();
    (Flow::new(work, &g, lanes, limit, |_| None), p)
}

#[test]
fn a_failing_criterion_runs_ahead_of_the_oldest_open_round_only_when_nothing_nearer_can() {
    let (mut f, _) = flow("- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b\n", 1, 10);
    // A's first attempt fails: its retry (round 2) may go before B's first (round 1).
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    f.lane_ended(0);
    f.settle(|_| false);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    f.lane_ended(0);
    f.settle(|_| false);
    // Round 3 would be two ahead of round 1, which B still holds open: B goes first.
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-B-1"));
    f.lane_ended(0);
    f.settle(|id| id == "ISC-B-1");
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    assert_eq!(f.round_of("ISC-A-1"), 3);
}

/// A flow whose criteria's durations are known from an earlier run: `ms` per id.
fn flow_known(body: &str, lanes: usize, limit: u32, ms: &[(&str, u64)]) -> Flow {
    let p = Prd::parse(format!("# T\n\n## CRITERIA\n\n{body}")).unwrap();
    let g = Graph::of(&p).unwrap();
    let weight = |id: &str| ms.iter().find(|(i, _)| *i == id).map_or(1, |(_, m)| *m);
    let work = p
        .criteria
        .iter()
        .map(|c| Work::of(c, weight(&c.id)))
        .collect();
    Flow::new(work, &g, lanes, limit, |_| None)
}

#[test]
fn with_known_durations_the_most_urgent_goes_first_retry_or_not_and_however_far_ahead() {
    let body = "- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b\n";
    // A is long and fails twice: its third attempt is two rounds ahead of B's first, and
    // still goes first (its domain has the most work left).
    let mut f = flow_known(body, 1, 10, &[("ISC-A-1", 5000), ("ISC-B-1", 100)]);
    for _ in 0..3 {
        assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
        f.lane_ended(0);
        f.settle(|_| false);
    }
    assert_eq!(f.round_of("ISC-A-1"), 4);
    // A is short and failed once while X ran; X passed, so B (long) is ready for its first
    // attempt: B goes before A's retry. A first run, which knows no durations, retries first.
    let body = "- [ ] ISC-A-1: a\n- [ ] ISC-X-1: x\n- [ ] ISC-B-1: b (after: ISC-X-1)\n";
    let known = [("ISC-A-1", 100), ("ISC-X-1", 3000), ("ISC-B-1", 5000)];
    let (unknown, _) = flow(body, 2, 10);
    for (mut f, first) in [
        (flow_known(body, 2, 10, &known), "ISC-B-1"),
        (unknown, "ISC-A-1"),
    ] {
        assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-X-1"));
        assert_eq!(f.next_for_lane(1).as_deref(), Some("ISC-A-1"));
        f.lane_ended(1);
        f.settle(|_| false);
        f.lane_ended(0);
        f.settle(|id| id == "ISC-X-1");
        assert_eq!(f.next_for_lane(0).as_deref(), Some(first));
    }
}

#[test]
fn a_failing_criterion_that_others_need_retries_ahead_of_first_attempts() {
    // The same, but C waits for A: each round A's retry waits, C waits too. A goes on.
    let (mut f, _) = flow(
        "- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b\n- [ ] ISC-C-1: c (after: ISC-A-1)\n",
        1,
        10,
    );
    for round in 1..=3 {
        assert_eq!(
            f.next_for_lane(0).as_deref(),
            Some("ISC-A-1"),
            "round {round}"
        );
        f.lane_ended(0);
        f.settle(|_| false);
    }
    assert_eq!(f.round_of("ISC-A-1"), 4);
}

#[test]
fn a_failing_criterion_runs_at_most_max_ahead_rounds_ahead_even_with_its_lane_idle() {
    // B-1 runs long in round 1 on lane 1; A-1 keeps failing on lane 0: nothing nearer can
    // start, so A-1 goes on rounds ahead, up to MAX_AHEAD; then lane 0 waits for round 1.
    let (mut f, _) = flow("- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b\n", 2, 10);
    let first = f.next_for_lane(0).unwrap();
    let other = f.next_for_lane(1).unwrap();
    assert_eq!((first.as_str(), other.as_str()), ("ISC-A-1", "ISC-B-1"));
    for round in 2..=1 + MAX_AHEAD {
        f.lane_ended(0);
        f.settle(|_| false);
        assert_eq!(
            f.next_for_lane(0).as_deref(),
            Some("ISC-A-1"),
            "round {round}"
        );
        assert_eq!(f.round_of("ISC-A-1"), round);
    }
    f.lane_ended(0);
    f.settle(|_| false);
    assert_eq!(f.next_for_lane(0), None, "no further than MAX_AHEAD");
    assert!(f.work_waits());
    // Round 1 closes with B's pass: A-1 goes on.
    f.lane_ended(1);
    f.settle(|id| id == "ISC-B-1");
    assert_eq!(f.open_round(), Some(2 + MAX_AHEAD));
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
}

#[test]
fn a_lower_stall_bounds_the_rounds_ahead_lower() {
    let (mut f, _) = flow("- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b\n", 2, 10);
    f.bound_ahead(1);
    assert!(f.next_for_lane(0).is_some() && f.next_for_lane(1).is_some());
    f.lane_ended(0);
    f.settle(|_| false);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    f.lane_ended(0);
    f.settle(|_| false);
    assert_eq!(f.next_for_lane(0), None);
}

#[test]
fn a_question_parks_its_criterion_without_an_attempt_until_the_answer() {
    let (mut f, _) = flow("- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b\n", 1, 2);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    // Its worker asks, and ends.
    f.park("ISC-A-1");
    f.lane_ended(0);
    f.settle(|_| false);
    assert_eq!(f.state("ISC-A-1"), Some(&State::Parked));
    // The lane goes on with other work; the parked one is not handed out.
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-B-1"));
    f.lane_ended(0);
    f.settle(|id| id == "ISC-B-1");
    assert_eq!(f.next_for_lane(0), None);
    // Answered: worked on again, with both of its attempts left (the question was none).
    f.unpark("ISC-A-1");
    for _ in 0..2 {
        assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
        f.lane_ended(0);
        f.settle(|_| false);
    }
    assert_eq!(f.state("ISC-A-1"), Some(&State::Exhausted));
}

#[test]
fn a_criterion_starts_only_after_what_it_needs_passes() {
    let (mut f, _) = flow(
        "- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b (after: ISC-A-1)\n",
        2,
        3,
    );
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    assert_eq!(f.next_for_lane(1), None);
    f.lane_ended(0);
    f.settle(|id| id == "ISC-A-1");
    assert_eq!(f.round_of("ISC-B-1"), 2);
    assert_eq!(f.next_for_lane(1).as_deref(), Some("ISC-B-1"));
    assert_eq!(f.open_round(), Some(2));
}

#[test]
fn a_failed_criterion_retries_at_once_and_its_dependents_wait_when_it_runs_out() {
    let (mut f, _) = flow(
        "- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b (after: ISC-A-1)\n- [ ] ISC-C-1: c (after: ISC-B-1)\n",
        2,
        2,
    );
    for _ in 0..2 {
        assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
        f.lane_ended(0);
        f.settle(|_| false);
    }
    assert_eq!(f.state("ISC-A-1"), Some(&State::Exhausted));
    assert!(f.waiting_for("ISC-B-1").unwrap().contains("ISC-A-1"));
    assert_eq!(f.waiting_for("ISC-C-1"), Some("ISC-B-1"));
    assert_eq!(f.open_round(), None);
}

#[test]
fn overlapping_footprints_are_not_run_at_once_while_other_work_waits() {
    let (mut f, _) = flow(
        "- [ ] ISC-A-1: edit `src/x.rs`\n- [ ] ISC-B-1: also `src/x.rs`\n- [ ] ISC-C-1: c\n- [ ] ISC-A-2: same domain\n",
        3,
        3,
    );
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    // B touches A's file, A-2 shares its domain: C runs, then the third lane idles.
    assert_eq!(f.next_for_lane(1).as_deref(), Some("ISC-C-1"));
    assert_eq!(f.next_for_lane(2), None);
    f.lane_ended(0);
    f.settle(|_| true);
    assert!(f.next_for_lane(0).is_some());
    assert!(f.next_for_lane(2).is_some());
    // Touched files join the footprint.
    f.touched("ISC-C-1", &["src/y.rs".into()]);
    assert!(f.files("ISC-C-1").unwrap().contains("src/y.rs"));
}

#[test]
fn a_criterion_gone_from_the_prd_frees_its_lane_and_is_not_worked_again() {
    let (mut f, _) = flow("- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b\n", 1, 3);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    f.forget(0, "ISC-A-1");
    f.settle(|_| false);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-B-1"));
    f.lane_ended(0);
    f.settle(|_| true);
    assert_eq!(f.next_for_lane(0), None);
    assert_eq!(f.open_round(), None);
}

#[test]
fn a_requeued_attempt_is_retried_in_the_same_round() {
    let (mut f, _) = flow("- [ ] ISC-A-1: a\n", 1, 1);
    assert!(f.next_for_lane(0).is_some());
    f.lane_ended(0);
    f.requeue(0, "ISC-A-1");
    f.settle(|_| false);
    assert_eq!(f.round_of("ISC-A-1"), 1);
    assert_eq!(f.state("ISC-A-1"), Some(&State::Ready));
}

#[test]
fn a_domain_that_proved_slow_goes_first_even_over_the_lanes_own_domain() {
    let (mut f, _) = flow(
        "- [ ] ISC-A-1: a\n- [ ] ISC-A-2: a\n- [ ] ISC-B-1: b\n- [ ] ISC-B-2: b\n- [ ] ISC-C-1: c\n- [ ] ISC-C-2: c\n",
        1,
        3,
    );
    // Each passes; A's took 100 ms, B's 1 s, C's 550 ms (the run's mean by then).
    for (id, ms) in [("ISC-A-1", 100), ("ISC-B-1", 1000), ("ISC-C-1", 550)] {
        assert_eq!(f.next_for_lane(0).as_deref(), Some(id));
        f.lane_ended(0);
        f.observed(id, ms);
        f.settle(|c| c == id || c.ends_with("-1"));
    }
    // One criterion left in each: B's is expected to take longest, then C's (the lane's own),
    // then A's.
    for id in ["ISC-B-2", "ISC-C-2", "ISC-A-2"] {
        assert_eq!(f.next_for_lane(0).as_deref(), Some(id));
        f.lane_ended(0);
        f.settle(|_| true);
    }
}

#[test]
fn a_file_many_criteria_name_counts_as_the_work_behind_each_of_them() {
    // A has two criteria; B, C and D one each, all three editing `src/x.rs`, which only one
    // attempt at a time may hold: three criteria of work behind whichever starts first.
    let (mut f, _) = flow(
        "- [ ] ISC-A-1: a\n- [ ] ISC-A-2: a\n- [ ] ISC-B-1: edits `src/x.rs`\n\
         - [ ] ISC-C-1: edits `src/x.rs`\n- [ ] ISC-D-1: edits `src/x.rs`\n",
        1,
        10,
    );
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-B-1"));
}

#[test]
fn a_chain_link_started_rounds_ahead_retries_at_once_up_to_max_ahead_failures() {
    // C-1 holds round 1 open on lane 1. A-1 fails twice and passes in round 3: B-1, which
    // needs it, starts in round 4, already MAX_AHEAD rounds ahead, by A-1's doing. Its own
    // failures are what is bounded: it retries at once, MAX_AHEAD times, as A-1 could.
    let (mut f, _) = flow(
        "- [ ] ISC-A-1: a\n- [ ] ISC-C-1: c\n- [ ] ISC-B-1: b (after: ISC-A-1)\n",
        2,
        10,
    );
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    assert_eq!(f.next_for_lane(1).as_deref(), Some("ISC-C-1"));
    for pass in [false, false, true] {
        f.lane_ended(0);
        f.settle(|id| pass && id == "ISC-A-1");
        if !pass {
            assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
        }
    }
    assert_eq!(f.round_of("ISC-B-1"), 1 + MAX_AHEAD);
    for attempt in 1..=1 + MAX_AHEAD {
        assert_eq!(
            f.next_for_lane(0).as_deref(),
            Some("ISC-B-1"),
            "attempt {attempt}"
        );
        f.lane_ended(0);
        f.settle(|_| false);
    }
    assert_eq!(f.open_round(), Some(1), "C-1 still runs");
    assert_eq!(
        f.next_for_lane(0),
        None,
        "no more than MAX_AHEAD failures ahead"
    );
    assert!(f.work_waits());
}

/// The barrier's plan of `round`: its ready criteria partitioned over `lanes` lanes, as the
/// core makes it when the round opens.
fn plan_round(f: &mut Flow, p: &Prd, round: u64, lanes: usize) {
    let items: Vec<(&str, &str)> = p
        .criteria
        .iter()
        .filter(|c| f.starts_in(&c.id, round))
        .map(|c| (c.id.as_str(), c.domain.as_str()))
        .collect();
    let lanes = crate::plan::partition_weighted(items, lanes, |_| 1);
    f.plan(round, plan::LanePlan::weighted(&lanes, |_| 1));
}

#[test]
fn with_the_barrier_a_retry_waits_for_its_round_to_close_and_lanes_keep_their_plan() {
    let (mut f, p) = flow("- [ ] ISC-A-1: a\n- [ ] ISC-B-1: b\n", 2, 10);
    f.barrier();
    plan_round(&mut f, &p, 1, 1);
    // One lane planned: it works through A's group, then B's; lane 1 has no plan.
    assert_eq!(f.next_for_lane(1), None, "a lane the plan has not");
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    f.lane_ended(0);
    f.settle(|_| false);
    // A's retry is in round 2: B's first attempt goes first, whatever the flow's urgency.
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-B-1"));
    f.lane_ended(0);
    f.settle(|id| id == "ISC-B-1");
    assert_eq!(
        f.next_for_lane(0),
        None,
        "no attempt ahead of the open round"
    );
    assert_eq!(
        f.open_round(),
        Some(2),
        "round 1 closed with its last attempt"
    );
    plan_round(&mut f, &p, 2, 1);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    assert_eq!(f.round_of("ISC-A-1"), 2);
}

#[test]
fn with_the_barrier_no_round_starts_past_the_n_th_so_a_late_link_gets_what_is_left() {
    // C needs A; A passes in round 2 of 2: C's first attempt would be in round 3.
    let (mut f, p) = flow(
        "- [ ] ISC-A-1: a\n- [ ] ISC-C-1: c (after: ISC-A-1)\n",
        1,
        2,
    );
    f.barrier();
    assert_eq!(f.last_round(), Some(2));
    for (round, passes) in [(1, false), (2, true)] {
        plan_round(&mut f, &p, round, 1);
        assert_eq!(
            f.next_for_lane(0).as_deref(),
            Some("ISC-A-1"),
            "round {round}"
        );
        f.lane_ended(0);
        f.settle(|id| passes && id == "ISC-A-1");
    }
    assert_eq!(f.state("ISC-C-1"), Some(&State::Exhausted));
    assert_eq!(
        f.open_round(),
        None,
        "nothing is left to start: the run ends"
    );
    assert!(!f.work_waits());
}

#[test]
fn with_the_barrier_what_comes_back_is_planned_again_in_the_open_round() {
    let (mut f, p) = flow("- [ ] ISC-A-1: a\n- [ ] ISC-A-2: b\n", 1, 10);
    f.barrier();
    plan_round(&mut f, &p, 1, 1);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    // Its attempt could not be made: the same lane takes it again first, in round 1.
    f.requeue(0, "ISC-A-1");
    f.settle(|_| false);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    assert_eq!(f.round_of("ISC-A-1"), 1);
    // It asks a question: parked, then answered while round 1 is open: tried in it.
    f.park("ISC-A-1");
    f.lane_ended(0);
    f.settle(|_| false);
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-2"));
    f.unpark("ISC-A-1");
    f.lane_ended(0);
    f.settle(|id| id == "ISC-A-2");
    assert_eq!(f.next_for_lane(0).as_deref(), Some("ISC-A-1"));
    assert_eq!(f.round_of("ISC-A-1"), 1);
}
