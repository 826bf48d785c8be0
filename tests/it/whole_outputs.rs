//! Whole outputs compared exactly (insta snapshots), where the whole output is known: a run's
//! `--json` event stream, its state file, a worker's prompt, `plan` and `verify`. What varies
//! from run to run (temporary paths, session ids, times, durations, pids) is filtered to a
//! placeholder; everything else must match byte for byte.

use crate::common::*;
use serde_json::json;

/// The PRD every test here runs: one criterion checked by the runner, one the worker fails
/// once, one ticked before the run.
fn sandbox() -> Sandbox {
    Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-API-1: the API answers | Verify: CLI: `true`",
            "- [ ] ISC-API-2: errors are JSON",
            "- [x] ISC-DB-1: the schema is migrated",
        ]),
        json!({"ISC-API-2": ["fail:the error body is HTML", "pass"], "*": ["pass"]}),
    )
}

/// What varies between runs, as placeholders.
fn filters(sb: &Sandbox) -> Vec<(String, String)> {
    let root = regex_escape(&sb.root().display().to_string());
    // The fake agent lives in this checkout's target folder.
    let fake = regex_escape(FAKE);
    [
        (fake.as_str(), "[FAKE AGENT]"),
        (root.as_str(), "[TMP]"),
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[SESSION]",
        ),
        (
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?",
            "[TIME]",
        ),
        (r"\b\d{13}\b", "[MS]"),
        // `verify`'s log folder of one invocation.
        (r"prdloop-verify-[0-9a-f]{16}", "prdloop-verify-[ID]"),
        (
            r#""(durationMs|pid|durationSecs|elapsedMs|ms|timeMs|timeMsPerPass|agentTimeMs|waitedMs)": \d+"#,
            r#""$1": [N]"#,
        ),
        (r"\d+\.\ds\b", "[DUR]"),
        (r#""sandbox": (true|false)"#, r#""sandbox": [ON OR OFF]"#),
        (r#""(hostname|host)": "[^"]*""#, r#""$1": "[HOST]""#),
        (
            r#""prdloopVersion": "[^"]*""#,
            r#""prdloopVersion": "[VERSION]""#,
        ),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect()
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// Snapshots `text` with the sandbox's filters.
fn snapshot(sb: &Sandbox, name: &str, text: &str) {
    let filters = filters(sb);
    let filters: Vec<(&str, &str)> = filters
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    insta::with_settings!({filters => filters}, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn a_runs_json_events_and_state_file_are_exactly_these() {
    let sb = sandbox();
    let out = sb.run(&["run", "PRD.md", "-a", "1", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // One event per line; shown pretty, one after another.
    let events: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            serde_json::to_string_pretty(&v).unwrap()
        })
        .collect();
    snapshot(&sb, "run_json_events", &events.join("\n"));
    snapshot(
        &sb,
        "run_state_file",
        &serde_json::to_string_pretty(&sb.state()).unwrap(),
    );
}

#[test]
fn a_workers_prompt_is_exactly_this() {
    let sb = sandbox();
    let out = sb.run(&["run", "PRD.md", "-a", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let recs = sb.worker_records();
    let prompt = |id: &str, attempt: u64| {
        recs.iter()
            .find(|r| r["criterion"] == id && r["attempt"] == attempt)
            .unwrap_or_else(|| panic!("no attempt {attempt} of {id}"))["prompt"]
            .as_str()
            .unwrap()
            .to_string()
    };
    snapshot(&sb, "worker_prompt_first", &prompt("ISC-API-2", 1));
    // The retry's prompt carries the reason the first attempt gave.
    snapshot(&sb, "worker_prompt_retry", &prompt("ISC-API-2", 2));
}

#[test]
fn plan_and_verify_print_exactly_this() {
    let sb = sandbox();
    for (name, args) in [
        ("plan_text", &["plan", "PRD.md", "-a", "2"][..]),
        ("plan_json", &["plan", "PRD.md", "-a", "2", "--json"]),
        ("verify_dry_run", &["verify", "PRD.md", "--dry-run"]),
        ("verify_text", &["verify", "PRD.md", "--no-write"]),
        ("verify_json", &["verify", "PRD.md", "--no-write", "--json"]),
    ] {
        let out = sb.run(args);
        assert!([0, 1].contains(&code(&out)), "{args:?}: {}", stderr(&out));
        let text = format!(
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            code(&out),
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        snapshot(&sb, name, &text);
    }
}
