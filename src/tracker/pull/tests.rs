use super::*;
use crate::evidence::receipt::CheckReceipt;

const PRD: &str = "---
id: PRD-7
---

# Widgets

## IDEAL STATE CRITERIA (Verification Criteria)

- [x] ISC-GH1-1: a form (#1)
- [x] ISC-GH1-2: a route | with a pipe (#1)
- [ ] ISC-GH2-1: a logout (#2)
- [x] ISC-GH3-1: docs (#3)
- [x] ISC-MINE-1: mine, no issue
- [ ] ISC-MINE-2: mine too (#4)
";

fn receipt(evidence: Evidence, check: Option<CheckReceipt>) -> Receipt {
    Receipt {
        evidence,
        check,
        review: None,
        commit: None,
        base: None,
        agent: Some("claude".into()),
        model: None,
        tokens: 0,
        cost_usd: 0.0,
        at_ms: 0,
    }
}

fn inputs() -> (Prd, HashMap<String, Receipt>, HashMap<String, String>) {
    let prd = Prd::parse(PRD).unwrap();
    let check = CheckReceipt {
        command: "cargo test form".into(),
        exit: serde_json::json!(0),
        duration_ms: 5,
        output_sha256: Some("0123456789abcdef0123".into()),
        log: "l".into(),
    };
    let receipts = HashMap::from([
        (
            "ISC-GH1-1".to_string(),
            receipt(Evidence::Checked, Some(check)),
        ),
        ("ISC-GH1-2".to_string(), receipt(Evidence::Claimed, None)),
    ]);
    let questions = HashMap::from([("ISC-GH2-1".to_string(), "Which page?".to_string())]);
    (prd, receipts, questions)
}

#[test]
fn criteria_name_their_issue_by_id_or_by_the_number_after_them() {
    let prd = Prd::parse(PRD).unwrap();
    let issues: Vec<_> = prd.criteria.iter().map(issue_of).collect();
    assert_eq!(issues, [Some(1), Some(1), Some(2), Some(3), None, Some(4)]);
}

#[test]
fn issues_whose_criteria_all_pass_are_closed() {
    let prd = Prd::parse(PRD).unwrap();
    assert_eq!(closed_issues(&prd), [1, 3]);
}

#[test]
fn the_body_lists_every_criterion_with_its_tick_receipt_and_issue() {
    let (prd, receipts, questions) = inputs();
    let b = body(&prd, &receipts, &questions);
    assert!(b.contains("**4/6 criteria pass**"), "{b}");
    assert!(
        b.contains("| ✅ | ISC-GH1-1 a form (#1) | checked | `cargo test form` exited 0, output sha256 0123456789ab | #1 |"),
        "{b}"
    );
    assert!(b.contains("| ✅ | ISC-GH1-2 a route \\| with a pipe (#1) | claimed | the worker's word (claude) | #1 |"), "{b}");
    assert!(
        b.contains(
            "| ❓ | ISC-GH2-1 a logout (#2) | waiting for an answer | asks: Which page? | #2 |"
        ),
        "{b}"
    );
    assert!(
        b.contains("| ✅ | ISC-GH3-1 docs (#3) | ticked | no receipt"),
        "{b}"
    );
    assert!(
        b.contains("| ⬜ | ISC-MINE-2 mine too (#4) | open | — | #4 |"),
        "{b}"
    );
    assert!(b.ends_with("\nCloses #1\nCloses #3\n"), "{b}");
    assert_eq!(title(&prd), "prdloop: Widgets (4/6 criteria)");
}

#[test]
fn a_question_is_asked_once_on_its_issue() {
    let (prd, _, questions) = inputs();
    assert_eq!(question_comment(&prd, 1, &questions, "P.md"), None);
    let c = question_comment(&prd, 2, &questions, "P.md").unwrap();
    assert!(c.contains("`prdloop answer P.md <ID> \"<answer>\"`"), "{c}");
    assert!(
        c.contains("- **ISC-GH2-1** (a logout (#2)): Which page?"),
        "{c}"
    );
    assert!(already_asked(
        std::slice::from_ref(&c),
        "ISC-GH2-1",
        "Which page?"
    ));
    assert!(!already_asked(&[c], "ISC-GH2-1", "Another question?"));
}
