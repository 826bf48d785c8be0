//! The task lists of other tools (ralph's and ralph-tui's `prd.json`, Taskmaster's
//! `tasks.json`, Spec Kit's and Kiro's `tasks.md`) run end to end with the fake agent: each
//! is shown by `plan` in its format, and the run writes back exactly its done markers, byte
//! for byte, in its own terms.

use crate::common::*;
use serde_json::json;

fn formats_fixture(rel: &str) -> String {
    fixture_prd(&format!("formats/{rel}"))
}

/// A sandbox holding `files` (relative to the work folder) besides a PRD.md nobody runs.
fn sandbox(files: &[(&str, &str)], plan: serde_json::Value) -> Sandbox {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-1: unused"]), plan);
    for (name, text) in files {
        let path = sb.work().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    sb
}

fn read(sb: &Sandbox, rel: &str) -> String {
    std::fs::read_to_string(sb.work().join(rel)).unwrap()
}

/// The prompts the workers were given.
fn prompts(sb: &Sandbox) -> Vec<String> {
    sb.worker_records()
        .iter()
        .map(|r| r["prompt"].as_str().unwrap_or("").to_string())
        .collect()
}

fn run_all(sb: &Sandbox, rel: &str) -> std::process::Output {
    sb.run(&["run", rel, "-a", "2", "-n", "6", "--timeout", "60s"])
}

#[test]
fn ralph_prd_json_runs_and_only_passes_changes() {
    let rel = "scripts/ralph/prd.json";
    // Its commands are ones this machine has.
    let text = formats_fixture("ralph/prd.json")
        .replace("`npm run typecheck`", "`true`")
        .replace("`npm test`", "`test -d .`");
    let progress = formats_fixture("ralph/progress.txt");
    let sb = sandbox(
        &[(rel, &text), ("scripts/ralph/progress.txt", &progress)],
        json!({"US-002": ["pass"], "US-003": ["pass"]}),
    );
    let plan = sb.run(&["plan", rel, "--json"]);
    assert_eq!(code(&plan), 0, "{}", stderr(&plan));
    let v: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(v["format"], "ralph");
    let plan = sb.run(&["plan", rel]);
    let shown = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(shown.starts_with("(no id) MyApp (ralph)\n"), "{shown}");
    assert!(shown.contains("runs `true && test -d .`"), "{shown}");

    let out = run_all(&sb, rel);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let want = text
        .replacen(
            "\"priority\": 3,\n      \"passes\": false",
            "\"priority\": 3,\n      \"passes\": true",
            1,
        )
        .replacen(
            "\"priority\": 2,\n      \"passes\": false",
            "\"priority\": 2,\n      \"passes\": true",
            1,
        );
    assert_ne!(want, text);
    assert_eq!(read(&sb, rel), want);
    // The workers were given progress.txt, and PAI's state file was kept.
    let prompts = prompts(&sb);
    assert!(
        prompts
            .iter()
            .any(|p| p.contains("The tasks table is read through src/db/tasks.ts only")),
        "{prompts:?}"
    );
    assert!(sb.state_count() >= 1);
    // Each attempt was appended to progress.txt as ralph appends: what was there stays.
    let log = read(&sb, "scripts/ralph/progress.txt");
    let added = log.strip_prefix(progress.as_str()).expect("appended only");
    // (US-003's commands passed before any worker: it had no attempt.)
    assert_eq!(
        added
            .matches(" - US-002\n- prdloop attempt: pass (iteration 1, lane ")
            .count(),
        1,
        "{added}"
    );
    assert!(!added.contains("US-003"), "{added}");
    assert!(added.ends_with("\n---\n"), "{added}");
}

#[test]
fn ralph_tui_without_a_final_newline_keeps_its_bytes() {
    let rel = "prd.json";
    let text = formats_fixture("ralph-tui/prd.json")
        .replace("`pnpm typecheck`", "`true`")
        .replace("`pnpm lint`", "`true`");
    let sb = sandbox(
        &[(rel, &text)],
        json!({"US-001": ["pass"], "US-002": ["pass"]}),
    );
    let status = sb.run(&["status", rel, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(v[0]["format"], "ralph-tui", "{}", stderr(&status));
    let out = run_all(&sb, rel);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        read(&sb, rel),
        text.replace("\"passes\": false", "\"passes\": true")
    );
}

#[test]
fn taskmaster_tasks_json_ticks_statuses_in_place_and_the_parent_with_its_subtasks() {
    let rel = ".taskmaster/tasks/tasks.json";
    let text = formats_fixture("taskmaster/.taskmaster/tasks/tasks.json")
        .replace("`npm run test -- login`", "`true`");
    let sb = sandbox(&[(rel, &text)], json!({"4": ["pass"], "2.2": ["pass"]}));
    let plan = sb.run(&["plan", rel, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(v["format"], "taskmaster", "{}", stderr(&plan));
    let out = run_all(&sb, rel);
    // Task 3 is deferred: the list is not complete, and it says so.
    let err = stderr(&out);
    assert!(err.contains("task 3 is deferred"), "{err}");
    let want = text
        .replacen("\"status\": \"in-progress\"", "\"status\": \"done\"", 1)
        .replacen(
            "\"dependencies\": [1],\n            \"details\": \"\",\n            \"status\": \"pending\"",
            "\"dependencies\": [1],\n            \"details\": \"\",\n            \"status\": \"done\"",
            1,
        )
        .replacen(
            "\"dependencies\": [1],\n        \"status\": \"pending\"",
            "\"dependencies\": [1],\n        \"status\": \"done\"",
            1,
        );
    assert_eq!(want.matches("\"status\": \"done\"").count(), 5);
    assert_eq!(read(&sb, rel), want);
}

#[test]
fn spec_kit_tasks_md_starting_with_a_rule_runs_phase_by_phase() {
    let dir = "specs/001-photo-albums";
    let rel = format!("{dir}/tasks.md");
    let text = formats_fixture(&format!("spec-kit/{rel}"));
    let spec = formats_fixture(&format!("spec-kit/{dir}/spec.md"));
    let ids = ["T002", "T003", "T004", "T005", "T007"];
    let plan: serde_json::Value = ids
        .iter()
        .map(|i| (i.to_string(), json!(["pass"])))
        .collect();
    let sb = sandbox(&[(&rel, &text), (&format!("{dir}/spec.md"), &spec)], plan);
    let out = run_all(&sb, &rel);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut want = text.clone();
    for id in ids {
        want = want.replacen(&format!("- [ ] {id} "), &format!("- [x] {id} "), 1);
    }
    assert_eq!(read(&sb, &rel), want);
    // Phase by phase: no Phase 2 task started before Phase 1's passed.
    let start = |id: &str| {
        sb.worker_records()
            .iter()
            .filter(|r| r["criterion"] == id)
            .map(|r| r["start"].as_f64().unwrap_or(0.0))
            .fold(f64::MAX, f64::min)
    };
    let end_of = |id: &str| {
        sb.worker_records()
            .iter()
            .filter(|r| r["criterion"] == id)
            .map(|r| r["end"].as_f64().unwrap_or(0.0))
            .fold(0.0, f64::max)
    };
    assert!(start("T003") >= end_of("T002"));
    assert!(start("T005") >= end_of("T004"));
    // The spec is given as context.
    assert!(prompts(&sb).iter().any(|p| p.contains("FR-001")));
    // spec.md on its own is no task list.
    let out = sb.run(&["run", &format!("{dir}/spec.md")]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("is not a task list"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kiro_tasks_md_ticks_sub_tasks_then_their_parent() {
    let dir = ".kiro/specs/user-auth";
    let rel = format!("{dir}/tasks.md");
    let text = formats_fixture(&format!("kiro/{rel}"));
    let req = formats_fixture(&format!("kiro/{dir}/requirements.md"));
    let sb = sandbox(
        &[(&rel, &text), (&format!("{dir}/requirements.md"), &req)],
        json!({"2.1": ["pass"], "2.2": ["pass"], "3": ["pass"]}),
    );
    let out = run_all(&sb, &rel);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let want = text
        .replace("- [ ] 2. ", "- [x] 2. ")
        .replace("- [ ] 2.1 ", "- [x] 2.1 ")
        .replace("- [ ] 2.2 ", "- [x] 2.2 ")
        .replace("- [ ] 3. ", "- [x] 3. ");
    assert_eq!(read(&sb, &rel), want);
    let prompts = prompts(&sb);
    assert!(
        prompts
            .iter()
            .any(|p| p.contains("Requirements: 2.1, 3.3, 1.2")
                && p.contains("SHALL start a session"))
    );
    // What its Requirements name, resolved in requirements.md, is what to make true.
    assert!(prompts.iter().any(|p| p.contains(
        "(requirements.md)\n\n- 1.2: IF the password is wrong THEN the system SHALL answer 401\n"
    )));
    // No worker works on the parent.
    assert!(!sb.worker_records().iter().any(|r| r["criterion"] == "2"));
}

#[test]
fn bad_task_lists_are_input_errors_naming_the_file() {
    let sb = sandbox(
        &[
            (
                "empty/prd.json",
                "{\n  \"project\": \"x\",\n  \"userStories\": []\n}\n",
            ),
            (
                "broken/prd.json",
                "{\n  \"userStories\": [\n    {\"id\": \"US-001\",}\n  ]\n}\n",
            ),
            ("other/package.json", "{\"name\": \"x\"}\n"),
            ("ralph/progress.txt", "# Ralph Progress Log\n"),
            (
                "misplaced/PRD.md",
                "---\nphase: climbing\nprogress: 0/1\n---\n# T\n\n## Criteria\n\n## Phase 2\n\n- [ ] ISC-1: a\n",
            ),
        ],
        json!({}),
    );
    for (rel, says) in [
        (
            "empty/prd.json",
            "empty/prd.json has no tasks to run: its ralph task list holds none",
        ),
        ("broken/prd.json", "broken/prd.json:3: not valid JSON"),
        (
            "other/package.json",
            "other/package.json is JSON but no task list prdloop reads",
        ),
        (
            "ralph/progress.txt",
            "ralph/progress.txt is not a task list: it is read as context beside its prd.json; run ",
        ),
        (
            "misplaced/PRD.md",
            "misplaced/PRD.md has no criteria: its criteria heading `## Criteria` (line 7) holds no boxes, while 1 box with criterion ids sits under `## Phase 2` (line 9): move them under `## Criteria`",
        ),
    ] {
        for cmd in ["plan", "run", "verify"] {
            let out = sb.run(&[cmd, rel]);
            assert_eq!(code(&out), 2, "{cmd} {rel}: {}", stderr(&out));
            assert!(stderr(&out).contains(says), "{cmd} {rel}: {}", stderr(&out));
        }
    }
}

/// A Taskmaster task that needs a cancelled one runs (a cancelled task is never done); one
/// that needs a deferred task waits, and `plan` and the run's summary say so.
#[test]
fn taskmaster_needs_on_cancelled_tasks_are_met_and_on_deferred_ones_wait() {
    let rel = ".taskmaster/tasks/tasks.json";
    let text = r#"{
  "master": {
    "tasks": [
      {"id": 1, "title": "Old login", "status": "cancelled", "dependencies": []},
      {"id": 2, "title": "New login", "status": "pending", "dependencies": [1]},
      {"id": 3, "title": "Offline cache", "status": "deferred", "dependencies": []},
      {"id": 4, "title": "Sync", "status": "pending", "dependencies": [3]}
    ]
  }
}
"#;
    let sb = sandbox(&[(rel, text)], json!({"2": ["pass"], "4": ["pass"]}));
    let plan = sb.run(&["plan", rel]);
    assert_eq!(code(&plan), 0, "{}", stderr(&plan));
    let shown = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(
        shown.contains(
            "blocked by a deferred task (not started while it is deferred):\n  4 needs 3\n"
        ),
        "{shown}"
    );
    let plan = sb.run(&["plan", rel, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    assert_eq!(
        v["blockedByDeferred"],
        json!([{"id": "4", "deferred": ["3"]}])
    );
    let out = run_all(&sb, rel);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert!(err.contains("waiting for 3 (deferred)"), "{err}");
    // 2 ran and was ticked; 4 never started.
    assert_eq!(
        read(&sb, rel),
        text.replacen(
            "\"status\": \"pending\", \"dependencies\": [1]",
            "\"status\": \"done\", \"dependencies\": [1]",
            1
        )
    );
    assert!(!sb.worker_records().iter().any(|r| r["criterion"] == "4"));
}

/// Kiro's optional tasks (`- [ ]* 2.3 …`) are run and shown as optional; the run writes
/// their box with the `*` kept, and the list is complete only with them.
#[test]
fn kiro_optional_tasks_run_and_keep_their_star() {
    let dir = ".kiro/specs/search";
    let rel = format!("{dir}/tasks.md");
    let text = formats_fixture(&format!("kiro-optional/{rel}"));
    let sb = sandbox(
        &[(&rel, &text)],
        json!({"2.1": ["pass"], "2.2": ["pass"], "2.3": ["pass"], "3": ["pass"]}),
    );
    let plan = sb.run(&["plan", &rel]);
    assert_eq!(code(&plan), 0, "{}", stderr(&plan));
    let shown = String::from_utf8_lossy(&plan.stdout).into_owned();
    assert!(
        shown.contains("2.3            Write property tests for the tokeniser (optional)\n"),
        "{shown}"
    );
    let out = run_all(&sb, &rel);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let want = text
        .replace("- [ ] 2. ", "- [x] 2. ")
        .replace("- [ ] 2.1 ", "- [x] 2.1 ")
        .replace("- [ ] 2.2 ", "- [x] 2.2 ")
        .replace("- [ ]* 2.3 ", "- [x]* 2.3 ")
        .replace("- [ ] 3. ", "- [x] 3. ");
    assert_eq!(read(&sb, &rel), want);
    assert!(sb.worker_records().iter().any(|r| r["criterion"] == "2.3"));
    assert!(!sb.worker_records().iter().any(|r| r["criterion"] == "2"));
}
