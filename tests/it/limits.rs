//! Limits and odd input (issue 38): long dependency chains, dependents whose own check
//! passes early, huge QUESTION lines, `PRDLOOP_*` variables.

use crate::common::*;
use serde_json::json;

/// A chain of `n` criteria, each needing the one before.
fn chain(n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| match i {
            1 => "- [ ] ISC-C-1: step 1 | Verify: Test: `true`".to_string(),
            _ => format!(
                "- [ ] ISC-C-{i}: step {i} (after: ISC-C-{}) | Verify: Test: `true`",
                i - 1
            ),
        })
        .collect()
}

/// A 20,000-link chain plans, in `plan` and `run --dry-run` (the graph's walks are linear
/// and keep their own stacks; no time is asserted: `graph_bench` measures 100,000).
#[test]
fn a_long_chain_plans() {
    let lines = chain(20_000);
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sb = Sandbox::new(&prd_with(&refs), json!({}));
    let out = sb.run(&["plan", "PRD.md", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("plan --json");
    let text = plan.to_string();
    assert!(text.contains("ISC-C-20000"), "the last link is planned");
    let out = sb.run(&["run", "PRD.md", "--dry-run"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(sb.worker_records().is_empty(), "a dry run starts no worker");
}

/// A criterion whose own check passes already is not ticked by the start check while what
/// it needs fails: it waits (and here, its need never passing, stays open). A chain whose
/// every check passes is ticked whole, needs before dependents.
#[test]
fn a_dependent_waits_for_its_need_even_when_its_own_check_passes() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: makes a | Verify: Test: `test -f a`",
            "- [ ] ISC-A-2: builds on a (after: ISC-A-1) | Verify: Test: `true`",
        ]),
        json!({"ISC-A-1": ["fail"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    let text = sb.prd_text();
    assert!(text.contains("- [ ] ISC-A-1:"), "{text}");
    assert!(
        text.contains("- [ ] ISC-A-2:"),
        "ticked before its need passed: {text}"
    );
    assert!(
        err.contains("ISC-A-2's check passes already, but it needs ISC-A-1"),
        "{err}"
    );

    let lines = chain(3);
    let refs: Vec<&str> = lines.iter().rev().map(String::as_str).collect();
    let sb = Sandbox::new(&prd_with(&refs), json!({}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = sb.prd_text();
    for i in 1..=3 {
        assert!(text.contains(&format!("- [x] ISC-C-{i}:")), "{text}");
    }
    assert!(
        sb.worker_records().is_empty(),
        "the start check ticked them all"
    );
}

/// A bad `PRDLOOP_*` value's error names the variable and its value (exit 2), `config
/// --show-origin` refuses what `run` refuses, and an empty variable is unset.
#[test]
fn environment_errors_name_the_variable_and_empty_is_unset() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a | Verify: Test: `true`"]),
        json!({}),
    );
    let with = |var: &str, value: &str, args: &[&str]| {
        let mut c = sb.command(args);
        c.env(var, value);
        wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60))
    };
    for (var, value) in [("PRDLOOP_SANDBOX", "bogus"), ("PRDLOOP_TIMEOUT", "soon")] {
        let out = with(var, value, &["run", "PRD.md", "--dry-run"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{err}");
        assert!(err.contains(&format!("{var}=\"{value}\"")), "{err}");
        let out = with(var, value, &["config", "PRD.md", "--show-origin"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{err}");
        assert!(err.contains(&format!("{var}=\"{value}\"")), "{err}");
    }
    for var in ["PRDLOOP_SANDBOX", "PRDLOOP_TIMEOUT", "PRDLOOP_AGENTS"] {
        let out = with(var, "", &["run", "PRD.md", "--dry-run"]);
        assert_eq!(code(&out), 0, "{var}=: {}", stderr(&out));
        let out = with(var, "", &["config", "PRD.md", "--show-origin"]);
        assert_eq!(code(&out), 0, "{var}=: {}", stderr(&out));
    }
}

/// A QUESTION line longer than the output tail kept (and one longer than the longest line
/// parsed) is still asked, its text bounded: not counted as "no RESULT line".
#[test]
fn a_huge_question_line_is_still_asked() {
    use std::os::unix::fs::PermissionsExt;
    for size in [300_000, 1_500_000] {
        let sb = Sandbox::new(
            &prd_with(&["- [ ] ISC-A-1: the colour is chosen | Verify: Test: `test -f colour`"]),
            json!({}),
        );
        let agent = sb.root().join("agent.sh");
        std::fs::write(
            &agent,
            format!(
                "#!/bin/sh\ncat > /dev/null\necho 'thinking it over'\nprintf 'QUESTION: %s Which colour? ' \"$PRDLOOP_CRITERION\"\nhead -c {size} /dev/zero | tr '\\0' x\necho\necho 'done'\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = run_command_agent(&sb, &agent, &["-n", "1"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 8, "{size}: {}", &err[..err.len().min(4000)]);
        assert!(err.contains("ISC-A-1 asks: Which colour? xxx"), "{size}");
        assert!(!err.contains("no RESULT line"), "{size}");
    }
}

/// `resume` told no agent runs the one its session ran (`--agent command` and its program),
/// as the dashboard's Resume button asks: not the default claude.
#[test]
fn resume_runs_the_session_with_its_settings() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: it is done | Verify: Test: `test -f done`"]),
        json!({}),
    );
    // Fails its first call, hangs on its second, does the work on its third (the count kept
    // where a sandboxed worker may write).
    let count = sb.records().join("calls");
    let agent = sb.root().join("agent.sh");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho x >> '{c}'\ncase $(wc -l < '{c}') in\n  *1) echo \"RESULT: $PRDLOOP_CRITERION FAIL\" ;;\n  *2) sleep 60 ;;\n  *) touch done; echo \"RESULT: $PRDLOOP_CRITERION PASS\" ;;\nesac\n",
            c = count.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut first = sb.command(&command_agent_args(&agent, &["-n", "1"]));
    // A setting from the environment is the run's too.
    first.env("PRDLOOP_TIMEOUT", "3s");
    let first = wait_output(first.spawn().unwrap(), std::time::Duration::from_secs(120));
    assert_eq!(code(&first), 1, "{}", stderr(&first));
    // No agent and no timeout named anywhere: not on the command line, not in the
    // environment. The session's are taken, and its 3 s timeout ends the hanging call.
    let mut c = sb.command(&["resume", "PRD.md", "-n", "1"]);
    c.env_remove("PRDLOOP_CLAUDE_BIN");
    let out = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(120));
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains(" · with its --agent command"), "{err}");
    assert!(err.contains("--agent command"), "{err}");
    assert!(err.contains("--timeout 3s"), "{err}");
    assert!(err.contains("timed out"), "{err}");
    // Its own flag wins; what it does not give still comes from the first session.
    let mut c = sb.command(&["resume", "PRD.md", "--timeout", "90s"]);
    c.env_remove("PRDLOOP_CLAUDE_BIN");
    let out = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(120));
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(!err.contains("--timeout 3s"), "{err}");
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"), "{err}");
    // Its state file keeps both, for the next resume.
    let sessions: Vec<serde_json::Value> = std::fs::read_dir(sb.state_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok())
        .collect();
    let last = sessions
        .iter()
        .find(|s| s["runSettings"]["timeout"] == "90s")
        .unwrap_or_else(|| panic!("{sessions:#?}"));
    assert_eq!(last["runSettings"]["agent"], "command", "{last:#}");
    assert_eq!(
        last["runSettings"]["agent-bin"],
        agent.display().to_string(),
        "{last:#}"
    );
}
