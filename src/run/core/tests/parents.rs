//! Parents over leaves (`ISC-A` over `ISC-A-1`…): ticked with their leaves, opened again when
//! one regresses, and what the core takes from the PRD writer's boxes.

use super::*;

#[test]
fn a_parent_passes_with_its_leaves_and_opens_again_when_one_regresses() {
    let (mut c, _) = core(
        cfg(),
        &[
            "- [ ] ISC-1: container",
            "  - [ ] ISC-1.1: a",
            "  - [ ] ISC-1.2: b",
            "- [x] ISC-2: ticked by its author",
            "  - [ ] ISC-2.1: still open",
        ],
    );
    c.ledger.check_passed("ISC-1.1");
    c.settle_parents();
    assert!(!c.ledger.passing("ISC-1"), "one leaf is open");
    c.ledger.check_passed("ISC-1.2");
    c.settle_parents();
    assert!(c.ledger.passing("ISC-1"));
    c.ledger.check_failed("ISC-1.2", "regression".into(), true);
    c.settle_parents();
    assert!(!c.ledger.passing("ISC-1"), "the run's tick is taken back");
    // The author's tick on a parent stays while its leaves are worked on.
    assert!(c.ledger.passing("ISC-2"));
    // Parents are no work.
    let failing: Vec<String> = c.failing_ids();
    assert!(failing.contains(&"ISC-1".to_string()));
    assert!(!matches!(c.next_step(), Step::End(End::Complete)));
}

#[test]
fn the_boxes_the_writer_writes_are_the_ones_the_core_has_once_it_takes_the_write() {
    let (mut c, _) = core(
        cfg(),
        &[
            "- [ ] ISC-1: container",
            "  - [ ] ISC-1.1: a",
            "  - [ ] ISC-1.2: b",
        ],
    );
    c.ledger.check_passed("ISC-1.1");
    c.ledger.check_passed("ISC-1.2");
    c.settle_parents();
    assert!(c.ledger.passing("ISC-1"), "the run ticked the parent");
    // Someone adds an open leaf under the parent and a criterion ticked already.
    let edited = Prd::parse(
        "# T\n\n## CRITERIA\n\n- [x] ISC-1: container\n  - [x] ISC-1.1: a\n  - [x] ISC-1.2: b\n  - [ ] ISC-1.3: c\n- [x] ISC-3: added\n"
            .to_string(),
    )
    .unwrap();
    let boxes = c.boxes_for(&edited);
    let ids: Vec<String> = edited.criteria.iter().map(|k| k.id.clone()).collect();
    let written: Vec<bool> = ids.iter().map(|id| boxes(id)).collect();
    assert_eq!(written, [false, true, true, false, true], "{ids:?}");
    // The writer only reads the run: nothing changed yet.
    assert!(c.ledger.get("ISC-1.3").is_none());
    c.take_sync(Some(edited), &[], Some(None), Some(Vec::new()));
    let held: Vec<bool> = ids.iter().map(|id| c.ledger.passing(id)).collect();
    assert_eq!(held, written);
}

/// A parent someone adds during the run over leaves that pass already: the writer ticks it
/// (the run settled it), so it is the run's tick, taken back when a leaf regresses — as it was
/// before the writer stopped changing the run, and as for a parent the run ticked itself.
#[test]
fn a_parent_added_during_the_run_over_passing_leaves_is_the_runs_tick_and_opens_again() {
    let text = "# T\n\n## CRITERIA\n\n- [ ] ISC-1.1: a\n- [ ] ISC-1.2: b\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("PRD.md");
    std::fs::write(&path, text).unwrap();
    let mut cfg = cfg();
    cfg.prd_path = path.clone();
    let now = Now::current();
    let mut c = Core::new(
        cfg,
        "s-1".into(),
        Prd::parse(text.to_string()).unwrap(),
        now,
    );
    c.ledger.check_passed("ISC-1.1");
    c.ledger.check_passed("ISC-1.2");
    let mut w = crate::run::prd_writer::PrdWriter::new(path.clone(), text.to_string());
    // Someone adds the parent, open.
    std::fs::write(
        &path,
        "# T\n\n## CRITERIA\n\n- [ ] ISC-1: container\n- [ ] ISC-1.1: a\n- [ ] ISC-1.2: b\n",
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let report = rt
        .block_on(w.sync(&c, &[]))
        .unwrap()
        .expect("an edit merged");
    c.take_sync(report.doc, &report.admitted, report.broken, report.vanished);
    let on_disk = Prd::parse(std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        on_disk.criterion("ISC-1").unwrap().checked,
        "the run ticks it"
    );
    assert!(c.ledger.passing("ISC-1"));
    // A leaf regresses: the parent the run ticked opens again.
    c.ledger.check_failed("ISC-1.2", "regression".into(), true);
    c.settle_parents();
    assert!(
        !c.ledger.passing("ISC-1"),
        "the run's tick on the parent is taken back"
    );
    // And in the PRD: the next write opens its box again.
    let _ = rt.block_on(w.sync(&c, &[])).unwrap();
    let on_disk = Prd::parse(std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        !on_disk.criterion("ISC-1").unwrap().checked,
        "the parent's box opens again:\n{}",
        on_disk.text()
    );
}
