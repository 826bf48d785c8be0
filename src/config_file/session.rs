//! The settings a run was given on its command line and in its `PRDLOOP_*` variables,
//! recorded in its state file (`runSettings`) so that `resume` runs the session as it ran.
//! They are a layer of their own: above the config files, which `resume` reads again, and
//! below `resume`'s own flags and variables, which win.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use super::origin::each_flag;
use super::{Keys, Origin};
pub use crate::given::{Given, SessionSettings};
use clap::parser::ValueSource;

/// Flags that say what one command shows or does once, not how the session's work is done:
/// a `resume` is told them afresh. (`shard`, `bundle` and `profile` are no keys at all.)
const NOT_RESUMED: &[&str] = &[
    "json",
    "progress",
    "junit",
    "serve",
    "serve-port",
    "dry-run",
    "force",
    "recheck",
    "state-dir",
    "with-children",
    "pr",
    "pr-base",
    "draft",
    // Where notifications go may hold a secret (an ntfy topic, a webhook's token), and the
    // state file is readable by workers: a resume takes them from its own environment and
    // config files.
    "notify",
    "notify-url",
    "voice-id",
];

/// The flags that choose the workers' agent, one setting among them: when `resume`'s command
/// line or environment names any of them, none of the session's is taken (its program and
/// arguments were for its agent).
pub const AGENT_KEYS: &[&str] = &[
    "agent",
    "agent-bin",
    "agent-arg",
    "claude-bin",
    "claude-arg",
];

/// The settings the command line `args` gives a run (flags and `PRDLOOP_*` variables,
/// not config files: a `resume` reads those itself), relative paths made absolute (a
/// `resume` may start in another folder).
pub(super) fn given_by(cmd: &clap::Command, args: &[OsString], keys: &Keys) -> SessionSettings {
    let mut cmd = cmd.clone();
    let Ok(matches) = cmd.try_get_matches_from_mut(args) else {
        return SessionSettings::default();
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut out = BTreeMap::new();
    each_flag(&cmd, &matches, |arg, long, m| {
        let id = arg.get_id().as_str();
        let given = matches!(
            m.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if !given || NOT_RESUMED.contains(&long) {
            return;
        }
        if let Some(value) = keys.keys.get(long).and_then(|k| k.given(m, id, &cwd)) {
            out.insert(long.to_string(), value);
        }
    });
    SessionSettings::from_map(out)
}

/// The settings a `resume` takes from its session's: all but those its own command line or
/// environment gives (in `origins`), and none of the agent's when it names an agent.
pub(super) fn taken_by(
    session: &SessionSettings,
    origins: &BTreeMap<String, Origin>,
) -> SessionSettings {
    let given = |k: &str| {
        matches!(
            origins.get(k),
            Some(Origin::CommandLine(_) | Origin::Env(_))
        )
    };
    let agent_named = AGENT_KEYS.iter().any(|k| given(k));
    SessionSettings::from_map(
        session
            .iter()
            .filter(|(k, _)| !(given(k) || agent_named && AGENT_KEYS.contains(&k.as_str())))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Where a setting the session gave came from, for `--show-origin` and the sandbox line.
pub(super) fn place(state_file: &Path) -> super::Place {
    super::Place {
        scope: super::Scope::Session,
        file: state_file.to_path_buf(),
        line: 0,
        profile: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::given::Value;

    fn of(args: &[&str]) -> SessionSettings {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        given_by(&super::super::cli_command(), &args, &Keys::new())
    }

    #[test]
    fn a_runs_flags_are_kept_but_not_what_one_command_shows_or_does_once() {
        let s = of(&[
            "prdloop",
            "run",
            "PRD.md",
            "--timeout",
            "5m",
            "--agent",
            "command",
            "--agent-bin",
            "bin/agent.sh",
            "--agent-arg=-x",
            "--agent-arg=two words",
            "--no-verify",
            "--json",
            "--dry-run",
            "--force",
        ]);
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(s.get("timeout"), Some(&Value::One("5m".into())), "{s:?}");
        assert_eq!(
            s.get("agent-bin"),
            Some(&Value::One(cwd.join("bin/agent.sh").display().to_string()))
        );
        assert_eq!(
            s.get("agent-arg"),
            Some(&Value::Many(vec!["-x".into(), "two words".into()]))
        );
        assert_eq!(s.get("no-verify"), Some(&Value::Flag(true)));
        for once in ["json", "dry-run", "force", "notify-url"] {
            assert!(s.get(once).is_none(), "{once}: {s:?}");
        }
        // A flag at its default is no setting of the run's.
        assert!(s.get("kill-grace").is_none(), "{s:?}");
        let text = s.to_string();
        assert!(text.contains("--agent-arg='two words'"), "{text}");
        assert!(text.contains("--timeout 5m"), "{text}");
        // Through the state file and back.
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<SessionSettings>(&json).unwrap(), s);
    }

    #[test]
    fn resumes_own_flags_win_and_an_agent_it_names_takes_none_of_the_sessions() {
        let s = of(&[
            "prdloop",
            "run",
            "PRD.md",
            "--timeout",
            "5m",
            "--stall",
            "7",
            "--agent",
            "command",
            "--agent-bin",
            "/bin/agent",
        ]);
        let mut origins = BTreeMap::new();
        origins.insert("timeout".to_string(), Origin::CommandLine("timeout".into()));
        let taken = taken_by(&s, &origins);
        assert!(taken.get("timeout").is_none());
        assert!(taken.get("stall").is_some());
        assert!(taken.get("agent-bin").is_some());
        origins.insert("agent".to_string(), Origin::Env("PRDLOOP_AGENT".into()));
        let taken = taken_by(&s, &origins);
        assert!(taken.get("agent").is_none() && taken.get("agent-bin").is_none());
        assert!(taken.get("stall").is_some());
        // A config file's agent does not count as resume's own: the session's stands.
        origins.clear();
        origins.insert(
            "agent".to_string(),
            Origin::File(place(Path::new("/x/prdloop.toml"))),
        );
        assert!(taken_by(&s, &origins).get("agent-bin").is_some());
    }
}
