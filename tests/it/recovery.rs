//! A run killed (`kill -9`) in the middle of a landing: the next `run` or `resume` finishes
//! the landing from its journal and credits the pass once (the state file, the attempts log,
//! the PRD's tick and its receipt), and with `--commit` commits it. The landing is stopped
//! halfway through putting its files in place by the test-only `PRDLOOP_TEST_LANDING_PAUSE`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::json;

/// Twelve tracked files, each of one line.
fn twelve() -> Vec<(String, String)> {
    (1..=12)
        .map(|i| (format!("f{i:02}.txt"), "mine\n".to_string()))
        .collect()
}

/// A worker that appends its line to each of the twelve files (run twice, it would append
/// twice).
const APPEND: &str = "sh:for f in f*.txt; do echo worker >> $f; done";

fn repo_of_twelve(criteria: &[&str], plan: serde_json::Value) -> Sandbox {
    let files = twelve();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    repo(criteria, plan, &refs)
}

/// Starts `args`, waits until its landing has put half its files in place, and kills it
/// there with SIGKILL.
fn kill_mid_landing(sb: &Sandbox, args: &[&str]) {
    let marker = sb.root().join("landing-paused");
    let child = sb
        .command(args)
        .env("PRDLOOP_TEST_LANDING_PAUSE", &marker)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !marker.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the landing never began"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    send_signal(child.id(), "KILL");
    let _ = wait_output(child, Duration::from_secs(30));
    let journal = sb.work().join(".git/prdloop/landing.json");
    assert!(journal.exists(), "the kill came after the landing");
}

/// Every attempts log in the state folder, as records.
fn all_attempts(sb: &Sandbox) -> Vec<serde_json::Value> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(sb.state_dir()).unwrap().flatten() {
        let log: PathBuf = e.path().join("attempts.jsonl");
        if let Ok(text) = std::fs::read_to_string(&log) {
            v.extend(text.lines().map(|l| serde_json::from_str(l).unwrap()));
        }
    }
    v
}

fn passes_of(sb: &Sandbox, id: &str) -> usize {
    all_attempts(sb)
        .iter()
        .filter(|r| r["criterion"] == id && r["verdict"] == "pass")
        .count()
}

fn file(w: &Path, name: &str) -> String {
    std::fs::read_to_string(w.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One criterion appending to the twelve files, killed mid-landing, then `then` (`run` or
/// `resume`): every file has the worker's line once, the worker did not run again, the box
/// is ticked and the attempts logs hold one pass.
fn killed_then(then: &str) -> Sandbox {
    let sb = repo_of_twelve(
        &["- [ ] ISC-A-1: every file has the line | Verify: CLI: `grep -q worker f12.txt`"],
        json!({"ISC-A-1": [APPEND]}),
    );
    kill_mid_landing(&sb, &["run", "PRD.md", "-n", "3"]);
    let out = sb.run(&[then, "PRD.md"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    for (name, _) in twelve() {
        assert_eq!(file(&sb.work(), &name), "mine\nworker\n", "{name}: {err}");
    }
    assert_eq!(sb.worker_records().len(), 1, "{err}");
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"), "{err}");
    assert_eq!(passes_of(&sb, "ISC-A-1"), 1, "{:?}", all_attempts(&sb));
    sb
}

#[test]
fn a_landing_killed_halfway_is_finished_and_credited_once_by_resume() {
    let sb = killed_then("resume");
    let w = sb.work();
    // The state holds the pass with its receipt.
    let state = sb.state();
    let c = &state["criteria"][0];
    assert_eq!(c["status"], "completed", "{state}");
    assert_eq!(c["receipt"]["evidence"], "checked", "{state}");
    // Nothing of the landing is left behind.
    assert!(!w.join(".git/prdloop/landing.json").exists());
    let left = landing_leftovers(&w);
    assert!(left.is_empty(), "{left:?}");
    assert!(
        std::fs::read_dir(w.join(".git/prdloop/owed"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );
    // Another run has nothing more to credit or do.
    let again = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert_eq!(passes_of(&sb, "ISC-A-1"), 1);
    assert_eq!(file(&w, "f01.txt"), "mine\nworker\n");
}

#[test]
fn a_landing_killed_halfway_is_credited_once_by_a_new_run() {
    let sb = killed_then("run");
    // The new session's state holds the pass and its receipt (what `audit` reads).
    let state = sb.state();
    assert_eq!(state["criteria"][0]["status"], "completed", "{state}");
    assert!(state["criteria"][0]["receipt"].is_object(), "{state}");
}

#[test]
fn with_commit_a_landing_killed_halfway_gets_its_commit_and_later_ones_theirs() {
    // B appends to the lines A appended: its change cannot be committed alone unless A's
    // is committed first.
    let sb = repo_of_twelve(
        &[
            "- [ ] ISC-A-1: every file has the line | Verify: CLI: `grep -q worker f12.txt`",
            "- [ ] ISC-B-1: every file has B's line (after: ISC-A-1) | Verify: CLI: `grep -q second f12.txt`",
        ],
        json!({"ISC-A-1": [APPEND], "ISC-B-1": ["sh:for f in f*.txt; do echo second >> $f; done"]}),
    );
    kill_mid_landing(&sb, &["run", "PRD.md", "--commit"]);
    let out = sb.run(&["run", "PRD.md", "--commit"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(!err.contains("cannot be separated"), "{err}");
    let w = sb.work();
    let log = git(&w, &["log", "--format=%s", "HEAD"]);
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(
        subjects,
        [
            "ISC-B-1: every file has B's line (after: ISC-A-1)",
            "ISC-A-1: every file has the line",
            "initial"
        ],
        "{err}"
    );
    assert_eq!(
        git(&w, &["show", "HEAD~1:f07.txt"]),
        "mine\nworker\n",
        "{err}"
    );
    for (name, _) in twelve() {
        assert_eq!(file(&w, &name), "mine\nworker\nsecond\n", "{name}");
    }
    let status = git(&w, &["status", "--porcelain", "--", "f*.txt"]);
    assert_eq!(status, "", "{status}");
    assert_eq!(passes_of(&sb, "ISC-A-1"), 1);
}
