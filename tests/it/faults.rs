//! Faults a hostile run found: a closed stderr, criteria deleted by a worker, a PRD that
//! goes away mid-run. Nothing lost, nothing faked.

use std::process::Stdio;

use crate::common::*;
use serde_json::json;

fn run_with_stderr(sb: &Sandbox, args: &[&str], stderr: Stdio) -> std::process::Output {
    let mut c = sb.command(args);
    c.stderr(stderr);
    let mut child = c.spawn().unwrap();
    // wait_output drains both pipes; stderr is not one here.
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut out = Vec::new();
    std::io::Read::read_to_end(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    std::process::Output {
        status,
        stdout: out,
        stderr: Vec::new(),
    }
}

#[test]
fn a_full_or_closed_stderr_never_stops_the_loop() {
    let crits = ["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"];
    // stderr to /dev/full: every write fails with ENOSPC.
    let sb = Sandbox::new(&prd_with(&crits), json!({"*": ["sleep:200"]}));
    let full = std::fs::File::options()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = run_with_stderr(&sb, &["run", "PRD.md", "-a", "3", "-v"], full.into());
    assert_eq!(code(&out), 0, "no panic, a normal end");
    let text = sb.prd_text();
    assert!(text.contains("\nloopStatus: completed\n"), "{text}");
    for c in crits {
        assert!(text.contains(&c.replacen("[ ]", "[x]", 1)), "{text}");
    }
    assert_eq!(sb.state()["active"], false);
    sb.assert_no_process_left();

    // stderr a pipe whose reader went away after the first line (`2>&1 | head -1`).
    let sb = Sandbox::new(&prd_with(&crits), json!({"*": ["sleep:300"]}));
    let mut c = sb.command(&["run", "PRD.md", "-a", "3"]);
    let mut child = c.spawn().unwrap();
    let mut err = child.stderr.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut err, &mut first).unwrap();
    drop(err);
    let out = wait_output_status(child);
    assert_eq!(out, 0);
    let text = sb.prd_text();
    assert!(text.contains("\nloopStatus: completed\n"), "{text}");
    assert_eq!(sb.state()["active"], false);
    sb.assert_no_process_left();
}

/// A child's stderr, read as it comes, for waiting on what it says.
struct Watch {
    text: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Watch {
    fn stderr(child: &mut std::process::Child) -> Watch {
        use std::io::BufRead;
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = std::sync::Arc::clone(&text);
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                let mut t = sink.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
            }
        });
        Watch { text }
    }

    /// Waits until stderr has said `needle` (a safety limit of 30 s).
    fn wait_for(&self, needle: &str) {
        let t = std::time::Instant::now();
        while !self.text().contains(needle) {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(30),
                "never said `{needle}`: {}",
                self.text()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }
}

/// Waits for a child whose stderr is read elsewhere; drains its stdout.
fn wait_output_status(mut child: std::process::Child) -> i32 {
    let mut out = child.stdout.take().unwrap();
    let t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
    });
    let s = child.wait().unwrap();
    t.join().unwrap();
    s.code().unwrap_or(-1)
}

/// Waits for a child whose stderr is read elsewhere; its exit code and its stdout.
fn wait_status_and_stdout(mut child: std::process::Child) -> (i32, String) {
    let mut out = child.stdout.take().unwrap();
    let t = std::thread::spawn(move || {
        let mut v = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut v);
        v
    });
    let s = child.wait().unwrap();
    (s.code().unwrap_or(-1), t.join().unwrap())
}

#[test]
fn a_worker_that_deletes_its_criterion_never_fakes_completion() {
    for step in ["delete-own-line", "empty-prd"] {
        let sb = Sandbox::new(
            &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
            json!({"ISC-A-1": [step], "*": ["pass"]}),
        );
        let out = sb.run(&["run", "PRD.md", "-n", "3"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{step}: {err}");
        assert!(!err.contains("complete: all"), "{step}: {err}");
        assert!(
            err.contains("disappeared from the PRD during the run"),
            "{step}: {err}"
        );
        assert!(err.contains("ISC-A-1"), "{step}: {err}");
        assert!(err.contains("prdloop resume"), "{step}: {err}");
        let text = sb.prd_text();
        assert!(!text.contains("status: COMPLETE"), "{step}: {text}");
        let st = sb.state();
        assert_eq!(st["active"], false, "{step}");
        assert!(st["summary"].as_str().unwrap().starts_with("failed:"));
    }
}

#[test]
fn a_prd_that_goes_away_mid_run_stops_the_run_with_its_results_kept() {
    for arg in ["", "dir"] {
        let step = if arg.is_empty() {
            "remove-prd".to_string()
        } else {
            format!("remove-prd:{arg}")
        };
        let sb = Sandbox::new(
            &prd_with(&[
                "- [ ] ISC-A-1: goes first",
                "- [ ] ISC-A-2: after it",
                "- [ ] ISC-A-3: after that",
            ]),
            json!({"ISC-A-1": [step], "*": ["pass"]}),
        );
        let out = sb.run(&["run", "PRD.md"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{arg}: {err}");
        assert!(!err.contains("complete: all"), "{arg}: {err}");
        assert!(err.contains("cannot be read any more"), "{arg}: {err}");
        assert!(err.contains("results so far are in"), "{arg}: {err}");
        assert_eq!(
            sb.worker_records().len(),
            1,
            "{arg}: no worker starts once the PRD is gone"
        );
        let st = sb.state();
        assert_eq!(st["active"], false);
        let a1 = &st["criteria"][0];
        assert_eq!(a1["id"], "ISC-A-1");
        assert_eq!(a1["status"], "completed", "{arg}: the pass is in the state");
    }
}

#[test]
fn resume_ticks_passes_that_never_reached_a_read_only_prd() {
    // The PRD's folder turns read-only after ISC-A-1 passed: the pass is in the state, not
    // in the PRD, and the run stops with exit 6.
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["freeze-prd-dir"], "ISC-B-1": ["sleep:500"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    let frozen = sb.worker_records().iter().any(|r| r["frozen"] == true);
    let _ = std::process::Command::new("chattr")
        .arg("-i")
        .arg(sb.work())
        .status();
    if !frozen {
        eprintln!(
            "skipped: `chattr +i` is not available here, so a read-only PRD folder cannot be made"
        );
        return;
    }
    let err = stderr(&out);
    assert_eq!(code(&out), 6, "an I/O failure: {err}");
    assert!(sb.prd_text().contains("- [ ] ISC-A-1:"), "never written");
    let st = sb.state();
    assert_eq!(
        st["active"], false,
        "the end state is recorded where it can be"
    );
    assert_eq!(st["criteria"][0]["status"], "completed");
    let out = sb.run(&["resume", "PRD.md"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains(
            "ISC-A-1 passed in the earlier session but its box never reached the PRD; ticked now"
        ),
        "{err}"
    );
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
    let a_runs = sb
        .worker_records()
        .iter()
        .filter(|r| r["criterion"] == "ISC-A-1")
        .count();
    assert_eq!(a_runs, 1, "ISC-A-1 is not run again");
}

#[test]
fn a_box_you_unticked_between_sessions_is_redone_not_reticked() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-B-1": ["fail", "pass"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2", "-n", "1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let text = sb.prd_text().replace("- [x] ISC-A-1:", "- [ ] ISC-A-1:");
    std::fs::write(sb.prd(), text).unwrap();
    let out = sb.run(&["resume", "PRD.md"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(!err.contains("never reached the PRD"), "{err}");
    let a_runs = sb
        .worker_records()
        .iter()
        .filter(|r| r["criterion"] == "ISC-A-1")
        .count();
    assert_eq!(a_runs, 2, "your untick stands: ISC-A-1 is worked on again");
}

#[test]
fn a_deletion_noticed_before_ctrl_c_still_ends_with_exit_2() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["delete-own-line"], "ISC-B-1": ["hang"]}),
    );
    let mut child = sb.spawn(&["run", "PRD.md", "-a", "2", "--kill-grace", "1s"]);
    let err = Watch::stderr(&mut child);
    // The deletion is seen at the next write; then Ctrl-C while ISC-B-1 still runs.
    err.wait_for("disappeared from the PRD during the run");
    send_signal(child.id(), "INT");
    let status = wait_output_status(child);
    let err = err.text();
    assert_eq!(status, 2, "{err}");
    assert!(err.contains("ISC-A-1 disappeared from the PRD"), "{err}");
    assert!(!err.contains("complete: all"), "{err}");
    sb.assert_no_process_left();
}

#[test]
fn a_resumed_run_rechecks_the_ticks_its_earlier_session_made() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: ok exists | Verify: Test: `test -f ok`",
            "- [ ] ISC-B-1: slow",
        ]),
        json!({"ISC-A-1": ["write:ok"], "ISC-B-1": ["hang"]}),
    );
    std::fs::write(sb.work().join("ok"), "").unwrap();
    let child = sb.spawn(&["run", "PRD.md", "-a", "2", "--kill-grace", "1s"]);
    sb.wait_for_workers(1);
    sb.wait_for_prd("- [x] ISC-A-1:");
    send_signal(child.id(), "INT");
    let out = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    // The session's own tick (by its check) is not the author's: after `ok` goes, resume
    // unticks it and works on it again.
    std::fs::remove_file(sb.work().join("ok")).unwrap();
    sb.set_plan(json!({"*": ["pass"], "ISC-A-1": ["write:ok"]}));
    let out = sb.run(&["resume", "PRD.md"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains("ISC-A-1 FAIL ticked, but its Verify command fails: unticked"),
        "{err}"
    );
    assert!(
        sb.worker_records()
            .iter()
            .any(|r| r["criterion"] == "ISC-A-1"),
        "ISC-A-1 was worked on again"
    );
    assert!(sb.work().join("ok").exists());
}

/// The third Ctrl-C exits without the summary, but a `--json` stream still ends with its
/// `end` event: the run's end as it stood, paused, exit 130.
#[test]
fn a_third_ctrl_c_still_ends_the_json_stream() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        // The worker outlives the first Ctrl-C (it ignores SIGTERM, the grace is a minute),
        // and after the second (SIGKILL) a grandchild of another session still holds its
        // pipes for the drain window: the run is still there for the third.
        json!({"*": ["ignore-sigterm:hold"]}),
    );
    let mut child = sb.spawn(&["run", "PRD.md", "--kill-grace", "60s", "--json"]);
    let err = Watch::stderr(&mut child);
    sb.wait_for_workers(1);
    let pid = child.id();
    send_signal(pid, "INT");
    err.wait_for("interrupted: stopping the workers");
    send_signal(pid, "INT");
    err.wait_for("killing the workers now");
    send_signal(pid, "INT");
    let (status, out) = wait_status_and_stdout(child);
    // The holder is of another session: no Ctrl-C reaches it.
    for r in sb.worker_records() {
        for c in r["children"].as_array().into_iter().flatten() {
            prdloop::platform::kill_pid(c.as_u64().unwrap() as u32);
        }
    }
    assert_eq!(status, 130, "{}", err.text());
    // It exited before its end: no summary (which the end would have printed).
    assert!(
        !err.text().contains("ISC-A-1          fail"),
        "{}",
        err.text()
    );
    let events: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(
        events.first().map(|e| &e["event"]),
        Some(&json!("start")),
        "{out}"
    );
    let last = events.last().expect("events");
    assert_eq!(last["event"], "end", "{out}");
    assert_eq!(
        (&last["outcome"], &last["exitCode"]),
        (&json!("paused"), &json!(130)),
        "{out}"
    );
    assert_eq!(
        events.iter().filter(|e| e["event"] == "end").count(),
        1,
        "{out}"
    );
}

#[test]
fn a_third_ctrl_c_exits_at_once_and_leaves_nothing_behind() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        json!({"*": ["ignore-sigterm"]}),
    );
    let mut child = sb.spawn(&["run", "PRD.md", "--kill-grace", "60s"]);
    let err = Watch::stderr(&mut child);
    sb.wait_for_workers(1);
    let pid = child.id();
    // The first asks the worker to stop (it ignores SIGTERM and the grace is a minute), the
    // second kills it, the third ends everything now; each once the one before was heard.
    send_signal(pid, "INT");
    err.wait_for("interrupted: stopping the workers");
    send_signal(pid, "INT");
    err.wait_for("killing the workers now");
    send_signal(pid, "INT");
    let status = wait_output_status(child);
    assert_eq!(status, 130, "{}", err.text());
    sb.assert_no_process_left();
    assert!(sb.prd_text().contains("\nloopStatus: paused\n"));
    assert_eq!(sb.state()["active"], false);
    // The lock was released: the next run does not take it over from a "crashed" one.
    sb.set_plan(json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("taking over"), "{}", stderr(&out));
}
