//! When the agent fails, not the criterion: fatal failures stop the run, limits pause every
//! lane and the attempt is retried without counting, budgets stop new launches.

use crate::common::*;
use serde_json::json;

fn starts(sb: &Sandbox) -> Vec<(String, u64, Option<u64>)> {
    sb.worker_records()
        .iter()
        .map(|r| {
            (
                r["criterion"].as_str().unwrap().to_string(),
                r["start"].as_u64().unwrap(),
                r["end"].as_u64(),
            )
        })
        .collect()
}

#[test]
fn a_usage_limit_pauses_every_lane_and_resumes_at_the_reset_without_spending_an_attempt() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: hits the limit first",
            "- [ ] ISC-A-2: same lane, after it",
            "- [ ] ISC-B-1: other lane",
            "- [ ] ISC-B-2: other lane, after it",
        ]),
        json!({"ISC-A-1": ["usage-limit-once:3"], "ISC-B-1": ["sleep:1000"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains("usage limit reached: no worker starts until"),
        "{err}"
    );
    let runs = starts(&sb);
    let limited = runs.iter().find(|r| r.0 == "ISC-A-1").unwrap();
    // The reset was 3 s after the limited worker started. Everything the runner started after
    // it saw the limit waited for the reset: the retry, ISC-A-2, and ISC-B-2 (whose lane was
    // busy with ISC-B-1 for a second when the limit came).
    let reset = (limited.1 / 1000 + 3) * 1000;
    for id in ["ISC-A-2", "ISC-B-2"] {
        let start = runs.iter().find(|r| r.0 == id).unwrap().1;
        assert!(
            start >= reset,
            "{id} started at {start}, before the reset at {reset}"
        );
    }
    let retry = runs.iter().filter(|r| r.0 == "ISC-A-1").nth(1).unwrap().1;
    assert!(
        retry >= reset,
        "the retry started at {retry}, before the reset at {reset}"
    );
    assert_eq!(
        runs.iter().filter(|r| r.0 == "ISC-A-1").count(),
        2,
        "retried once"
    );
    let st = sb.state();
    let a1 = st["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ISC-A-1")
        .unwrap()
        .clone();
    assert_eq!(a1["attempts"], 1, "the limited run did not count");
    assert_eq!(a1["agentFailures"], 1);
    assert_eq!(a1["status"], "completed");
    let att = attempts(&st);
    let failed = att
        .iter()
        .find(|a| a["verdict"] == "agent_failure")
        .unwrap();
    assert_eq!(failed["agentFailure"]["kind"], "usage_limit");
    // The failed try keeps its own log; the retry of the same attempt writes another.
    let passed = att
        .iter()
        .find(|a| a["criterion"] == "ISC-A-1" && a["verdict"] == "pass")
        .unwrap();
    assert_ne!(failed["log"], passed["log"]);
    let failed_log = worker_log(failed["log"].as_str().unwrap());
    assert!(failed_log.contains("hit your limit"), "{failed_log}");
    assert!(st["waitedMs"].as_u64().unwrap() >= 1000);
    assert!(sb.prd_text().contains("\nloopStatus: completed\n"));
}

#[test]
fn an_authentication_failure_ends_the_run_after_one_worker_with_exit_5() {
    let prd = prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"]);
    let sb = Sandbox::new(&prd, json!({"*": ["auth"]}));
    let out = sb.run(&["run", "PRD.md", "-a", "1"]);
    // Exit 5: authentication failure, retrying cannot help.
    snapshot!(sb.root(), "an_authentication_failure", &shown(&out));
    assert_eq!(sb.worker_records().len(), 1);
    let text = sb.prd_text();
    assert!(text.contains("\nloopStatus: paused\n"));
    assert!(!text.contains("- [x]"), "no box touched");
    let st = sb.state();
    assert_eq!(st["active"], false);
    assert!(
        st["stopReason"]
            .as_str()
            .unwrap()
            .contains("Invalid API key")
    );
    assert_eq!(st["criteria"][0]["attempts"], 0);
    assert!(
        st["criteria"][0]["lastAgentFailure"]
            .as_str()
            .unwrap()
            .starts_with("authentication failure")
    );
}

#[test]
fn max_cost_stops_new_launches_at_the_budget() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: a",
            "- [ ] ISC-A-2: b",
            "- [ ] ISC-A-3: c",
            "- [ ] ISC-A-4: d",
        ]),
        json!({"*": ["cost:0.4"]}),
    );
    // The workers' own cost alone (a verifier's is counted too: see the evidence tests).
    let out = sb.run(&["run", "PRD.md", "--max-cost", "1.00", "--verifier", "none"]);
    // Exit 1: spent $0.8000 of --max-cost $1.00, $0.4000 per passed criterion.
    snapshot!(sb.root(), "the_budget", &shown(&out));
    assert_eq!(
        sb.worker_records().len(),
        2,
        "a third worker could pass $1.00"
    );
    let st = sb.state();
    assert!((st["totalCostUsd"].as_f64().unwrap() - 0.8).abs() < 1e-9);
    assert!(sb.prd_text().contains("\nloopStatus: paused\n"));
}

#[test]
fn a_run_that_only_meets_overload_backs_off_instead_of_hammering() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        json!({"*": ["overloaded"]}),
    );
    let out = sb.run(&["run", "PRD.md", "--retry-backoff", "1s", "--max-wait", "5s"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("model service overloaded"), "{err}");
    assert!(err.contains("--max-wait"), "{err}");
    let runs = starts(&sb);
    // Waits of about 1, 2 (and 4 s would pass the 5 s max-wait): 3 runs at most, gaps growing.
    assert!((2..=3).contains(&runs.len()), "{} runs", runs.len());
    let gaps: Vec<u64> = runs.windows(2).map(|w| w[1].1 - w[0].2.unwrap()).collect();
    assert!(gaps[0] >= 700, "first wait {gaps:?}");
    if gaps.len() > 1 {
        assert!(gaps[1] > gaps[0], "the backoff grows: {gaps:?}");
    }
    let st = sb.state();
    assert_eq!(st["criteria"][0]["attempts"], 0);
    assert!(sb.prd_text().contains("\nloopStatus: paused\n"));
}

#[test]
fn timeouts_and_rate_limits_are_recorded_with_their_class() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: hangs", "- [ ] ISC-B-1: rate limited once"]),
        json!({"ISC-A-1": ["hang"], "ISC-B-1": ["rate-limit"]}),
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-a",
        "2",
        "-n",
        "1",
        "--timeout",
        "1s",
        "--kill-grace",
        "1s",
        "--retry-backoff",
        "1s",
        "--max-wait",
        "1s",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let st = sb.state();
    let kinds: Vec<String> = attempts(&st)
        .iter()
        .filter_map(|a| a["agentFailure"]["kind"].as_str().map(String::from))
        .collect();
    assert!(kinds.contains(&"timeout".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"rate_limit".to_string()), "{kinds:?}");
    sb.assert_no_process_left();
}

#[test]
fn a_timed_out_workers_end_event_carries_the_structured_reason() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: hangs"]),
        json!({"ISC-A-1": ["hang"]}),
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-n",
        "1",
        "--json",
        "--timeout",
        "1s",
        "--kill-grace",
        "1s",
    ]);
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = events
        .iter()
        .find(|e| e["event"] == "worker_end")
        .unwrap_or_else(|| panic!("a worker_end event: {events:?}"));
    assert_eq!(end["verdict"], "agent_failure", "{end}");
    assert_eq!(end["agentFailure"]["kind"], "timeout", "{end}");
    // The words as before, the typed reason beside them.
    assert_eq!(
        end["reason"], "timed out: the worker ran past --timeout",
        "{end}"
    );
    assert_eq!(end["why"]["kind"], "timed_out", "{end}");
    assert_eq!(end["why"]["afterMs"], 1000, "{end}");
    assert_eq!(end["why"]["text"], "the worker ran past --timeout", "{end}");
    // The attempts log keeps the text for PAI and the typed reason beside it.
    let records = attempts(&sb.state());
    let rec = records.first().unwrap();
    assert_eq!(rec["reason"], end["reason"], "{rec}");
    assert_eq!(rec["why"], end["why"], "{rec}");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "end");
    assert_eq!(last["version"], 2);
    sb.assert_no_process_left();
}

#[test]
fn reaching_the_budget_with_the_last_worker_still_completes() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]),
        json!({"*": ["cost:0.4"]}),
    );
    let out = sb.run(&["run", "PRD.md", "--max-cost", "1.00"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(sb.prd_text().contains("\nloopStatus: completed\n"));
}

#[test]
fn an_agent_that_cannot_start_ends_the_run_after_one_worker_with_exit_5() {
    let prd = prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"]);
    let sb = Sandbox::new(&prd, json!({}));
    // There and executable, so the check before the run passes; but its interpreter is not.
    let agent = sb.root().join("agent.sh");
    std::fs::write(
        &agent,
        "#!/nonexistent/interp\necho 'RESULT: ISC-A-1 PASS'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-a",
        "1",
        "--json",
        "--claude-bin",
        agent.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 5, "{err}");
    assert!(
        err.contains("the agent cannot start: failed to start `"),
        "{err}"
    );
    assert!(err.contains("retrying cannot help"), "{err}");
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let starts = events
        .iter()
        .filter(|e| e["event"] == "worker_start")
        .count();
    assert_eq!(starts, 1, "stopped after the first: {events:?}");
    let end = events.iter().find(|e| e["event"] == "worker_end").unwrap();
    assert_eq!(end["verdict"], "agent_failure");
    assert_eq!(end["agentFailure"]["kind"], "cannot_start");
    let last = events.last().unwrap();
    assert_eq!(
        (last["event"].as_str(), last["exitCode"].as_u64()),
        (Some("end"), Some(5))
    );
    let text = sb.prd_text();
    assert!(text.contains("\nloopStatus: paused\n"));
    assert!(!text.contains("- [x]"), "no box touched");
    let st = sb.state();
    for c in st["criteria"].as_array().unwrap() {
        assert_eq!(c["attempts"], 0, "no attempt counted: {c}");
    }
    assert!(
        st["stopReason"]
            .as_str()
            .unwrap()
            .starts_with("the agent cannot start"),
        "{}",
        st["stopReason"]
    );
}
