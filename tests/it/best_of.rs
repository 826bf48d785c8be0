//! Best-of-N in real temporary git repositories: samples of one attempt at once, each in its
//! own worktree; the winner's work alone reaches the checkout.

use crate::common::*;
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
    let text = transcript(
        &sb,
        &[
            &["run", "PRD.md", "--best-of", "2", "--no-verify"],
            &["run", "PRD.md", "--best-of", "9"],
        ],
    );
    snapshot!(sb.root(), "best_of_needs_isolated_workers", &text);
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

/// The samples each attempt at `id` ran (`of` of its records), in the order they ran.
fn samples_per_attempt(sb: &Sandbox, id: &str) -> Vec<u64> {
    let mut by_iteration: std::collections::BTreeMap<u64, u64> = Default::default();
    for a in attempts(&sb.state()) {
        if a["criterion"] == id {
            by_iteration.insert(
                a["iteration"].as_u64().unwrap(),
                a["sample"]["of"].as_u64().unwrap_or(1),
            );
        }
    }
    by_iteration.into_values().collect()
}

#[test]
fn auto_starts_at_one_raises_a_failing_domain_and_never_passes_max() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: never | Verify: CLI: `test -f never.txt`",
            "- [ ] ISC-A-2: never either | Verify: CLI: `test -f never.txt`",
            "- [ ] ISC-B-1: b1 | Verify: CLI: `test -f b1.txt`",
            "- [ ] ISC-B-2: b2 | Verify: CLI: `test -f b2.txt`",
        ],
        json!({"ISC-A-1": ["sh:exit 1"], "ISC-A-2": ["sh:exit 1"],
               "ISC-B-1": ["write:b1.txt"], "ISC-B-2": ["write:b2.txt"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-a",
        "1",
        // Far from the iteration limit (which would raise the samples of the last attempts):
        // the stall limit ends the run after four iterations.
        "-n",
        "50",
        "--stall",
        "3",
        "--best-of",
        "auto:2",
        // Counted in PAI's iterations: one attempt per criterion each.
        "--rounds",
        "barrier",
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    // A domain that passes first time stays at 1.
    assert_eq!(samples_per_attempt(&sb, "ISC-B-1"), [1]);
    assert_eq!(samples_per_attempt(&sb, "ISC-B-2"), [1]);
    // One that keeps failing starts at 1 and rises, but never past MAX (2).
    let a1 = samples_per_attempt(&sb, "ISC-A-1");
    let a2 = samples_per_attempt(&sb, "ISC-A-2");
    assert_eq!((a1.len(), a2.len()), (4, 4), "{a1:?} {a2:?}");
    let first_of_a = [a1[0], a2[0]];
    assert!(first_of_a.contains(&1), "{a1:?} {a2:?}");
    assert_eq!(&a1[1..], [2, 2, 2], "{a1:?}");
    assert_eq!(&a2[1..], [2, 2, 2], "{a2:?}");
    let state = sb.state();
    let next = &state["bestOf"]["auto"]["next"]["A · claude"];
    assert_eq!(next["samples"], 2, "{state}");
    assert!(next["passAt1"].as_f64().unwrap() < 0.2, "{next}");
    assert_eq!(state["bestOf"]["auto"]["max"], 2);
    // The accounts the estimate comes from: 14 workers of A judged, none passed.
    let spend = state["spend"].as_array().unwrap();
    let a = spend.iter().find(|r| r["domain"] == "A").unwrap();
    assert_eq!(
        (a["judged"].as_u64(), a["passedRuns"].as_u64()),
        (Some(14), Some(0))
    );
}

#[test]
fn resume_goes_on_from_the_estimate_the_earlier_session_left() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: never | Verify: CLI: `test -f never.txt`",
            "- [ ] ISC-A-2: never either | Verify: CLI: `test -f never.txt`",
        ],
        json!({"*": ["sh:exit 1"]}),
        &[("README", "r\n")],
    );
    // Far from the iteration limit: the stall limit ends each session.
    // Counted in PAI's iterations: one attempt per criterion each.
    let auto = [
        "-a",
        "1",
        "-n",
        "50",
        "--best-of",
        "auto:4",
        "--rounds",
        "barrier",
    ];
    let out = sb.run(&[&["run", "PRD.md", "--stall", "2"][..], &auto].concat());
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    // Two iterations: 1 and 1 sample, then 2 and 2: 6 failures, pass@1 about 2/9.
    assert_eq!(samples_per_attempt(&sb, "ISC-A-1"), [1, 2]);
    assert_eq!(samples_per_attempt(&sb, "ISC-A-2"), [1, 2]);
    assert_eq!(
        sb.state()["bestOf"]["auto"]["next"]["A · claude"]["samples"],
        3
    );
    let out = sb.run(&[&["resume", "PRD.md", "--stall", "1"][..], &auto].concat());
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    // The resumed session's first attempt runs 3 samples, not 1 again.
    let a1 = samples_per_attempt(&sb, "ISC-A-1");
    assert_eq!(a1, [1, 2, 3], "{}", stderr(&out));
    let state = sb.state();
    let a = &state["spend"].as_array().unwrap()[0];
    assert_eq!(a["judged"], 6 + 3 + 3, "{state}");
}

#[test]
fn escalation_moves_a_criterion_after_k_failures_and_counts_the_cost_per_pass() {
    for (k, args) in [
        (2, vec![]),
        (1, vec!["--escalate-after", "1"]),
        (3, vec!["--escalate-after", "3"]),
    ] {
        let sb = Sandbox::new(
            &prd_with(&["- [ ] ISC-A-1: a.txt | Verify: CLI: `test -f a.txt`"]),
            json!({"ISC-A-1@weak": ["sh:exit 1"], "ISC-A-1@strong": ["write:a.txt"]}),
        );
        let out = sb.run(
            &[
                &["run", "PRD.md", "--stall", "0", "--json"][..],
                &["--escalate", "claude:weak,claude:strong"],
                &args,
            ]
            .concat(),
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let models: Vec<String> = sb
            .worker_records()
            .iter()
            .map(|r| r["model"].as_str().unwrap().to_string())
            .collect();
        let mut want = vec!["weak"; k];
        want.push("strong");
        // By start time: k on the first set-up, then the second.
        let mut recs = sb.worker_records();
        recs.sort_by_key(|r| r["start"].as_u64());
        let by_time: Vec<&str> = recs.iter().map(|r| r["model"].as_str().unwrap()).collect();
        assert_eq!(by_time, want, "{models:?}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "ISC-A-1 failed {k} attempt(s) on claude:weak: its next attempts run on claude:strong"
            )),
            "{err}"
        );
        let state = sb.state();
        let setups: Vec<String> = attempts(&state)
            .iter()
            .map(|a| a["setup"].as_str().unwrap().replace("claude:", ""))
            .collect();
        assert_eq!(setups, want);
        let rung = &state["escalation"]["criteria"]["ISC-A-1"];
        assert_eq!(rung["setup"], "claude:strong", "{state}");
        assert_eq!(rung["failedOn"]["claude:weak"], k as u64);
        // Which set-up earned its price: the state, and the `end` event.
        let by_setup = &state["costPerPass"]["bySetup"];
        assert_eq!(by_setup[0]["name"], "claude:strong", "{state}");
        assert_eq!(by_setup[0]["passed"], 1);
        assert_eq!(by_setup[0]["runsPerPass"], 1.0);
        assert_eq!(by_setup[0]["passAt1"], 1.0);
        assert_eq!(by_setup[1]["name"], "claude:weak");
        assert_eq!(by_setup[1]["passed"], 0);
        assert_eq!(by_setup[1]["runs"], k as u64);
        assert_eq!(by_setup[1]["passAt1"], 0.0);
        assert!(by_setup[1]["costUsdPerPass"].is_null());
        let by_domain = &state["costPerPass"]["byDomain"][0];
        assert_eq!(by_domain["name"], "A");
        assert_eq!(by_domain["runsPerPass"], (k + 1) as f64);
        let end: serde_json::Value = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["event"] == "end")
            .expect("an end event");
        assert_eq!(end["costPerPass"], state["costPerPass"]);
        assert!(err.contains("set-up claude:weak    0 passed"), "{err}");
        // Each worker line says the set-up it runs.
        assert!(err.contains("ISC-A-1 [claude:weak] started\n"), "{err}");
        assert!(
            err.contains(&format!(
                "ISC-A-1 [claude:strong] started (attempt {})",
                k + 1
            )),
            "{err}"
        );
    }
}

#[test]
fn fallback_hands_a_limited_set_ups_work_to_the_next_instead_of_waiting() {
    let prd = prd_with(&["- [ ] ISC-A-1: a.txt | Verify: CLI: `test -f a.txt`"]);
    let plan = json!({"*@weak": ["usage-limit:3600"], "*@strong": ["write:a.txt"]});
    let ladder = [
        "--escalate",
        "claude:weak,claude:strong",
        "--max-wait",
        "1s",
    ];
    // Without --fallback: every lane waits for the limit, which is past --max-wait.
    let sb = Sandbox::new(&prd, plan.clone());
    let out = sb.run(&[&["run", "PRD.md"][..], &ladder].concat());
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("--max-wait"), "{}", stderr(&out));
    let models: Vec<_> = sb
        .worker_records()
        .iter()
        .map(|r| r["model"].clone())
        .collect();
    assert_eq!(models, [json!("weak")]);
    // With it: the next set-up takes the work at once.
    let sb = Sandbox::new(&prd, plan);
    let out = sb.run(&[&["run", "PRD.md", "--fallback"][..], &ladder].concat());
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains(
            "claude:weak: usage limit reached; its work goes to claude:strong until the limit resets"
        ),
        "{err}"
    );
    let mut recs = sb.worker_records();
    recs.sort_by_key(|r| r["start"].as_u64());
    let models: Vec<_> = recs.iter().map(|r| r["model"].clone()).collect();
    assert_eq!(models, [json!("weak"), json!("strong")]);
    let state = sb.state();
    let until = state["escalation"]["limitedUntil"]["claude:weak"]
        .as_u64()
        .expect("the limit's end");
    assert!(until > state["algorithmStartedAt"].as_u64().unwrap() + 3_000_000);
    // A usage limit is not a failure: the criterion stays on its own set-up.
    assert!(
        state["escalation"]["criteria"]["ISC-A-1"].is_null(),
        "{state}"
    );
    assert_eq!(state["criteria"][0]["attempts"], 1);
}

#[test]
fn the_new_flags_are_checked() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a | Verify: CLI: `true`"]),
        json!({}),
    );
    // Each a usage error (exit 2) naming its flag.
    let runs: Vec<Vec<&str>> = [
        &["--best-of", "auto:9"][..],
        &["--best-of", "many"],
        &["--fallback"],
        &["--escalate-after", "2"],
        &["--escalate", "claude:a", "--mix", "claude:b"],
        &["--escalate", "nope:x"],
        &["--escalate", "claude:a", "--escalate-after", "0"],
        &["--best-of", "auto"],
    ]
    .iter()
    .map(|args| [&["run", "PRD.md", "--no-verify"][..], args].concat())
    .collect();
    let runs: Vec<&[&str]> = runs.iter().map(Vec::as_slice).collect();
    snapshot!(
        sb.root(),
        "the_new_flags_are_checked",
        &transcript(&sb, &runs)
    );
}
