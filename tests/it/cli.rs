//! The command line: plan, status, PRD lookup, flags and exit codes.

use crate::common::*;
use serde_json::json;

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn agents_above_16_are_clamped_with_a_warning_and_bad_numbers_are_usage_errors() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({}),
    );
    // -a 40 is clamped to 16 with a warning; a word is a usage error (exit 2) naming its flag.
    let text = transcript(
        &sb,
        &[
            &["plan", "PRD.md", "-a", "40"],
            &["plan", "PRD.md", "-a", "four"],
            &["run", "PRD.md", "-n", "abc"],
            &["run", "PRD.md", "--timeout", "soon"],
        ],
    );
    snapshot!(sb.root(), "agents_clamped_and_bad_numbers", &text);
    let mut c = sb.command(&["plan", "PRD.md"]);
    c.env("PRDLOOP_AGENTS", "2");
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    assert!(out(&o).contains("(-a 2)"), "env twin: {}", out(&o));
}

#[test]
fn plan_json_and_dry_run_spawn_nothing() {
    let prd = prd_with(&[
        "- [ ] ISC-A-1: a | Verify: Test: `true`",
        "- [ ] ISC-A-2: b",
        "- [ ] ISC-UX-1: c | Verify: Custom: look",
    ]);
    let sb = Sandbox::new(&prd, json!({}));
    let o = sb.run(&["plan", "PRD.md", "-a", "4", "--json"]);
    assert_eq!(code(&o), 0);
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["lanes"].as_array().unwrap().len(), 1);
    assert_eq!(v["lanes"][0]["criteria"][0]["id"], "ISC-A-1");
    assert_eq!(v["lanes"][0]["criteria"][0]["verify"]["command"], "true");
    assert_eq!(v["needsPerson"], json!(["ISC-UX-1"]));
    assert_eq!(v["command"]["args"][0], "-p");
    let o = sb.run(&["run", "PRD.md", "--dry-run"]);
    assert_eq!(code(&o), 0);
    snapshot!(sb.root(), "run_dry_run", &shown(&o));
    assert_eq!(sb.prd_text(), prd);
    assert!(sb.worker_records().is_empty());
}

#[test]
fn status_finds_prds_by_id_in_pai_locations() {
    let sb = Sandbox::new(
        &prd_with(&["- [x] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({}),
    );
    let work = sb.pai().join("MEMORY/WORK/20261130-120000_test");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(sb.prd(), work.join("PRD-20261130-test.md")).unwrap();
    let o = sb.run(&["status", "PRD-20261130-test"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    snapshot!(sb.root(), "status_by_id", &shown(&o));
    let o = sb.run(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["passing"], 1);
    // A second copy makes the id ambiguous: both are listed.
    let proj = sb.root().join("projects/app/.prd");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::copy(sb.prd(), proj.join("PRD-20261130-test.md")).unwrap();
    let text = transcript(
        &sb,
        &[&["status", "PRD-20261130-test"], &["status", "PRD-nope"]],
    );
    snapshot!(sb.root(), "status_ambiguous_and_unknown_ids", &text);
}

#[test]
fn malformed_prds_name_file_and_line_and_are_not_touched() {
    let bad = "---\nid: x\n---\n\n- [ ] ISC-A-1: a\n- [ ] ISC-A-1: again\n";
    let sb = Sandbox::new(bad, json!({}));
    let mut text = transcript(
        &sb,
        &[
            &["plan", "PRD.md"],
            &["status", "PRD.md"],
            &["run", "PRD.md"],
        ],
    );
    assert_eq!(sb.prd_text(), bad);
    std::fs::write(sb.prd(), "---\nid: x\niteration: lots\n---\n").unwrap();
    text.push('\n');
    text.push_str(&transcript(&sb, &[&["run", "PRD.md"]]));
    std::fs::write(sb.prd(), b"---\nid: x\n---\n\xff\n").unwrap();
    text.push('\n');
    text.push_str(&transcript(&sb, &[&["status", "PRD.md"]]));
    assert_eq!(std::fs::read(sb.prd()).unwrap(), b"---\nid: x\n---\n\xff\n");
    snapshot!(sb.root(), "malformed_prds", &text);
}

/// A run on a PRD another run holds reads the PRD (without the lock) only to find what is
/// wrong with it: its error wins over the busy lock, which is said only of a run that would
/// otherwise start.
#[test]
fn a_malformed_prd_another_run_holds_ends_with_its_error_not_locked() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
    let child = sb.spawn(&["run", "PRD.md", "--kill-grace", "1s"]);
    sb.wait_for_workers(1);
    let good = sb.prd_text();
    let bad = "---\nid: x\n---\n\n- [ ] ISC-A-1: a\n- [ ] ISC-A-1: again\n";
    std::fs::write(sb.prd(), bad).unwrap();
    let o = sb.run(&["run", "PRD.md", "--json"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let v = end_event(&o);
    assert_eq!(v["outcome"], "error", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("duplicate criterion id ISC-A-1"),
        "{v}"
    );
    assert!(!stderr(&o).contains("already being run"), "{}", stderr(&o));
    std::fs::write(sb.prd(), &good).unwrap();
    let o = sb.run(&["run", "PRD.md", "--json"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(end_event(&o)["outcome"], "locked");
    send_signal(child.id(), "TERM");
    wait_output(child, std::time::Duration::from_secs(60));
    sb.assert_no_process_left();
}

#[test]
fn help_documents_exit_codes_and_the_n_difference() {
    let sb = Sandbox::new("", json!({}));
    let o = sb.run(&["--help"]);
    assert_eq!(code(&o), 0);
    assert!(out(&o).contains("130  interrupted"));
    let o = sb.run(&["run", "--help"]);
    assert!(out(&o).contains("Unlike PAI"), "{}", out(&o));
    assert!(out(&o).contains("PRDLOOP_TIMEOUT"));
}

#[test]
fn a_prd_without_criteria_is_not_run_and_not_touched() {
    let prd = fixture_prd("pai-new.md");
    let sb = Sandbox::new(&prd, json!({}));
    let o = sb.run(&["run", "PRD.md"]);
    snapshot!(sb.root(), "a_prd_without_criteria", &shown(&o));
    assert_eq!(sb.prd_text(), prd);
}

#[test]
fn status_tells_a_live_loop_from_a_crashed_one() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
    let child = sb.spawn(&["run", "PRD.md", "--kill-grace", "1s"]);
    sb.wait_for_workers(1);
    let o = sb.run(&["status", "PRD.md"]);
    assert!(out(&o).contains("running now: session"), "{}", out(&o));
    send_signal(child.id(), "KILL");
    let _ = wait_output(child, std::time::Duration::from_secs(30));
    let o = sb.run(&["status", "PRD.md"]);
    assert!(out(&o).contains("no live loop holds it"), "{}", out(&o));
    // Clean up the orphaned worker the way the next run would.
    let o = sb.run(&[
        "run",
        "PRD.md",
        "-n",
        "1",
        "--timeout",
        "1s",
        "--kill-grace",
        "1s",
    ]);
    assert!(stderr(&o).contains("taking over"), "{}", stderr(&o));
    sb.assert_no_process_left();
}

/// The lock is taken before the PRD is read: a run that then ends before its loop (here: its
/// agent is missing) has taken over a crashed run's lock, says so, and lets it go cleanly.
#[test]
fn a_run_that_ends_before_its_loop_takes_over_a_crashed_runs_lock_and_says_so() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
    let child = sb.spawn(&["run", "PRD.md", "--kill-grace", "1s"]);
    sb.wait_for_workers(1);
    send_signal(child.id(), "KILL");
    let _ = wait_output(child, std::time::Duration::from_secs(30));
    let o = sb.run(&["run", "PRD.md", "--claude-bin", "/nonexistent/agent"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("taking over"), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent/agent"), "{}", stderr(&o));
    sb.assert_no_process_left();
    let o = sb.run(&["status", "PRD.md"]);
    assert!(!out(&o).contains("running now"), "{}", out(&o));
    let o = sb.run(&["run", "PRD.md", "--claude-bin", "/nonexistent/agent"]);
    assert!(!stderr(&o).contains("taking over"), "{}", stderr(&o));
}

/// The last line of stdout as JSON: the `end` event of a `--json` run.
fn end_event(o: &std::process::Output) -> serde_json::Value {
    let text = out(o);
    let last = text
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no output on stdout; stderr: {}", stderr(o)));
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["event"], "end", "{text}");
    v
}

#[test]
fn zero_durations_and_counts_below_their_minimum_are_usage_errors_naming_the_flag() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let mut runs: Vec<Vec<&str>> = Vec::new();
    for flag in [
        "--timeout",
        "--max-time",
        "--verify-timeout",
        "--retry-backoff",
    ] {
        for zero in ["0", "0s", "0m"] {
            runs.push(vec!["run", "PRD.md", flag, zero]);
        }
    }
    for args in [
        &["-n", "-1"][..],
        &["-n", "0"],
        &["-a", "-1"],
        &["-a", "0"],
        &["--max-turns", "0"],
        &["--max-turns", "-2"],
        &["--stall", "-1"],
    ] {
        let mut all = vec!["run", "PRD.md"];
        all.extend_from_slice(args);
        runs.push(all);
    }
    // The same rule in PAI's form.
    runs.push(vec!["-m", "loop", "-p", "PRD.md", "-n", "-1"]);
    let runs: Vec<&[&str]> = runs.iter().map(Vec::as_slice).collect();
    snapshot!(sb.root(), "zero_and_below_minimum", &transcript(&sb, &runs));
    // Zero where it means something: no grace before SIGKILL, no stall limit, no waiting.
    let o = sb.run(&[
        "run",
        "PRD.md",
        "--dry-run",
        "--kill-grace",
        "0",
        "--stall",
        "0",
        "--max-wait",
        "0",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(sb.worker_records().is_empty());
}

#[test]
fn pai_form_without_p_says_how_to_write_it() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let o = sb.run(&["-m", "loop", "PRD.md", "-n", "2"]);
    // No word of clap's about subcommands.
    snapshot!(sb.root(), "pai_form_without_p", &shown(&o));
    assert!(sb.worker_records().is_empty());
}

#[test]
fn without_home_or_pai_dir_nothing_is_guessed_and_nothing_goes_to_dot_claude() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let run = |args: &[&str]| {
        let mut c = sb.command(args);
        c.env_remove("HOME").env_remove("PAI_DIR");
        wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(120))
    };
    let said: Vec<String> = [
        &["run", "PRD.md", "-n", "1"][..],
        &["-m", "loop", "-p", "PRD.md"],
        &["verify", "PRD.md"],
        &["status"],
        &["new", "-t", "x"],
        &["plan", "PRD-20261130-test"],
    ]
    .iter()
    .map(|args| shown_as(args, &run(args)))
    .collect();
    snapshot!(sb.root(), "without_home_or_pai_dir", &said.join("\n"));
    assert!(sb.worker_records().is_empty());
    assert!(!sb.work().join(".claude").exists());
    // A path and --state-dir are enough (outside the run's folder, which workers write
    // without lanes).
    let o = run(&["run", "PRD.md", "-n", "1", "--state-dir", "../st"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(sb.prd_text().contains("- [x] ISC-A-1"));
    assert!(sb.root().join("st").is_dir());
    let o = run(&["plan", "PRD.md"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run(&["new", "-t", "x", "-p", "docs"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!sb.work().join(".claude").exists(), "nothing in ./.claude");
}

#[test]
fn json_runs_that_end_before_the_loop_still_print_an_end_event() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
    let o = sb.run(&["run", "nope.md", "--json"]);
    assert_eq!(code(&o), 2);
    let v = end_event(&o);
    assert_eq!(v["outcome"], "error");
    assert_eq!(v["exitCode"], 2);
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("no PRD file at `nope.md`"),
        "{v}"
    );
    assert_eq!(out(&o).lines().count(), 1, "one line: {}", out(&o));

    let o = sb.run(&[
        "run",
        "PRD.md",
        "--json",
        "--claude-bin",
        "/nonexistent/agent",
    ]);
    assert_eq!(code(&o), 2);
    let v = end_event(&o);
    assert_eq!(
        (v["outcome"].as_str(), v["exitCode"].as_u64()),
        (Some("error"), Some(2))
    );
    assert!(
        v["reason"].as_str().unwrap().contains("/nonexistent/agent"),
        "{v}"
    );
    assert_eq!(
        (v["passing"].as_u64(), v["total"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(v["failing"], json!(["ISC-A-1"]));

    // Locked: another loop runs on the PRD.
    let child = sb.spawn(&["run", "PRD.md", "--kill-grace", "1s"]);
    sb.wait_for_workers(1);
    let o = sb.run(&["resume", "PRD.md", "--json"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let v = end_event(&o);
    assert_eq!(
        (v["outcome"].as_str(), v["exitCode"].as_u64()),
        (Some("locked"), Some(3))
    );
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("is already being run by session"),
        "{v}"
    );
    send_signal(child.id(), "TERM");
    let first = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(code(&first), 130, "{}", stderr(&first));
    sb.assert_no_process_left();

    let mut c = sb.command(&["run", "PRD.md", "--json"]);
    c.env_remove("HOME").env_remove("PAI_DIR");
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    assert_eq!(code(&o), 2);
    assert!(
        end_event(&o)["reason"]
            .as_str()
            .unwrap()
            .contains("neither PAI_DIR nor HOME")
    );

    let complete =
        prd_with(&["- [x] ISC-A-1: a"]).replace("status: IN_PROGRESS", "status: COMPLETE");
    std::fs::write(sb.prd(), &complete).unwrap();
    let o = sb.run(&["run", "PRD.md", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = end_event(&o);
    assert_eq!(
        (v["outcome"].as_str(), v["exitCode"].as_u64()),
        (Some("already_complete"), Some(0))
    );
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("is already complete"),
        "{v}"
    );

    // A usage error, before anything is parsed.
    let o = sb.run(&["run", "PRD.md", "--json", "--timeout", "0"]);
    assert_eq!(code(&o), 2);
    let v = end_event(&o);
    assert_eq!(
        (v["outcome"].as_str(), v["exitCode"].as_u64()),
        (Some("error"), Some(2))
    );
    assert!(
        v["reason"]
            .as_str()
            .unwrap()
            .contains("'--timeout <DUR>': must be more than 0"),
        "{v}"
    );

    std::fs::write(sb.prd(), fixture_prd("pai-new.md")).unwrap();
    let o = sb.run(&["run", "PRD.md", "--json"]);
    assert_eq!(code(&o), 2);
    let v = end_event(&o);
    assert_eq!(v["outcome"], "error");
    assert!(
        v["reason"].as_str().unwrap().contains("has no criteria"),
        "{v}"
    );
}

#[test]
fn a_session_names_file_that_cannot_be_updated_gets_a_plain_warning_line() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let names = sb.pai().join("MEMORY/STATE/session-names.json");
    std::fs::create_dir_all(names.parent().unwrap()).unwrap();
    std::fs::write(&names, "not json").unwrap();
    let o = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let e = stderr(&o);
    let line = e
        .lines()
        .find(|l| l.contains("session names"))
        .unwrap_or_else(|| panic!("no warning: {e}"));
    assert!(
        line.starts_with("warning: could not update the session names: `")
            && line.ends_with(
                "is not a JSON object (expected ident at line 1 column 2); not touching it"
            ),
        "{line}"
    );
    assert!(!e.contains(" WARN "), "no tracing-style lines: {e}");
    assert_eq!(std::fs::read_to_string(&names).unwrap(), "not json");
}

#[test]
fn a_json_run_that_fails_inside_the_loop_prints_exactly_one_end_event() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b"]),
        json!({"ISC-A-1": ["break-prd"], "*": ["pass"]}),
    );
    let o = sb.run(&["run", "PRD.md", "-n", "3", "--json"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let ends: Vec<serde_json::Value> = out(&o)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "end")
        .collect();
    assert_eq!(ends.len(), 1, "{}", out(&o));
    assert_eq!(ends[0]["exitCode"], 2, "{}", ends[0]);
    assert!(
        ends[0]["reason"]
            .as_str()
            .unwrap()
            .contains("an edit into a broken state is never overwritten"),
        "{}",
        ends[0]
    );
    assert_eq!(end_event(&o), ends[0], "the last line");
}

/// A PRD whose front matter has its own `prdloop:` map.
fn prd_with_map(map: &str) -> String {
    prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"]).replacen(
        "---\n",
        &format!("---\nprdloop:\n{map}"),
        1,
    )
}

/// The `-a` that `plan` says it would use.
fn planned_agents(o: &std::process::Output) -> String {
    let text = out(o);
    let at = text
        .find("(-a ")
        .unwrap_or_else(|| panic!("{text}{}", stderr(o)));
    text[at + 4..].split(')').next().unwrap().to_string()
}

#[test]
fn config_files_set_defaults_below_flags_and_variables_and_show_where_each_came_from() {
    let sb = Sandbox::new(
        &prd_with_map("  agents: 4\n  timeout: 45m\n  profile:\n    ci:\n      stall: 9\n"),
        json!({}),
    );
    let user = sb.root().join(".config/prdloop");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("config.toml"),
        "# mine\nmodel = \"opus\"\nagents = 2\nmax-cost = 5\n",
    )
    .unwrap();
    std::fs::write(
        sb.work().join("prdloop.toml"),
        "agents = 3\nagent-arg = [\"--x\", \"--y\"]\nstate-dir = \"state\"\n\n[profile.ci]\nmax-cost = 1.5\nno-verify = true\n\n[profile.fast]\nstall = 1\n",
    )
    .unwrap();
    // The repository's file and the PRD's map set keys that need trust (agent-arg,
    // state-dir, no-verify): trusted here, as their author would.
    for f in ["prdloop.toml", "PRD.md"] {
        let o = sb.run(&["trust", f]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let before = sb.prd_text();
    // PRD > project > user.
    assert_eq!(planned_agents(&sb.run(&["plan", "PRD.md"])), "4");
    // Without the PRD's map: project > user.
    std::fs::write(sb.work().join("OTHER.md"), prd_with(&["- [ ] ISC-A-1: a"])).unwrap();
    assert_eq!(planned_agents(&sb.run(&["plan", "OTHER.md"])), "3");
    // The variable beats the files; the flag beats the variable.
    let mut c = sb.command(&["plan", "PRD.md"]);
    c.env("PRDLOOP_AGENTS", "2");
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    assert_eq!(planned_agents(&o), "2");
    let mut c = sb.command(&["plan", "PRD.md", "-a", "1"]);
    c.env("PRDLOOP_AGENTS", "2");
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    assert_eq!(planned_agents(&o), "1");
    // The files' settings reach the worker's command line.
    let o = sb.run(&["plan", "PRD.md", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
    let args: Vec<&str> = v["command"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.windows(2).any(|w| w == ["--model", "opus"]),
        "{args:?}"
    );
    assert!(args.ends_with(&["--x", "--y"]), "{args:?}");

    let root = sb.root().canonicalize().unwrap();
    let show = |extra: &[(&str, &str)], args: &[&str]| {
        let mut c = sb.command(args);
        for (k, v) in extra {
            c.env(k, v);
        }
        let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        // The comments' column depends on the temporary folder's length.
        out(&o)
            .replace(&root.display().to_string(), "[ROOT]")
            .replace(&sb.root().display().to_string(), "[ROOT]")
            .replace(FAKE, "[FAKE AGENT]")
            .lines()
            .map(|l| match l.split_once("  # ") {
                Some((setting, origin)) => format!("{}  # {origin}\n", setting.trim_end()),
                None => format!("{l}\n"),
            })
            .collect::<String>()
    };
    // In CI, profile.ci of each file applies over that file's keys.
    let origins = show(
        &[("CI", "true"), ("PRDLOOP_STALL", "7")],
        &["config", "PRD.md", "--show-origin"],
    );
    insta::assert_snapshot!("config_show_origin", origins);
    // Without --show-origin: plain TOML, which reads back as TOML.
    let plain = show(&[], &["config"]);
    toml::from_str::<toml::Table>(&plain).unwrap();
    insta::assert_snapshot!("config_plain", plain);
    // A named profile instead of ci (its stall; not ci's no-verify).
    let fast = show(
        &[("CI", "1")],
        &["config", "--profile", "fast", "--show-origin"],
    );
    insta::assert_snapshot!("config_profile_fast", fast);
    let o = sb.run(&["config", "--profile", "slow"]);
    snapshot!(sb.root(), "config_profile_unknown", &shown(&o));
    assert_eq!(
        sb.prd_text(),
        before,
        "reading the map does not touch the PRD"
    );
}

#[test]
fn config_file_errors_name_the_file_and_line_and_nothing_runs() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let project = sb.work().join("prdloop.toml");
    let cases = [
        "timeout = \"5m\"\n\nbest_of = 2\n",
        "force = \"yes\"\n",
        "agents = 0\n",
        "[profile.ci]\nagent = \"nobody\"\n",
        "timeout = 5m\n",
    ];
    let mut said = String::new();
    for text in cases {
        std::fs::write(&project, text).unwrap();
        said.push_str(&format!("=== prdloop.toml:\n{text}"));
        said.push_str(&transcript(&sb, &[&["run", "PRD.md"]]));
        said.push('\n');
        assert!(sb.worker_records().is_empty());
    }
    // Both project files: which one is meant is unclear.
    std::fs::write(&project, "agents = 2\n").unwrap();
    std::fs::create_dir_all(sb.work().join(".config")).unwrap();
    std::fs::write(sb.work().join(".config/prdloop.toml"), "agents = 3\n").unwrap();
    said.push_str("=== prdloop.toml and .config/prdloop.toml\n");
    said.push_str(&transcript(&sb, &[&["plan", "PRD.md"]]));
    snapshot!(sb.root(), "config_file_errors", &said);
    std::fs::remove_file(&project).unwrap();
    assert_eq!(planned_agents(&sb.run(&["plan", "PRD.md"])), "3");
    // A PRD's map: its own line in the PRD, which is left as it was.
    let prd = prd_with_map("  agents: 2\n  verify-timeout: soon\n");
    std::fs::write(sb.prd(), &prd).unwrap();
    let o = sb.run(&["run", "PRD.md", "--json"]);
    assert_eq!(code(&o), 2);
    let want = format!(
        "{}:4: `verify-timeout`: invalid value 'soon'",
        sb.prd().display()
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    assert_eq!(end_event(&o)["exitCode"], 2);
    assert_eq!(sb.prd_text(), prd);
}

#[test]
fn a_prds_own_map_survives_the_loop_rewriting_its_front_matter() {
    let sb = Sandbox::new(
        &prd_with_map(
            "  max-iterations: 1\n  state-dir: ../state\n  agent-arg:\n    - --from-map\n",
        ),
        json!({"ISC-A-1": "pass"}),
    );
    let o = sb.run(&["trust", "PRD.md"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = sb.run(&["run", "PRD.md"]);
    assert!(code(&o) <= 1, "{}", stderr(&o));
    let text = sb.prd_text();
    assert!(
        text.contains(
            "prdloop:\n  max-iterations: 1\n  state-dir: ../state\n  agent-arg:\n    - --from-map\n"
        ),
        "{text}"
    );
    // The state went where the map says, relative to the PRD's folder (outside the run's
    // folder, which workers write without lanes), and the commands that read it find it there.
    let states = std::fs::read_dir(sb.root().join("state")).unwrap().count();
    assert!(states > 0);
    assert!(!sb.state_dir().exists());
    let o = sb.run(&["logs", "PRD.md", "ISC-A-1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = sb.run(&["status", "PRD.md", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let records = sb.worker_records();
    assert!(!records.is_empty());
    assert!(
        records.iter().all(|r| r.to_string().contains("--from-map")),
        "{records:?}"
    );
}

#[test]
fn completions_for_every_shell_and_man_pages_for_every_command() {
    let sb = Sandbox::new("", json!({}));
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = sb.run(&["completions", shell]);
        assert_eq!(code(&o), 0, "{shell}: {}", stderr(&o));
        let script = out(&o);
        for word in ["prdloop", "resume", "best-of", "show-origin"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
        if shell == "bash" {
            let path = sb.root().join("prdloop.bash");
            std::fs::write(&path, &script).unwrap();
            let check = std::process::Command::new("bash")
                .arg("-n")
                .arg(&path)
                .output()
                .unwrap();
            assert!(check.status.success(), "{}", stderr(&check));
        }
    }
    let o = sb.run(&["completions", "tcsh"]);
    assert_eq!(code(&o), 2);

    let dir = sb.root().join("man/man1");
    let o = sb.run(&["man", dir.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for want in [
        "prdloop.1",
        "prdloop-run.1",
        "prdloop-config.1",
        "prdloop-merge.1",
    ] {
        assert!(pages.iter().any(|p| p == want), "{want} in {pages:?}");
    }
    // The page renders: man(1) formats it without complaint (groff's warnings on).
    let rendered = std::process::Command::new("man")
        .args(["-l", "-P", "cat"])
        .arg(dir.join("prdloop-run.1"))
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_STDERR", "1")
        .env("MANROFFOPT", "-ww")
        .output()
        .expect("man(1) is installed");
    assert!(rendered.status.success(), "{}", stderr(&rendered));
    let text = String::from_utf8_lossy(&rendered.stdout);
    assert!(text.contains("prdloop-run"), "{text}");
    assert!(text.contains("--best-of"), "{text}");
    assert!(text.contains("PRDLOOP_TIMEOUT"), "{text}");
    assert!(
        !String::from_utf8_lossy(&rendered.stderr).contains("warning"),
        "{}",
        stderr(&rendered)
    );
}

#[test]
fn color_always_never_and_no_color() {
    let sb = Sandbox::new(
        "---\nid: x\nstatus: [broken\n---\n- [ ] ISC-A-1: a\n",
        json!({}),
    );
    let has_escape = |o: &std::process::Output| o.stderr.contains(&0x1b);
    // The sandbox sets NO_COLOR: --color always beats it, and a pipe.
    let o = sb.run(&["plan", "PRD.md", "--color", "always"]);
    assert_eq!(code(&o), 2);
    assert!(has_escape(&o), "{}", stderr(&o));
    let o = sb.run(&["plan", "PRD.md"]);
    assert!(!has_escape(&o), "{}", stderr(&o));
    let mut c = sb.command(&["plan", "PRD.md"]);
    c.env_remove("NO_COLOR").env("CLICOLOR_FORCE", "1");
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    assert!(has_escape(&o), "CLICOLOR_FORCE: {}", stderr(&o));
    let mut c = sb.command(&["plan", "PRD.md", "--color", "never"]);
    c.env_remove("NO_COLOR").env("CLICOLOR_FORCE", "1");
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    assert!(!has_escape(&o), "--color never: {}", stderr(&o));
    // clap's own usage errors too.
    let o = sb.run(&["plan", "PRD.md", "--color", "always", "-a", "zero"]);
    assert_eq!(code(&o), 2);
    assert!(has_escape(&o), "usage error: {}", stderr(&o));
    let mut c = sb.command(&["plan", "PRD.md"]);
    c.env("PRDLOOP_COLOR", "always");
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    assert!(has_escape(&o), "PRDLOOP_COLOR: {}", stderr(&o));
}

#[test]
fn several_prds_each_run_with_their_own_map() {
    let sb = Sandbox::new("", json!({"ISC-A-1": "pass"}));
    let a = prd_with(&["- [ ] ISC-A-1: a"]).replacen(
        "---\n",
        "---\nprdloop:\n  agent-arg: [--from-a]\n",
        1,
    );
    let b = prd_with(&["- [ ] ISC-A-1: a"])
        .replace("PRD-20261130-test", "PRD-20261130-other")
        .replacen("---\n", "---\nprdloop:\n  agent-arg: [--from-b]\n", 1);
    std::fs::write(sb.work().join("A.md"), &a).unwrap();
    std::fs::write(sb.work().join("B.md"), &b).unwrap();
    for f in ["A.md", "B.md"] {
        let o = sb.run(&["trust", f]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    let o = sb.run(&["run", "A.md", "B.md", "-n", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let records = sb.worker_records();
    assert_eq!(records.len(), 2, "{records:?}");
    for r in records {
        let prd = r["prd"].as_str().unwrap();
        let args = r["args"].to_string();
        let (mine, theirs) = if prd.ends_with("A.md") {
            ("--from-a", "--from-b")
        } else {
            ("--from-b", "--from-a")
        };
        assert!(
            args.contains(mine) && !args.contains(theirs),
            "{prd}: {args}"
        );
    }
}

#[test]
fn a_workers_lane_leaves_the_agent_to_the_files() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    std::fs::write(sb.work().join("prdloop.toml"), "agent = \"codex\"\n").unwrap();
    let program = |var: &str, value: &str| {
        let mut c = sb.command(&["plan", "PRD.md", "--json"]);
        c.env(var, value);
        let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&out(&o)).unwrap();
        v["command"]["program"].as_str().unwrap().to_string()
    };
    // Inside a worker of another run, PRDLOOP_LANE is its lane number: not a choice of agent.
    assert_eq!(program("PRDLOOP_LANE", "3"), "codex");
    // PRDLOOP_AGENT is --agent's twin, and beats the file.
    assert_eq!(program("PRDLOOP_AGENT", "gemini"), "gemini");
}

/// Every `--json` output of every command: JSON Lines (a run, `undo`, `audit`) or one
/// document (`plan`, `verify`, `status`, `clean`); each object names the shape's version.
#[test]
fn every_json_line_and_document_carries_its_version() {
    let sb = repo(
        &["- [ ] ISC-A-1: a | Verify: Test: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[],
    );
    let versions = |args: &[&str]| -> Vec<serde_json::Value> {
        let o = sb.run(args);
        assert!([0, 1].contains(&code(&o)), "{args:?}: {}", stderr(&o));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        // A pretty document, or one value per line.
        let values: Vec<serde_json::Value> = match serde_json::from_str(&text) {
            Ok(serde_json::Value::Array(items)) => items,
            Ok(v) => vec![v],
            Err(_) => text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {e}: {l}")))
                .collect(),
        };
        assert!(!values.is_empty(), "{args:?} wrote no JSON");
        // Keys are camelCase everywhere, a `why`'s fields too.
        let snake: Vec<String> = values.iter().flat_map(snake_case_keys).collect();
        assert!(snake.is_empty(), "{args:?}: snake_case keys {snake:?}");
        values.iter().map(|v| v["version"].clone()).collect()
    };
    for args in [
        &["run", "PRD.md", "--json", "-a", "1"][..],
        &["plan", "PRD.md", "--json"],
        &["plan", "PRD.md", "--json", "--shards", "2"],
        &["verify", "PRD.md", "--json"],
        &["verify", "PRD.md", "--json", "--dry-run"],
        &["status", "PRD.md", "--json"],
        &["audit", "PRD.md", "--json"],
        &["undo", "--list", "--json"],
        &["clean", "--json"],
    ] {
        for v in versions(args) {
            assert_eq!(v, 2, "{args:?}");
        }
    }
}

/// The keys of `v`, at any depth, that hold an underscore.
fn snake_case_keys(v: &serde_json::Value) -> Vec<String> {
    match v {
        serde_json::Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| {
                let mut keys = snake_case_keys(v);
                if k.contains('_') {
                    keys.push(k.clone());
                }
                keys
            })
            .collect(),
        serde_json::Value::Array(items) => items.iter().flat_map(snake_case_keys).collect(),
        _ => Vec::new(),
    }
}

/// `plan --json` of an ISA with a Test Strategy: its probes' keys are camelCase too.
#[test]
fn a_plans_probes_have_camel_case_keys() {
    let sb = Sandbox::new(&fixture_prd("isa/claims.md"), json!({}));
    let o = sb.run(&["plan", "PRD.md", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let probe = v["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["criteria"].as_array().unwrap())
        .find_map(|c| c["probe"].as_object())
        .expect("a criterion with a probe");
    assert!(probe.contains_key("anchorsTo"), "{probe:?}");
    assert_eq!(snake_case_keys(&v), Vec::<String>::new());
}

/// A bad set-up list names the flag it came in and quotes the user's text as written (the
/// message is not `--mix`'s rewritten).
#[test]
fn a_bad_set_up_names_its_flag_and_keeps_the_users_text() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    for (arg, said) in [
        (
            "--escalate=--mixer",
            "--escalate `--mixer`: `--mixer` is not an agent",
        ),
        (
            "--verifier=--mixy",
            "--verifier `--mixy`: `--mixy` is not an agent",
        ),
        ("--mix=--mix2", "--mix `--mix2`: `--mix2` is not an agent"),
    ] {
        let o = sb.run(&["run", "PRD.md", arg]);
        assert_ne!(code(&o), 0);
        assert!(stderr(&o).contains(said), "{arg}: {}", stderr(&o));
    }
}
