//! Rounds without a barrier: how far a failing criterion may run ahead of the oldest open
//! round, and `--stall` ending a flow once, whatever runs ahead.

use super::*;

/// The stall reproduction: CORE-2 never passes; UI's criteria share a domain, so while UI-1
/// runs long, nothing but CORE-2 can use the other lane.
const STALL: [&str; 5] = [
    "- [ ] ISC-CORE-1: a",
    "- [ ] ISC-CORE-2: never",
    "- [ ] ISC-UI-1: u1",
    "- [ ] ISC-UI-2: u2",
    "- [ ] ISC-UI-3: u3",
];

fn passes(lane: usize, id: &str, now: Now) -> LoopEvent {
    done(lane, id, &format!("RESULT: {id} PASS"), now)
}

fn fails(lane: usize, id: &str, now: Now) -> LoopEvent {
    done(lane, id, &format!("RESULT: {id} FAIL: never"), now)
}

/// Every launch the dispatcher's loop makes: what the lanes take after each round that
/// closed.
fn fill(c: &mut Core, now: Now, stops: &mut Vec<String>) -> Vec<(usize, String, u64)> {
    let (_, r) = close_rounds_saying(c, now);
    stops.extend(r);
    let r = c.fill_lanes(now);
    r.launches()
        .iter()
        .map(|l| (l.lane, l.id.clone(), l.iteration))
        .collect()
}

/// [`close_rounds`], with the warnings said.
fn close_rounds_saying(c: &mut Core, now: Now) -> (Option<End>, Vec<String>) {
    let (mut asked, mut said) = (None, Vec::new());
    while c.round_closed() {
        let (gained, _) = c.end_iteration(now);
        let (end, r) = c.after_iteration(gained);
        said.extend(warning_texts(&r));
        asked = asked.or(end);
        let _ = c.next_round(end, now);
    }
    (asked, said)
}

#[test]
fn a_criterion_that_keeps_failing_runs_at_most_stall_rounds_ahead_and_the_stall_stops_once() {
    let mut cfg = cfg();
    cfg.max_iterations = Some(128);
    cfg.stall = 3;
    let (mut c, now) = flow(cfg, &STALL);
    let mut said = Vec::new();
    let mut core2 = 0;
    // Lane 0 takes UI (the heaviest domain), lane 1 CORE.
    let first = fill(&mut c, now, &mut said);
    assert_eq!(first.len(), 2, "{first:?}");
    let ui_lane = first
        .iter()
        .find(|l| l.1 == "ISC-UI-1")
        .expect("UI-1 starts")
        .0;
    let core_lane = 1 - ui_lane;
    let _ = c.handle_event(passes(core_lane, "ISC-CORE-1", now), now);
    // While UI-1 runs, CORE-2 fails as often as the core lets it start.
    loop {
        let l = fill(&mut c, now, &mut said);
        let Some((lane, id, iteration)) = l.first().cloned() else {
            break;
        };
        assert_eq!((lane, id.as_str()), (core_lane, "ISC-CORE-2"));
        core2 += 1;
        assert!(
            iteration <= 1 + 3,
            "attempt {core2} in iteration {iteration}"
        );
        let _ = c.handle_event(fails(core_lane, "ISC-CORE-2", now), now);
    }
    // Round 1 is open (UI-1 runs): rounds 1 to 4, no further; the lane waits.
    assert_eq!(core2, 4);
    // UI works through its domain; each pass lets the lanes fill again.
    for id in ["ISC-UI-1", "ISC-UI-2", "ISC-UI-3"] {
        let _ = c.handle_event(passes(ui_lane, id, now), now);
        for (lane, next, _) in fill(&mut c, now, &mut said) {
            if next == "ISC-CORE-2" {
                core2 += 1;
                let _ = c.handle_event(fails(lane, &next, now), now);
            }
        }
    }
    let _ = close_rounds_saying(&mut c, now);
    assert!(
        fill(&mut c, now, &mut said).is_empty(),
        "the stall stops new workers"
    );
    // Round 1 gained; rounds 2, 3 and 4 (CORE-2's attempts made already) did not.
    assert_eq!(core2, 4, "no attempt after the stall");
    assert_eq!(
        said,
        ["no criterion newly passed in 3 iteration(s) in a row (--stall 3); stopping"]
    );
    assert!(c.settled());
    assert_eq!(c.next_step(), Step::End(End::Stalled));
}

#[test]
fn a_criterion_that_always_fails_ends_the_flow_after_stall_rounds() {
    let mut cfg = cfg();
    cfg.max_iterations = Some(128);
    cfg.stall = 3;
    let (mut c, now) = flow(cfg, &["- [ ] ISC-A-1: never"]);
    let mut said = Vec::new();
    let mut attempts = 0;
    loop {
        let l = fill(&mut c, now, &mut said);
        let Some((lane, id, _)) = l.first().cloned() else {
            break;
        };
        attempts += 1;
        let _ = c.handle_event(fails(lane, &id, now), now);
    }
    assert_eq!(attempts, 3);
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(c.next_step(), Step::End(End::Stalled));
}
