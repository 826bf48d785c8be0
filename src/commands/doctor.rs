//! `prdloop doctor [--agent NAME] [--agent-bin PATH]`: can the chosen agent run here? Its
//! binary (where), its `--version` (with a time limit), and whether it looks logged in, told
//! from API key variables and credential files only: no request, no tokens spent.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::backend::Agent;
use crate::config::DoctorSettings;
use crate::exit::Exit;
use crate::{env, exit, outln};

/// How long `--version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(15);

/// What can be told about a login without asking the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// Looks logged in: how.
    Yes(String),
    /// Surely not: what is missing.
    No(String),
    /// Cannot be told without a request.
    Unknown(String),
}

/// `prdloop doctor`.
pub fn doctor(s: &DoctorSettings) -> Result<Exit> {
    let (opts, warnings) = (&s.agent, &s.notes);
    let mut out = String::new();
    let agent = opts.agent;
    outln!(out, "agent:   {agent}");
    for w in warnings {
        outln!(out, "note:    {w}");
    }
    let mut usable = true;
    let path = match crate::platform::find_program(&opts.bin, "--agent-bin (PRDLOOP_AGENT_BIN)") {
        Ok(p) => {
            outln!(out, "binary:  {} ({})", p.display(), opts.bin);
            Some(p)
        }
        Err(msg) => {
            outln!(out, "binary:  NOT FOUND: {msg}");
            usable = false;
            None
        }
    };
    if let Some(p) = &path {
        if agent == Agent::Command {
            outln!(
                out,
                "version: not asked (a `command` agent need not know `--version`)"
            );
        } else {
            match version(p) {
                Ok(v) => outln!(out, "version: {v}"),
                Err(e) => {
                    outln!(out, "version: FAILED: {e}");
                    usable = false;
                }
            }
        }
    }
    match login(
        agent,
        &|k| std::env::var_os(k).filter(|v| !v.is_empty()),
        &home(),
    ) {
        Login::Yes(how) => outln!(out, "login:   looks logged in ({how})"),
        Login::No(what) => {
            outln!(
                out,
                "login:   NOT LOGGED IN: {what}; {}",
                agent.login_advice()
            );
            usable = false;
        }
        Login::Unknown(why) => outln!(out, "login:   cannot tell without a request ({why})"),
    }
    outln!(out, "command: {}", opts.display());
    let support = crate::worker::sandbox::probe();
    let with = match &support {
        crate::worker::sandbox::Support::Unavailable(_) => {
            "--sandbox auto runs the workers without it, --sandbox on fails"
        }
        _ if agent.sandboxes_itself() => {
            "under --sandbox auto the agent keeps its own sandbox; --sandbox on binds it with prdloop's"
        }
        _ => "--sandbox auto binds the workers",
    };
    // One line (what it says depends on the kernel).
    let walls = match support {
        crate::worker::sandbox::Support::Landlock { .. } => {
            format!("; {}; {}", support.walls(), support.net_walls())
        }
        crate::worker::sandbox::Support::Unavailable(_) => String::new(),
    };
    outln!(out, "sandbox: {}; {with}{walls}", support.label());
    outln!(out, "{}", if usable { "usable" } else { "NOT usable" });
    crate::report::stdout(&out)?;
    Ok(if usable {
        exit::Exit::Success
    } else {
        exit::Exit::Usage
    })
}

fn home() -> PathBuf {
    std::env::var_os(env::HOME).map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// The first line of `<program> --version`, ended after [`VERSION_TIMEOUT`].
fn version(program: &std::path::Path) -> Result<String, String> {
    let mut child = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() > VERSION_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`--version` did not answer within {}s",
                    VERSION_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let mut text = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut text);
    }
    if text.trim().is_empty()
        && let Some(mut e) = child.stderr.take()
    {
        let _ = e.read_to_string(&mut text);
    }
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    if status.success() {
        Ok(if first.is_empty() {
            "(printed nothing)".into()
        } else {
            first
        })
    } else {
        Err(format!("`--version` exited with {status}: {first}"))
    }
}

/// Whether `agent` looks logged in: an API key variable (`var` reads the environment), or the
/// credentials file the agent writes at login, under `home`.
pub fn login(
    agent: Agent,
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    home: &std::path::Path,
) -> Login {
    if let Some(k) = agent.key_vars().iter().find(|k| var(k).is_some()) {
        return Login::Yes(format!("{k} is set"));
    }
    let dir = |k: &str, default: PathBuf| var(k).map_or(default, PathBuf::from);
    let file = |p: PathBuf, missing: &str| {
        if p.is_file() {
            Login::Yes(format!("{} exists", p.display()))
        } else {
            Login::No(format!("no {} and {missing}", p.display()))
        }
    };
    let keys = agent.key_vars().join(" or ");
    match agent {
        Agent::Claude => {
            let f = dir("CLAUDE_CONFIG_DIR", home.join(".claude")).join(".credentials.json");
            if cfg!(target_os = "macos") && !f.is_file() {
                Login::Unknown(format!("the login may be in the keychain; {keys} not set"))
            } else {
                file(f, &format!("{keys} not set"))
            }
        }
        Agent::Codex => file(
            dir("CODEX_HOME", home.join(".codex")).join("auth.json"),
            &format!("{keys} not set"),
        ),
        Agent::Gemini => {
            let base = dir("GEMINI_CLI_HOME", home.to_path_buf()).join(".gemini");
            if var("GOOGLE_GENAI_USE_VERTEXAI").is_some() {
                return Login::Unknown("Vertex AI credentials (GOOGLE_GENAI_USE_VERTEXAI)".into());
            }
            file(base.join("oauth_creds.json"), &format!("{keys} not set"))
        }
        Agent::Opencode => {
            let f = dir("XDG_DATA_HOME", home.join(".local/share")).join("opencode/auth.json");
            if f.is_file() {
                Login::Yes(format!("{} exists", f.display()))
            } else {
                Login::Unknown(format!(
                    "no {}; a provider's key in the environment or config may still work",
                    f.display()
                ))
            }
        }
        Agent::Cursor | Agent::Amp => Login::Unknown(format!(
            "{keys} not set; a stored login cannot be checked offline"
        )),
        Agent::Command => Login::Unknown("a `command` agent manages its own credentials".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_from_variables_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let none = |_: &str| None;
        assert!(matches!(
            login(Agent::Codex, &none, dir.path()),
            Login::No(_)
        ));
        let key = |k: &str| (k == "OPENAI_API_KEY").then(|| "sk".into());
        assert_eq!(
            login(Agent::Codex, &key, dir.path()),
            Login::Yes("OPENAI_API_KEY is set".into())
        );
        std::fs::create_dir_all(dir.path().join(".codex")).unwrap();
        std::fs::write(dir.path().join(".codex/auth.json"), "{}").unwrap();
        assert!(matches!(
            login(Agent::Codex, &none, dir.path()),
            Login::Yes(_)
        ));
        assert!(matches!(
            login(Agent::Amp, &none, dir.path()),
            Login::Unknown(_)
        ));
        assert!(matches!(
            login(Agent::Command, &none, dir.path()),
            Login::Unknown(_)
        ));
    }
}
