//! `--progress`: the live view on a terminal, only the summary with `none`, lines elsewhere;
//! and the third Ctrl-C, which exits at once, still leaves the JUnit report.

use crate::common::pty::Pty;
use crate::common::*;
use serde_json::json;

const ESC: char = '\x1b';

fn two_working() -> Sandbox {
    Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        // Long enough for the view to draw each step: it redraws ten times a second.
        json!({"*": ["work:1500"]}),
    )
}

/// The command on a terminal named `xterm` (the sandbox clears the environment).
fn on_terminal(sb: &Sandbox, args: &[&str]) -> std::process::Command {
    let mut c = sb.command(args);
    c.env("TERM", "xterm");
    c
}

/// The live view draws each running worker with what its agent is doing; once the run is
/// over the view is gone and the summary follows it whole, no bar drawn into it.
#[test]
fn the_live_view_draws_the_workers_then_leaves_the_summary_intact() {
    let sb = two_working();
    let pty = Pty::spawn(
        on_terminal(&sb, &["run", "PRD.md", "-a", "2", "--progress", "bar"]),
        24,
        100,
    );
    // A worker line: lane, criterion, time, what the agent does now (the fake agent runs
    // `cargo test <id>` like claude's stream-json says a Bash call).
    pty.wait_for("Bash: cargo test isc-a-1");
    let (code, out) = pty.finish();
    assert_eq!(code, 0, "{out:?}");
    assert!(
        out.lines()
            .any(|l| l.contains("[lane 1] ISC-A-1 ") && l.contains("Bash: cargo test isc-a-1")),
        "{out:?}"
    );
    // The view's header.
    assert!(
        out.contains("▸ iteration 1 · 0/2 passing · $0.0000 · "),
        "{out:?}"
    );
    // The finished workers' lines scrolled above the view, as `lines` prints them.
    assert!(out.contains("[lane 1] ISC-A-1 PASS"), "{out:?}");
    // The view's own drawing (cursor moves, line clears) ends before the summary, and the
    // summary is every line whole and in order, as without the view.
    let at = out
        .rfind("complete: all 2 criteria pass")
        .expect("the summary");
    let summary = &out[at..];
    assert!(!summary.contains(ESC), "{summary:?}");
    let lines: Vec<&str> = summary.lines().map(str::trim_end).collect();
    assert_eq!(lines[0], "complete: all 2 criteria pass", "{summary:?}");
    assert!(
        lines[1].starts_with("  ISC-A-1          pass"),
        "{summary:?}"
    );
    assert!(
        lines[2].starts_with("  ISC-B-1          pass"),
        "{summary:?}"
    );
    assert!(lines[3].starts_with("  cost $"), "{summary:?}");
    assert!(lines[4].starts_with("  verifier: 2 reviews"), "{summary:?}");
    assert!(
        lines[5].starts_with("  per passed criterion"),
        "{summary:?}"
    );
    assert!(
        lines[6].starts_with("    set-up claude  2 passed"),
        "{summary:?}"
    );
    assert!(
        lines[7].starts_with("    domain A       1 passed"),
        "{summary:?}"
    );
    assert!(
        lines[8].starts_with("    domain B       1 passed"),
        "{summary:?}"
    );
    assert!(lines[9].starts_with("  logs  "), "{summary:?}");
    assert!(lines[10].starts_with("  state "), "{summary:?}");
    assert_eq!(lines.len(), 11, "{summary:?}");
    assert!(!summary.contains("[lane"), "{summary:?}");
    assert!(sb.prd_text().contains("- [x] ISC-B-1:"));
}

/// More workers than the terminal has rows: as many as fit, then how many more.
#[test]
fn more_workers_than_rows_are_counted_not_drawn() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: a",
            "- [ ] ISC-B-1: b",
            "- [ ] ISC-C-1: c",
            "- [ ] ISC-D-1: d",
            "- [ ] ISC-E-1: e",
        ]),
        json!({"*": ["work:1500"]}),
    );
    // Six rows: the header, three workers, the count, the cursor's line.
    let pty = Pty::spawn(
        on_terminal(&sb, &["run", "PRD.md", "-a", "5", "--progress", "bar"]),
        6,
        80,
    );
    pty.wait_for("… and 2 more");
    let (code, out) = pty.finish();
    assert_eq!(code, 0, "{out:?}");
    assert!(out.contains("complete: all 5 criteria pass"), "{out:?}");
}

/// `none`: the summary and nothing else.
#[test]
fn progress_none_prints_only_the_summary() {
    let sb = two_working();
    sb.set_plan(json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--progress", "none"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines[0], "complete: all 2 criteria pass", "{err}");
    // The rows, cost, the verifier's reviews, the cost per pass (a heading, one set-up, two
    // domains), logs and state.
    assert_eq!(lines.len(), 11, "{err}");
    for absent in ["prdloop", "── iteration", "started", "PASS"] {
        assert!(!err.contains(absent), "{absent}: {err}");
    }
    // The env twin says the same.
    let mut c = sb.command(&["run", "PRD.md", "--force", "-a", "2"]);
    c.env("PRDLOOP_PROGRESS", "none");
    let out = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(180));
    assert!(!stderr(&out).contains("── iteration"), "{}", stderr(&out));
}

/// `auto` on a terminal in CI (whose logs may pretend to be terminals) prints lines: no
/// drawing at all.
#[test]
fn auto_prints_lines_in_ci_even_on_a_terminal() {
    let sb = two_working();
    let mut c = on_terminal(&sb, &["run", "PRD.md", "-a", "2"]);
    c.env("CI", "true");
    let (code, out) = Pty::spawn(c, 24, 100).finish();
    assert_eq!(code, 0, "{out:?}");
    assert!(!out.contains(ESC), "{out:?}");
    assert!(out.contains("[lane 1] ISC-A-1 started"), "{out:?}");
    assert!(!out.contains("Bash: cargo test"), "{out:?}");
}

/// The third Ctrl-C exits at once, and still writes the JUnit report; the live view is
/// taken off the screen first.
#[test]
fn a_third_ctrl_c_still_writes_the_junit_file() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        // ISC-A-1's worker outlives the first Ctrl-C (it ignores SIGTERM, the grace is a
        // minute), and after the second (SIGKILL) a grandchild of another session still
        // holds its pipes for the drain window: the run is still there for the third.
        json!({"ISC-A-1": ["ignore-sigterm:hold"], "*": ["pass"]}),
    );
    let pty = Pty::spawn(
        on_terminal(
            &sb,
            &[
                "run",
                "PRD.md",
                "-a",
                "2",
                "--kill-grace",
                "60s",
                "--junit",
                "junit.xml",
                "--progress",
                "bar",
            ],
        ),
        24,
        100,
    );
    let pid = pty.child.id();
    pty.wait_for("ISC-B-1 PASS");
    sb.wait_for_workers(2);
    // Each Ctrl-C once the one before was heard: stop, kill, exit now.
    send_signal(pid, "INT");
    pty.wait_for("interrupted: stopping the workers");
    send_signal(pid, "INT");
    pty.wait_for("killing the workers now");
    send_signal(pid, "INT");
    let (code, out) = pty.finish();
    // The holder is of another session: no Ctrl-C reaches it.
    for r in sb.worker_records() {
        for c in r["children"].as_array().into_iter().flatten() {
            prdloop::platform::kill_pid(c.as_u64().unwrap() as u32);
        }
    }
    assert_eq!(code, 130, "{out:?}");
    // It exited before its end: no summary (which the end would have printed).
    assert!(!out.contains("ISC-A-1          fail"), "{out:?}");
    let xml = std::fs::read_to_string(sb.work().join("junit.xml")).expect("junit.xml");
    let report = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    let suite = &report.test_suites[0];
    assert_eq!((suite.tests, suite.failures), (2, 1), "{xml}");
    assert!(
        suite
            .properties
            .iter()
            .any(|p| p.name.as_str() == "outcome" && p.value.as_str() == "paused"),
        "{xml}"
    );
    assert!(sb.prd_text().contains("\nloopStatus: paused\n"));
    sb.assert_no_process_left();
}
