use super::*;

fn keys() -> Keys {
    Keys::new()
}

fn layer(text: &str) -> Result<Layer> {
    let file = Path::new("/repo/prdloop.toml");
    Layer::new(
        &keys(),
        Scope::Project,
        file,
        Path::new("/repo"),
        toml_tree(text, file)?,
    )
}

#[test]
fn keys_are_the_long_flags() {
    let k = keys();
    for name in [
        "timeout",
        "agent",
        "best-of",
        "verify-types",
        "setup",
        "agent-arg",
    ] {
        assert!(k.keys.contains_key(name), "{name}");
    }
    for name in [
        "help",
        "version",
        "profile",
        "show-origin",
        "prd",
        "mode",
        "shard",
        "bundle",
    ] {
        assert!(!k.keys.contains_key(name), "{name}");
    }
}

#[test]
fn values_are_checked_and_errors_name_the_line() {
    let l =
        layer("timeout = \"30m\"\nbest-of = 2\nforce = true\nagent-arg = [\"-x\", 1]\n").unwrap();
    let got: Vec<_> = l.base.iter().map(|s| (s.key.as_str(), s.line)).collect();
    assert_eq!(
        got,
        [
            ("timeout", 1),
            ("best-of", 2),
            ("force", 3),
            ("agent-arg", 4)
        ]
    );
    assert_eq!(l.base[3].value, Value::Many(vec!["-x".into(), "1".into()]));
    let err = |t: &str| layer(t).unwrap_err().to_string();
    assert_eq!(
        err("# a comment\n\ntimeuot = \"5m\"\n"),
        "/repo/prdloop.toml:3: unknown key `timeuot`: the keys are the long flag names \
             (`timeout` for --timeout); `prdloop config` lists the settings"
    );
    assert_eq!(
        err("max_cost = 5\n"),
        "/repo/prdloop.toml:1: unknown key `max_cost`: the keys are the long flag names, \
             `max-cost`"
    );
    assert_eq!(
        err("a = 1\nforce = \"yes\"\n").lines().next().unwrap(),
        "/repo/prdloop.toml:1: unknown key `a`: the keys are the long flag names \
             (`timeout` for --timeout); `prdloop config` lists the settings"
    );
    assert_eq!(
        err("force = \"yes\"\n"),
        "/repo/prdloop.toml:1: `force` takes true or false, not the text \"yes\""
    );
    assert!(
        err("\n\ntimeout = \"soon\"\n").starts_with(
            "/repo/prdloop.toml:3: `timeout`: invalid value 'soon' for '--timeout <DUR>'"
        ),
        "{}",
        err("\n\ntimeout = \"soon\"\n")
    );
    assert!(err("best-of = 9\n").starts_with("/repo/prdloop.toml:1: `best-of`: invalid value '9'"));
    assert_eq!(
        err("timeout = [\"1m\"]\n"),
        "/repo/prdloop.toml:1: `timeout` takes one value, not a list"
    );
    assert_eq!(
        err("[agent]\nx = 1\n"),
        "/repo/prdloop.toml:1: `agent` is a table: settings are `key = value`, profiles \
             `[profile.NAME]`"
    );
    assert_eq!(
        err("[profile.ci]\nstal = 1\n"),
        "/repo/prdloop.toml:2: unknown key `stal`: the keys are the long flag names \
             (`timeout` for --timeout); `prdloop config` lists the settings"
    );
    assert!(err("timeout = \n").starts_with("/repo/prdloop.toml:1: not valid TOML:"));
}

#[test]
fn relative_paths_are_the_files_folder() {
    let l = layer("state-dir = \"state\"\nagent-bin = \"./bin/agent\"\nclaude-bin = \"claude\"\n")
        .unwrap();
    let v: Vec<_> = l.base.iter().map(|s| s.value.clone()).collect();
    assert_eq!(
        v,
        [
            Value::One("/repo/state".into()),
            Value::One("/repo/./bin/agent".into()),
            Value::One("claude".into()),
        ]
    );
}

#[test]
fn a_prds_map_has_the_files_lines() {
    let text = "---\nid: PRD-1\nprdloop:\n  timeout: 30m\n  agent-arg:\n    - -x\n  profile:\n    ci:\n      best-of: 2\n---\n# Body\n";
    let entries = prd_tree(text, Path::new("/p/PRD.md")).unwrap().unwrap();
    let l = Layer::new(
        &keys(),
        Scope::Prd,
        Path::new("/p/PRD.md"),
        Path::new("/p"),
        entries,
    )
    .unwrap();
    let got: Vec<_> = l.base.iter().map(|s| (s.key.as_str(), s.line)).collect();
    assert_eq!(got, [("timeout", 4), ("agent-arg", 5)]);
    assert_eq!(l.profiles["ci"][0].line, 9);
    assert!(
        prd_tree("---\nid: x\n---\n", Path::new("p"))
            .unwrap()
            .is_none()
    );
    let bad = "---\nid: x\nprdloop:\n  best-of: many\n---\n";
    let broken = "---\nid: x\nprdloop:\n  timeout: 5m\n  agents: [1\n---\n";
    let e = prd_tree(broken, Path::new("/p/PRD.md"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "/p/PRD.md:5: the front matter's `prdloop:` map cannot be read: unclosed bracket '['"
    );
    let e = Layer::new(
        &keys(),
        Scope::Prd,
        Path::new("/p/PRD.md"),
        Path::new("/p"),
        prd_tree(bad, Path::new("/p/PRD.md")).unwrap().unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("/p/PRD.md:4: `best-of`: invalid value 'many'"),
        "{e}"
    );
}

#[test]
fn settings_are_defaults_that_the_command_line_overrides() {
    let place = Place {
        scope: Scope::Project,
        file: PathBuf::from("/repo/prdloop.toml"),
        line: 1,
        profile: None,
    };
    let mut settings = Settings::default();
    for (k, v) in [
        ("verbose", Value::One("2".into())),
        ("force", Value::Flag(true)),
        ("timeout", Value::One("30m".into())),
        ("agent-arg", Value::Many(vec!["--a".into(), "--b".into()])),
        ("stall", Value::One("9".into())),
    ] {
        settings.values.insert(k.into(), (v, place.clone()));
    }
    let parse = |args: &[&str]| {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        Cli::try_parse_from_cmd(settings.apply(Cli::command()), &args).unwrap()
    };
    let run_opts = |cli: Cli| match cli.command {
        Some(Sub::Run { opts, .. }) => opts,
        other => panic!("{other:?}"),
    };
    let cli = parse(&["prdloop", "run", "X.md"]);
    assert_eq!(cli.global.verbose, 2);
    let opts = run_opts(cli);
    assert!(opts.force);
    assert_eq!(opts.timeout, std::time::Duration::from_secs(1800));
    assert_eq!(opts.worker.agent_args, ["--a", "--b"]);
    assert_eq!(opts.stall, 9);
    let cli = parse(&[
        "prdloop",
        "run",
        "X.md",
        "-v",
        "--timeout",
        "1m",
        "--agent-arg",
        "--c",
    ]);
    assert_eq!(cli.global.verbose, 1);
    let opts = run_opts(cli);
    assert_eq!(opts.timeout, std::time::Duration::from_secs(60));
    assert_eq!(opts.worker.agent_args, ["--c"]);
    // PAI's form has the same flags at the top level.
    let cli = parse(&["prdloop", "-m", "loop", "-p", "X.md"]);
    assert_eq!(cli.run.stall, 9);
}
