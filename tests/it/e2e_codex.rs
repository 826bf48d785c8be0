//! End to end with the real Codex CLI (`--agent codex`) against a fake OpenAI Responses API on
//! 127.0.0.1.
//!
//! Needs `PRDLOOP_E2E_CODEX` (the `codex` binary; `bash .ci/install-agents codex` installs the
//! pinned version and prints `codex=<path>`). Under CI (`CI=true`) a missing codex fails these
//! tests; elsewhere they are skipped with a line saying how to run them.

use crate::common::fake_model;
use crate::common::fake_openai;

use crate::common::*;
use fake_model::{NO_NETWORK, Turn, agent_bin};
use fake_openai::{FakeOpenAi, error_401, error_429, has_tool_output, prompt_of};
use serde_json::json;

fn codex() -> Option<String> {
    agent_bin(
        "PRDLOOP_E2E_CODEX",
        "`bash .ci/install-agents codex` installs codex and prints codex=<path>",
    )
}

/// Runs prdloop with `--agent codex`, the real codex pointed at the fake by a model provider
/// in a scratch `CODEX_HOME` (codex ignores `OPENAI_BASE_URL`). Without the `[analytics]` and
/// `[features]` settings codex 0.171 also contacts chatgpt.com, ab.chatgpt.com, api.github.com
/// and (with git) github.com at start-up, for analytics and its curated plugins; the proxy
/// variables of `NO_NETWORK` would stop those too.
fn run_with_codex(
    sb: &Sandbox,
    codex: &str,
    api: &FakeOpenAi,
    args: &[&str],
) -> std::process::Output {
    run_with_codex_at(sb, codex, &api.base_url(), args)
}

fn run_with_codex_at(
    sb: &Sandbox,
    codex: &str,
    base_url: &str,
    args: &[&str],
) -> std::process::Output {
    let home = sb.root().join("home");
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model_provider = \"fake\"\n\
             check_for_update_on_startup = false\n\
             \n\
             [analytics]\n\
             enabled = false\n\
             \n\
             [features]\n\
             plugins = false\n\
             remote_plugin = false\n\
             apps = false\n\
             \n\
             [model_providers.fake]\n\
             name = \"fake\"\n\
             base_url = \"{}\"\n\
             env_key = \"OPENAI_API_KEY\"\n\
             wire_api = \"responses\"\n\
             supports_websockets = false\n",
            base_url
        ),
    )
    .unwrap();
    let mut all = args.to_vec();
    all.extend(["--agent", "codex", "--agent-bin", codex]);
    let mut c = sb.command(&all);
    c.env("HOME", &home)
        .env("CODEX_HOME", &codex_home)
        .env("OPENAI_API_KEY", "sk-fake")
        .envs(NO_NETWORK);
    wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(120))
}

fn work(id: &str, file: &str, content: &str) -> (String, Vec<Turn>) {
    (
        id.to_string(),
        vec![
            Turn::Shell(format!("echo {content} > {file}")),
            Turn::Text(format!("I wrote {file}.\n\nRESULT: {id} PASS")),
        ],
    )
}

/// With `--sandbox on` prdloop's sandbox binds codex and codex's own is off (it cannot start
/// inside prdloop's): its shell tool still makes the file in the workers' folder, and a write
/// beside it is refused.
#[cfg(target_os = "linux")]
#[test]
#[cfg_attr(
    not(e2e_codex),
    ignore = "needs PRDLOOP_E2E_CODEX: `bash .ci/install-agents codex` prints codex=<path>"
)]
fn codex_works_inside_prdloop_s_sandbox() {
    let Some(codex) = codex() else { return };
    let (id, mut turns) = work("ISC-API-1", "api1.txt", "one");
    let beside = std::env::temp_dir().join(format!("prdloop-e2e-beside-{}", std::process::id()));
    turns.insert(0, Turn::Shell(format!("echo evil > {}", beside.display())));
    let api = FakeOpenAi::start(vec![(id.as_str(), turns)]);
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-API-1: api1.txt says one | Verify: Test: `grep -q one api1.txt`"]),
        json!({}),
    );
    // codex reads its fake server's address from its config file, not from OPENAI_BASE_URL:
    // under prdloop's network policy that host is allowed by name.
    let base = api.base_url();
    let host = base
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let allow = format!("allow:{host}");
    let out = run_with_codex(
        &sb,
        &codex,
        &api,
        &[
            "run",
            "PRD.md",
            "-n",
            "1",
            "--sandbox",
            "on",
            "--network",
            &allow,
        ],
    );
    let err = stderr(&out);
    let made_beside = beside.exists();
    let _ = std::fs::remove_file(&beside);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("sandbox: on"), "{err}");
    assert!(sb.prd_text().contains("- [x] ISC-API-1:"), "{err}");
    assert!(!made_beside, "codex wrote outside its folder: {err}");
    // It tried, and the attempt says the sandbox refused it.
    assert!(err.contains("the sandbox refused"), "{err}");
}

#[test]
#[cfg_attr(
    not(e2e_codex),
    ignore = "needs PRDLOOP_E2E_CODEX: `bash .ci/install-agents codex` prints codex=<path>"
)]
fn codex_makes_the_files_and_the_boxes_are_ticked() {
    let Some(codex) = codex() else { return };
    let script = [
        work("ISC-API-1", "api1.txt", "one"),
        work("ISC-DB-1", "db1.txt", "db"),
    ];
    let api = FakeOpenAi::start(
        script
            .iter()
            .map(|(id, t)| (id.as_str(), t.clone()))
            .collect(),
    );
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-API-1: api1.txt says one | Verify: Test: `grep -q one api1.txt`",
            "- [ ] ISC-DB-1: db1.txt exists | Verify: CLI: `test -f db1.txt`",
        ]),
        json!({}),
    );
    let out = run_with_codex(&sb, &codex, &api, &["run", "PRD.md", "-a", "2", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("agents (codex)"), "{err}");
    for f in ["api1.txt", "db1.txt"] {
        assert!(
            sb.work().join(f).exists(),
            "{f} was not made by codex's shell tool"
        );
    }
    let text = sb.prd_text();
    assert!(text.contains("- [x] ISC-API-1:"), "{text}");
    assert!(text.contains("- [x] ISC-DB-1:"), "{text}");
    assert!(
        text.contains("\nstatus: COMPLETE\n") && text.contains("\nverification_summary: \"2/2\"\n"),
        "{text}"
    );
    let st = sb.state();
    assert_eq!(st["workerAgent"], "codex");
    let att = attempts(&st);
    assert_eq!(att.len(), 2);
    for a in &att {
        assert_eq!(a["verdict"], "pass", "{a}");
        assert_eq!(a["agentName"], "codex");
        assert_eq!(a["notReported"], json!(["cost"]), "{a}");
        // Each model request of the fake reports 120 input tokens, 20 of them cached;
        // codex sums them over the turn.
        let n = api.requests_for(a["criterion"].as_str().unwrap()).len() as u64;
        assert_eq!(n, 2, "a tool call and the answer");
        assert_eq!(a["usage"]["inputTokens"], 100 * n, "{a}");
        assert_eq!(a["usage"]["cacheReadInputTokens"], 20 * n, "{a}");
        assert_eq!(a["usage"]["outputTokens"], 12 * n, "{a}");
    }
    // The worker log is codex's own JSONL.
    let log = worker_log(att[0]["log"].as_str().unwrap());
    assert!(log.contains("\"type\":\"thread.started\""), "{log}");
    assert!(log.contains("\"type\":\"command_execution\""), "{log}");
    assert!(log.contains("\"type\":\"turn.completed\""), "{log}");

    // What reached the model: the prompt (on codex's stdin), with the criterion and its Verify.
    let reqs = api.requests_for("ISC-API-1");
    let prompt = prompt_of(&reqs[0]);
    assert!(prompt.contains("ISC-API-1: api1.txt says one"), "{prompt}");
    assert!(
        prompt.contains("Verify: Test: `grep -q one api1.txt`"),
        "{prompt}"
    );
    assert!(prompt.contains("use integer cents"), "{prompt}");
    assert!(prompt.contains("RESULT: ISC-API-1 PASS"), "{prompt}");
    assert!(
        !prompt.contains("<stdin>"),
        "the prompt came on stdin, not as an argument plus stdin: {prompt}"
    );
    assert!(
        has_tool_output(&reqs[1]),
        "the second request carries the tool's output"
    );
}

#[test]
#[cfg_attr(
    not(e2e_codex),
    ignore = "needs PRDLOOP_E2E_CODEX: `bash .ci/install-agents codex` prints codex=<path>"
)]
fn a_false_claim_and_a_fail_answer_leave_the_boxes_open() {
    let Some(codex) = codex() else { return };
    let api = FakeOpenAi::start(vec![
        (
            "ISC-A-1",
            vec![Turn::Text("All done.\nRESULT: ISC-A-1 PASS".into())],
        ),
        (
            "ISC-B-1",
            vec![
                Turn::Shell("echo nope > b.txt".into()),
                Turn::Text("RESULT: ISC-B-1 FAIL: the tests are still red".into()),
            ],
        ),
    ]);
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: made.txt exists | Verify: Test: `test -f made.txt`",
            "- [ ] ISC-B-1: b.txt says yes | Verify: Test: `grep -q yes b.txt`",
        ]),
        json!({}),
    );
    let out = run_with_codex(&sb, &codex, &api, &["run", "PRD.md", "-a", "2", "-n", "1"]);
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
    assert!(
        att.iter().all(|a| a["agentFailure"].is_null()),
        "the agent worked: {att:?}"
    );
}

#[test]
#[cfg_attr(
    not(e2e_codex),
    ignore = "needs PRDLOOP_E2E_CODEX: `bash .ci/install-agents codex` prints codex=<path>"
)]
fn a_429_pauses_and_the_attempt_is_retried_without_counting() {
    let Some(codex) = codex() else { return };
    let api = FakeOpenAi::start(vec![(
        "ISC-A-1",
        vec![
            error_429(),
            Turn::Shell("echo a > a.txt".into()),
            Turn::Text("RESULT: ISC-A-1 PASS".into()),
        ],
    )]);
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a.txt exists | Verify: Test: `test -f a.txt`"]),
        json!({}),
    );
    let out = run_with_codex(
        &sb,
        &codex,
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
    assert_eq!(att[0]["agentFailure"]["kind"], "rate_limit", "{att:?}");
    assert_eq!(att.last().unwrap()["verdict"], "pass");
    assert_eq!(
        st["criteria"][0]["attempts"], 1,
        "the rate-limited run did not count"
    );
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
}

#[test]
#[cfg_attr(
    not(e2e_codex),
    ignore = "needs PRDLOOP_E2E_CODEX: `bash .ci/install-agents codex` prints codex=<path>"
)]
fn a_401_is_an_authentication_failure_that_stops_the_run() {
    let Some(codex) = codex() else { return };
    let api = FakeOpenAi::start(vec![
        ("ISC-A-1", vec![error_401()]),
        ("ISC-B-1", vec![error_401()]),
    ]);
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({}),
    );
    let out = run_with_codex(&sb, &codex, &api, &["run", "PRD.md", "-a", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 5, "{err}");
    assert!(err.contains("authentication failure"), "{err}");
    assert!(err.contains("codex login"), "{err}");
    assert!(
        api.requests_for("ISC-B-1").is_empty(),
        "no second worker after an auth failure"
    );
    assert!(!err.contains("ISC-A-1 FAIL"), "{err}");
    assert!(sb.prd_text().contains("\nloopStatus: paused\n"));
}

/// codex never gives up on a server it cannot reach; the worker's --timeout ends it and the
/// reason says what codex was waiting for.
#[test]
#[cfg_attr(
    not(e2e_codex),
    ignore = "needs PRDLOOP_E2E_CODEX: `bash .ci/install-agents codex` prints codex=<path>"
)]
fn an_unreachable_server_ends_at_the_timeout_with_codexs_words() {
    let Some(codex) = codex() else { return };
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let out = run_with_codex_at(
        &sb,
        &codex,
        &format!("http://127.0.0.1:{port}/v1"),
        &["run", "PRD.md", "-n", "1", "--timeout", "15s"],
    );
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let att = attempts(&sb.state());
    assert_eq!(att[0]["agentFailure"]["kind"], "timeout", "{att:?}");
    assert!(
        att[0]["reason"]
            .as_str()
            .unwrap()
            .contains("its last error: Reconnecting... waiting for network"),
        "{att:?}"
    );
}
