//! Amp and cursor: their own command lines, logins and failure texts; the stream they print
//! is claude's stream-json, read and shown by claude's reader and renderer.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::{ClaudeReader, OutputFormat, render};
use crate::backend::agents::{Agent, AgentOptions, strings};
use crate::backend::classify::contains_any as has;
use crate::backend::contract::{Backend, Login, Reader, Var, key_set, xdg};

/// Cursor's agent CLI.
pub struct Cursor;

/// Amp.
pub struct Amp;

/// A stored login these agents keep cannot be checked offline: only their key variable.
fn key_login(agent: Agent, var: Var) -> Login {
    let keys = agent.key_vars();
    key_set(var, keys).unwrap_or_else(|| {
        Login::Unknown(format!(
            "{} not set; a stored login cannot be checked offline",
            keys.join(" or ")
        ))
    })
}

impl Backend for Cursor {
    fn args(&self, o: &AgentOptions, prompt: &str) -> Vec<String> {
        let mut v = strings(&["-p", "--output-format", "stream-json", "--force", "--trust"]);
        v.extend(o.model_args("--model"));
        v.extend(o.extra_args.iter().cloned());
        v.push(prompt.to_string());
        v
    }

    fn format(&self, _: &AgentOptions) -> OutputFormat {
        OutputFormat::CursorStreamJson
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<ClaudeReader>::default()
    }

    fn says_auth(&self, all: &str, _: Option<i32>) -> bool {
        has(
            all,
            &["authentication required", "agent login", "not logged in"],
        )
    }

    fn render(&self, v: &Json) -> Option<String> {
        render::line(v)
    }

    fn login(&self, var: Var, _: &Path) -> Login {
        key_login(Agent::Cursor, var)
    }

    fn state_dirs(&self, _: Var, home: &Path) -> Vec<PathBuf> {
        vec![home.join(".cursor")]
    }
}

impl Backend for Amp {
    fn args(&self, o: &AgentOptions, prompt: &str) -> Vec<String> {
        let mut v = vec!["-x".to_string(), prompt.to_string()];
        v.extend(strings(&["--stream-json", "--dangerously-allow-all"]));
        // amp has no model flag: its agent mode (`low` … `ultra`) picks the model.
        v.extend(o.model_args("--mode"));
        v.extend(o.extra_args.iter().cloned());
        v
    }

    fn format(&self, _: &AgentOptions) -> OutputFormat {
        OutputFormat::AmpStreamJson
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<ClaudeReader>::default()
    }

    fn says_auth(&self, all: &str, _: Option<i32>) -> bool {
        has(all, &["invalid or missing api key", "amp login"])
    }

    fn says_overloaded(&self, all: &str, _: Option<i32>) -> bool {
        has(all, &["couldn't connect to the amp server"])
    }

    fn render(&self, v: &Json) -> Option<String> {
        render::line(v)
    }

    fn login(&self, var: Var, _: &Path) -> Login {
        key_login(Agent::Amp, var)
    }

    fn state_dirs(&self, var: Var, home: &Path) -> Vec<PathBuf> {
        let (config, data) = xdg(var, home);
        vec![config.join("amp"), data.join("amp")]
    }
}
