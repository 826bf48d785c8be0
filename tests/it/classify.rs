//! Real outputs of Claude Code 2.1.197 fed through the stream parser, the verdict and the
//! agent-failure classifier.

use prdloop::backend::verdict::{Exit, Verdict, verdict};
use prdloop::backend::{Kind, Outcome, OutputFormat, StreamParser, classify};

fn parse(name: &str) -> Outcome {
    let path = format!(
        "{}/tests/fixtures/claude/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap();
    let format = if name.starts_with("stream-json") {
        OutputFormat::StreamJson
    } else {
        OutputFormat::Json
    };
    let mut p = StreamParser::new(format);
    for line in bytes.split(|&b| b == b'\n') {
        p.feed_line(line);
    }
    p.finish()
}

const NOW: i64 = 1_796_032_800;

fn kind(name: &str, code: i32) -> Option<Kind> {
    let o = parse(name);
    classify(&Exit::Code { code }, &o, "", NOW).map(|f| f.kind)
}

#[test]
fn successes_are_not_agent_failures_and_pass() {
    for name in [
        "json-success.jsonl",
        "stream-json-success.jsonl",
        "stream-json-bash-tool.jsonl",
        "stream-json-partial-messages.jsonl",
        "stream-json-write-denied.jsonl",
    ] {
        let o = parse(name);
        assert_eq!(kind(name, 0), None, "{name}");
        let (v, _) = verdict("ISC-1", &Exit::Code { code: 0 }, &o);
        assert_eq!(v, Verdict::Pass, "{name}");
        assert!(o.cost_usd.is_some(), "{name}");
    }
    let o = parse("stream-json-bash-tool.jsonl");
    assert_eq!(o.num_turns, Some(2));
    assert_eq!(o.usage.input_tokens, 20);
    assert_eq!(
        o.session_id.as_deref(),
        Some("f27ec49c-57b2-4911-ae89-e0ed402181c2")
    );
    let o = parse("stream-json-write-denied.jsonl");
    assert_eq!(o.permission_denials, ["Write"]);
}

#[test]
fn each_failure_class_is_recognised_from_real_texts() {
    assert_eq!(kind("json-invalid-api-key.jsonl", 1), Some(Kind::Auth));
    assert_eq!(kind("json-credit-too-low.jsonl", 1), Some(Kind::Billing));
    assert_eq!(kind("json-overloaded-529.jsonl", 1), Some(Kind::Overloaded));
    assert_eq!(kind("json-error-max-turns.jsonl", 1), Some(Kind::MaxTurns));
    assert_eq!(
        kind("json-error-max-budget.jsonl", 1),
        Some(Kind::MaxBudget)
    );
    assert_eq!(
        kind("stream-json-rate-limited-429.jsonl", 1),
        Some(Kind::RateLimit)
    );
    let o = parse("json-invalid-api-key.jsonl");
    let f = classify(&Exit::Code { code: 1 }, &o, "", NOW).unwrap();
    assert_eq!(f.text, "Invalid API key · Fix external API key");
    let o = parse("json-error-max-turns.jsonl");
    let f = classify(&Exit::Code { code: 1 }, &o, "", NOW).unwrap();
    assert_eq!(f.text, "Reached maximum number of turns (1)");
}

fn outcome_with(text: &str) -> Outcome {
    Outcome {
        final_text: Some(text.into()),
        has_result: true,
        is_error: true,
        ..Default::default()
    }
}

#[test]
fn usage_limits_and_their_reset_times() {
    let exit = Exit::Code { code: 1 };
    let f = classify(
        &exit,
        &outcome_with("You've hit your limit · resets 4pm (Europe/Berlin)"),
        "",
        NOW,
    )
    .unwrap();
    assert_eq!(f.kind, Kind::UsageLimit);
    assert_eq!(f.resets_at, Some(NOW + 5 * 3600));
    let f = classify(&exit, &outcome_with("You've hit your usage limit"), "", NOW).unwrap();
    assert_eq!((f.kind, f.resets_at), (Kind::UsageLimit, None));
    let f = classify(&exit, &outcome_with("You're out of usage credits"), "", NOW).unwrap();
    assert_eq!(f.kind, Kind::UsageLimit);
    let f = classify(
        &exit,
        &outcome_with("Claude AI usage limit reached|1796040000"),
        "",
        NOW,
    )
    .unwrap();
    assert_eq!(f.resets_at, Some(1_796_040_000));
    // resetsAt from a rate_limit_event wins.
    let mut o = outcome_with("You've hit your limit · resets 4pm (Europe/Berlin)");
    o.rate_limit_resets_at = Some(NOW + 60);
    assert_eq!(
        classify(&exit, &o, "", NOW).unwrap().resets_at,
        Some(NOW + 60)
    );
    // Not logged in: no request made, exit 1.
    let f = classify(
        &exit,
        &outcome_with("Not logged in · Please run /login"),
        "",
        NOW,
    )
    .unwrap();
    assert_eq!(f.kind, Kind::Auth);
}

#[test]
fn timeouts_crashes_and_plain_criterion_failures() {
    let o = Outcome::default();
    let k = |exit: Exit, o: &Outcome, err: &str| classify(&exit, o, err, NOW).map(|f| f.kind);
    assert_eq!(
        k(Exit::TimedOut { after_secs: 5 }, &o, ""),
        Some(Kind::Timeout)
    );
    assert_eq!(k(Exit::Signal { signal: 9 }, &o, ""), Some(Kind::Crash));
    assert_eq!(
        k(Exit::Code { code: 3 }, &o, "panic: boom"),
        Some(Kind::Crash)
    );
    assert_eq!(k(Exit::Cancelled, &o, ""), None);
    // The agent worked and said FAIL: a criterion failure, not an agent failure.
    let worked = Outcome {
        final_text: Some("RESULT: ISC-1 FAIL: tests red".into()),
        has_result: true,
        ..Default::default()
    };
    assert_eq!(k(Exit::Code { code: 0 }, &worked, ""), None);
    // A non-zero exit after a clean result: the verdict's FAIL stands.
    assert_eq!(k(Exit::Code { code: 1 }, &worked, ""), None);
}
