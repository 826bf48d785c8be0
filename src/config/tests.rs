use super::*;

#[test]
fn clamps() {
    assert_eq!(clamp_agents(4), (4, None));
    assert_eq!(clamp_agents(40).0, 16);
    assert!(clamp_agents(40).1.unwrap().contains("using 16"));
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
        ["--claude-arg applies to claude only; ignored with --agent codex (use --agent-arg)"]
    );

    // A claude set-up of --mix under another agent still takes --claude-bin.
    let (m, _) = mix(
        "claude:opus,codex",
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
