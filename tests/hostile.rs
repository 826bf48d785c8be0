//! Hostile workers and a hostile world: a worker that leaves a detached process holding its
//! stdout, and a runner killed with SIGKILL while its workers and Verify commands run.

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

/// A runner killed by SIGKILL takes its children with it: Linux's parent-death signal, set by
/// the exec trampoline. (On macOS the next run's takeover ends them; see run_loop.rs.)
#[cfg(target_os = "linux")]
mod killed_runner {
    use std::process::{Command, Stdio};
    use std::time::Instant;

    use super::*;

    /// Waits up to `limit` for `pid` to die; whether it did.
    fn dies_within(pid: u32, limit: Duration) -> bool {
        let t = Instant::now();
        while prdloop::platform::is_alive(pid) {
            if t.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    #[test]
    fn workers_die_with_a_runner_killed_by_sigkill() {
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: hangs"]), json!({"*": ["hang"]}));
        let child = sb.spawn(&["run", "PRD.md", "--timeout", "30m"]);
        sb.wait_for_workers(1);
        let worker = sb.worker_records()[0]["pid"].as_u64().unwrap() as u32;
        let _guard = KillOnDrop(vec![worker]);
        assert!(prdloop::platform::is_alive(worker));
        send_signal(child.id(), "KILL");
        let _ = wait_output(child, Duration::from_secs(30));
        assert!(
            dies_within(worker, Duration::from_secs(10)),
            "worker {worker} outlived the runner killed by SIGKILL"
        );
    }

    #[test]
    fn verify_commands_die_with_a_runner_killed_by_sigkill() {
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
        let pid_file = sb.root().join("verify.pid");
        let prd = prd_with(&[&format!(
            "- [ ] ISC-A-1: a | Verify: Test: `echo $$ > {}; exec sleep 600`",
            pid_file.display()
        )]);
        std::fs::write(sb.prd(), prd).unwrap();
        let child = sb.spawn(&["run", "PRD.md", "--verify-timeout", "30m"]);
        let t = Instant::now();
        let pid = loop {
            if let Some(p) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                break p;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "the check never ran");
            std::thread::sleep(Duration::from_millis(20));
        };
        let _guard = KillOnDrop(vec![pid]);
        assert!(prdloop::platform::is_alive(pid));
        send_signal(child.id(), "KILL");
        let _ = wait_output(child, Duration::from_secs(30));
        assert!(
            dies_within(pid, Duration::from_secs(10)),
            "the Verify command {pid} outlived the runner killed by SIGKILL"
        );
    }

    /// The exec trampoline (`prdloop __prdloop-exec <parent pid> <program> <args…>`) keeps the pid
    /// and the pipes, and reports a program it cannot run with status 127.
    #[test]
    fn the_exec_trampoline_keeps_the_pid_and_reports_a_missing_program() {
        let me = std::process::id().to_string();
        let out = Command::new(PRDLOOP)
            .args([
                "__prdloop-exec",
                &me,
                "sh",
                "-c",
                "echo $$; echo to-stderr >&2",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = out.id();
        let out = out.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), pid.to_string());
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), "to-stderr");

        let out = Command::new(PRDLOOP)
            .args(["__prdloop-exec", &me, "/nonexistent/agent", "-p"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(127), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("/nonexistent/agent"), "{err}");

        // A trampoline whose parent is not the one named ends at once without running anything.
        let marker = tempfile::tempdir().unwrap();
        let file = marker.path().join("ran");
        let out = Command::new(PRDLOOP)
            .args(["__prdloop-exec", "1", "touch"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{out:?}");
        assert!(
            !file.exists(),
            "the program ran under a parent that was gone"
        );

        // Hidden: not in the help.
        let help = Command::new(PRDLOOP).arg("--help").output().unwrap();
        assert!(!String::from_utf8_lossy(&help.stdout).contains("__prdloop-exec"));
    }
}
