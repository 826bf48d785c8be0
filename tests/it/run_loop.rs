//! `prdloop run` against the fake agent: untrusted workers, the loop's end states, the PRD and
//! state files it leaves, and that no process outlives the run.

use crate::common::*;
use serde_json::json;

fn s(v: &serde_json::Value) -> &str {
    v.as_str().unwrap_or("")
}

#[test]
fn untrusted_workers_one_behaviour_per_criterion() {
    let criteria = [
        "- [ ] ISC-PASS-1: passes",
        "- [ ] ISC-FAIL-1: fails",
        "- [ ] ISC-CRASH-1: crashes after printing PASS",
        "- [ ] ISC-ERR-1: is_error result",
        "- [ ] ISC-HANG-1: hangs",
        "- [ ] ISC-TERM-1: ignores SIGTERM",
        "- [ ] ISC-GRAND-1: leaves a grandchild holding the pipes",
        "- [ ] ISC-FLOOD-1: prints 100 MiB",
        "- [ ] ISC-LONG-1: prints a 20 MiB line",
        "- [ ] ISC-UTF-1: prints invalid UTF-8",
        "- [ ] ISC-OTHER-1: claims another criterion",
        "- [ ] ISC-PRE-1: claims an id it is a prefix of",
        "- [ ] ISC-PRE-11: the longer id",
        "- [ ] ISC-EDIT-1: edits the PRD",
    ];
    let prd = prd_with(&criteria);
    let sb = Sandbox::new(
        &prd,
        json!({
            "ISC-PASS-1": ["pass"],
            "ISC-FAIL-1": ["fail:widget still broken"],
            "ISC-CRASH-1": ["crash-after-pass"],
            "ISC-ERR-1": ["is-error"],
            "ISC-HANG-1": ["hang"],
            "ISC-TERM-1": ["ignore-sigterm"],
            "ISC-GRAND-1": ["grandchild"],
            "ISC-FLOOD-1": ["flood:100"],
            "ISC-LONG-1": ["flood-noline:20"],
            "ISC-UTF-1": ["invalid-utf8"],
            "ISC-OTHER-1": ["claim:ISC-FAIL-1"],
            "ISC-PRE-1": ["claim:ISC-PRE-11"],
            "ISC-PRE-11": ["fail"],
            "ISC-EDIT-1": ["edit-prd:ISC-FAIL-1"],
        }),
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-a",
        "16",
        "-n",
        "1",
        // Long enough for the floods on a loaded machine; the hanging ones end at it.
        "--timeout",
        "12s",
        "--kill-grace",
        "1s",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");

    // Exactly the honest passes are ticked; the worker's edit of the LOG survives; every other
    // byte of the criteria section is as it was.
    let passed = [
        "ISC-PASS-1",
        "ISC-GRAND-1",
        "ISC-FLOOD-1",
        "ISC-LONG-1",
        "ISC-UTF-1",
    ];
    let text = sb.prd_text();
    for c in criteria {
        let id = c[6..].split(':').next().unwrap();
        let ticked = c.replacen("- [ ]", "- [x]", 1);
        if passed.contains(&id) {
            assert!(
                text.contains(&format!("\n{ticked}\n")),
                "{id} should be ticked:\n{text}"
            );
        } else {
            assert!(
                text.contains(&format!("\n{c}\n")),
                "{id} should be unticked:\n{text}"
            );
        }
    }
    assert!(
        text.ends_with("- worker note: edited by the worker\n"),
        "{text}"
    );
    let body_before = &prd[prd.find("\n# Test PRD").unwrap()..];
    let mut expect_body = body_before.to_string();
    for id in passed {
        expect_body = expect_body.replace(&format!("- [ ] {id}:"), &format!("- [x] {id}:"));
    }
    expect_body.push_str("- worker note: edited by the worker\n");
    assert_eq!(&text[text.find("\n# Test PRD").unwrap()..], expect_body);
    assert!(text.contains("\niteration: 1\n"));
    assert!(text.contains("\nloopStatus: failed\n"));
    assert!(text.contains("\nlast_phase: VERIFY\n"));
    assert!(
        text.contains("\nverification_summary: \"5/14\"\n"),
        "{text}"
    );
    assert!(text.contains(
        "\nfailing_criteria: [ISC-FAIL-1, ISC-CRASH-1, ISC-ERR-1, ISC-HANG-1, ISC-TERM-1, ISC-OTHER-1, ISC-PRE-1, ISC-PRE-11, ISC-EDIT-1]\n"
    ), "{text}");

    // Warnings the user sees.
    assert!(
        err.contains("reported a result for ISC-FAIL-1; ignored"),
        "{err}"
    );
    assert!(
        err.contains("reported a result for ISC-PRE-11; ignored"),
        "{err}"
    );
    assert!(
        err.contains("the box of ISC-EDIT-1 was ticked outside prdloop"),
        "{err}"
    );

    // The state file: PAI's fields, real statuses and reasons.
    let st = sb.state();
    assert_eq!(st["active"], false);
    assert_eq!(st["loopMode"], true);
    assert_eq!(st["mode"], "loop");
    assert_eq!(st["parallelAgents"], 16);
    assert_eq!(st["loopIteration"], 1);
    assert_eq!(
        st["loopMaxIterations"], 1,
        "the iteration at which this run stops"
    );
    assert_eq!(s(&st["summary"]), "failed: 5/14 criteria in 1 iterations");
    let crit = |id: &str| {
        st["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(crit("ISC-PASS-1")["status"], "completed");
    assert_eq!(crit("ISC-FAIL-1")["status"], "failed");
    assert_eq!(crit("ISC-FAIL-1")["lastFailure"], "widget still broken");
    assert!(s(&crit("ISC-HANG-1")["lastFailure"]).contains("timed out"));
    assert!(s(&crit("ISC-TERM-1")["lastFailure"]).contains("timed out"));
    assert!(s(&crit("ISC-CRASH-1")["lastFailure"]).contains(
        "agent crashed: exited with status 3 without a result: fatal: the agent crashed"
    ));
    assert!(s(&crit("ISC-ERR-1")["lastFailure"]).contains("API Error: 400 invalid_request_error"));
    assert!(s(&crit("ISC-OTHER-1")["lastFailure"]).contains("no `RESULT: ISC-OTHER-1"));
    assert_eq!(crit("ISC-EDIT-1")["type"], "criterion");
    assert_eq!(st["criteria"].as_array().unwrap().len(), 14);
    let attempts = attempts(&st);
    assert_eq!(attempts.len(), 14);
    assert_eq!(st["loopHistory"].as_array().unwrap().len(), 1);
    assert_eq!(st["loopHistory"][0]["criteriaPassing"], 5);
    for a in st["agents"].as_array().unwrap() {
        assert_eq!(a["agentType"], "loop-worker");
        assert_eq!(
            a["status"], "completed",
            "PAI's schema: active|completed|failed"
        );
    }
    // The flood went to the log, not to memory.
    let flood_log = attempts
        .iter()
        .find(|a| a["criterion"] == "ISC-FLOOD-1")
        .unwrap()["log"]
        .clone();
    let size = prdloop::worker::output_log::head(std::path::Path::new(s(&flood_log)), u64::MAX)
        .unwrap()
        .len();
    assert!(size >= 100 * 1024 * 1024, "log has {size} bytes");

    // Workers ran without CLAUDECODE, with the contract's variables, prompt on stdin.
    for r in sb.worker_records() {
        assert!(r["claudecode"].is_null());
        assert_eq!(r["iteration"], "1");
        assert_eq!(
            s(&r["prd"]),
            sb.prd().canonicalize().unwrap().to_str().unwrap()
        );
        assert!(s(&r["prompt"]).contains(&format!("RESULT: {} PASS", s(&r["criterion"]))));
        assert_eq!(r["args"][0], "-p");
    }
    sb.assert_no_process_left();
}

#[test]
fn loop_completes_over_two_iterations_with_the_reason_in_the_retry_prompt() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-API-1: a | Verify: Test: `true`",
            "- [ ] ISC-API-2: b",
            "- [x] ISC-DB-1: c",
            "- [ ] ISC-UX-1: d",
        ]),
        json!({"ISC-API-2": ["fail:needs a second look", "pass"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "4"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let text = sb.prd_text();
    assert!(
        text.contains("- [x] ISC-API-1:")
            && text.contains("- [x] ISC-API-2:")
            && text.contains("- [x] ISC-UX-1:")
    );
    assert!(text.contains("\nstatus: COMPLETE\n"));
    assert!(text.contains("\nloopStatus: completed\n"));
    assert!(text.contains("\niteration: 2\n"));
    assert!(text.contains("\nfailing_criteria: []\n"));
    assert!(text.contains("\nverification_summary: \"4/4\"\n"));
    let recs = sb.worker_records();
    assert_eq!(
        recs.len(),
        3,
        "ISC-API-1's command passes at the start: no worker; the others once, then the retry"
    );
    assert!(
        err.contains("ISC-API-1 PASS its Verify command already passes"),
        "{err}"
    );
    let retry = recs
        .iter()
        .find(|r| r["criterion"] == "ISC-API-2" && r["attempt"] == 2)
        .unwrap();
    assert!(s(&retry["prompt"]).contains("needs a second look"));
    assert!(
        s(&retry["prompt"]).contains("use integer cents"),
        "the CONTEXT section"
    );
    let st = sb.state();
    assert_eq!(s(&st["summary"]), "completed: 4/4 criteria in 2 iterations");
    // Log folders whose state file is gone (PAI's hook deletes old state files) are swept
    // at the next start; the others stay.
    let orphan = sb
        .state_dir()
        .join("0f0e0d0c-0b0a-4998-8776-655443322110.logs");
    std::fs::create_dir_all(&orphan).unwrap();
    let kept = sb.state_dir().join(format!("{}.logs", s(&st["sessionId"])));
    let again = sb.run(&["run", "PRD.md", "-a", "4", "--force"]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert!(!orphan.exists(), "the orphaned log folder is removed");
    assert!(
        kept.exists(),
        "a session's logs stay while its state file does"
    );
    assert_eq!(st["currentPhase"], "COMPLETE");
    // Three workers, and the verifier's review of the two passes no command checks.
    assert!((st["totalCostUsd"].as_f64().unwrap() - 0.005).abs() < 1e-9);
    assert_eq!(st["reviews"], 2);
    assert!((st["reviewCostUsd"].as_f64().unwrap() - 0.001).abs() < 1e-9);
    assert_eq!(st["usage"]["inputTokens"], 500);
    let names: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.pai().join("MEMORY/STATE/session-names.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(names[s(&st["sessionId"])], "Loop: Test PRD [COMPLETE]");
    assert!(err.contains("complete: all 4 criteria pass"), "{err}");
    sb.assert_no_process_left();
}

#[test]
fn every_failing_criterion_of_a_domain_gets_its_attempt_in_one_iteration() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: a",
            "- [ ] ISC-A-2: b",
            "- [ ] ISC-A-3: c",
            "- [ ] ISC-B-1: d",
        ]),
        json!({"*": ["fail"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2", "-n", "1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let recs = sb.worker_records();
    let mut ids: Vec<&str> = recs.iter().map(|r| s(&r["criterion"])).collect();
    ids.sort();
    assert_eq!(ids, ["ISC-A-1", "ISC-A-2", "ISC-A-3", "ISC-B-1"]);
    // One domain never runs in two lanes.
    let lane_of =
        |id: &str| s(&recs.iter().find(|r| r["criterion"] == id).unwrap()["lane"]).to_string();
    assert!(["1", "2"].contains(&lane_of("ISC-A-1").as_str()));
    assert_eq!(lane_of("ISC-A-1"), lane_of("ISC-A-2"));
    assert_eq!(lane_of("ISC-A-1"), lane_of("ISC-A-3"));
}

fn max_overlap(recs: &[serde_json::Value]) -> usize {
    let mut events: Vec<(u64, i32)> = Vec::new();
    for r in recs {
        events.push((r["start"].as_u64().unwrap(), 1));
        events.push((r["end"].as_u64().unwrap(), -1));
    }
    // Ends before starts at the same instant: touching is not overlapping.
    events.sort_by_key(|&(t, d)| (t, d));
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in events {
        cur += d;
        max = max.max(cur);
    }
    max as usize
}

#[test]
fn lanes_run_concurrently_up_to_the_agent_count() {
    let crits = [
        "- [ ] ISC-A-1: a",
        "- [ ] ISC-A-2: a",
        "- [ ] ISC-B-1: b",
        "- [ ] ISC-B-2: b",
        "- [ ] ISC-C-1: c",
        "- [ ] ISC-C-2: c",
        "- [ ] ISC-D-1: d",
        "- [ ] ISC-D-2: d",
    ];
    for (agents, lanes) in [(4, 4), (2, 2), (16, 4)] {
        let sb = Sandbox::new(&prd_with(&crits), json!({"*": ["sleep:400"]}));
        let out = sb.run(&["run", "PRD.md", "-a", &agents.to_string()]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let recs = sb.worker_records();
        assert_eq!(recs.len(), 8);
        assert_eq!(max_overlap(&recs), lanes, "-a {agents}");
    }
}

#[test]
fn missing_or_non_executable_agent_is_a_usage_error_and_changes_nothing() {
    let prd = prd_with(&["- [ ] ISC-A-1: a"]);
    let sb = Sandbox::new(&prd, json!({}));
    let plain = sb.root().join("not-exec");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    // Usage errors (exit 2): it does not exist, is not on PATH, is not executable.
    let text = transcript(
        &sb,
        &[
            &["run", "PRD.md", "--claude-bin", "/nonexistent/claude"],
            &["run", "PRD.md", "--claude-bin", "no-such-agent-xyz"],
            &["run", "PRD.md", "--claude-bin", plain.to_str().unwrap()],
        ],
    );
    snapshot!(sb.root(), "missing_or_non_executable_agent", &text);
    assert_eq!(sb.prd_text(), prd, "the PRD is not touched");
    assert_eq!(sb.state_count(), 0);
}

#[test]
fn stall_limit_and_iteration_limit_end_with_exit_1() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["fail"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "5", "--stall", "2"]);
    // Exit 1 after two iterations that gained nothing.
    snapshot!(sb.root(), "the_stall_limit", &shown(&out));
    assert_eq!(sb.worker_records().len(), 2);
    assert!(sb.prd_text().contains("\niteration: 2\n"));

    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["fail"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "3", "--stall", "0"]);
    assert_eq!(code(&out), 1);
    assert_eq!(sb.worker_records().len(), 3);
    let text = sb.prd_text();
    assert!(text.contains("\niteration: 3\n") && text.contains("\nloopStatus: failed\n"));
}

#[test]
fn without_the_barrier_a_hopeless_criterion_ends_the_run_after_about_stall_rounds() {
    // CORE-2 never passes; UI's criteria share a domain and take a while each, so the other
    // lane has nothing but CORE-2 to run. With -n 128 it may not race ahead, and the stall
    // ends the run (said once) instead of the 128 attempts.
    let prd = prd_with(&[
        "- [ ] ISC-CORE-1: a",
        "- [ ] ISC-CORE-2: never",
        "- [ ] ISC-UI-1: u1",
        "- [ ] ISC-UI-2: u2",
        "- [ ] ISC-UI-3: u3",
    ]);
    let sb = Sandbox::new(
        &prd,
        json!({"ISC-CORE-2": ["fail"], "ISC-UI-1": ["sleep:300"], "ISC-UI-2": ["sleep:300"], "ISC-UI-3": ["sleep:300"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2", "-n", "128", "--stall", "3"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let core2 = sb
        .worker_records()
        .iter()
        .filter(|r| r["criterion"] == "ISC-CORE-2")
        .count();
    // Rounds 1 to 4 at most while UI holds round 1 open; rounds 2 to 4 gain nothing.
    assert_eq!(core2, 4, "{err}");
    assert_eq!(err.matches("(--stall 3); stopping").count(), 1, "{err}");
    assert!(err.contains("stalled"), "{err}");
    let text = sb.prd_text();
    assert!(text.contains("- [x] ISC-UI-3: u3"), "{text}");
}

#[test]
fn custom_only_failures_end_blocked_with_exit_4() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: a",
            "- [ ] ISC-UX-1: looks right | Verify: Custom: open it",
        ]),
        json!({"*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md"]);
    // Exit 4, blocked on the Custom criterion, which needs a person.
    snapshot!(sb.root(), "custom_only_failures", &shown(&out));
    let text = sb.prd_text();
    assert!(text.contains("- [x] ISC-A-1:"));
    assert!(text.contains("- [ ] ISC-UX-1:"));
    assert!(text.contains("\nstatus: BLOCKED\n"));
    assert!(text.contains("\nloopStatus: completed\n"));
    assert_eq!(
        sb.worker_records().len(),
        1,
        "no worker for the Custom criterion"
    );
}

#[test]
fn pai_form_and_text_output_format() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        json!({"*": ["text-pass"]}),
    );
    let out = sb.run(&[
        "-m",
        "loop",
        "-p",
        "PRD.md",
        "-n",
        "1",
        "--claude-arg=--output-format=text",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let r = &sb.worker_records()[0];
    assert!(
        r["args"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a != "stream-json")
    );
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
}

#[test]
fn a_live_lock_holder_gets_exit_3_naming_its_session() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
    let first = sb.spawn(&["run", "PRD.md", "--kill-grace", "1s"]);
    sb.wait_for_workers(1);
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let session = sb.state()["sessionId"].as_str().unwrap().to_string();
    assert!(stderr(&out).contains(&session), "{}", stderr(&out));
    send_signal(first.id(), "INT");
    let out = wait_output(first, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    sb.assert_no_process_left();
}

#[test]
fn ctrl_c_stops_workers_and_leaves_the_prd_paused() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"]),
        json!({"ISC-A-1": ["hang"], "ISC-B-1": ["ignore-sigterm"], "ISC-C-1": ["grandchild"]}),
    );
    let child = sb.spawn(&["run", "PRD.md", "-a", "3", "--kill-grace", "1s"]);
    let pid = child.id();
    sb.wait_for_workers(3);
    // Wait until the grandchild exists and its worker's result has been applied.
    sb.wait_for_prd("- [x] ISC-C-1:");
    send_signal(pid, "INT");
    let out = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    let text = sb.prd_text();
    assert!(text.contains("\nloopStatus: paused\n"), "{text}");
    assert!(text.contains("- [x] ISC-C-1:"));
    let st = sb.state();
    assert_eq!(st["active"], false);
    assert_eq!(st["currentPhase"], "PLAN");
    assert!(s(&st["summary"]).starts_with("paused:"));
    sb.assert_no_process_left();
}

#[test]
fn after_sigkill_the_next_run_takes_over_and_finishes() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["hang-once"], "*": ["pass"]}),
    );
    let child = sb.spawn(&["run", "PRD.md", "-a", "2"]);
    let pid = child.id();
    sb.wait_for_prd("- [x] ISC-B-1:");
    send_signal(pid, "KILL");
    let _ = wait_output(child, std::time::Duration::from_secs(30));
    let text = sb.prd_text();
    assert!(text.contains("\nloopStatus: running\n"));
    prdloop::prd::Prd::parse(text).expect("the PRD left by a killed runner parses");
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("taking over"), "{err}");
    let text = sb.prd_text();
    assert!(text.contains("- [x] ISC-A-1:") && text.contains("\nloopStatus: completed\n"));
    // The takeover ended the crashed run's orphaned worker too.
    sb.assert_no_process_left();
}

#[test]
fn pause_and_stop_requests_in_the_prd_are_honoured() {
    for (word, step) in [("paused", "sleep:1500"), ("stopped", "hang")] {
        let sb = Sandbox::new(
            &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]),
            json!({"*": [step]}),
        );
        let child = sb.spawn(&["run", "PRD.md", "--kill-grace", "1s"]);
        sb.wait_for_workers(1);
        let text = sb
            .prd_text()
            .replace("loopStatus: running", &format!("loopStatus: {word}"));
        std::fs::write(sb.prd(), text).unwrap();
        let out = wait_output(child, std::time::Duration::from_secs(60));
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        let text = sb.prd_text();
        assert!(text.contains(&format!("\nloopStatus: {word}\n")), "{text}");
        assert_eq!(
            sb.worker_records().len(),
            1,
            "no new worker after the request"
        );
        if word == "paused" {
            assert!(
                text.contains("- [x] ISC-A-1:"),
                "the running worker finished and counted"
            );
        } else {
            assert!(
                text.contains("- [ ] ISC-A-1:"),
                "stop ends the running worker"
            );
        }
        sb.assert_no_process_left();
    }
}

#[test]
fn sigterm_and_sighup_are_handled_like_ctrl_c() {
    for sig in ["TERM", "HUP"] {
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
        let child = sb.spawn(&["run", "PRD.md", "--kill-grace", "1s"]);
        sb.wait_for_workers(1);
        send_signal(child.id(), sig);
        let out = wait_output(child, std::time::Duration::from_secs(60));
        assert_eq!(code(&out), 130, "SIG{sig}: {}", stderr(&out));
        assert!(sb.prd_text().contains("\nloopStatus: paused\n"), "SIG{sig}");
        assert_eq!(sb.state()["active"], false);
        sb.assert_no_process_left();
    }
}

#[test]
fn a_prd_broken_during_the_run_is_never_overwritten() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]),
        json!({"ISC-A-1": ["break-prd"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "3"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("edited into a broken state"), "{err}");
    assert!(
        err.contains("error:") && err.contains("prdloop resume"),
        "{err}"
    );
    let broken = prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"])
        .replace("loopStatus: null", "loopStatus: running")
        .replacen("\n---\n", "\n", 1);
    assert_eq!(
        sb.prd_text(),
        broken,
        "the broken bytes are left as they are"
    );
    assert!(prdloop::prd::Prd::parse(sb.prd_text()).is_err());
}

#[test]
fn a_prd_reached_through_a_symlink_stays_a_symlink() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let link = sb.work().join("LINK.md");
    std::os::unix::fs::symlink(sb.prd(), &link).unwrap();
    let out = sb.run(&["run", "LINK.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
}

#[test]
fn json_events_on_stdout_for_ci() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-B-1": ["fail:not yet", "pass"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let events: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"start"));
    assert_eq!(kinds.last(), Some(&"end"));
    assert_eq!(kinds.iter().filter(|k| **k == "worker_start").count(), 3);
    assert_eq!(kinds.iter().filter(|k| **k == "worker_end").count(), 3);
    assert_eq!(kinds.iter().filter(|k| **k == "iteration_end").count(), 2);
    let fail = events
        .iter()
        .find(|e| e["event"] == "worker_end" && e["verdict"] == "fail")
        .unwrap();
    assert_eq!(fail["criterion"], "ISC-B-1");
    assert_eq!(fail["reason"], "not yet");
    let end = events.last().unwrap();
    assert_eq!(end["outcome"], "completed");
    assert_eq!(end["exitCode"], 0);
    assert_eq!(end["passing"], 2);
}

/// The state file of the one session in `dir` (a state folder given with --state-dir).
fn state_in(dir: &std::path::Path) -> serde_json::Value {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a state file");
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

#[test]
fn a_second_run_with_another_state_folder_home_or_tmpdir_gets_exit_3() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
    let first = sb.spawn(&["run", "PRD.md", "--kill-grace", "1s"]);
    sb.wait_for_workers(1);
    let session = sb.state()["sessionId"].as_str().unwrap().to_string();
    // Short limits, so that a second loop (as before the lock was keyed by the PRD) ends soon.
    let limits = ["--timeout", "2s", "-n", "1", "--kill-grace", "1s"];
    let other = sb.root().join("other-state");
    let mut args = vec!["run", "PRD.md", "--state-dir", other.to_str().unwrap()];
    args.extend(limits);
    let out = sb.run(&args);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains(&session), "{}", stderr(&out));
    // Another HOME, PAI_DIR and TMPDIR, no --state-dir: still the same PRD, still refused.
    let home = sb.root().join("other-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut args = vec!["run", "PRD.md"];
    args.extend(limits);
    let mut cmd = sb.command(&args);
    cmd.env("HOME", &home)
        .env("PAI_DIR", home.join(".claude"))
        .env("TMPDIR", &home);
    let out = wait_output(cmd.spawn().unwrap(), std::time::Duration::from_secs(180));
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains(&session), "{}", stderr(&out));
    assert_eq!(sb.worker_records().len(), 1, "no second worker started");
    let states = |d: &std::path::Path| {
        std::fs::read_dir(d).map_or(0, |rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .count()
        })
    };
    assert_eq!(states(&other), 0, "the refused run wrote no state");
    assert_eq!(states(&home.join(".claude/MEMORY/STATE/algorithms")), 0);
    // `verify` writes boxes, so it takes the same lock.
    let out = sb.run(&["verify", "PRD.md", "--state-dir", other.to_str().unwrap()]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains(&session), "{}", stderr(&out));
    send_signal(first.id(), "INT");
    let out = wait_output(first, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    sb.assert_no_process_left();
}

#[test]
fn a_crashed_run_with_another_state_folder_is_taken_over() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["hang-once"], "*": ["pass"]}),
    );
    let crashed_dir = sb.root().join("crashed-state");
    let child = sb.spawn(&[
        "run",
        "PRD.md",
        "-a",
        "2",
        "--state-dir",
        crashed_dir.to_str().unwrap(),
    ]);
    let pid = child.id();
    sb.wait_for_prd("- [x] ISC-B-1:");
    send_signal(pid, "KILL");
    let _ = wait_output(child, std::time::Duration::from_secs(30));
    let crashed = state_in(&crashed_dir);
    assert_eq!(crashed["active"], true);
    // The default state folder this time.
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--timeout", "20s"]);
    let err = stderr(&out);
    // First, so that a leftover worker is ended even when an assertion below fails.
    sb.assert_no_process_left();
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains("taking over") && err.contains(s(&crashed["sessionId"])),
        "{err}"
    );
    // Its hung worker is gone: on Linux it died with its runner (parent-death signal);
    // elsewhere the takeover ends it ("ending worker process …").
    let crashed = state_in(&crashed_dir);
    assert_eq!(
        crashed["active"], false,
        "its own state folder's file is marked"
    );
    assert!(s(&crashed["summary"]).contains("crash"), "{crashed}");
    assert!(sb.prd_text().contains("\nloopStatus: completed\n"));
}

#[test]
fn what_a_run_prints_is_exactly_this() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-API-1: a | Verify: Test: `true`",
            "- [ ] ISC-API-2: b",
            "- [x] ISC-DB-1: c",
            "- [ ] ISC-UX-1: d",
        ]),
        json!({"ISC-API-2": ["fail:needs a second look", "pass"], "*": ["pass"]}),
    );
    // Pins PAI's iterations as printed (without the barrier the retry runs before ISC-UX-1).
    let out = sb.run(&["run", "PRD.md", "-a", "1", "--rounds", "barrier"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let root = sb.root().display().to_string();
    insta::with_settings!({filters => vec![
        (root.as_str(), "[TMP]"),
        (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[SESSION]"),
        (r"\d+\.\ds", "[DUR]"),
        // On or off (and why) depends on the machine's kernel.
        (r"(?m)^sandbox: .*$", "sandbox: [ON OR OFF, AND WHY]"),
    ]}, {
        insta::assert_snapshot!(stderr(&out));
    });
}

// ---- the criteria graph and the continuous loop (issue 25) --------------------------------

/// Each worker record's (start, end), by criterion and attempt.
fn spans(sb: &Sandbox) -> std::collections::HashMap<(String, u64), (u64, u64)> {
    sb.worker_records()
        .iter()
        .map(|r| {
            (
                (
                    s(&r["criterion"]).to_string(),
                    r["attempt"].as_u64().unwrap(),
                ),
                (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap()),
            )
        })
        .collect()
}

#[test]
fn no_criterion_starts_before_what_it_needs_passes() {
    for rounds in ["continuous", "barrier"] {
        let sb = Sandbox::new(
            &prd_with(&[
                "- [ ] ISC-C-1: top | After: ISC-B-1",
                "- [ ] ISC-B-1: middle (after: ISC-A-1)",
                "- [ ] ISC-A-1: base",
                "- [ ] ISC-D-1: free",
            ]),
            json!({"ISC-A-1": ["sleep:400"], "ISC-D-1": ["sleep:400"], "*": ["sleep:50"]}),
        );
        let out = sb.run(&["run", "PRD.md", "-a", "3", "--rounds", rounds]);
        assert_eq!(code(&out), 0, "{rounds}: {}", stderr(&out));
        let sp = spans(&sb);
        let at = |id: &str| sp[&(id.to_string(), 1)];
        assert!(at("ISC-B-1").0 >= at("ISC-A-1").1, "{rounds}: {sp:?}");
        assert!(at("ISC-C-1").0 >= at("ISC-B-1").1, "{rounds}: {sp:?}");
        // What needs nothing runs alongside.
        assert!(at("ISC-D-1").0 < at("ISC-A-1").1, "{rounds}: {sp:?}");
        // The text keeps what was written; each link is an iteration in PAI's sense.
        assert!(
            sb.prd_text()
                .contains("- [x] ISC-C-1: top | After: ISC-B-1\n")
        );
        assert!(
            sb.prd_text().contains("iteration: 3\n"),
            "{}",
            sb.prd_text()
        );
        assert_eq!(sb.state()["loopHistory"].as_array().unwrap().len(), 3);
    }
}

#[test]
fn dependency_cycles_and_unknown_ids_are_refused_at_their_line() {
    for (criteria, want) in [
        (
            [
                "- [ ] ISC-A-1: a (after: ISC-B-1)",
                "- [ ] ISC-B-1: b (after: ISC-A-1)",
            ],
            "PRD.md:{line}: the dependencies (after:) go round: ISC-A-1 → ISC-B-1 → ISC-A-1",
        ),
        (
            ["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b | After: ISC-Q-9"],
            "PRD.md:{next}: ISC-B-1 needs ISC-Q-9 (after:), which is no criterion of this file",
        ),
    ] {
        let text = prd_with(&criteria);
        let line = text.lines().position(|l| l.contains("ISC-")).unwrap() + 1;
        let want = want.replace("{line}", &line.to_string());
        let want = want.replace("{next}", &(line + 1).to_string());
        let sb = Sandbox::new(&text, json!({"*": ["pass"]}));
        for args in [
            &["run", "PRD.md"][..],
            &["plan", "PRD.md"],
            &["run", "PRD.md", "--dry-run"],
        ] {
            let out = sb.run(args);
            assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains(&want), "{args:?}: {}", stderr(&out));
        }
        assert!(sb.worker_records().is_empty());
        assert_eq!(sb.prd_text(), text, "the PRD is left as it was");
    }
}

#[test]
fn plan_shows_the_waves_and_its_json_the_edges() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: a",
            "- [ ] ISC-B-1: b (after: ISC-A-1)",
            "- [ ] ISC-C-1: c | After: ISC-A-1, ISC-B-1",
        ]),
        json!({}),
    );
    let out = sb.run(&["plan", "PRD.md"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("  wave 1: ISC-A-1\n  wave 2: ISC-B-1\n  wave 3: ISC-C-1\n"),
        "{text}"
    );
    let at = |id: &str| {
        sb.prd_text()
            .lines()
            .position(|l| l.contains(&format!("{id}:")))
            .unwrap()
            + 1
    };
    let (b, c) = (at("ISC-B-1"), at("ISC-C-1"));
    let out = sb.run(&["plan", "PRD.md", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["waves"], json!([["ISC-A-1"], ["ISC-B-1"], ["ISC-C-1"]]));
    assert_eq!(
        v["edges"],
        json!([
            {"criterion": "ISC-B-1", "needs": "ISC-A-1", "line": b},
            {"criterion": "ISC-C-1", "needs": "ISC-A-1", "line": c},
            {"criterion": "ISC-C-1", "needs": "ISC-B-1", "line": c},
        ])
    );
}

#[test]
fn dependents_of_a_failing_criterion_wait_and_are_not_attempts() {
    for rounds in ["continuous", "barrier"] {
        let sb = Sandbox::new(
            &prd_with(&[
                "- [ ] ISC-A-1: base",
                "- [ ] ISC-B-1: needs it (after: ISC-A-1)",
                "- [ ] ISC-C-1: needs B | After: ISC-B-1",
                "- [ ] ISC-D-1: free",
            ]),
            json!({"ISC-A-1": ["fail:still broken"], "*": ["pass"]}),
        );
        let out = sb.run(&["run", "PRD.md", "-a", "2", "-n", "2", "--rounds", rounds]);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{rounds}: {err}");
        let ran: Vec<String> = sb
            .worker_records()
            .iter()
            .map(|r| s(&r["criterion"]).to_string())
            .collect();
        assert_eq!(ran.iter().filter(|c| *c == "ISC-A-1").count(), 2, "{ran:?}");
        assert!(
            !ran.iter().any(|c| c == "ISC-B-1" || c == "ISC-C-1"),
            "{ran:?}"
        );
        assert!(
            err.contains("ISC-B-1          waiting for ISC-A-1"),
            "{rounds}: {err}"
        );
        assert!(
            err.contains("ISC-C-1          waiting for ISC-B-1"),
            "{rounds}: {err}"
        );
        let st = sb.state();
        let none = |id: &str| !attempts(&st).iter().any(|a| s(&a["criterion"]) == id);
        assert!(none("ISC-B-1") && none("ISC-C-1"));
    }
}

#[test]
fn overlapping_footprints_are_not_run_at_once() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-X-1: add the header to `shared/config.toml`",
            "- [ ] ISC-Y-1: add the footer to shared/config.toml",
            "- [ ] ISC-Z-1: something else",
        ]),
        json!({"*": ["sleep:500"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "3"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let sp = spans(&sb);
    let (x, y, z) = (
        sp[&("ISC-X-1".to_string(), 1)],
        sp[&("ISC-Y-1".to_string(), 1)],
        sp[&("ISC-Z-1".to_string(), 1)],
    );
    assert!(x.1 <= y.0 || y.1 <= x.0, "X and Y overlapped: {sp:?}");
    // The other work ran meanwhile.
    assert!(z.0 < x.1.min(y.1), "{sp:?}");
    assert_eq!(sb.state()["conflicts"], 0);
}

#[test]
fn a_conflict_is_counted_and_the_files_join_the_footprint() {
    let sb = repo(
        &["- [ ] ISC-P-1: one side", "- [ ] ISC-Q-1: the other side"],
        json!({
            "ISC-P-1": ["sh:echo p > shared.txt && sleep 0.2"],
            "ISC-Q-1": ["sh:echo q > shared.txt && sleep 0.6", "sh:echo q > shared.txt"],
        }),
        &[("shared.txt", "base\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert_eq!(sb.state()["conflicts"], 1, "{err}");
    assert!(
        err.contains("conflicts: 1 passing attempt collided"),
        "{err}"
    );
    // Each attempt records the files it touched.
    let st = sb.state();
    let atts = attempts(&st);
    assert!(atts.len() >= 3, "{atts:?}");
    assert!(
        atts.iter().all(|a| a["footprint"] == json!(["shared.txt"])),
        "{atts:?}"
    );
}

#[test]
fn what_a_run_without_the_barrier_prints_is_exactly_this() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-API-1: a | Verify: Test: `true`",
            "- [ ] ISC-API-2: b",
            "- [x] ISC-DB-1: c",
            "- [ ] ISC-UX-1: d (after: ISC-API-2)",
        ]),
        json!({"ISC-API-2": ["fail:needs a second look", "pass"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let root = sb.root().display().to_string();
    insta::with_settings!({filters => vec![
        (root.as_str(), "[TMP]"),
        (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[SESSION]"),
        (r"\d+\.\ds", "[DUR]"),
        (r"(?m)^sandbox: .*$", "sandbox: [ON OR OFF, AND WHY]"),
    ]}, {
        insta::assert_snapshot!(stderr(&out));
    });
}

/// The state saved when the PRD is written describes the PRD written: a criterion someone
/// added, merged by that write, is in it (the state's PRD hash is of that text already).
#[test]
fn the_state_saved_with_a_write_has_the_criteria_that_write_merged() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: first", "- [ ] ISC-A-2: second"]),
        json!({}),
    );
    let snaps = sb.records();
    sb.set_plan(json!({
        // Someone adds a criterion (ticked: no work) while the first worker runs.
        "ISC-A-1": ["sh:sed -i '/ISC-A-2: second/a - [x] ISC-B-1: added during the run' \"$PRDLOOP_PRD\""],
        // The second worker waits for the first state saved with ISC-A-1 passed (it is saved
        // while this worker runs) and copies it (a copy, as the runner may write it again).
        "ISC-A-2": [format!(
            "sh:st=\"{}/$PRDLOOP_SESSION_ID.json\"; for i in $(seq 1 600); do cp \"$st\" \"{}/snap.tmp\" 2>/dev/null && grep -A3 '\"id\": \"ISC-A-1\"' \"{}/snap.tmp\" | grep -q '\"status\": \"completed\"' && mv \"{}/snap.tmp\" \"{}/snap-10.state\" && break; sleep 0.05; done",
            sb.state_dir().display(),
            snaps.display(),
            snaps.display(),
            snaps.display(),
            snaps.display()
        )],
    }));
    let out = sb.run(&["run", "PRD.md", "-a", "1", "-n", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        sb.prd_text()
            .contains("- [x] ISC-B-1: added during the run\n")
    );
    // The first state saved once ISC-A-1 passed: the write that ticked it merged ISC-B-1.
    let first = (10..50)
        .filter_map(|i| std::fs::read_to_string(snaps.join(format!("snap-{i}.state"))).ok())
        .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .find(|st| {
            st["criteria"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["id"] == "ISC-A-1" && c["status"] == "completed")
            })
        })
        .expect("a state saved with ISC-A-1 passed while ISC-A-2 ran");
    let ids: Vec<&str> = first["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| s(&c["id"]))
        .collect();
    assert_eq!(ids, ["ISC-A-1", "ISC-A-2", "ISC-B-1"], "{first:#}");
}

/// A run with the debug line of its one read of the PRD (`commands::read_prd`) on stderr.
fn run_counting_reads(sb: &Sandbox, args: &[&str]) -> (std::process::Output, usize) {
    let mut c = sb.command(args);
    c.env("PRDLOOP_LOG", "prdloop::prd_read=debug");
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(180));
    let reads = stderr(&o).matches("PRD read and parsed").count();
    (o, reads)
}

#[test]
fn a_run_reads_and_parses_its_prd_once() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["pass"], "*": ["fail"]}),
    );
    let (o, reads) = run_counting_reads(&sb, &["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(reads, 1, "run: {}", stderr(&o));
    let (o, reads) = run_counting_reads(&sb, &["resume", "PRD.md", "-n", "1"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(reads, 1, "resume: {}", stderr(&o));
    // Several PRDs: each read once, for the plan; its loop takes that reading while the file
    // still holds it.
    let other = prd_with(&["- [ ] ISC-C-1: c"]).replace("PRD-20261130-test", "PRD-other");
    std::fs::write(sb.work().join("B.md"), other).unwrap();
    let (o, reads) = run_counting_reads(&sb, &["run", "PRD.md", "B.md", "-n", "1"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(reads, 2, "two PRDs: {}", stderr(&o));
    // An early end reads it once too.
    let (o, reads) = run_counting_reads(&sb, &["run", "PRD.md", "--dry-run"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(reads, 1, "dry run: {}", stderr(&o));
}
