//! `prdloop run A.md B.md C.md`: several PRDs as sub-loops of one process under one cap on
//! concurrent workers, one combined summary and exit code, stops and pauses shared, and
//! `--with-children`.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::json;

/// A PRD file `name` in the sandbox's work folder with these criteria (and `children:`).
fn write_prd(sb: &Sandbox, name: &str, criteria: &[&str], children: &[&str]) -> PathBuf {
    let text = prd_with(criteria)
        .replace(
            "children: []",
            &format!("children: [{}]", children.join(", ")),
        )
        .replace("id: PRD-20261130-test", &format!("id: PRD-{name}"));
    let path = sb.work().join(format!("{name}.md"));
    std::fs::write(&path, text).unwrap();
    path
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// The most workers that ran at once, from the fake agent's start and end times.
fn max_overlap(records: &[serde_json::Value]) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for r in records {
        let start = r["start"].as_u64().expect("start");
        let end = r["end"].as_u64().expect("end: the worker finished");
        edges.push((start, 1));
        edges.push((end, -1));
    }
    // An end at the same millisecond as a start is counted first: they did not overlap.
    edges.sort();
    let (mut now, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        max = max.max(now);
    }
    max as usize
}

/// Every state file, by the PRD it belongs to.
fn states(sb: &Sandbox) -> Vec<serde_json::Value> {
    std::fs::read_dir(sb.state_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| serde_json::from_str(&read(&p)).ok())
        .collect()
}

fn state_of(sb: &Sandbox, prd: &Path) -> serde_json::Value {
    let want = std::fs::canonicalize(prd).unwrap().display().to_string();
    let mut of: Vec<serde_json::Value> = states(sb)
        .into_iter()
        .filter(|s| s["loopPrdPath"] == want.as_str())
        .collect();
    assert_eq!(of.len(), 1, "one state file for {want}");
    of.remove(0)
}

fn records_of(sb: &Sandbox, prd: &Path) -> Vec<serde_json::Value> {
    let want = std::fs::canonicalize(prd).unwrap().display().to_string();
    sb.worker_records()
        .into_iter()
        .filter(|r| r["prd"] == want.as_str())
        .collect()
}

#[test]
fn three_prds_never_run_more_workers_than_the_cap_and_each_ends_as_alone() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"*": ["sleep:300"]}),
    );
    let prds: Vec<PathBuf> = ["A", "B", "C"]
        .iter()
        .map(|n| {
            let ids: Vec<String> = (1..=3)
                .map(|i| format!("- [ ] ISC-{n}-{i}: c{i}"))
                .collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            write_prd(&sb, n, &ids, &[])
        })
        .collect();
    let out = sb.run(&[
        "run",
        "A.md",
        "B.md",
        "C.md",
        "-a",
        "3",
        "--max-workers",
        "2",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let records = sb.worker_records();
    assert_eq!(records.len(), 9, "one worker per criterion: {err}");
    let overlap = max_overlap(&records);
    assert!(overlap <= 2, "{overlap} workers at once over a cap of 2");
    assert_eq!(overlap, 2, "the sub-loops run at once");
    for (name, prd) in ["A", "B", "C"].iter().zip(&prds) {
        let text = read(prd);
        assert_eq!(text.matches("- [x]").count(), 3, "{name}: {text}");
        assert!(text.contains("status: COMPLETE"), "{name}: {text}");
        assert!(text.contains("loopStatus: completed"), "{name}: {text}");
        let st = state_of(&sb, prd);
        assert_eq!(st["active"], false);
        assert_eq!(st["criteria"].as_array().unwrap().len(), 3);
        assert_eq!(records_of(&sb, prd).len(), 3);
        assert!(
            err.contains(&format!("[{name}] ")),
            "lines say their PRD: {err}"
        );
    }
    // The PRD that was not named is untouched.
    assert!(!sb.prd_text().contains("- [x]"));
    assert!(err.contains("3 PRDs (exit 0):"), "{err}");
    assert!(err.contains("total: 9/9 pass"), "{err}");
}

#[test]
fn the_cap_applies_to_one_prd_only_when_given() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"]),
        json!({"*": ["sleep:300"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "3", "--max-workers", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(max_overlap(&sb.worker_records()), 1);
    assert!(
        !stderr(&out).contains("PRDs (exit"),
        "no combined summary for one PRD"
    );
}

#[test]
fn the_exit_code_is_the_worst_and_the_summary_combines_them() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"ISC-A-1": ["pass"], "ISC-B-1": ["fail:still broken"]}),
    );
    let a = write_prd(&sb, "A", &["- [ ] ISC-A-1: a"], &[]);
    let b = write_prd(&sb, "B", &["- [ ] ISC-B-1: b"], &[]);
    let out = sb.run(&["run", "A.md", "B.md", "-n", "1", "--json"]);
    let err = stderr(&out);
    assert_eq!(
        code(&out),
        1,
        "complete (0) and not complete (1) → 1: {err}"
    );
    assert!(read(&a).contains("- [x] ISC-A-1"));
    assert!(read(&b).contains("- [ ] ISC-B-1"));
    assert!(err.contains("2 PRDs (exit 1):"), "{err}");
    // The two workers and the verifier's review of the pass.
    assert!(err.contains("total: 1/2 pass · $0.0035"), "{err}");
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ends: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "end").collect();
    assert_eq!(ends.len(), 2, "each sub-loop's own end event");
    assert!(ends.iter().all(|e| e["prd"].is_string()), "{ends:?}");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "group_end");
    assert_eq!(last["exitCode"], 1);
    assert_eq!(last["prds"].as_array().unwrap().len(), 2);
    assert_eq!(last["prds"][0]["outcome"], "completed");
    assert_eq!(last["prds"][1]["outcome"], "failed");
}

#[test]
fn an_input_error_in_one_prd_is_its_own_outcome() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"*": ["pass"]}),
    );
    let a = write_prd(&sb, "A", &["- [ ] ISC-A-1: a"], &[]);
    std::fs::write(sb.work().join("E.md"), "---\nid: e\n---\n\n# no criteria\n").unwrap();
    let out = sb.run(&["run", "A.md", "E.md"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        read(&a).contains("- [x] ISC-A-1"),
        "the other PRD ran: {err}"
    );
    assert!(err.contains("[E] "), "{err}");
}

#[test]
fn an_agent_that_cannot_work_in_one_prd_stops_the_others() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"ISC-A-1": ["auth"], "*": ["sleep:3000"]}),
    );
    let a = write_prd(&sb, "A", &["- [ ] ISC-A-1: a"], &[]);
    let b = write_prd(
        &sb,
        "B",
        &["- [ ] ISC-B-1: b", "- [ ] ISC-B-2: b", "- [ ] ISC-B-3: b"],
        &[],
    );
    let out = sb.run(&["run", "A.md", "B.md", "-a", "1", "--kill-grace", "1s"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 5, "{err}");
    assert!(read(&a).contains("loopStatus: paused"));
    let tb = read(&b);
    assert!(tb.contains("loopStatus: paused"), "{tb}");
    assert!(
        !tb.contains("- [x]"),
        "B stopped before anything passed: {tb}"
    );
    assert!(
        records_of(&sb, &b).len() <= 1,
        "B started no worker after A's failure"
    );
    let st = state_of(&sb, &b);
    assert!(
        st["stopReason"].as_str().unwrap_or("").contains("in A"),
        "{st}"
    );
    assert!(err.contains("stopping this PRD too"), "{err}");
    sb.assert_no_process_left();
}

#[test]
fn with_children_runs_the_children_first_then_the_parent() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"*": ["sleep:200"]}),
    );
    std::fs::create_dir_all(sb.work().join("kids")).unwrap();
    write_prd(
        &sb,
        "kids/K1",
        &["- [ ] ISC-K1-1: k", "- [ ] ISC-K1-2: k"],
        &[],
    );
    // A child by id (found in PAI's locations), and one by path.
    let k2 = write_prd(&sb, "K2", &["- [ ] ISC-K2-1: k"], &[]);
    let p = write_prd(&sb, "P", &["- [ ] ISC-P-1: p"], &["kids/K1.md", "K2.md"]);
    let out = sb.run(&["run", "P.md", "--with-children", "-a", "2"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let records = sb.worker_records();
    assert_eq!(records.len(), 4, "{err}");
    let parent = records_of(&sb, &p);
    assert_eq!(parent.len(), 1);
    let parent_start = parent[0]["start"].as_u64().unwrap();
    for r in records.iter().filter(|r| r["criterion"] != "ISC-P-1") {
        assert!(
            r["end"].as_u64().unwrap() <= parent_start,
            "a child ended after the parent began: {r}"
        );
    }
    assert!(read(&k2).contains("status: COMPLETE"));
    assert!(read(&p).contains("status: COMPLETE"));
    assert!(err.contains("3 PRDs (exit 0):"), "{err}");
}

#[test]
fn with_children_a_parent_whose_child_did_not_complete_does_not_start() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"ISC-K-1": ["fail"], "*": ["pass"]}),
    );
    write_prd(&sb, "K", &["- [ ] ISC-K-1: k"], &[]);
    let p = write_prd(&sb, "P", &["- [ ] ISC-P-1: p"], &["K.md"]);
    let out = sb.run(&["run", "P.md", "--with-children", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(records_of(&sb, &p).is_empty());
    assert!(read(&p).contains("- [ ] ISC-P-1"));
    assert!(err.contains("its children are not complete (K)"), "{err}");
}

#[test]
fn with_children_refuses_a_cycle_before_running_anything() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"*": ["pass"]}),
    );
    write_prd(&sb, "A", &["- [ ] ISC-A-1: a"], &["B.md"]);
    write_prd(&sb, "B", &["- [ ] ISC-B-1: b"], &["A.md"]);
    let out = sb.run(&["run", "A.md", "--with-children"]);
    snapshot!(sb.root(), "a_cycle_of_children", &shown(&out));
    assert!(sb.worker_records().is_empty());
}

#[test]
fn a_usage_limit_in_one_prd_pauses_them_all() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"ISC-A-1": ["usage-limit-once:5"], "ISC-B-1": ["sleep:2000"], "*": ["pass"]}),
    );
    let a = write_prd(&sb, "A", &["- [ ] ISC-A-1: a"], &[]);
    let b = write_prd(&sb, "B", &["- [ ] ISC-B-1: b", "- [ ] ISC-B-2: b"], &[]);
    let out = sb.run(&["run", "A.md", "B.md", "-a", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(read(&a).contains("- [x] ISC-A-1"));
    assert!(read(&b).contains("- [x] ISC-B-2"));
    let records = sb.worker_records();
    let limited = records
        .iter()
        .find(|r| r["criterion"] == "ISC-A-1")
        .unwrap();
    // The reset is 5 s after the limited worker began (whole seconds); B's next worker, due
    // 2 s in, waited for it.
    let reset = (limited["start"].as_u64().unwrap() / 1000 + 5) * 1000;
    let b2 = records
        .iter()
        .find(|r| r["criterion"] == "ISC-B-2")
        .unwrap();
    assert!(
        b2["start"].as_u64().unwrap() >= reset,
        "ISC-B-2 started before A's usage limit reset: {err}"
    );
    assert!(err.contains("all PRDs wait"), "{err}");
}

#[test]
fn ctrl_c_ends_every_sub_loop_promptly() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-X-1: unused"]),
        json!({"*": ["hang"]}),
    );
    let a = write_prd(&sb, "A", &["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: a"], &[]);
    let b = write_prd(&sb, "B", &["- [ ] ISC-B-1: b", "- [ ] ISC-B-2: b"], &[]);
    // A cap of 1: one sub-loop's worker runs, the other waits for a permit.
    let child = sb.spawn(&[
        "run",
        "A.md",
        "B.md",
        "-a",
        "2",
        "--max-workers",
        "1",
        "--kill-grace",
        "1s",
    ]);
    let pid = child.id();
    sb.wait_for_workers(1);
    // Both loops are under way (each has saved its state): one worker runs, the other loop's
    // waits for the one slot.
    let t = std::time::Instant::now();
    while sb.state_count() < 2 {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "B never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    send_signal(pid, "INT");
    let out = wait_output(child, std::time::Duration::from_secs(30));
    let err = stderr(&out);
    assert_eq!(code(&out), 130, "{err}");
    for prd in [&a, &b] {
        let text = read(prd);
        assert!(text.contains("loopStatus: paused"), "{text}");
        assert!(!text.contains("- [x]"));
    }
    assert!(err.contains("2 PRDs (exit 130):"), "{err}");
    sb.assert_no_process_left();
}

#[test]
fn with_children_and_no_children_is_a_run_alone_without_a_default_cap() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"]),
        json!({"*": ["sleep:500"]}),
    );
    let out = sb.run(&["run", "PRD.md", "--with-children", "-a", "3"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert_eq!(max_overlap(&sb.worker_records()), 3, "{err}");
    assert!(!err.contains("[PRD]"), "no labels for one PRD: {err}");
    assert!(!err.contains("PRDs (exit"), "{err}");
}
