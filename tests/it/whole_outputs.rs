//! Whole outputs compared exactly (insta snapshots), where the whole output is known: a run's
//! `--json` event stream, its state file, a worker's prompt, `plan`, `verify` and `merge`. What
//! varies from run to run (temporary paths, session ids, times, durations, pids, commits) is
//! filtered to a placeholder (`common::snap`); everything else must match byte for byte.

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
    snapshot!(sb.root(), "run_json_events", &events.join("\n"));
    // The PRD's hash covers its `updated:` date, which is today's.
    snapshot!(
        sb.root(),
        "run_state_file",
        &serde_json::to_string_pretty(&sb.state()).unwrap(),
        [(
            r#""prdTextHash": "[0-9a-f]+""#,
            r#""prdTextHash": "[HASH]""#
        )]
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
    snapshot!(sb.root(), "worker_prompt_first", &prompt("ISC-API-2", 1));
    // The retry's prompt carries the reason the first attempt gave.
    snapshot!(sb.root(), "worker_prompt_retry", &prompt("ISC-API-2", 2));
}

#[test]
fn plan_and_verify_print_exactly_this() {
    let sb = sandbox();
    for (name, args) in [
        ("plan_text", &["plan", "PRD.md", "-a", "2"][..]),
        ("plan_json", &["plan", "PRD.md", "-a", "2", "--json"]),
        ("plan_shards_text", &["plan", "PRD.md", "--shards", "2"]),
        (
            "plan_shards_json",
            &["plan", "PRD.md", "--shards", "2", "--json"],
        ),
        ("verify_dry_run", &["verify", "PRD.md", "--dry-run"]),
        (
            "verify_dry_run_json",
            &["verify", "PRD.md", "--dry-run", "--json"],
        ),
        ("verify_text", &["verify", "PRD.md", "--no-write"]),
        ("verify_json", &["verify", "PRD.md", "--no-write", "--json"]),
    ] {
        let out = sb.run(args);
        assert!([0, 1].contains(&code(&out)), "{args:?}: {}", stderr(&out));
        snapshot!(sb.root(), name, &shown(&out));
    }
}

/// `undo --list`, `undo` and `clean`, with `--json`, after a run that committed its landing.
#[test]
fn undo_and_clean_json_are_exactly_these() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "--commit"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let a = sb.work().join("a.txt");
    let landed = std::fs::read_to_string(&a).unwrap();
    let mut text = transcript(&sb, &[&["undo", "--list", "--json"]]);
    // Changed since it landed: refused, then put back as it landed: undone.
    std::fs::write(&a, "the user's own\n").unwrap();
    text.push('\n');
    text.push_str(&transcript(&sb, &[&["undo", "--json"]]));
    std::fs::write(&a, landed).unwrap();
    text.push('\n');
    text.push_str(&transcript(
        &sb,
        &[
            &["undo", "--json"],
            &["undo", "--json"],
            &["clean", "--json"],
        ],
    ));
    // An undo point's name ends in a random part.
    snapshot!(
        sb.root(),
        "undo_and_clean_json",
        &text,
        [(r"(refs/prdloop-undo/\d+)-[0-9a-f]+", "$1-[ID]")]
    );
}

/// `audit --json` after a run, once its tick holds and once it does not.
#[test]
fn audit_json_is_exactly_this() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut text = transcript(&sb, &[&["audit", "PRD.md", "--json"]]);
    std::fs::remove_file(sb.work().join("a.txt")).unwrap();
    text.push('\n');
    text.push_str(&transcript(&sb, &[&["audit", "PRD.md", "--json"]]));
    snapshot!(sb.root(), "audit_json", &text);
}

#[test]
fn merge_prints_exactly_this() {
    // Two shards in two clones (CI's jobs); the fan-in in a third: shard 1 passes its
    // criterion by a Verify command merge runs again, shard 2 has one claimed and one failed.
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: the docs read well | Verify: Review: a person reads docs.md",
            "- [ ] ISC-B-2: the impossible holds | Verify: CLI: `test -f never.txt`",
        ],
        json!({
            "ISC-A-1": ["write:a.txt"],
            "ISC-B-1": ["sh:echo docs > docs.md"],
            "ISC-B-2": ["fail:not today"],
        }),
        &[("README", "hello\n")],
    );
    let clone = |name: &str| {
        git(
            sb.root(),
            &["clone", "-q", &sb.work().display().to_string(), name],
        );
        sb.root().join(name)
    };
    let bundles = sb.root().join("bundles");
    for i in 1..=2 {
        let job = clone(&format!("job{i}"));
        let bundle = bundles.join(format!("shard-{i}"));
        let out = sb
            .command(&[
                "run",
                "PRD.md",
                "-n",
                "1",
                "--shard",
                &format!("{i}/2"),
                "--bundle",
                bundle.to_str().unwrap(),
            ])
            .current_dir(&job)
            .output()
            .unwrap();
        assert!([0, 1].contains(&code(&out)), "shard {i}: {}", stderr(&out));
    }
    for (name, json) in [("merge_text", false), ("merge_json", true)] {
        let fan_in = clone(&format!("fan-in-{name}"));
        let mut args = vec!["merge", "PRD.md", bundles.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let out = sb.command(&args).current_dir(&fan_in).output().unwrap();
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        let mut text = shown(&out);
        if json {
            // Each JSON value shown pretty.
            let pretty: Vec<String> = serde_json::Deserializer::from_slice(&out.stdout)
                .into_iter::<serde_json::Value>()
                .map(|v| serde_json::to_string_pretty(&v.unwrap()).unwrap())
                .collect();
            text = format!(
                "exit {}\n--- stdout\n{}\n--- stderr\n{}",
                code(&out),
                pretty.join("\n"),
                stderr(&out)
            );
        }
        snapshot!(sb.root(), name, &text);
    }
}

/// `status` after a run, text and `--json`: per criterion how its tick was earned.
#[test]
fn status_says_how_each_tick_was_earned() {
    let sb = sandbox();
    let out = sb.run(&["run", "PRD.md", "-a", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = sb.run(&["status", "PRD.md"]);
    assert_eq!(code(&text), 0, "{}", stderr(&text));
    snapshot!(sb.root(), "status_after_a_run", &shown(&text));
    let json = sb.run(&["status", "PRD.md", "--json"]);
    assert_eq!(code(&json), 0, "{}", stderr(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let earned: Vec<&serde_json::Value> = v[0]["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["earned"])
        .collect();
    assert_eq!(
        earned,
        [&json!("checked"), &json!("reviewed"), &json!("before")]
    );
    snapshot!(
        sb.root(),
        "status_json_after_a_run",
        &String::from_utf8_lossy(&json.stdout)
    );
}
