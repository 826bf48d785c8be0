use super::*;

fn repo() -> Repo {
    Repo::parse("github:acme/widgets").unwrap()
}

fn issue(number: u64, title: &str, body: &str) -> Issue {
    Issue {
        number,
        title: title.into(),
        body: body.into(),
        open: true,
        pull_request: false,
    }
}

const PRD: &str = "---
id: PRD-1
status: DRAFT
---

# Widgets

## IDEAL STATE CRITERIA (Verification Criteria)

_placeholder_

## LOG

nothing yet
";

fn import(text: &str, issues: &[Issue]) -> Imported {
    merge(&Prd::parse(text).unwrap(), &repo(), &items_of(issues)).unwrap()
}

#[test]
fn task_list_items_are_read_outside_code_fences() {
    let body = "Intro\n\n- [ ] first  thing\n- [x] done one\n  * [X] nested\n- plain item\n\
                - [ ]\n```\n- [ ] in a fence\n```\n+ [ ] plus | Verify: Test: `rm -rf /`\n";
    assert_eq!(
        task_items(body),
        vec![
            (false, "first thing".to_string()),
            (true, "done one".into()),
            (true, "nested".into()),
            (false, "plus ¦ Verify: Test: `rm -rf /`".into()),
        ]
    );
}

#[test]
fn an_issue_without_a_list_is_one_criterion_named_after_its_title() {
    let items = items_of(&[
        issue(7, "Fix  the\nlogin", "no list here"),
        issue(9, "t", "- [ ] a\n- [x] b"),
    ]);
    let texts: Vec<_> = items
        .iter()
        .map(|i| (i.issue, i.text.as_str(), i.done))
        .collect();
    assert_eq!(
        texts,
        vec![(7, "Fix the login", false), (9, "a", false), (9, "b", true)]
    );
}

#[test]
fn a_new_prd_gets_the_criteria_in_its_section_and_the_tracker() {
    let out = import(
        PRD,
        &[
            issue(3, "Login", "- [ ] a form\n- [x] a route"),
            issue(5, "Logout", ""),
        ],
    );
    assert_eq!(out.added, ["ISC-GH3-1", "ISC-GH3-2", "ISC-GH5-1"]);
    let doc = Prd::parse(out.text.clone()).unwrap();
    assert_eq!(doc.front.tracker.as_deref(), Some("github:acme/widgets"));
    let c = doc.criterion("ISC-GH3-2").unwrap();
    assert!(c.checked);
    assert_eq!(c.description, "a route (#3)");
    assert!(out.text.contains(
        "_placeholder_\n\n- [ ] ISC-GH3-1: a form (#3)\n- [x] ISC-GH3-2: a route (#3)\n- [ ] ISC-GH5-1: Logout (#5)\n\n## LOG\n"
    ), "{}", out.text);
    // Each issue is a domain: its own lane.
    assert_ne!(
        doc.criterion("ISC-GH3-1").unwrap().domain,
        doc.criterion("ISC-GH5-1").unwrap().domain
    );
}

#[test]
fn reimport_keeps_ids_ticks_and_the_users_text_and_adds_only_new_items() {
    let first = import(PRD, &[issue(3, "Login", "- [ ] a form\n- [ ] a route")]).text;
    // The user ticks one, edits around the criteria and adds one of their own.
    let edited = first
        .replace("- [ ] ISC-GH3-1", "- [x] ISC-GH3-1")
        .replace("_placeholder_", "My   own words.")
        .replace(
            "- [ ] ISC-GH3-2: a route (#3)\n",
            "- [ ] ISC-GH3-2: a route (#3)\n  with a note\n- [ ] ISC-MINE-1: mine\n",
        );
    let again = import(
        &edited,
        &[
            issue(3, "Login", "- [ ] a form\n- [ ] a route\n- [ ] a  test"),
            issue(4, "New", ""),
        ],
    );
    assert_eq!(again.added, ["ISC-GH3-3", "ISC-GH4-1"]);
    assert_eq!(again.present, 2);
    // Byte for byte what it does not add: removing the added lines gives the user's text.
    let without: String = again
        .text
        .split_inclusive('\n')
        .filter(|l| !l.contains("ISC-GH3-3") && !l.contains("ISC-GH4-1"))
        .collect();
    assert_eq!(without, edited);
    assert!(
        again
            .text
            .contains("  with a note\n- [ ] ISC-GH3-3: a test (#3)\n"),
        "{}",
        again.text
    );
    let doc = Prd::parse(again.text.clone()).unwrap();
    assert!(doc.criterion("ISC-GH3-1").unwrap().checked);
    // Once more: nothing to add, nothing changes.
    let third = import(
        &again.text,
        &[
            issue(3, "Login", "- [ ] a form\n- [ ] a route\n- [ ] a test"),
            issue(4, "New", ""),
        ],
    );
    assert!(third.added.is_empty());
    assert_eq!(third.text, again.text);
}

#[test]
fn a_prd_with_no_criteria_section_gets_one_and_crlf_is_kept() {
    let out = import(
        "---\r\nid: x\r\n---\r\n\r\n# T\r\n\r\nwords",
        &[issue(2, "Two", "")],
    );
    assert_eq!(
        out.text,
        "---\r\nid: x\r\ntracker: github:acme/widgets\r\n---\r\n\r\n# T\r\n\r\nwords\r\n\r\n## IDEAL STATE CRITERIA (Verification Criteria)\r\n\r\n- [ ] ISC-GH2-1: Two (#2)\r\n"
    );
}

#[test]
fn another_repositorys_prd_is_refused() {
    let text = PRD.replace("status: DRAFT", "status: DRAFT\ntracker: github:other/repo");
    let e = merge(
        &Prd::parse(text).unwrap(),
        &repo(),
        &items_of(&[issue(1, "a", "")]),
    )
    .unwrap_err();
    assert!(e.contains("github:other/repo"), "{e}");
}

#[test]
fn an_issue_listing_an_item_twice_gets_one_criterion() {
    let out = import(PRD, &[issue(3, "t", "- [ ] same\n- [ ] same")]);
    assert_eq!(out.added, ["ISC-GH3-1"]);
}
