//! End to end with the real Gemini CLI (`--agent gemini`) against a fake Gemini API on
//! 127.0.0.1.
//!
//! Needs `PRDLOOP_E2E_GEMINI` (the `gemini` binary; `bash .ci/install-agents gemini` installs
//! the pinned version and prints `gemini=<path>`). Under CI (`CI=true`) a missing gemini fails
//! these tests; elsewhere they are skipped with a line saying how to run them.

use crate::common::fake_gemini;
use crate::common::fake_model;

use crate::common::*;
use fake_gemini::{FakeGemini, error_401, error_daily_quota, has_tool_output, prompt_of};
use fake_model::{NO_NETWORK, Turn, agent_bin};
use serde_json::json;

fn gemini() -> Option<String> {
    agent_bin(
        "PRDLOOP_E2E_GEMINI",
        "`bash .ci/install-agents gemini` installs gemini and prints gemini=<path>",
    )
}

/// Runs prdloop with `--agent gemini`, the real gemini pointed at the fake by
/// `GOOGLE_GEMINI_BASE_URL`, with API-key auth chosen in a scratch `GEMINI_CLI_HOME` (the base
/// URL alone would switch it to a gateway mode) and no statistics or update checks.
fn run_with_gemini(
    sb: &Sandbox,
    gemini: &str,
    api: &FakeGemini,
    args: &[&str],
) -> std::process::Output {
    let home = sb.root().join("home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(
        home.join(".gemini/settings.json"),
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
            "telemetry": {"enabled": false}
        })
        .to_string(),
    )
    .unwrap();
    let mut all = args.to_vec();
    all.extend(["--agent", "gemini", "--agent-bin", gemini]);
    let mut c = sb.command(&all);
    c.env("HOME", &home)
        .env("GEMINI_CLI_HOME", &home)
        .env("GEMINI_API_KEY", "fake-key")
        .env("GOOGLE_GEMINI_BASE_URL", api.base_url())
        .envs(NO_NETWORK);
    wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(120))
}

#[test]
#[cfg_attr(
    not(e2e_gemini),
    ignore = "needs PRDLOOP_E2E_GEMINI: `bash .ci/install-agents gemini` prints gemini=<path>"
)]
fn gemini_makes_the_files_and_the_boxes_are_ticked() {
    let Some(gemini) = gemini() else { return };
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-SH-1: sh.txt says one | Verify: Test: `grep -q one sh.txt`",
            "- [ ] ISC-WR-1: wr.txt says two | Verify: CLI: `grep -q two wr.txt`",
        ]),
        json!({}),
    );
    let target = sb.work().join("wr.txt").display().to_string();
    let api = FakeGemini::start(vec![
        (
            "ISC-SH-1",
            vec![
                Turn::Shell("echo one > sh.txt".into()),
                Turn::Text("I wrote sh.txt.\n\nRESULT: ISC-SH-1 PASS".into()),
            ],
        ),
        (
            "ISC-WR-1",
            vec![
                Turn::WriteFile(target, "two\n".into()),
                Turn::Text("I wrote wr.txt.\n\nRESULT: ISC-WR-1 PASS".into()),
            ],
        ),
    ]);
    let out = run_with_gemini(&sb, &gemini, &api, &["run", "PRD.md", "-a", "2", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("agents (gemini)"), "{err}");
    assert_eq!(
        std::fs::read_to_string(sb.work().join("sh.txt")).unwrap(),
        "one\n",
        "made by run_shell_command"
    );
    assert_eq!(
        std::fs::read_to_string(sb.work().join("wr.txt")).unwrap(),
        "two\n",
        "made by write_file"
    );
    let text = sb.prd_text();
    assert!(
        text.contains("\nstatus: COMPLETE\n") && text.contains("\nverification_summary: \"2/2\"\n"),
        "{text}"
    );
    let st = sb.state();
    assert_eq!(st["workerAgent"], "gemini");
    let att = attempts(&st);
    assert_eq!(att.len(), 2);
    for a in &att {
        assert_eq!(a["verdict"], "pass", "{a}");
        assert_eq!(a["agentName"], "gemini");
        assert_eq!(a["notReported"], json!(["cost"]), "{a}");
        assert!(a["usage"]["inputTokens"].as_u64().unwrap() >= 200, "{a}");
        assert!(
            a["usage"]["cacheReadInputTokens"].as_u64().unwrap() >= 40,
            "{a}"
        );
    }
    // The worker log is gemini's own stream-json.
    let log = worker_log(att[0]["log"].as_str().unwrap());
    assert!(log.contains("\"type\":\"init\""), "{log}");
    assert!(log.contains("\"type\":\"tool_result\""), "{log}");
    assert!(log.contains("\"type\":\"result\""), "{log}");

    // What reached the model: the prompt (an argument), with the criterion and its Verify.
    let reqs = api.requests_for("ISC-SH-1");
    assert_eq!(reqs.len(), 2, "a tool call and the answer");
    let prompt = prompt_of(&reqs[0]);
    assert!(prompt.contains("ISC-SH-1: sh.txt says one"), "{prompt}");
    assert!(
        prompt.contains("Verify: Test: `grep -q one sh.txt`"),
        "{prompt}"
    );
    assert!(prompt.contains("use integer cents"), "{prompt}");
    assert!(has_tool_output(&reqs[1]), "the tool's result came back");
}

#[test]
#[cfg_attr(
    not(e2e_gemini),
    ignore = "needs PRDLOOP_E2E_GEMINI: `bash .ci/install-agents gemini` prints gemini=<path>"
)]
fn a_false_claim_and_a_fail_answer_leave_the_boxes_open() {
    let Some(gemini) = gemini() else { return };
    let api = FakeGemini::start(vec![
        (
            "ISC-A-1",
            vec![Turn::Text("All done.\nRESULT: ISC-A-1 PASS".into())],
        ),
        (
            "ISC-B-1",
            vec![Turn::Text(
                "RESULT: ISC-B-1 FAIL: the tests are still red".into(),
            )],
        ),
    ]);
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: made.txt exists | Verify: Test: `test -f made.txt`",
            "- [ ] ISC-B-1: b.txt says yes | Verify: Test: `grep -q yes b.txt`",
        ]),
        json!({}),
    );
    let out = run_with_gemini(&sb, &gemini, &api, &["run", "PRD.md", "-a", "2", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains(
            "the agent said PASS, but its Verify command `test -f made.txt` exited with status 1"
        ),
        "{err}"
    );
    let text = sb.prd_text();
    assert!(text.contains("- [ ] ISC-A-1:"), "{text}");
    assert!(text.contains("- [ ] ISC-B-1:"), "{text}");
    let att = attempts(&sb.state());
    let b = att.iter().find(|a| a["criterion"] == "ISC-B-1").unwrap();
    assert_eq!(b["verdict"], "fail", "{b}");
    assert_eq!(b["reason"], "the tests are still red", "{b}");
}

#[test]
#[cfg_attr(
    not(e2e_gemini),
    ignore = "needs PRDLOOP_E2E_GEMINI: `bash .ci/install-agents gemini` prints gemini=<path>"
)]
fn a_401_is_an_authentication_failure_that_stops_the_run() {
    let Some(gemini) = gemini() else { return };
    let api = FakeGemini::start(vec![
        ("ISC-A-1", vec![error_401()]),
        ("ISC-B-1", vec![error_401()]),
    ]);
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({}),
    );
    let out = run_with_gemini(&sb, &gemini, &api, &["run", "PRD.md", "-a", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 5, "{err}");
    assert!(err.contains("authentication failure"), "{err}");
    assert!(err.contains("GEMINI_API_KEY"), "{err}");
    assert!(
        api.requests_for("ISC-B-1").is_empty(),
        "no second worker after an auth failure"
    );
    assert!(!err.contains("ISC-A-1 FAIL"), "{err}");
    assert!(sb.prd_text().contains("\nloopStatus: paused\n"));
}

/// gemini fails at once on a daily quota (exit 173, the 429 mod 256); prdloop calls it a usage
/// limit. `--max-wait 0` ends the run at the limit instead of waiting for a reset.
#[test]
#[cfg_attr(
    not(e2e_gemini),
    ignore = "needs PRDLOOP_E2E_GEMINI: `bash .ci/install-agents gemini` prints gemini=<path>"
)]
fn a_used_up_daily_quota_is_a_usage_limit() {
    let Some(gemini) = gemini() else { return };
    let api = FakeGemini::start(vec![("ISC-A-1", vec![error_daily_quota()])]);
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let out = run_with_gemini(&sb, &gemini, &api, &["run", "PRD.md", "--max-wait", "0"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("usage limit reached: [API Error: You have exhausted your daily quota"),
        "{err}"
    );
    let st = sb.state();
    let att = attempts(&st);
    assert_eq!(att.len(), 1, "{att:?}");
    assert_eq!(att[0]["verdict"], "agent_failure", "{att:?}");
    assert_eq!(att[0]["agentFailure"]["kind"], "usage_limit", "{att:?}");
    assert_eq!(st["criteria"][0]["attempts"], 0, "the limit did not count");
    assert!(sb.prd_text().contains("- [ ] ISC-A-1:"));
}
