//! Rate limits and overload: pauses that do not stack, and the backoff.

use super::*;

/// A worker whose agent said the model service is overloaded (HTTP 529, no reset time).
fn overloaded(lane: usize, id: &str, now: Now) -> LoopEvent {
    let LoopEvent::WorkerDone(mut d) = done(lane, id, "", now) else {
        unreachable!()
    };
    let ran = d.ran.as_mut().unwrap();
    ran.finished.exit = Exit::Code { code: 1 };
    ran.finished.outcome.is_error = true;
    ran.finished.outcome.api_error_status = Some(529);
    ran.finished.outcome.final_text = Some("API Error: 529 Overloaded".into());
    *ran = crate::run::judge::Ran::read(id, ran.finished.clone(), now.secs());
    d.judgement = judge(&d.ran);
    LoopEvent::WorkerDone(d)
}

fn paused(r: &Effects) -> Vec<Duration> {
    r.said()
        .iter()
        .filter_map(|e| match e {
            RunEvent::Paused { delay, .. } => Some(*delay),
            _ => None,
        })
        .collect()
}

#[test]
fn a_second_limit_inside_the_pause_in_force_neither_extends_it_nor_counts_as_waiting() {
    let mut cfg = cfg();
    // Room for one 11s wait, not two.
    cfg.max_wait = Duration::from_secs(20);
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]);
    assert_eq!(launched(&c.fill_lanes(now)).len(), 2);
    let r = c.handle_event(limited(0, "ISC-A-1", 10, now), now);
    assert_eq!(paused(&r), [Duration::from_secs(11)]);
    // The other lane's worker meets the same limit a moment later: covered, and not
    // counted against --max-wait.
    let r = c.handle_event(limited(1, "ISC-B-1", 10, now), now);
    assert!(
        r.said()
            .iter()
            .all(|e| !matches!(e, RunEvent::Paused { .. } | RunEvent::Warning(_))),
        "{:?}",
        r.said()
    );
    // Both are retried when it is over, neither attempt counted.
    let after = later(now, 12);
    let r = c.handle_event(LoopEvent::PauseOver, after);
    assert_eq!(notices(&r), ["resuming: workers start again"]);
    assert_eq!(launched(&c.fill_lanes(after)).len(), 2);
    for id in ["ISC-A-1", "ISC-B-1"] {
        assert_eq!(c.ledger.get(id).unwrap().attempts, 0, "{id}");
    }
}

#[test]
fn overload_backs_off_doubling_from_retry_backoff_and_a_pass_resets_it() {
    let mut cfg = cfg();
    cfg.agents = 1;
    cfg.retry_backoff = Duration::from_secs(10);
    let (mut c, mut now) = core(cfg, &["- [ ] ISC-A-1: a"]);
    // 10s, then 20s, then 40s, each ±20%.
    for base in [10.0, 20.0, 40.0] {
        assert_eq!(launched(&c.fill_lanes(now)), [(0, "ISC-A-1")]);
        let r = c.handle_event(overloaded(0, "ISC-A-1", now), now);
        let delay = paused(&r)[0].as_secs_f64();
        assert!(
            (base * 0.8..=base * 1.2).contains(&delay),
            "{delay}s, not about {base}s"
        );
        assert!(c.fill_lanes(now).launches().is_empty(), "every lane waits");
        now = later(now, delay.ceil() as u64);
        let _ = c.handle_event(LoopEvent::PauseOver, now);
    }
    assert_eq!(c.ledger.get("ISC-A-1").unwrap().agent_failures, 3);
    // A pass starts the count again: the next overload waits about 10s.
    let (mut c, now) = core(c.cfg.clone(), &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]);
    let _ = c.fill_lanes(now);
    let r = c.handle_event(overloaded(0, "ISC-A-1", now), now);
    let first = paused(&r)[0].as_secs_f64();
    let now = later(now, first.ceil() as u64);
    let _ = c.handle_event(LoopEvent::PauseOver, now);
    let _ = c.fill_lanes(now);
    let _ = c.handle_event(done(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    assert_eq!(launched(&c.fill_lanes(now)), [(0, "ISC-A-2")]);
    let r = c.handle_event(overloaded(0, "ISC-A-2", now), now);
    let delay = paused(&r)[0].as_secs_f64();
    assert!((8.0..=12.0).contains(&delay), "{delay}s, not about 10s");
}

#[test]
fn max_cost_counts_running_workers_as_expected_not_as_spent() {
    // Eight lanes; four workers end at $0.001 each while four run: $0.004 spent, $0.004
    // expected. With --max-cost $0.0095 one more ($0.009 in all) fits, a second does not.
    let mut cfg = cfg();
    cfg.agents = 8;
    cfg.max_cost = Some(0.0095);
    let criteria: Vec<String> = (1..=12).map(|i| format!("- [ ] ISC-D{i}-1: c")).collect();
    let criteria: Vec<&str> = criteria.iter().map(String::as_str).collect();
    let (mut c, now) = core(cfg, &criteria);
    let first = c.fill_lanes(now);
    assert_eq!(first.launches().len(), 8);
    for l in &first.launches()[..4] {
        let _ = c.handle_event(
            done(l.lane, &l.id, &format!("RESULT: {} PASS", l.id), now),
            now,
        );
    }
    let r = c.fill_lanes(now);
    assert_eq!(r.launches().len(), 1, "{:?}", notices(&r));
    assert_eq!(
        notices(&r),
        [
            "budget: spent $0.0040 of --max-cost $0.01, $0.0050 more expected from 5 running worker(s); the next worker could pass it (about $0.0010 each); no new workers"
        ]
    );
    assert!(matches!(
        c.brakes.stop(),
        Some(crate::run::reason::StopReason::BudgetReached { running: 5, .. })
    ));
}
