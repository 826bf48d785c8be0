//! Hostile workers: a worker that leaves a detached process holding its stdout.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

/// Kills the given pids when dropped, so a failing test leaves nothing behind.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &p in &self.0 {
            prdloop::platform::kill_pid(p);
        }
    }
}

/// Every `children` pid the fake agent recorded.
fn children(sb: &Sandbox) -> Vec<u32> {
    sb.worker_records()
        .iter()
        .flat_map(|r| r["children"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_u64().map(|c| c as u32))
        .collect()
}

#[test]
fn a_result_read_before_a_detached_holder_is_kept() {
    // Five workers at once, each printing PASS and leaving a process in a new session that
    // holds its stdout for 60 s: every result counts, and nobody waits for the holders.
    // One group each (the letter), so they run in parallel lanes.
    let ids: Vec<String> = ["A", "B", "C", "D", "E"]
        .iter()
        .map(|g| format!("ISC-HOLD{g}-1"))
        .collect();
    let lines: Vec<String> = ids
        .iter()
        .map(|id| format!("- [ ] {id}: printed PASS, then left a holder"))
        .collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sb = Sandbox::new(&prd_with(&lines), json!({"*": ["setsid-holder:60"]}));
    let child = sb.spawn(&["run", "PRD.md", "-a", "5", "-n", "1", "--timeout", "30s"]);
    // A safety limit, not a speed assertion: far below the holders' 60 s.
    let out = wait_output(child, Duration::from_secs(50));
    let holders = KillOnDrop(children(&sb));
    let err = stderr(&out);
    assert_eq!(holders.0.len(), 5, "each worker left a holder: {err}");
    assert!(
        holders.0.iter().all(|&p| prdloop::platform::is_alive(p)),
        "the holders outlived the run (the test is hostile enough)"
    );
    assert_eq!(code(&out), 0, "{err}");
    let text = sb.prd_text();
    for id in &ids {
        assert!(
            text.contains(&format!("- [x] {id}:")),
            "{id}: {err}\n{text}"
        );
    }
    assert!(!err.contains("no `RESULT"), "{err}");
}
