//! PRDs as people write them: COMPLETE ones, patterns in backticks, repeated front matter
//! keys, v4 PRDs, bold ids, and files that are not PRDs. No author tick is lost, documents
//! keep their format, exit codes are as documented.

use crate::common::*;
use serde_json::json;

/// The front matter's lines (between the two `---`).
fn front_lines(text: &str) -> Vec<&str> {
    let body = &text[4..];
    let end = body.find("\n---\n").unwrap();
    body[..end].lines().collect()
}

fn key_of(line: &str) -> &str {
    line.split(':').next().unwrap()
}

#[test]
fn a_complete_prd_is_left_alone_unless_forced() {
    let prd = fixture_prd("complete-open-boxes.md");
    let sb = Sandbox::new(&prd, json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    // Already complete, nothing changed; the 3 boxes left open are named.
    snapshot!(sb.root(), "a_complete_prd", &shown(&out));
    assert_eq!(sb.prd_text(), prd, "not a byte changed");
    assert!(sb.worker_records().is_empty());
    assert_eq!(sb.state_count(), 0);
    // --force runs it.
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--force", "-n", "1"]);
    assert_ne!(sb.prd_text(), prd, "{}", stderr(&out));
    assert!(!sb.worker_records().is_empty());
}

#[test]
fn backticked_patterns_files_and_foreign_commands_never_untick_the_authors_boxes() {
    // The shape of a real PRD that a first run damaged: status COMPLETE, every box ticked,
    // Verify methods quoting patterns, files and commands for another machine.
    let prd = fixture_prd("complete-patterns.md");
    let sb = Sandbox::new(&prd, json!({"*": ["fail"]}));
    let out = sb.run(&["run", "PRD.md", "--force", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let text = sb.prd_text();
    let ticked = |t: &str| t.matches("\n- [x] ").count();
    assert_eq!(ticked(&text), ticked(&prd), "no author tick lost:\n{text}");
    assert!(sb.worker_records().is_empty(), "nothing to do");
    assert!(text.contains("\nstatus: COMPLETE\n"));
    // Only the two methods that are one code span of a command type were run.
    let out = sb.run(&["plan", "PRD.md", "--json"]);
    assert_eq!(code(&out), 0);
    // (A dry run runs nothing: `npx eslint` would fetch a package.)
    let verify = sb.run(&["verify", "PRD.md", "--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
    let mut ran: Vec<&str> = ["wouldRun", "cannotRunHere"]
        .iter()
        .flat_map(|k| v[k].as_array().unwrap())
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    ran.sort_by_key(|id| id.len());
    // ISC-C4's span is followed by prose: the agent's.
    assert_eq!(ran, ["ISC-C3", "ISC-C10"], "{v}");
}

#[test]
fn a_repeated_front_matter_key_warns_and_the_last_value_counts() {
    let prd = fixture_prd("v4-duplicate-key.md");
    let sb = Sandbox::new(&prd, json!({}));
    let out = sb.run(&["plan", "PRD.md"]);
    // A warning that `phase` is set twice, in our words (not the YAML library's).
    snapshot!(sb.root(), "a_repeated_front_matter_key", &stderr(&out));
    assert_eq!(code(&out), 0);
}

#[test]
fn a_v4_prd_runs_to_completion_and_stays_v4() {
    let prd = fixture_prd("v4.md");
    let sb = Sandbox::new(
        &prd,
        json!({"ISC-5": ["fail:not yet", "pass"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let text = sb.prd_text();
    // The same keys as before, in the same order: no v3 key was added.
    let before: Vec<&str> = front_lines(&prd).into_iter().map(key_of).collect();
    let after: Vec<&str> = front_lines(&text).into_iter().map(key_of).collect();
    assert_eq!(after, before, "{text}");
    assert!(text.contains("\nphase: complete\n"), "{text}");
    assert!(text.contains("\nprogress: 6/6\n"), "{text}");
    assert!(
        text.contains("\niteration: 4\n"),
        "two iterations after 2: {text}"
    );
    let updated = front_lines(&text)
        .into_iter()
        .find(|l| l.starts_with("updated: "))
        .unwrap();
    let stamp = &updated["updated: ".len()..];
    assert!(
        stamp.len() == 20 && stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
        "an ISO timestamp stays one: {stamp}"
    );
    assert_ne!(stamp, "2026-02-24T03:17:42Z");
    // The body is untouched but for the boxes.
    let body = |t: &str| t[t.find("\n# ").unwrap()..].replace("- [x]", "- [ ]");
    assert_eq!(body(&text), body(&prd));
    let st = sb.state();
    assert_eq!(st["loopPrdId"], "20260224-020000_webhook-retry-backoff");
    assert_eq!(
        st["summary"], "completed: 6/6 criteria in 2 iterations",
        "{st}"
    );
    assert!(
        st["taskDescription"]
            .as_str()
            .unwrap()
            .starts_with("Loop: 20260224-020000_webhook-retry-backoff [6/6"),
        "{st}"
    );
    let names: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.pai().join("MEMORY/STATE/session-names.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        names[st["sessionId"].as_str().unwrap()],
        "Loop: Add retry with backoff to the webhook sender [COMPLETE]"
    );
    // Once complete, a second run leaves it alone.
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0);
    assert!(stderr(&out).contains("already complete (phase: complete)"));
}

#[test]
fn bold_ids_are_criteria_and_keep_their_bold() {
    let prd = fixture_prd("bold-ids.md");
    let sb = Sandbox::new(&prd, json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--no-verify"]);
    // The open `**Note:** …` box in the criteria section is no criterion: it is named, and
    // the run does not claim completion while it is open.
    let err = stderr(&out);
    assert_eq!(code(&out), 4, "{err}");
    assert!(err.contains("PRD.md:29: the open box `**Note:**"), "{err}");
    let text = sb.prd_text();
    assert!(!text.contains("status: COMPLETE"), "{text}");
    assert!(text.contains("- [x] **ISC-C2**: Reloading"), "{text}");
    assert!(text.contains("- [x] **ISC-A1:** No setting"), "{text}");
    assert_eq!(
        text.replace("- [x]", "- [ ]")[text.find("\n# ").unwrap()..],
        prd.replace("- [x]", "- [ ]")[prd.find("\n# ").unwrap()..]
    );
}

#[test]
fn verify_refuses_a_file_that_is_not_a_prd_and_changes_nothing() {
    let readme = "# My project\n\nSome notes.\n\n- [ ] buy milk\n";
    let sb = Sandbox::new(readme, json!({}));
    let mut text = transcript(&sb, &[&["verify", "PRD.md"]]);
    assert_eq!(sb.prd_text(), readme);
    // A front matter without criteria: the message `run` gives.
    let empty = "---\nid: x\n---\n# Nothing yet\n";
    std::fs::write(sb.prd(), empty).unwrap();
    for cmd in ["verify", "plan", "run"] {
        text.push('\n');
        text.push_str(&transcript(&sb, &[&[cmd, "PRD.md"]]));
        assert_eq!(sb.prd_text(), empty, "{cmd}");
    }
    snapshot!(sb.root(), "not_a_prd_and_no_criteria", &text);
}

#[test]
fn the_real_isa_files_run_with_an_agent_that_always_passes() {
    // As a new user would try them: every claim prdloop can read passes; nothing else moves.
    for (name, workers, progress) in [
        ("real-isa/05-photomanager-isa-135.md", 135, "135/135"),
        ("real-isa/21-rounds-isa-inline-probe.md", 12, "61/61"),
        ("real-isa/22-aihviewer-isa-no-task-slug.md", 0, "30/30"),
    ] {
        let isa = fixture_prd(name);
        let sb = Sandbox::new(&isa, json!({"*": ["pass"]}));
        let out = sb.run(&["run", "PRD.md", "-n", "1", "-a", "4"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 0, "{name}: {err}");
        assert_eq!(sb.worker_records().len(), workers, "{name}");
        let text = sb.prd_text();
        let ticked = |t: &str| t.matches("- [x] ").count();
        assert_eq!(
            ticked(&text),
            ticked(&isa) + workers,
            "{name}: no author tick lost"
        );
        let fm = &text[..text[4..].find("\n---\n").unwrap() + 4];
        assert!(fm.contains("\nphase: complete\n"), "{name}: {fm}");
        assert!(
            fm.contains(&format!("\nprogress: {progress}\n")),
            "{name}: {fm}"
        );
        for v3 in [
            "loopStatus",
            "status:",
            "failing_criteria",
            "verification_summary",
        ] {
            assert!(!fm.contains(v3), "{name}: {v3} in {fm}");
        }
        // The body is the author's, but for the boxes.
        let body = |t: &str| t[t.find("\n## ").unwrap()..].replace("- [x] ", "- [ ] ");
        assert_eq!(body(&text), body(&isa), "{name}");
        // Once complete, the next run leaves it alone.
        let again = sb.run(&["run", "PRD.md"]);
        assert!(
            stderr(&again).contains("already complete (phase: complete)"),
            "{name}"
        );
        assert_eq!(sb.prd_text(), text, "{name}");
    }
}
