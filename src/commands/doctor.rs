//! `prdloop doctor [--agent NAME] [--agent-bin PATH]`: can the chosen agent run here? Its
//! binary (where), its `--version` (with a time limit), and whether it looks logged in, told
//! from API key variables and credential files only: no request, no tokens spent.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::backend::{Agent, Login};
use crate::config::DoctorSettings;
use crate::exit::Exit;
use crate::{env, exit, outln};

/// How long `--version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(15);

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
    match agent
        .backend()
        .login(&|k| std::env::var_os(k).filter(|v| !v.is_empty()), &home())
    {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn login(
        agent: Agent,
        var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
        home: &std::path::Path,
    ) -> Login {
        agent.backend().login(var, home)
    }

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
