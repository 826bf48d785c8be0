use super::*;

#[test]
fn clamps() {
    assert_eq!(clamp_agents(4), (4, None));
    assert_eq!(clamp_agents(40).0, 16);
    assert_eq!(
        clamp_agents(40).1,
        Some(Warning::AgentsClamped {
            given: 40,
            used: 16
        })
    );
    assert_eq!(clamp_agents(0).0, 1);
    assert_eq!(clamp_agents(-3).0, 1);
}

#[test]
fn a_relative_agent_program_is_relative_to_where_prdloop_started() {
    let here = std::env::current_dir().unwrap();
    for (given, want) in [
        ("./bin/agent", here.join("./bin/agent")),
        ("../tools/agent", here.join("../tools/agent")),
        ("/usr/bin/agent", PathBuf::from("/usr/bin/agent")),
        ("claude", PathBuf::from("claude")),
    ] {
        let w = WorkerOpts {
            agent: Some(Agent::Command),
            agent_bin: Some(given.into()),
            ..WorkerOpts::default()
        };
        let (a, _) = agent_options(&w).unwrap();
        assert_eq!(PathBuf::from(&a.bin), want, "{given}");
    }
    // --claude-bin too.
    let w = WorkerOpts {
        claude_bin: "./claude-x".into(),
        ..WorkerOpts::default()
    };
    let (a, _) = agent_options(&w).unwrap();
    assert_eq!(PathBuf::from(&a.claude.bin), here.join("./claude-x"));
}

/// `auto` leaves an agent that sandboxes itself (codex) to its own sandbox; `on` binds
/// every agent with prdloop's; nothing is bound while the sandbox is off.
#[test]
fn which_agents_the_sandbox_binds() {
    use crate::worker::sandbox::Mode;
    let mut s = Sandboxing {
        mode: Mode::Auto,
        on: true,
        ..Sandboxing::default()
    };
    assert!(s.confines(Agent::Claude) && !s.confines(Agent::Codex));
    assert!(s.rules(Path::new("/lane"), Agent::Codex).is_none());
    assert!(s.rules(Path::new("/lane"), Agent::Gemini).is_some());
    s.mode = Mode::On;
    assert!(s.confines(Agent::Codex));
    s.on = false;
    assert!(!s.confines(Agent::Claude));
}

#[test]
fn progress_resolves_like_nextest() {
    use Progress::*;
    use ProgressArg as A;
    // (given, terminal, CI, dumb) → shown
    let table = [
        (A::Auto, true, false, false, Live),
        (A::Auto, false, false, false, Lines),
        (A::Auto, true, true, false, Lines),
        (A::Auto, true, false, true, Lines),
        (A::Bar, true, true, true, Live),
        (A::Bar, false, false, false, Lines),
        (A::Lines, true, false, false, Lines),
        (A::None, true, false, false, Summary),
        (A::None, false, true, false, Summary),
    ];
    for (arg, terminal, ci, dumb, want) in table {
        assert_eq!(
            Progress::resolve(arg, terminal, ci, dumb),
            want,
            "{arg:?} terminal={terminal} ci={ci} dumb={dumb}"
        );
    }
}

/// `--claude-bin` and `--claude-arg` are the old names of `--agent-bin` and `--agent-arg`,
/// for claude only: one program and one argument list in the settings, `--agent-bin` winning
/// over `--claude-bin`, the `--claude-arg`s first; with another agent `--claude-bin` is
/// ignored and `--claude-arg` is ignored with a warning naming it.
#[test]
fn the_old_claude_names_are_the_agent_fields_for_claude() {
    let base = WorkerOpts {
        claude_bin: "claude".into(),
        ..WorkerOpts::default()
    };
    let (a, w) = agent_options(&WorkerOpts {
        claude_bin: "/opt/claude-x".into(),
        claude_args: vec!["--a".into()],
        agent_args: vec!["--b".into()],
        ..base.clone()
    })
    .unwrap();
    assert_eq!(
        (a.bin.as_str(), a.claude.bin.as_str()),
        ("/opt/claude-x", "/opt/claude-x")
    );
    assert_eq!(a.claude.extra_args, ["--a", "--b"]);
    assert!(w.is_empty(), "{w:?}");

    let (a, _) = agent_options(&WorkerOpts {
        claude_bin: "/opt/claude-x".into(),
        agent_bin: Some("/opt/agent-y".into()),
        ..base.clone()
    })
    .unwrap();
    assert_eq!(
        (a.bin.as_str(), a.claude.bin.as_str()),
        ("/opt/agent-y", "/opt/agent-y")
    );

    let (a, w) = agent_options(&WorkerOpts {
        agent: Some(Agent::Codex),
        claude_bin: "/opt/claude-x".into(),
        claude_args: vec!["--a".into()],
        agent_args: vec!["--b".into()],
        ..base.clone()
    })
    .unwrap();
    assert_eq!(a.bin, "codex");
    assert_eq!(a.extra_args, ["--b"]);
    assert_eq!(
        w,
        [Warning::ClaudeArgIgnored {
            agent: Agent::Codex
        }]
    );

    // A claude set-up of --mix under another agent still takes --claude-bin.
    let (m, _) = mix(
        "claude:opus,codex",
        SetupsFlag::Mix,
        &WorkerOpts {
            agent: Some(Agent::Codex),
            claude_bin: "/opt/claude-x".into(),
            agent_bin: Some("/opt/codex-y".into()),
            ..base
        },
    )
    .unwrap();
    assert_eq!(m[0].agent.bin, "/opt/claude-x");
    assert_eq!(m[1].agent.bin, "/opt/codex-y");
}

/// Each command's settings are made from its clap arguments in one call: modes as enums,
/// counts clamped (with the warning), PRDs looked up, folders resolved.
#[test]
fn each_commands_settings_come_from_its_arguments() {
    use crate::cli::{Cli, Command};
    use clap::Parser;
    let dir = tempfile::tempdir().unwrap();
    let prd = dir.path().join("PRD.md");
    std::fs::write(&prd, "---\nprd: true\n---\n- [ ] ISC-1: x\n").unwrap();
    let prd_arg = prd.to_str().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let loc = Locations {
        pai_dir: dir.path().join("pai"),
        projects_dir: dir.path().join("projects"),
    };
    let parse = |args: &[&str]| {
        Cli::try_parse_from(std::iter::once("prdloop").chain(args.iter().copied()))
            .unwrap()
            .command
            .unwrap()
    };
    for (flag, want) in [
        (None, VerifyMode::Write),
        (Some("--dry-run"), VerifyMode::DryRun),
        (Some("--no-write"), VerifyMode::NoWrite),
    ] {
        // The folders given, so that no PRDLOOP_* variable of the environment decides.
        let state = dir.path().join("state");
        let mut args = vec!["verify", prd_arg, "-a", "40", "--workdir", dir_arg];
        args.extend(["--state-dir", state.to_str().unwrap()]);
        args.extend(flag);
        let Command::Verify(a) = parse(&args) else {
            panic!("not verify")
        };
        let (s, warnings) = VerifySettings::new(&a, &loc).unwrap();
        assert_eq!(s.mode, want, "{flag:?}");
        assert_eq!(s.agents, MAX_AGENTS);
        assert_eq!(
            warnings,
            [Warning::AgentsClamped {
                given: 40,
                used: 16
            }]
        );
        assert_eq!(s.prd, prd);
        assert_eq!(s.exec.paths.workdir, dir.path());
        assert_eq!(s.exec.paths.state_dir, state);
        assert_eq!(
            s.exec.paths.session_names,
            dir.path().join("session-names.json")
        );
    }
    for (args, want) in [
        (vec!["undo"], Landings::Newest(1)),
        (vec!["undo", "--to", "3"], Landings::Newest(3)),
        (vec!["undo", "--all"], Landings::All),
    ] {
        let Command::Undo(a) = parse(&args) else {
            panic!("not undo")
        };
        assert_eq!(UndoSettings::new(&a).count, want, "{args:?}");
    }
    let Command::Merge(a) = parse(&["merge", prd_arg, "b1", "--max-bundle-size", "1K"]) else {
        panic!("not merge")
    };
    let (s, _) = MergeSettings::new(&a, &loc).unwrap();
    assert_eq!((s.limits.size, s.bundles.len()), (1024, 1));
    let Command::New(a) = parse(&["new", "-t", "T", "--format", "v4"]) else {
        panic!("not new")
    };
    let s = NewSettings::new(&a, &loc);
    assert_eq!(
        (s.format, s.work),
        (PrdFormat::V4, loc.pai_dir.join("MEMORY/WORK"))
    );
    // A PRD that is not there is named.
    let Command::Audit(a) = parse(&["audit", "nope.md"]) else {
        panic!("not audit")
    };
    let e = AuditSettings::new(&a, &loc).unwrap_err();
    assert!(format!("{e:#}").contains("nope.md"), "{e:#}");
}

/// A sandboxed worker's agent gets a private home; the run refuses a state folder that a
/// worker could write (here through `--sandbox-allow`), and one in the run's folder without
/// lanes; with the sandbox off there is nothing to refuse.
#[test]
fn the_state_folder_must_be_out_of_every_workers_reach() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("home/.claude/MEMORY/STATE/algorithms");
    let mut s = Sandboxing {
        mode: crate::worker::sandbox::Mode::On,
        on: true,
        home: Some(d.path().join("home")),
        ..Sandboxing::default()
    };
    let r = s.rules(Path::new("/lane"), Agent::Claude).unwrap();
    assert_eq!(r.home.as_ref().map(|h| h.var), Some("CLAUDE_CONFIG_DIR"));
    let v = s.verifier_rules(Agent::Gemini).unwrap();
    assert_eq!(v.home.as_ref().map(|h| h.var), Some("GEMINI_CLI_HOME"));
    assert!(
        s.rules(Path::new("/lane"), Agent::Amp)
            .unwrap()
            .home
            .is_none()
    );
    assert_eq!(s.check_own(&state, &[]), Ok(()));
    let work = d.path().join("work");
    assert_eq!(s.check_own(&state, std::slice::from_ref(&work)), Ok(()));
    let err = s
        .check_own(&work.join("state"), std::slice::from_ref(&work))
        .unwrap_err();
    assert!(err.contains("--state-dir"), "{err}");
    s.writable.push(d.path().join("home/.claude"));
    let err = s.check_own(&state, &[]).unwrap_err();
    assert!(
        err.contains(&state.display().to_string()) && err.contains(".claude`"),
        "{err}"
    );
    s.on = false;
    assert_eq!(s.check_own(&state, &[]), Ok(()));
}

#[test]
fn the_repository_holding_a_folder_is_found_as_git_finds_it() {
    let d = tempfile::tempdir().unwrap();
    let top = d.path().join("top");
    let deep = top.join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    // No repository, and a stray `.git` (empty folder, a file that names nothing) is none.
    assert_eq!(repo_top_holding(&deep), None);
    std::fs::create_dir_all(top.join("a/.git")).unwrap();
    std::fs::write(deep.join(".git"), "not a gitdir line\n").unwrap();
    assert_eq!(repo_top_holding(&deep), None);
    assert_eq!(default_workdir(&deep.join("PRD.md")), deep);
    // A real one above is found; a worktree's `gitdir:` file is one too.
    std::fs::create_dir_all(top.join(".git")).unwrap();
    std::fs::write(top.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    assert_eq!(repo_top_holding(&deep), Some(top.clone()));
    assert_eq!(default_workdir(&deep.join("PRD.md")), top);
    std::fs::write(deep.join(".git"), "gitdir: /elsewhere/.git/worktrees/b\n").unwrap();
    assert_eq!(repo_top_holding(&deep), Some(deep.clone()));
    // Above a ceiling nothing is looked at: the search stops before climbing into it.
    std::fs::remove_file(deep.join(".git")).unwrap();
    assert_eq!(repo_top_below(&deep, &[top.join("a")]), None);
    assert_eq!(repo_top_below(&deep, std::slice::from_ref(&top)), None);
    assert_eq!(repo_top_below(&deep, &[d.path().to_path_buf()]), Some(top));
}

#[test]
fn prdloops_own_paths_are_the_prd_its_state_and_the_session_names_with_their_lock() {
    let own = OwnPaths::new(Path::new("/w/PRD.md"), PathBuf::from("/s/algorithms"));
    assert_eq!(
        own.unwritable(),
        [
            "/w/PRD.md",
            "/s/algorithms",
            "/s/session-names.json",
            "/s/session-names.json.lock"
        ]
        .map(PathBuf::from)
    );
    let key = crate::state::prd_key(Path::new("/w/PRD.md"));
    assert_eq!(
        own.book,
        PathBuf::from(format!("/s/algorithms/questions/{key}.json"))
    );
    assert_eq!(
        own.request,
        crate::state::request_path(Path::new("/w/PRD.md"))
    );
    assert_eq!(own.logs("s-1"), PathBuf::from("/s/algorithms/s-1.logs"));
    // A state folder at the top holds its session names itself.
    assert_eq!(
        OwnPaths::new(Path::new("/w/PRD.md"), PathBuf::from("/")).session_names,
        PathBuf::from("/session-names.json")
    );
}
