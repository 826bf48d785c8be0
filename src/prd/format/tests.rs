use std::path::{Path, PathBuf};

use super::*;
use crate::graph::Graph;
use crate::prd::{HowVerified, Prd, VerifyTypes};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/prds/formats")
        .join(rel)
}

fn load(rel: &str) -> Prd {
    crate::prd::load(&fixture(rel)).unwrap()
}

fn ids(p: &Prd) -> Vec<&str> {
    p.criteria.iter().map(|c| c.id.as_str()).collect()
}

/// Ticks `id` and checks that exactly `from` became `to` in the text, nothing else.
fn tick_changes(p: &mut Prd, id: &str, checked: bool, from: &str, to: &str) {
    let before = p.text().to_string();
    assert_eq!(p.set_checked(id, checked), Some(true), "{id}");
    let at = p.criterion(id).unwrap().marker.start;
    let mut want = before.clone();
    want.replace_range(at..at + from.len(), to);
    assert_eq!(&before[at..at + from.len()], from);
    assert_eq!(p.text(), want, "only the marker of {id} changes");
    assert_eq!(p.criterion(id).unwrap().checked, checked);
}

#[test]
fn formats_are_told_by_path_and_content() {
    let cases = [
        ("ralph/prd.json", ListFormat::Ralph),
        ("ralph-tui/prd.json", ListFormat::RalphTui),
        (
            "taskmaster/.taskmaster/tasks/tasks.json",
            ListFormat::Taskmaster,
        ),
        (
            "spec-kit/specs/001-photo-albums/tasks.md",
            ListFormat::SpecKit,
        ),
        ("kiro/.kiro/specs/user-auth/tasks.md", ListFormat::Kiro),
    ];
    for (rel, want) in cases {
        let p = load(rel);
        assert_eq!(p.list_format(), want, "{rel}");
        assert_eq!(p.format_name(), want.name());
    }
    // The same content elsewhere, by its boxes.
    let t = "# Tasks\n\n- [ ] T001 Do a\n";
    assert_eq!(
        ListFormat::detect(Path::new("tasks.md"), t),
        Ok(ListFormat::SpecKit)
    );
    let t = "# Plan\n\n- [ ] 1. Do a\n";
    assert_eq!(
        ListFormat::detect(Path::new("x/tasks.md"), t),
        Ok(ListFormat::Kiro)
    );
    assert_eq!(
        ListFormat::detect(Path::new("PRD.md"), "- [ ] T001 a\n"),
        Ok(ListFormat::Markdown)
    );
    let e = ListFormat::detect(Path::new("x/package.json"), "{\"name\": \"x\"}").unwrap_err();
    assert!(e.contains("x/package.json is JSON but no task list"), "{e}");
    let e = ListFormat::detect(Path::new("prd.json"), "{\n  \"userStories\": [,]\n}").unwrap_err();
    assert!(e.starts_with("prd.json:2: not valid JSON"), "{e}");
}

#[test]
fn companion_files_are_no_task_lists() {
    for (rel, run) in [
        ("ralph/progress.txt", "ralph/prd.json"),
        (
            "spec-kit/specs/001-photo-albums/spec.md",
            "001-photo-albums/tasks.md",
        ),
        (
            "spec-kit/specs/001-photo-albums/plan.md",
            "001-photo-albums/tasks.md",
        ),
        (
            "kiro/.kiro/specs/user-auth/requirements.md",
            "user-auth/tasks.md",
        ),
    ] {
        let e = crate::prd::load(&fixture(rel)).unwrap_err().to_string();
        assert!(e.contains("is not a task list"), "{e}");
        assert!(e.ends_with(run), "{e}");
    }
    // A plan.md of one's own is read as a PRD.
    assert_eq!(
        ListFormat::detect(Path::new("/nowhere/plan.md"), "# P\n"),
        Ok(ListFormat::Markdown)
    );
}

#[test]
fn ralph_stories_in_priority_order_with_their_checks() {
    let p = load("ralph/prd.json");
    assert_eq!(ids(&p), ["US-001", "US-002", "US-003"]);
    assert_eq!(p.display_title(), Some("MyApp"));
    assert_eq!(
        p.context(),
        Some("Task Priority System - Add priority levels to tasks")
    );
    assert_eq!(p.progress(), (1, 3));
    let types = VerifyTypes::default();
    let us3 = p.criterion("US-003").unwrap();
    assert_eq!(us3.line, 19);
    assert_eq!(
        us3.how_verified(&types),
        HowVerified::Command("npm run typecheck && npm test")
    );
    let us2 = p.criterion("US-002").unwrap();
    assert!(
        matches!(us2.how_verified(&types), HowVerified::Agent { why } if why.contains("Each task card")),
        "{:?}",
        us2.how_verified(&types)
    );
    assert!(
        us2.notes
            .iter()
            .any(|n| n == "notes: Badge component exists in src/components/Badge.tsx")
    );
    let tui = load("ralph-tui/prd.json");
    assert_eq!(tui.display_title(), Some("Dark mode"));
    let g = Graph::of(&tui).unwrap();
    assert_eq!(g.needs("US-002"), ["US-001"]);
}

#[test]
fn ralph_writes_change_only_passes() {
    let mut p = load("ralph/prd.json");
    tick_changes(&mut p, "US-002", true, "false", "true");
    tick_changes(&mut p, "US-001", false, "true", "false");
    let mut tui = load("ralph-tui/prd.json");
    tick_changes(&mut tui, "US-001", true, "false", "true");
    assert!(!tui.text().ends_with('\n'), "no final newline added");
}

#[test]
fn taskmaster_tasks_subtasks_tombstones_and_order() {
    let p = load("taskmaster/.taskmaster/tasks/tasks.json");
    // High priority first, then medium; a task's subtasks with it; cancelled and deferred
    // are no criteria.
    assert_eq!(ids(&p), ["1", "4", "2", "2.1", "2.2"]);
    assert_eq!(p.criterion("2").unwrap().leaves, ["2.1", "2.2"]);
    assert!(p.is_tombstone("2.3"));
    assert_eq!(
        p.unreadable_open()
            .map(|b| b.id.as_deref())
            .collect::<Vec<_>>(),
        [Some("3")]
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.message.contains("task 3 is deferred"))
    );
    let g = Graph::of(&p).unwrap();
    assert_eq!(g.needs("2.2"), ["2.1", "1"]);
    let types = VerifyTypes::default();
    assert_eq!(
        p.criterion("4").unwrap().how_verified(&types),
        HowVerified::Command("npm run test -- login")
    );
    assert!(matches!(
        p.criterion("2.2").unwrap().how_verified(&types),
        HowVerified::Agent { .. }
    ));
    assert_eq!(p.criterion("2.2").unwrap().domain, "2");
}

#[test]
fn taskmaster_writes_change_only_the_status_string() {
    let mut p = load("taskmaster/.taskmaster/tasks/tasks.json");
    tick_changes(&mut p, "2.2", true, "\"pending\"", "\"done\"");
    // The parent is ticked when its subtasks are: its status, in place.
    let before = p.text().to_string();
    assert_eq!(p.tick_parents(), ["2"]);
    assert_eq!(
        p.text(),
        before.replacen("\"status\": \"in-progress\"", "\"status\": \"done\"", 1)
    );
    tick_changes(&mut p, "1", false, "\"done\"", "\"pending\"");
}

#[test]
fn spec_kit_phases_parallel_tasks_and_the_rule_at_the_top() {
    let p = load("spec-kit/specs/001-photo-albums/tasks.md");
    assert!(!p.has_front_matter());
    assert_eq!(p.display_title(), Some("Tasks: Photo Albums"));
    assert_eq!(
        ids(&p),
        ["T001", "T002", "T003", "T004", "T005", "T006", "T007"]
    );
    assert_eq!(p.progress(), (2, 7));
    let t7 = p.criterion("T007").unwrap();
    assert_eq!(t7.description, "Render the album grid in src/ui/grid.tsx");
    assert!(t7.notes.contains(&"User story: US1".to_string()));
    let g = Graph::of(&p).unwrap();
    // Each phase waits for the one before.
    assert_eq!(g.needs("T003"), ["T001", "T002"]);
    assert_eq!(g.needs("T005"), ["T003", "T004"]);
    assert!(g.needs("T001").is_empty());
    // `[P]` tasks get a lane of their own; the others of a phase share one.
    assert_eq!(p.criterion("T002").unwrap().domain, "T002");
    assert_eq!(
        p.criterion("T006").unwrap().domain,
        p.criterion("T007").unwrap().domain
    );
    let mut p = p;
    tick_changes(&mut p, "T007", true, " ", "x");
    tick_changes(&mut p, "T001", false, "X", " ");
}

#[test]
fn kiro_tasks_nest_and_carry_their_requirements() {
    let mut p = load("kiro/.kiro/specs/user-auth/tasks.md");
    assert_eq!(ids(&p), ["1", "2", "2.1", "2.2", "3"]);
    assert_eq!(p.criterion("2").unwrap().leaves, ["2.1", "2.2"]);
    let two_one = p.criterion("2.1").unwrap();
    assert_eq!(
        two_one.description,
        "Create core data model interfaces and types"
    );
    assert_eq!(
        two_one.notes,
        [
            "Write TypeScript interfaces for all data models",
            "Requirements: 2.1, 3.3, 1.2"
        ]
    );
    let g = Graph::of(&p).unwrap();
    assert_eq!(g.needs("3"), ["2.1", "2.2"]);
    assert_eq!(g.needs("2.1"), ["1"]);
    tick_changes(&mut p, "2.1", true, " ", "x");
    tick_changes(&mut p, "2.2", true, " ", "x");
    assert_eq!(p.tick_parents(), ["2"]);
    assert!(p.text().contains("- [x] 2. Implement data models"));
}

#[test]
fn the_background_holds_notes_and_linked_files() {
    let path = fixture("kiro/.kiro/specs/user-auth/tasks.md");
    let p = crate::prd::load(&path).unwrap();
    let b = background(&p, &path, p.criterion("2.1").unwrap());
    assert!(b.starts_with("- Write TypeScript interfaces"), "{b}");
    assert!(
        b.contains("## requirements.md, beside the task list"),
        "{b}"
    );
    assert!(b.contains("THEN the system SHALL start a session"), "{b}");
    let path = fixture("ralph/prd.json");
    let p = crate::prd::load(&path).unwrap();
    let b = background(&p, &path, p.criterion("US-002").unwrap());
    assert!(b.contains("## progress.txt, beside the task list"), "{b}");
    // A big log gives its end only; a big spec its start.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("prd.json");
    std::fs::write(&big, crate::prd::load(&path).unwrap().text()).unwrap();
    let log = format!("OLDEST\n{}NEWEST\n", "x\n".repeat(CONTEXT_CAP));
    std::fs::write(dir.path().join("progress.txt"), log).unwrap();
    let b = background(&p, &big, p.criterion("US-002").unwrap());
    assert!(b.contains("(its last 64 KiB)") && b.contains("NEWEST") && !b.contains("OLDEST"));
    let path = fixture("spec-kit/specs/001-photo-albums/tasks.md");
    let p = crate::prd::load(&path).unwrap();
    let b = background(&p, &path, p.criterion("T003").unwrap());
    assert!(b.contains("FR-001") && b.contains("TypeScript 5.4"), "{b}");
}

#[test]
fn bad_input_names_its_line() {
    let e =
        Prd::parse_as("{\"userStories\": [{\"id\": \"US-1\"}]}", ListFormat::Ralph).unwrap_err();
    assert!(e.message.contains("US-1 has no `passes`"), "{}", e.message);
    let e = Prd::parse_as(
        "{\"userStories\": [\n{\"id\": \"A\", \"passes\": false},\n{\"id\": \"A\", \"passes\": true}]}",
        ListFormat::Ralph,
    )
    .unwrap_err();
    assert_eq!(e.line, 3);
    let e = Prd::parse_as(
        "{\"tasks\": [{\"id\": 1, \"title\": \"x\"}]}",
        ListFormat::Taskmaster,
    )
    .unwrap_err();
    assert!(
        e.message.contains("task 1 has no `status`"),
        "{}",
        e.message
    );
}

/// A need on a cancelled task is met (it will never be done); one on a deferred task waits
/// while it is deferred; one on no task at all is still an error.
#[test]
fn taskmaster_needs_on_cancelled_and_deferred_tasks() {
    let text = r#"{"master": {"tasks": [
  {"id": 1, "title": "A", "status": "cancelled", "dependencies": []},
  {"id": 2, "title": "B", "status": "pending", "dependencies": [1]},
  {"id": 3, "title": "C", "status": "deferred", "dependencies": []},
  {"id": 4, "title": "D", "status": "pending", "dependencies": [3, 2]}
]}}"#;
    let p = Prd::parse_as(text, ListFormat::Taskmaster).unwrap();
    assert_eq!(ids(&p), ["2", "4"]);
    assert!(p.is_deferred("3") && !p.is_deferred("1") && p.is_tombstone("1"));
    let g = Graph::of(&p).unwrap();
    assert!(g.needs("2").is_empty(), "{:?}", g.needs("2"));
    assert_eq!(g.needs("4"), ["3", "2"]);
    assert_eq!(g.deferred_needs("4"), ["3"]);
    assert!(g.deferred_needs("2").is_empty());
    assert_eq!(g.waves(&["2", "4"]), vec![vec!["2"], vec!["4"]]);
    let e =
        Graph::of(&Prd::parse_as(text.replace("[3, 2]", "[9]"), ListFormat::Taskmaster).unwrap())
            .unwrap_err();
    assert!(e.message.contains("4 needs 9"), "{}", e.message);
}

/// Kiro's optional tasks (`- [ ]* 2.3 …`, which CommonMark reads as no box) are criteria,
/// marked optional, no leaf of their parent; their box is written with the `*` kept.
#[test]
fn kiro_optional_tasks_are_criteria_their_parent_passes_without() {
    let mut p = load("kiro-optional/.kiro/specs/search/tasks.md");
    assert_eq!(ids(&p), ["1", "2", "2.1", "2.2", "2.3", "3", "4"]);
    let opt = p.criterion("2.3").unwrap();
    assert!(opt.optional && !opt.checked);
    assert_eq!(opt.description, "Write property tests for the tokeniser");
    assert!(
        opt.notes.iter().any(|n| n == "Requirements: 1.2"),
        "{:?}",
        opt.notes
    );
    assert!(p.criterion("4").unwrap().optional && p.criterion("4").unwrap().checked);
    assert!(!p.criterion("2.2").unwrap().optional);
    assert_eq!(p.criterion("2").unwrap().leaves, ["2.1", "2.2"]);
    // The optional sub-task waits for what its parent waits for.
    let g = Graph::of(&p).unwrap();
    assert_eq!(g.needs("2.3"), ["1"]);
    assert_eq!(g.needs("3"), ["2.1", "2.2"]);
    tick_changes(&mut p, "2.3", true, " ", "x");
    assert!(p.text().contains("- [x]* 2.3 Write property tests"));
    tick_changes(&mut p, "4", false, "x", " ");
    assert!(p.text().contains("- [ ]* 4. Benchmark"));
    tick_changes(&mut p, "2.1", true, " ", "x");
    tick_changes(&mut p, "2.2", true, " ", "x");
    assert_eq!(p.tick_parents(), ["2"]);
    // Open optional tasks keep the list from being complete.
    assert!(p.open_boxes().iter().any(|b| b.label == "4"));
    // Elsewhere `[ ]*` is still no box.
    let md = Prd::parse("# T\n\n## Criteria\n\n- [ ] ISC-1: a\n- [ ]* ISC-2: b\n").unwrap();
    assert_eq!(ids(&md), ["ISC-1"]);
}

/// Spec Kit's template writes a task's own needs in its text: `(depends on T012, T013)`.
#[test]
fn spec_kit_depends_on_in_the_task_text_is_a_need() {
    let text = "# Tasks\n\n## Phase 1: Setup\n\n- [ ] T001 Create the project\n- [ ] T002 [P] Configure linting\n\n## Phase 2: User Story 1\n\n- [ ] T012 [P] [US1] Create the User model in src/models/user.py\n- [ ] T013 [P] [US1] Create the Album model in src/models/album.py\n- [ ] T014 [US1] Implement AlbumService in src/services/album.py (depends on T012, T013)\n- [ ] T015 [US1] Wire the endpoint (Depends on T014 and T001)\n";
    let p = Prd::parse_as(text, ListFormat::SpecKit).unwrap();
    let g = Graph::of(&p).unwrap();
    assert_eq!(g.needs("T014"), ["T001", "T002", "T012", "T013"]);
    assert_eq!(g.needs("T015"), ["T001", "T002", "T014"]);
    assert_eq!(g.needs("T012"), ["T001", "T002"]);
    assert_eq!(
        g.waves(&["T012", "T013", "T014", "T015"]),
        vec![vec!["T012", "T013"], vec!["T014"], vec!["T015"]]
    );
    // An id that is no task of the file is an error at the task's line.
    let bad = text.replace("T012, T013", "T099");
    let e = Graph::of(&Prd::parse_as(bad, ListFormat::SpecKit).unwrap()).unwrap_err();
    assert_eq!(e.line, 12);
    assert!(e.message.contains("T014 needs T099"), "{}", e.message);
}
