//! Best-of-N in real temporary git repositories: samples of one attempt at once, each in its
//! own worktree; the winner's work alone reaches the checkout.

mod common;

use common::*;
use serde_json::json;

/// The attempts log's records of one criterion, by sample number.
fn samples(sb: &Sandbox, id: &str) -> Vec<serde_json::Value> {
    let mut v: Vec<serde_json::Value> = attempts(&sb.state())
        .into_iter()
        .filter(|a| a["criterion"] == id)
        .collect();
    v.sort_by_key(|a| a["sample"]["number"].as_u64());
    v
}

#[test]
fn only_the_passing_sample_lands_and_its_siblings_are_ended_not_failed() {
    let sb = repo(
        &["- [ ] ISC-A-1: s.txt exists | Verify: CLI: `test -f s.txt`"],
        json!({"ISC-A-1": [
            "sh:if [ \"$PRDLOOP_SAMPLE\" = 2 ]; then sleep 0.3; echo two > s.txt; else echo other > s$PRDLOOP_SAMPLE.txt; sleep 60; fi"
        ]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "--best-of", "3"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let w = sb.work();
    assert_eq!(std::fs::read_to_string(w.join("s.txt")).unwrap(), "two\n");
    assert!(!w.join("s1.txt").exists() && !w.join("s3.txt").exists());
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
    let recs = samples(&sb, "ISC-A-1");
    assert_eq!(recs.len(), 3, "{recs:?}");
    assert_eq!(recs[1]["verdict"], "pass");
    assert_eq!(recs[1]["sample"]["selected"], true);
    let won_at = recs[1]["finishedAt"].as_u64().unwrap();
    for i in [0, 2] {
        assert_eq!(recs[i]["verdict"], "sibling", "{}", recs[i]);
        assert_eq!(recs[i]["sample"]["endedAsSibling"], true);
        // Ended at once, not after their 60 s (a generous bound: the machine is shared).
        let at = recs[i]["finishedAt"].as_u64().unwrap();
        assert!(at.saturating_sub(won_at) < 10_000, "{at} vs {won_at}");
    }
    let err = stderr(&out);
    assert!(err.contains("1 attempt(s)"), "{err}");
    assert!(err.contains("won by sample 2/3"), "{err}");
    // One attempt, passed: no failure counted for the ended siblings.
    let state = sb.state();
    assert_eq!(state["bestOf"]["wonBy"]["ISC-A-1"], "sample 2/3", "{state}");
    sb.assert_no_process_left();
}

#[test]
fn select_best_takes_the_smaller_diff() {
    let sb = repo(
        &["- [ ] ISC-A-1: out.txt exists | Verify: CLI: `test -f out.txt`"],
        json!({"ISC-A-1": [
            "sh:case $PRDLOOP_SAMPLE in 1) seq 10 > out.txt;; 2) echo 1 > out.txt;; *) exit 1;; esac"
        ]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "--best-of", "3", "--select", "best"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(sb.work().join("out.txt")).unwrap(),
        "1\n"
    );
    let recs = samples(&sb, "ISC-A-1");
    assert_eq!(recs.len(), 3, "{recs:?}");
    assert_eq!(recs[0]["verdict"], "pass");
    assert_eq!(recs[0]["sample"]["selected"], false);
    assert_eq!(recs[0]["sample"]["diffLines"], 10);
    assert_eq!(recs[1]["sample"]["selected"], true);
    assert_eq!(recs[1]["sample"]["diffLines"], 1);
    assert_eq!(recs[2]["verdict"], "fail");
}

#[test]
fn mix_round_robins_the_set_ups_and_the_summary_counts_wins() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["sh:if [ \"$PRDLOOP_SAMPLE\" = 3 ]; then echo a > a.txt; else exit 1; fi"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "--best-of",
        "3",
        "--select",
        "best",
        "--mix",
        "claude:alpha,claude:beta",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut models: Vec<(String, String)> = sb
        .worker_records()
        .iter()
        .map(|r| {
            let args: Vec<String> = r["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            let i = args.iter().position(|a| a == "--model").expect("--model");
            let cwd = r["cwd"].as_str().unwrap().to_string();
            (cwd, args[i + 1].clone())
        })
        .collect();
    models.sort();
    // Samples 1, 2, 3 (worktrees lane-1 … lane-3) ran alpha, beta, alpha.
    let got: Vec<&str> = models.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(got, vec!["alpha", "beta", "alpha"], "{models:?}");
    let err = stderr(&out);
    assert!(err.contains("won by sample 3/3 (claude:alpha)"), "{err}");
    assert!(
        err.contains("criteria won per set-up: claude:alpha 1"),
        "{err}"
    );
    assert_eq!(sb.state()["bestOf"]["wins"]["claude:alpha"], 1);
}

#[test]
fn the_cost_cap_keeps_samples_from_starting() {
    // ISC-A-1's three samples fail at $0.001 each; then only one sample of ISC-A-2 fits.
    let sb = repo(
        &[
            "- [ ] ISC-A-1: never | Verify: CLI: `test -f never.txt`",
            "- [ ] ISC-A-2: never either | Verify: CLI: `test -f never.txt`",
        ],
        json!({"*": ["sh:exit 1"]}),
        &[("README", "r\n")],
    );
    // PAI's iterations: A-2's first attempt before A-1's retry (without the barrier a failed
    // criterion retries first, as soon as its lane is free).
    let out = sb.run(&[
        "run",
        "PRD.md",
        "--best-of",
        "3",
        "--max-cost",
        "0.0045",
        "--rounds",
        "barrier",
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("budget: 1 of 3 samples of ISC-A-2 start"),
        "{err}"
    );
    let a1 = sb
        .worker_records()
        .iter()
        .filter(|r| r["criterion"] == "ISC-A-1")
        .count();
    let a2 = sb
        .worker_records()
        .iter()
        .filter(|r| r["criterion"] == "ISC-A-2")
        .count();
    assert_eq!((a1, a2), (3, 1));
}

#[test]
fn best_of_needs_isolated_workers() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a | Verify: CLI: `true`"]),
        json!({}),
    );
    let out = sb.run(&["run", "PRD.md", "--best-of", "2", "--no-verify"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--best-of 2 needs isolated workers"),
        "{}",
        stderr(&out)
    );
    let out = sb.run(&["run", "PRD.md", "--best-of", "9"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}

#[test]
fn prdloop_logs_shows_a_samples_log() {
    let sb = repo(
        &["- [ ] ISC-A-1: s.txt exists | Verify: CLI: `test -f s.txt`"],
        json!({"ISC-A-1": ["write:s.txt"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "--best-of", "2", "--select", "best"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let o = sb.run(&["logs", "PRD.md", "ISC-A-1"]);
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(err.contains("ISC-A-1 · attempt 1 · sample"), "{err}");
    assert!(err.contains("-sample"), "{err}");
}
