//! A `command` agent: any program that reads the prompt on stdin and prints a `RESULT:` line
//! (its plain stdout is its output; its failures go by the shared rules).

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::agents::AgentOptions;
use super::claude::command::OutputFormat;
use super::contract::{Backend, Login, Reader, Seen, Var};
use super::outcome::Outcome;
use super::verdict::result_lines;

/// The `command` agent's backend.
pub struct Command;

impl Backend for Command {
    fn args(&self, o: &AgentOptions, _prompt: &str) -> Vec<String> {
        o.extra_args.clone()
    }

    fn prompt_on_stdin(&self) -> bool {
        true
    }

    fn format(&self, _: &AgentOptions) -> OutputFormat {
        OutputFormat::ResultLines
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::new(ResultLines)
    }

    fn speaks_json(&self) -> bool {
        false
    }

    fn render(&self, _: &Json) -> Option<String> {
        None
    }

    fn login(&self, _: Var, _: &Path) -> Login {
        Login::Unknown("a `command` agent manages its own credentials".into())
    }

    fn state_dirs(&self, _: Var, _: &Path) -> Vec<PathBuf> {
        Vec::new()
    }
}

/// The plain stdout (its tail is kept by the stream parser): a `RESULT:` line counts as the
/// agent's result.
#[derive(Debug)]
struct ResultLines;

impl Reader for ResultLines {
    fn line(&mut self, _: &mut Seen, _: &[u8]) {}

    fn finish(&mut self, o: &mut Outcome) {
        o.has_result = o
            .final_text
            .as_deref()
            .is_some_and(|t| !result_lines(t).is_empty());
    }
}
