use super::*;

#[test]
fn ticks_one_byte() {
    let t = "# T\n\n- [ ] ISC-A-1: a\n- [X] ISC-B-1: b\n";
    let mut p = Prd::parse(t).unwrap();
    assert_eq!(p.set_checked("ISC-A-1", true), Some(true));
    assert_eq!(p.set_checked("ISC-B-1", false), Some(true));
    assert_eq!(p.set_checked("ISC-B-1", false), Some(false));
    assert_eq!(p.set_checked("ISC-Z-1", false), None);
    assert_eq!(p.text(), "# T\n\n- [x] ISC-A-1: a\n- [ ] ISC-B-1: b\n");
}

#[test]
fn bold_ids() {
    assert_eq!(split_id("**ISC-C1:** text"), Some(("ISC-C1", " text")));
    assert_eq!(split_id("**ISC-C1**: text"), Some(("ISC-C1", " text")));
    assert_eq!(split_id("ISC-C1: text"), Some(("ISC-C1", " text")));
    assert_eq!(split_id("**ISC-C1** text: more"), None);
    assert_eq!(split_id("**ISC C1:** text"), None);
    assert_eq!(split_id("**:** text"), None);
    assert_eq!(split_id("ISC-1 [F]: text"), Some(("ISC-1", " text")));
    assert_eq!(split_id("ISC-1 [F][grep]: text"), Some(("ISC-1", " text")));
    assert_eq!(split_id("ISC-1 — text"), Some(("ISC-1", " text")));
    assert_eq!(split_id("ISC-1 [x y]: text"), None);
    assert_eq!(split_id("ISC-1 text: more"), None);
}

#[test]
fn duplicate_ids_name_both_lines() {
    let t = "- [ ] ISC-A-1: a\n\n- [ ] ISC-A-1: again\n";
    let e = Prd::parse(t).unwrap_err();
    assert_eq!(e.line, 3);
    assert!(
        e.message.contains("first defined at line 1"),
        "{}",
        e.message
    );
}

#[test]
fn legacy_ids_only_without_isc() {
    let p = Prd::parse("- [ ] C1: a\n- [ ] A1: b\n").unwrap();
    assert_eq!(p.criteria.len(), 2);
    assert!(p.criteria[1].anti);
    let p = Prd::parse("- [ ] C1: a\n- [ ] ISC-X-1: b\n").unwrap();
    assert_eq!(p.criteria.len(), 1);
}

#[test]
fn no_front_matter_is_added() {
    let t = "# T\r\n- [ ] ISC-C1: a\r\n";
    let mut p = Prd::parse(t).unwrap();
    p.set_front(&[("loopStatus", Value::str("running"))])
        .unwrap();
    assert_eq!(p.text(), t);
    assert!(!p.has_front_matter());
}

#[test]
fn plain_todos_under_features_do_not_block() {
    let t = "---\nphase: climbing\n---\n## Features\n### F1 · Search\nWhy: find things\n- [x] ISC-1: search works\n- [ ] polish the icon\n- [ ] ISC 2: a malformed claim\n";
    let p = Prd::parse(t).unwrap();
    assert_eq!(p.criteria.len(), 1);
    let open: Vec<usize> = p.open_boxes().iter().map(|b| b.line).collect();
    assert_eq!(open, [9]);
}

#[test]
fn never_complete_with_a_box_open() {
    let t = "---\nphase: climbing\nprogress: 1/1\n---\n## Claims\n- [x] ISC-1: a\n- [ ] ISC 7: b\n";
    let mut p = Prd::parse(t).unwrap();
    assert_eq!(p.criteria.len(), 1, "`ISC 7` is not read: {:?}", p.criteria);
    let e = p
        .set_front(&[("phase", Value::str("complete"))])
        .unwrap_err();
    assert_eq!(e.line, 7);
    assert!(
        e.message.contains("refusing to mark the file complete"),
        "{}",
        e.message
    );
    assert_eq!(p.text(), t);
    let e = p
        .set_front(&[("status", Value::str("COMPLETE"))])
        .unwrap_err();
    assert_eq!(e.line, 7);
    p.set_front(&[("phase", Value::str("climbing"))]).unwrap();
}

#[test]
fn an_empty_criteria_heading_with_boxes_elsewhere_says_so() {
    let t = "# T\n\n## Criteria\n\n(see below)\n\n## Phase 1 — setup\n\n- [ ] ISC-1: a\n- [ ] ISC-2: b\n\n## Phase 2\n\n- [ ] ISC-3: c\n";
    let p = Prd::parse(t).unwrap();
    assert!(p.criteria.is_empty());
    assert_eq!(
        p.misplaced(),
        Some(
            "its criteria heading `## Criteria` (line 3) holds no boxes, while 3 boxes with criterion ids sit under `## Phase 1 — setup` (line 7), `## Phase 2` (line 12): move them under `## Criteria`, or put that heading above them"
        )
    );
    // Boxes under the heading, or no boxes with ids anywhere: nothing to say.
    assert_eq!(
        Prd::parse("# T\n\n## Criteria\n\n- [ ] ISC-1: a\n")
            .unwrap()
            .misplaced(),
        None
    );
    assert_eq!(
        Prd::parse("# T\n\n## Criteria\n\n## Todo\n\n- [ ] buy milk\n")
            .unwrap()
            .misplaced(),
        None
    );
}
