//! Best-of-N through the core: which sample lands, what its siblings become, how one attempt
//! is counted.

use super::*;
use crate::run::event::Slot;

#[test]
fn best_of_first_merges_the_first_pass_ends_the_siblings_and_counts_one_attempt() {
    let mut cfg = cfg();
    cfg.agents = 1;
    cfg.samples.n = 3;
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a"]);
    let r = c.fill_lanes(now);
    assert_eq!(r.launches().len(), 3);
    let slots: Vec<usize> = r.launches().iter().map(|l| l.slot).collect();
    assert_eq!(slots, vec![0, 1, 2]);
    // Sample 2 passes: its work is merged before anything counts.
    let r = c.handle_event(sample(1, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    assert_eq!(r.lands().len(), 1);
    assert_eq!(r.lands()[0].work.commit, "c1");
    assert!(!c.ledger.passing("ISC-A-1"));
    let r = c.handle_event(
        LoopEvent::Landed {
            slot: Slot::new(0, 1),
            landing: merged(),
        },
        now,
    );
    assert!(c.ledger.passing("ISC-A-1"));
    assert_eq!(r.cancelled_lanes(), vec![0]);
    // The siblings come back ended: not failures; the attempt is one.
    let r1 = c.handle_event(cancelled(0, "ISC-A-1", now), now);
    let r3 = c.handle_event(cancelled(2, "ISC-A-1", now), now);
    let verdicts: Vec<_> = r1
        .records()
        .into_iter()
        .chain(r3.records())
        .map(|a| a.verdict)
        .collect();
    assert_eq!(verdicts, vec![crate::state::AttemptVerdict::Sibling; 2]);
    let rec = c.ledger.get("ISC-A-1").unwrap();
    assert_eq!(rec.attempts, 1);
    assert_eq!(rec.won_by.as_deref(), Some("sample 2/3"));
    assert!(c.sampling.is_idle());
}

#[test]
fn best_of_best_waits_for_all_and_a_conflict_falls_back_to_the_next() {
    let mut cfg = cfg();
    cfg.agents = 1;
    cfg.samples.n = 3;
    cfg.samples.select = crate::config::Select::Best;
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a"]);
    let _ = c.fill_lanes(now);
    // Samples 1 and 3 pass (3 has the smaller diff), 2 fails: nothing merges until all are back.
    let r = c.handle_event(sample(0, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    assert!(r.lands().is_empty());
    let r = c.handle_event(sample(2, "ISC-A-1", "RESULT: ISC-A-1 PASS", now), now);
    assert!(r.lands().is_empty());
    let r = c.handle_event(sample(1, "ISC-A-1", "RESULT: ISC-A-1 FAIL: no", now), now);
    assert_eq!(r.lands().len(), 1);
    assert_eq!(r.lands()[0].slot.sample, 2, "the smaller diff first");
    // It conflicts: the other passing sample is tried.
    let r = c.handle_event(
        LoopEvent::Landed {
            slot: Slot::new(0, 2),
            landing: crate::isolation::Landing::Conflict {
                files: vec!["a".into()],
                kept: "k".into(),
                theirs: String::new(),
            },
        },
        now,
    );
    assert_eq!(r.lands().len(), 1);
    assert_eq!(r.lands()[0].slot.sample, 0);
    let _ = c.handle_event(
        LoopEvent::Landed {
            slot: Slot::new(0, 0),
            landing: merged(),
        },
        now,
    );
    assert!(c.ledger.passing("ISC-A-1"));
    assert_eq!(c.ledger.get("ISC-A-1").unwrap().attempts, 1);
    assert!(c.sampling.is_idle());
}

#[test]
fn best_of_with_no_pass_fails_once_with_every_samples_reason() {
    let mut cfg = cfg();
    cfg.agents = 1;
    cfg.samples.n = 3;
    let (mut c, now) = core(cfg, &["- [ ] ISC-A-1: a"]);
    let _ = c.fill_lanes(now);
    for k in 0..3 {
        let _ = c.handle_event(
            sample(
                k,
                "ISC-A-1",
                &format!("RESULT: ISC-A-1 FAIL: reason {k}"),
                now,
            ),
            now,
        );
    }
    let rec = c.ledger.get("ISC-A-1").unwrap();
    assert_eq!(rec.attempts, 1);
    let why = rec.last_failure.clone().unwrap();
    for k in 0..3 {
        assert!(
            why.contains(&format!("sample {}/3: reason {k}", k + 1)),
            "{why}"
        );
    }
    assert!(c.sampling.is_idle());
}
