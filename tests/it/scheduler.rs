//! The scheduler's bounds as a user meets them: `--stall N` ends a hopeless run after N
//! rounds without a pass, in both loop modes.

use crate::common::*;
use serde_json::json;

#[test]
fn one_always_failing_criterion_stops_after_stall_rounds_in_both_modes() {
    for rounds in ["continuous", "barrier"] {
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: never"]), json!({"*": ["fail"]}));
        let out = sb.run(&[
            "run", "PRD.md", "-n", "128", "--stall", "3", "--rounds", rounds,
        ]);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{rounds}: {err}");
        // Three rounds, one attempt each, none passing: not 128.
        assert_eq!(sb.worker_records().len(), 3, "{rounds}: {err}");
        assert_eq!(
            err.matches("(--stall 3); stopping").count(),
            1,
            "{rounds}: {err}"
        );
        let text = sb.prd_text();
        assert!(text.contains("\niteration: 3\n"), "{rounds}: {text}");
    }
}

#[test]
fn a_fresh_run_of_a_prd_that_ran_before_starts_the_work_that_took_longest() {
    let text = prd_with(&["- [ ] ISC-A-1: quick", "- [ ] ISC-B-1: slow"]);
    let sb = Sandbox::new(&text, json!({"ISC-B-1": ["sleep:600"], "*": ["pass"]}));
    let order = |sb: &Sandbox| -> Vec<String> {
        sb.worker_records()
            .iter()
            .map(|r| r["criterion"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let out = sb.run(&["run", "PRD.md", "-a", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Nothing known: document order.
    assert_eq!(order(&sb), ["ISC-A-1", "ISC-B-1"]);
    // The boxes unticked and run again (not resumed): B took longest, so it goes first.
    std::fs::write(sb.prd(), &text).unwrap();
    std::fs::remove_dir_all(sb.records()).unwrap();
    std::fs::create_dir_all(sb.records()).unwrap();
    let out = sb.run(&["run", "PRD.md", "-a", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(order(&sb), ["ISC-B-1", "ISC-A-1"], "{}", stderr(&out));
}
