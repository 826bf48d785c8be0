//! Real outputs of codex 0.171.0, gemini 0.61.0, opencode 1.18.33 and amp (see each
//! `tests/fixtures/<agent>/README.md`) fed through each agent's parser, the strict verdict and
//! the agent's failure classifier, as the loop does it.

use prdloop::backend::verdict::{Exit, Verdict, verdict};
use prdloop::backend::{
    Agent, AgentFailure, AgentOptions, ClaudeOptions, Kind, Outcome, StreamParser, classify_for,
};

const NOW: i64 = 1_796_032_800; // 2026-11-30 10:00 UTC

fn opts(agent: Agent) -> AgentOptions {
    AgentOptions {
        agent,
        bin: agent.default_bin().unwrap_or("agent.sh").into(),
        model: None,
        extra_args: Vec::new(),
        claude: ClaudeOptions {
            bin: "claude".into(),
            model: None,
            permission_mode: None,
            max_turns: None,
            allowed_tools: String::new(),
            extra_args: Vec::new(),
        },
        in_prdloop_sandbox: false,
    }
}

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Parses a recorded stdout with the parser the agent's format chooses.
fn parse(agent: Agent, path: &str) -> Outcome {
    let mut p = StreamParser::new(opts(agent).format());
    for line in fixture(path).split(|&b| b == b'\n') {
        p.feed_line(line);
    }
    p.finish()
}

fn stderr(path: &str) -> String {
    let p = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The recorded run read as the loop reads it: its failure class and its verdict.
fn run(agent: Agent, out: &str, err: &str, code: i32) -> (Outcome, Option<AgentFailure>, Verdict) {
    let o = parse(agent, out);
    let exit = Exit::Code { code };
    assert_eq!(o.agent, agent, "the outcome names its agent");
    let f = classify_for(o.agent, &exit, &o, &stderr(err), NOW);
    let (v, _) = verdict("ISC-1", &exit, &o);
    (o, f, v)
}

fn kind(agent: Agent, out: &str, err: &str, code: i32) -> Option<Kind> {
    run(agent, out, err, code).1.map(|f| f.kind)
}

#[test]
fn codex_pass_and_fail_with_tokens_and_no_cost() {
    for name in [
        "json-pass",
        "json-tool",
        "json-pass-unknown-model", // an `item.completed{type:"error"}` warning is no failure
        "json-tool-unknown-model",
        "json-tool-command-fails",
    ] {
        let (o, f, v) = run(
            Agent::Codex,
            &format!("codex/{name}.jsonl"),
            &format!("codex/{name}.stderr.txt"),
            0,
        );
        assert_eq!(f, None, "{name}");
        assert_eq!(v, Verdict::Pass, "{name}");
        assert_eq!(o.cost_usd, None, "codex reports no cost: {name}");
        assert!(o.tokens_reported);
    }
    let (o, _, _) = run(Agent::Codex, "codex/json-tool.jsonl", "", 0);
    // input_tokens 240 includes the 40 cached ones.
    assert_eq!(
        (
            o.usage.input_tokens,
            o.usage.cache_read_input_tokens,
            o.usage.output_tokens
        ),
        (200, 40, 24)
    );
    assert_eq!(
        o.session_id.as_deref(),
        Some("01a22ca1-d67d-72d2-9b17-42842cc940af")
    );
    assert_eq!(o.final_text.as_deref(), Some("Done.\nRESULT: ISC-1 PASS"));
    let (_, f, v) = run(Agent::Codex, "codex/json-fail.jsonl", "", 0);
    assert_eq!(f, None);
    assert_eq!(
        v,
        Verdict::Fail(prdloop::backend::verdict::WorkerFail::WorkerSaidFail {
            text: Some("tests still red".into())
        })
    );
}

#[test]
fn codex_failures() {
    let (_, f, v) = run(Agent::Codex, "codex/json-auth.jsonl", "", 1);
    let f = f.unwrap();
    assert_eq!(f.kind, Kind::Auth);
    assert!(f.kind.is_fatal());
    assert!(
        f.text.starts_with("unexpected status 401 Unauthorized"),
        "{}",
        f.text
    );
    assert!(!v.is_pass());

    // "You’ve hit your usage limit ... try again at 2:25 PM." (a typographic apostrophe; the
    // time in the local zone).
    let f = run(Agent::Codex, "codex/json-quota.jsonl", "", 1)
        .1
        .unwrap();
    assert_eq!(f.kind, Kind::UsageLimit);
    let at = f.resets_at.expect("the reset time is in the text");
    assert!(at > NOW && at <= NOW + 24 * 3600);
    let local = jiff::Timestamp::from_second(at)
        .unwrap()
        .to_zoned_datetime(jiff::tz::TimeZone::system());
    assert_eq!((local.hour(), local.minute()), (14, 25));

    assert_eq!(
        kind(Agent::Codex, "codex/json-ratelimit.jsonl", "", 1),
        Some(Kind::RateLimit)
    );
    assert_eq!(
        kind(Agent::Codex, "codex/json-error500.jsonl", "", 1),
        Some(Kind::Overloaded)
    );
    // Outside a git repository without --skip-git-repo-check: nothing on stdout, exit 1.
    let f = run(
        Agent::Codex,
        "codex/json-no-skip-git-repo-check.jsonl",
        "codex/json-no-skip-git-repo-check.stderr.txt",
        1,
    )
    .1
    .unwrap();
    assert_eq!(f.kind, Kind::Crash);
    assert!(f.text.contains("--skip-git-repo-check"), "{}", f.text);
    // The unreachable server never ends by itself: the timeout decides.
    let f = classify_for(
        Agent::Codex,
        &Exit::TimedOut { after_secs: 40 },
        &parse(Agent::Codex, "codex/json-down.jsonl"),
        "",
        NOW,
    );
    assert_eq!(f.map(|f| f.kind), Some(Kind::Timeout));
}

#[test]
fn gemini_pass_and_fail_with_tokens_and_no_cost() {
    for name in [
        "stream-json-pass",
        "stream-json-tool",
        "stream-json-pass-piped-stdin",
    ] {
        let (o, f, v) = run(
            Agent::Gemini,
            &format!("gemini/{name}.jsonl"),
            &format!("gemini/{name}.stderr.txt"),
            0,
        );
        assert_eq!(f, None, "{name}");
        assert_eq!(v, Verdict::Pass, "{name}");
        assert_eq!(o.final_text.as_deref(), Some("Done.\nRESULT: ISC-1 PASS"));
        assert_eq!(o.cost_usd, None);
        assert!(o.tokens_reported);
    }
    let (o, _, _) = run(Agent::Gemini, "gemini/stream-json-tool.jsonl", "", 0);
    assert_eq!(
        (
            o.usage.input_tokens,
            o.usage.cache_read_input_tokens,
            o.usage.output_tokens
        ),
        (300, 60, 36)
    );
    assert_eq!(
        o.session_id.as_deref(),
        Some("51403f39-5b5a-4995-afb9-a2394ea697d5")
    );
    // The deltas join mid-word: "RESULT" + ": ISC-1 FAIL: tests still red".
    let (_, f, v) = run(Agent::Gemini, "gemini/stream-json-fail.jsonl", "", 0);
    assert_eq!(f, None);
    assert_eq!(
        v,
        Verdict::Fail(prdloop::backend::verdict::WorkerFail::WorkerSaidFail {
            text: Some("tests still red".into())
        })
    );
}

#[test]
fn gemini_failures() {
    // The exit code is the HTTP status mod 256: 401 → 145, 429 → 173.
    let (_, f, v) = run(
        Agent::Gemini,
        "gemini/stream-json-auth.jsonl",
        "gemini/stream-json-auth.stderr.txt",
        145,
    );
    assert_eq!(f.unwrap().kind, Kind::Auth);
    assert!(!v.is_pass());
    let f = run(
        Agent::Gemini,
        "gemini/stream-json-quota.jsonl",
        "gemini/stream-json-quota.stderr.txt",
        173,
    )
    .1
    .unwrap();
    assert_eq!(f.kind, Kind::UsageLimit);
    assert!(f.text.contains("exhausted your daily quota"), "{}", f.text);
    // The daily quota text names no time.
    assert_eq!(f.resets_at, None);
    // A per-minute 429 and a 500 are retried for minutes (the recordings were cut by a
    // timeout); had gemini given up, its exit code would have said which.
    let f = classify_for(
        Agent::Gemini,
        &Exit::Code { code: 173 },
        &parse(Agent::Gemini, "gemini/stream-json-ratelimit.jsonl"),
        &stderr("gemini/stream-json-ratelimit-fixed-model.stderr.txt"),
        NOW,
    )
    .unwrap();
    assert_eq!(f.kind, Kind::RateLimit);
    assert_eq!(f.resets_at, Some(NOW + 1), "Suggested retry after 1s");
    assert_eq!(
        kind(
            Agent::Gemini,
            "gemini/stream-json-error500.jsonl",
            "gemini/stream-json-error500.stderr.txt",
            244
        ),
        Some(Kind::Overloaded)
    );
    // Without --skip-trust in a fresh folder: exit 55, nothing on stdout.
    let f = run(
        Agent::Gemini,
        "gemini/stream-json-untrusted-no-skip-trust.jsonl",
        "gemini/stream-json-untrusted-no-skip-trust.stderr.txt",
        55,
    )
    .1
    .unwrap();
    assert_eq!(f.kind, Kind::Crash);
    assert!(f.text.contains("--skip-trust"), "{}", f.text);
}

#[test]
fn opencode_pass_and_fail_with_tokens_and_cost() {
    for name in [
        "json-pass",
        "json-tool",
        "json-tool-no-auto",
        "json-pass-piped-stdin",
        "json-pass-with-cost",
    ] {
        let (o, f, v) = run(Agent::Opencode, &format!("opencode/{name}.jsonl"), "", 0);
        assert_eq!(f, None, "{name}");
        assert_eq!(v, Verdict::Pass, "{name}");
        assert!(o.tokens_reported);
    }
    let (o, _, _) = run(Agent::Opencode, "opencode/json-pass-with-cost.jsonl", "", 0);
    assert_eq!(o.cost_usd, Some(0.000486));
    assert_eq!(
        (
            o.usage.input_tokens,
            o.usage.cache_read_input_tokens,
            o.usage.output_tokens
        ),
        (100, 20, 12)
    );
    // A model without a price in opencode's config reports `cost: 0`: not known, not free.
    let (o, _, _) = run(Agent::Opencode, "opencode/json-pass.jsonl", "", 0);
    assert_eq!(o.cost_usd, None);
    // Two steps (a tool call, then the answer) are summed.
    let (o, _, _) = run(Agent::Opencode, "opencode/json-tool.jsonl", "", 0);
    assert_eq!((o.usage.output_tokens, o.num_turns), (24, Some(2)));
    let (_, f, v) = run(Agent::Opencode, "opencode/json-fail.jsonl", "", 0);
    assert_eq!(f, None);
    assert_eq!(
        v,
        Verdict::Fail(prdloop::backend::verdict::WorkerFail::WorkerSaidFail {
            text: Some("tests still red".into())
        })
    );
    // A rejected permission stops the session with exit 0 and no answer: a plain FAIL.
    let (_, f, v) = run(
        Agent::Opencode,
        "opencode/json-write-outside-no-auto.jsonl",
        "opencode/json-write-outside-no-auto.stderr.txt",
        0,
    );
    assert_eq!(f, None);
    assert!(!v.is_pass());
}

#[test]
fn opencode_failures() {
    let (_, f, v) = run(Agent::Opencode, "opencode/json-auth.jsonl", "", 1);
    let f = f.unwrap();
    assert_eq!(f.kind, Kind::Auth);
    assert!(
        f.text.starts_with("Incorrect API key provided"),
        "{}",
        f.text
    );
    assert!(!v.is_pass());
    // "Please try again in 1s."
    let f = run(Agent::Opencode, "opencode/json-ratelimit.jsonl", "", 1)
        .1
        .unwrap();
    assert_eq!((f.kind, f.resets_at), (Kind::RateLimit, Some(NOW + 1)));
    // OpenAI's `insufficient_quota`: the account has no credit left; waiting cannot help.
    assert_eq!(
        kind(Agent::Opencode, "opencode/json-quota.jsonl", "", 1),
        Some(Kind::Billing)
    );
    assert_eq!(
        kind(Agent::Opencode, "opencode/json-error500.jsonl", "", 1),
        Some(Kind::Overloaded)
    );
}

#[test]
fn amp_failures_before_any_model_call() {
    // No pass could be recorded offline (see tests/fixtures/amp/README.md): stdout is empty,
    // one `Error:` line on stderr, exit 1.
    let f = run(
        Agent::Amp,
        "amp/stream-json-auth.jsonl",
        "amp/stream-json-auth.stderr.txt",
        1,
    )
    .1
    .unwrap();
    assert_eq!(f.kind, Kind::Auth);
    assert!(f.text.contains("amp login"), "{}", f.text);
    assert_eq!(
        kind(
            Agent::Amp,
            "amp/stream-json-down.jsonl",
            "amp/stream-json-down.stderr.txt",
            1
        ),
        Some(Kind::Overloaded)
    );
    let f = run(
        Agent::Amp,
        "amp/stream-json-fake-server.jsonl",
        "amp/stream-json-fake-server.stderr.txt",
        1,
    )
    .1
    .unwrap();
    assert_eq!(f.kind, Kind::Crash);
    assert!(f.text.contains("Thread not found"), "{}", f.text);
}

/// Amp's and cursor's streams are claude-compatible (from their docs; no successful run was
/// recorded): claude's own recording read as theirs gives the verdict, and no cost is made up.
#[test]
fn claude_compatible_streams_for_amp_and_cursor() {
    let line = br#"{"type":"result","subtype":"success","is_error":false,"result":"ok\nRESULT: ISC-1 PASS","session_id":"s1","duration_ms":5}"#;
    for agent in [Agent::Amp, Agent::Cursor] {
        let mut p = StreamParser::new(opts(agent).format());
        p.feed_line(br#"{"type":"system","subtype":"init","session_id":"s1"}"#);
        p.feed_line(line);
        let o = p.finish();
        assert_eq!(o.agent, agent);
        let exit = Exit::Code { code: 0 };
        assert_eq!(classify_for(agent, &exit, &o, "", NOW), None);
        assert_eq!(verdict("ISC-1", &exit, &o).0, Verdict::Pass);
        assert_eq!(o.cost_usd, None);
        assert!(!o.tokens_reported);
    }
}

#[test]
fn a_command_agent_passes_by_its_last_result_line_and_exit_0() {
    let read = |text: &str| {
        let mut p = StreamParser::new(opts(Agent::Command).format());
        for l in text.lines() {
            p.feed_line(l.as_bytes());
        }
        p.finish()
    };
    let ok = Exit::Code { code: 0 };
    let o = read("working\nRESULT: ISC-1 FAIL: not yet\nRESULT: ISC-1 PASS\n");
    assert_eq!(classify_for(Agent::Command, &ok, &o, "", NOW), None);
    assert_eq!(verdict("ISC-1", &ok, &o).0, Verdict::Pass);
    let o = read("RESULT: ISC-1 PASS\nRESULT: ISC-1 FAIL: broke it again\n");
    assert_eq!(
        verdict("ISC-1", &ok, &o).0,
        Verdict::Fail(prdloop::backend::verdict::WorkerFail::WorkerSaidFail {
            text: Some("broke it again".into())
        })
    );
    // A PASS line with a non-zero exit is no pass, and (a result was printed) no crash.
    let bad = Exit::Code { code: 3 };
    let o = read("RESULT: ISC-1 PASS\n");
    assert_eq!(classify_for(Agent::Command, &bad, &o, "", NOW), None);
    assert!(!verdict("ISC-1", &bad, &o).0.is_pass());
    // No RESULT line and a non-zero exit: the program failed, not the criterion.
    let o = read("segfault?\n");
    let f = classify_for(Agent::Command, &bad, &o, "boom\n", NOW).unwrap();
    assert_eq!(f.kind, Kind::Crash);
    assert_eq!(o.cost_usd, None);
    assert!(!o.tokens_reported);
}

#[test]
fn every_parser_tolerates_garbage_and_unknown_events() {
    for agent in [
        Agent::Codex,
        Agent::Gemini,
        Agent::Opencode,
        Agent::Amp,
        Agent::Cursor,
    ] {
        let mut p = StreamParser::new(opts(agent).format());
        p.feed_line(b"not json");
        p.feed_line(&[0xff, 0xfe, b'{']);
        p.feed_line(b"[1,2]");
        p.feed_line(br#"{"type":"brand_new_event","part":{"tokens":"many"},"item":7}"#);
        p.feed_line(br#"{"type":"step_finish","part":{"tokens":{"input":"x"},"cost":"free"}}"#);
        p.feed_line(br#"{"type":"item.completed","item":{"type":"agent_message","text":5}}"#);
        let o = p.finish();
        assert!(o.unparsed_lines >= 2, "{agent}: {o:?}");
        assert_eq!(o.final_text, None, "{agent}");
        assert_eq!(o.cost_usd, None, "{agent}");
    }
}
