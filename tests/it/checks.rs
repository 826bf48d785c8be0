//! The runner's checks are evidence only when they measured something and the attempt left
//! them alone: a check whose test runner ran no test is unmeasured, never a pass.

use crate::common::*;
use serde_json::json;

/// What `cargo test auth` prints when no test matches `auth`.
const CARGO_RAN_NOTHING: &str = "printf '\\nrunning 0 tests\\n\\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.00s\\n\\n'\n";

/// A check that exits 0 while its test runner says it ran no test ticks nothing: not before
/// any agent runs, not when an agent claims PASS (`--verifier none`: nothing else can pass
/// it), not in `prdloop verify`; the reason says why.
#[test]
fn a_check_that_ran_no_test_ticks_nothing() {
    let sb = repo(
        &["- [ ] ISC-A-1: the auth tests pass | Verify: Test: `sh ran-none.sh`"],
        json!({"ISC-A-1": ["pass"]}),
        &[("ran-none.sh", CARGO_RAN_NOTHING)],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--verifier", "none"]);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert!(!err.contains("ticked without an agent"), "{err}");
    assert!(sb.prd_text().contains("- [ ] ISC-A-1:"), "{err}");
    assert_eq!(sb.worker_records().len(), 1, "{err}");
    let st = sb.state();
    let att = attempts(&st);
    assert_eq!(att[0]["verdict"], "fail", "{att:?}");
    let reason = att[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("`sh ran-none.sh` ran no test: cargo's test harness ran 0 tests"),
        "{reason}"
    );
    // `prdloop verify` does not count it either.
    let out = sb.run(&["verify", "PRD.md", "--no-write"]);
    assert_ne!(code(&out), 0, "{}", stderr(&out));
}

/// The same check with a verifier: the claim goes to the verifier, told that the command
/// measured nothing; its PASS makes the tick `reviewed`, never `checked`.
#[test]
fn a_check_that_ran_no_test_sends_the_claim_to_the_verifier() {
    let sb = repo(
        &["- [ ] ISC-A-1: the auth tests pass | Verify: Test: `sh ran-none.sh`"],
        json!({"ISC-A-1": ["pass"]}),
        &[("ran-none.sh", CARGO_RAN_NOTHING)],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let v = sb.verifier_records();
    assert_eq!(v.len(), 1, "{err}");
    assert!(
        v[0]["prompt"]
            .as_str()
            .unwrap()
            .contains("The Verify command measured nothing"),
        "{}",
        v[0]["prompt"]
    );
    assert_eq!(sb.state()["criteria"][0]["verifiedBy"], "reviewed", "{err}");
}

/// The README's headline example (`examples/demo/PRD.md`) ticks nothing before an agent has
/// worked: its anti-criterion's check needs the pages it looks at.
#[test]
fn the_demo_prd_ticks_nothing_before_an_agent_works() {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo/PRD.md");
    let sb = Sandbox::new(
        &std::fs::read_to_string(demo).unwrap(),
        json!({"*": ["fail"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert!(!err.contains("ticked without an agent"), "{err}");
    assert!(!sb.prd_text().contains("- [x]"), "{err}");
}
