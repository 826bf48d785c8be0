//! End to end with the real Claude Code CLI against a fake Messages API on 127.0.0.1.
//!
//! Each test runs once per claude binary that is set: `PRDLOOP_E2E_CLAUDE` (the pinned
//! version; `bash .ci/install-claude` installs it and prints its path) and
//! `PRDLOOP_E2E_CLAUDE_LATEST` (the newest release; `bash .ci/install-claude latest`). Under CI
//! (`CI=true`) a missing one fails these tests; elsewhere it is skipped with a line saying how
//! to run it.

use crate::common::fake_model;

use crate::common::fake_api::{FakeApi, Turn, prompt_of};
use crate::common::*;
use fake_model::agent_bin;
use serde_json::json;

/// The claude binaries to run the tests with: the pinned one and the newest release.
fn claudes() -> Vec<String> {
    [
        (
            "PRDLOOP_E2E_CLAUDE",
            "`bash .ci/install-claude` installs the pinned claude and prints its path",
        ),
        (
            "PRDLOOP_E2E_CLAUDE_LATEST",
            "`bash .ci/install-claude latest` installs the newest claude and prints its path",
        ),
    ]
    .into_iter()
    .filter_map(|(var, how)| agent_bin(var, how))
    .collect()
}

/// Runs prdloop with the real claude pointed at the fake API.
fn run_with_claude(
    sb: &Sandbox,
    claude: &str,
    api: &FakeApi,
    args: &[&str],
) -> std::process::Output {
    let mut c = sb.command(args);
    c.env("PRDLOOP_CLAUDE_BIN", claude);
    api.point_claude(&mut c, &sb.root().join("home"));
    wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(240))
}

fn work(id: &str, file: &str, content: &str) -> (String, Vec<Turn>) {
    (
        id.to_string(),
        vec![
            Turn::Bash(format!("echo {content} > {file}")),
            Turn::Text(format!("I wrote {file}.\n\nRESULT: {id} PASS")),
        ],
    )
}

#[test]
#[cfg_attr(
    not(e2e_claude),
    ignore = "needs PRDLOOP_E2E_CLAUDE: `bash .ci/install-claude` installs the pinned claude and prints its path"
)]
fn three_criteria_in_two_domains_complete_with_real_tool_calls() {
    for claude in claudes() {
        // Shown when an assertion below fails.
        eprintln!("with {claude}");
        let script = [
            work("ISC-API-1", "api1.txt", "one"),
            work("ISC-API-2", "api2.txt", "two"),
            work("ISC-DB-1", "db1.txt", "db"),
        ];
        let api = FakeApi::start(
            script
                .iter()
                .map(|(id, t)| (id.as_str(), t.clone()))
                .collect(),
        );
        let sb = Sandbox::new(
            &prd_with(&[
                "- [ ] ISC-API-1: api1.txt exists | Verify: Test: `test -f api1.txt`",
                "- [ ] ISC-API-2: api2.txt says two | Verify: Test: `grep -q two api2.txt`",
                "- [ ] ISC-DB-1: db1.txt exists | Verify: CLI: `test -f db1.txt`",
            ]),
            json!({}),
        );
        let out = run_with_claude(&sb, &claude, &api, &["run", "PRD.md", "-a", "2", "-n", "2"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 0, "{err}");
        for f in ["api1.txt", "api2.txt", "db1.txt"] {
            assert!(
                sb.work().join(f).exists(),
                "{f} was not made by the Bash tool"
            );
        }
        let text = sb.prd_text();
        assert!(
            text.contains("\nstatus: COMPLETE\n")
                && text.contains("\nverification_summary: \"3/3\"\n"),
            "{text}"
        );
        // Sandboxed, claude ran in a private home of its own: nothing in the user's.
        assert!(err.contains("sandbox: on"), "{err}");
        let home = sb.root().join("home");
        assert!(!home.join(".claude").exists() && !home.join(".claude.json").exists());
        let st = sb.state();
        let att = attempts(&st);
        assert_eq!(att.len(), 3);
        let mut cost = 0.0;
        let mut input = 0;
        for a in &att {
            assert_eq!(a["verdict"], "pass");
            assert_eq!(a["turns"], 2, "a tool turn and the answer: {a}");
            assert!(a["usage"]["inputTokens"].as_u64().unwrap() >= 20, "{a}");
            assert!(
                a.get("permissionDenials").is_none(),
                "tools were refused: {a}"
            );
            cost += a["costUsd"].as_f64().unwrap();
            input += a["usage"]["inputTokens"].as_u64().unwrap();
        }
        assert!((st["totalCostUsd"].as_f64().unwrap() - cost).abs() < 1e-9);
        assert_eq!(st["usage"]["inputTokens"].as_u64().unwrap(), input);
        for c in st["criteria"].as_array().unwrap() {
            assert_eq!(c["verifiedBy"], "checked");
            assert_eq!(c["turns"], 2);
        }
        // The worker log is claude's own stream-json.
        let log = worker_log(att[0]["log"].as_str().unwrap());
        assert!(log.contains("\"claude_code_version\""), "{log}");
        assert!(log.contains("\"type\":\"result\""), "{log}");

        // What reached the model: the criterion, its Verify method, the CONTEXT section.
        let reqs = api.requests_for("ISC-API-2");
        assert!(!reqs.is_empty());
        let prompt = prompt_of(&reqs[0]);
        assert!(prompt.contains("ISC-API-2: api2.txt says two"), "{prompt}");
        assert!(
            prompt.contains("Verify: Test: `grep -q two api2.txt`"),
            "{prompt}"
        );
        assert!(prompt.contains("use integer cents"), "{prompt}");
        assert!(prompt.contains("RESULT: ISC-API-2 PASS"), "{prompt}");
        // The second request carries the tool's result: the Bash call really ran.
        let second = reqs
            .iter()
            .find(|r| r.to_string().contains("tool_result"))
            .expect("a tool_result request");
        assert!(
            !second.to_string().contains("\"is_error\":true"),
            "the tool call failed: {second}"
        );
    }
}

#[test]
#[cfg_attr(
    not(e2e_claude),
    ignore = "needs PRDLOOP_E2E_CLAUDE: `bash .ci/install-claude` installs the pinned claude and prints its path"
)]
fn a_429_pauses_and_the_attempt_is_retried_without_counting() {
    for claude in claudes() {
        // Shown when an assertion below fails.
        eprintln!("with {claude}");
        let api = FakeApi::start(vec![(
            "ISC-A-1",
            vec![
                Turn::Error(
                    429,
                    "rate_limit_error",
                    "Number of requests has exceeded your rate limit",
                ),
                Turn::Bash("echo a > a.txt".into()),
                Turn::Text("RESULT: ISC-A-1 PASS".into()),
            ],
        )]);
        let sb = Sandbox::new(
            &prd_with(&["- [ ] ISC-A-1: a.txt exists | Verify: Test: `test -f a.txt`"]),
            json!({}),
        );
        let out = run_with_claude(
            &sb,
            &claude,
            &api,
            &["run", "PRD.md", "--retry-backoff", "1s"],
        );
        let err = stderr(&out);
        assert_eq!(code(&out), 0, "{err}");
        assert!(
            err.contains("rate limited: no worker starts until"),
            "{err}"
        );
        let st = sb.state();
        let att = attempts(&st);
        assert_eq!(att[0]["verdict"], "agent_failure", "{att:?}");
        assert_eq!(att[0]["agentFailure"]["kind"], "rate_limit");
        assert_eq!(att.last().unwrap()["verdict"], "pass");
        assert_eq!(
            st["criteria"][0]["attempts"], 1,
            "the rate-limited run did not count"
        );
        assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
    }
}

#[test]
#[cfg_attr(
    not(e2e_claude),
    ignore = "needs PRDLOOP_E2E_CLAUDE: `bash .ci/install-claude` installs the pinned claude and prints its path"
)]
fn a_401_is_an_authentication_failure_that_stops_the_run() {
    for claude in claudes() {
        // Shown when an assertion below fails.
        eprintln!("with {claude}");
        let api = FakeApi::start(vec![
            (
                "ISC-A-1",
                vec![Turn::Error(
                    401,
                    "authentication_error",
                    "invalid x-api-key",
                )],
            ),
            (
                "ISC-B-1",
                vec![Turn::Error(
                    401,
                    "authentication_error",
                    "invalid x-api-key",
                )],
            ),
        ]);
        let sb = Sandbox::new(
            &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
            json!({}),
        );
        let out = run_with_claude(&sb, &claude, &api, &["run", "PRD.md", "-a", "1"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 5, "{err}");
        assert!(err.contains("authentication failure"), "{err}");
        assert!(
            api.requests_for("ISC-B-1").is_empty(),
            "no second worker after an auth failure"
        );
        assert!(
            !err.contains("ISC-A-1 FAIL"),
            "not reported as a criterion failure: {err}"
        );
        assert!(sb.prd_text().contains("\nloopStatus: paused\n"));
    }
}

#[test]
#[cfg_attr(
    not(e2e_claude),
    ignore = "needs PRDLOOP_E2E_CLAUDE: `bash .ci/install-claude` installs the pinned claude and prints its path"
)]
fn a_claim_without_the_work_is_caught_by_the_verify_command() {
    for claude in claudes() {
        // Shown when an assertion below fails.
        eprintln!("with {claude}");
        let api = FakeApi::start(vec![(
            "ISC-A-1",
            vec![Turn::Text("All done.\nRESULT: ISC-A-1 PASS".into())],
        )]);
        let sb = Sandbox::new(
            &prd_with(&["- [ ] ISC-A-1: made.txt exists | Verify: Test: `test -f made.txt`"]),
            json!({}),
        );
        let out = run_with_claude(&sb, &claude, &api, &["run", "PRD.md", "-n", "1"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{err}");
        assert!(
        err.contains(
            "the agent said PASS, but its Verify command `test -f made.txt` exited with status 1"
        ),
        "{err}"
    );
        assert!(sb.prd_text().contains("- [ ] ISC-A-1:"));
    }
}

#[test]
#[cfg_attr(
    not(e2e_claude),
    ignore = "needs PRDLOOP_E2E_CLAUDE: `bash .ci/install-claude` installs the pinned claude and prints its path"
)]
fn a_claim_without_the_work_is_caught_by_the_real_verifier() {
    for claude in claudes() {
        // Shown when an assertion below fails.
        eprintln!("with {claude}");
        // One script for the criterion, served in order: the worker's claim, then the
        // verifier (the real claude again) looking for the file, and its verdict.
        let api = FakeApi::start(vec![(
            "ISC-V-1",
            vec![
                Turn::Text("All done.\nRESULT: ISC-V-1 PASS".into()),
                Turn::Bash("test -f v.txt && echo present || echo missing".into()),
                Turn::Text(
                    "`test -f v.txt` printed missing.\nVERDICT: ISC-V-1 FAIL: v.txt is missing"
                        .into(),
                ),
            ],
        )]);
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-V-1: v.txt exists"]), json!({}));
        let out = run_with_claude(&sb, &claude, &api, &["run", "PRD.md", "-n", "1"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{err}");
        assert!(err.contains("found it not done: v.txt is missing"), "{err}");
        assert!(sb.prd_text().contains("- [ ] ISC-V-1:"));
        let reqs = api.requests_for("ISC-V-1");
        assert!(
            reqs.iter()
                .any(|r| r.to_string().contains("independent verifier")),
            "the verifier's own request reached the model"
        );
        let st = sb.state();
        let a = &attempts(&st)[0];
        assert_eq!(a["review"]["verdict"], "fail", "{a}");
    }
}

#[test]
#[cfg_attr(
    not(e2e_claude),
    ignore = "needs PRDLOOP_E2E_CLAUDE: `bash .ci/install-claude` installs the pinned claude and prints its path"
)]
fn the_default_flags_let_the_write_tool_work() {
    for claude in claudes() {
        // Shown when an assertion below fails.
        eprintln!("with {claude}");
        let sb = Sandbox::new(
            &prd_with(&["- [ ] ISC-W-1: w.txt says hi | Verify: Test: `grep -q hi w.txt`"]),
            json!({}),
        );
        let target = sb.work().join("w.txt").display().to_string();
        let api = FakeApi::start(vec![(
            "ISC-W-1",
            vec![
                Turn::Write(target, "hi\n".into()),
                Turn::Text("RESULT: ISC-W-1 PASS".into()),
            ],
        )]);
        let out = run_with_claude(&sb, &claude, &api, &["run", "PRD.md", "-n", "1"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 0, "{err}");
        assert!(!err.contains("refused tools"), "{err}");
        assert_eq!(
            std::fs::read_to_string(sb.work().join("w.txt")).unwrap(),
            "hi\n"
        );
    }
}
