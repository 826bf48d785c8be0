//! What a worker's output says, whichever agent printed it: the outcome once it has ended,
//! what it is doing while it works, and the tool calls the stuck watch counts.

use serde_json::Value as Json;

use super::agents::Agent;
use super::stuck::{ToolCall, command_key};

/// Token counts summed over a worker's run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_creation_input_tokens += o.cache_creation_input_tokens;
        self.cache_read_input_tokens += o.cache_read_input_tokens;
    }

    pub fn total(&self) -> u64 {
        self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
    }
}

/// What a worker's output says, once it has ended.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// The final text: the `result` object's text, or the last assistant text, or (for the
    /// text format) the tail of stdout.
    pub final_text: Option<String>,
    /// Whether a `result` object was seen.
    pub has_result: bool,
    pub is_error: bool,
    pub subtype: Option<String>,
    pub api_error_status: Option<u16>,
    pub errors: Vec<String>,
    pub cost_usd: Option<f64>,
    pub usage: Usage,
    /// Whether the agent reported token counts at all (`usage` is zeros otherwise).
    pub tokens_reported: bool,
    /// The agent whose output this is (from the output format).
    pub agent: Agent,
    pub num_turns: Option<u64>,
    pub session_id: Option<String>,
    pub permission_denials: Vec<String>,
    /// `system/api_retry` events seen (the agent retrying the model API itself).
    pub api_retries: u32,
    /// Last HTTP status seen in an `api_retry` event.
    pub retry_status: Option<u16>,
    /// `rate_limit_event` info: (status, resetsAt epoch seconds).
    pub rate_limit_status: Option<String>,
    pub rate_limit_resets_at: Option<i64>,
    /// Lines that were not JSON (or not UTF-8) in a JSON format.
    pub unparsed_lines: u64,
    /// One of them was a plain `RESULT: <id> PASS|FAIL` line: a script speaking the
    /// `command` contract run as a JSON-speaking agent.
    pub plain_result_line: bool,
}

/// What a worker is doing now, as its output stream shows it: for the live view only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// The last tool call (`Bash: cargo test auth`, `Edit: src/x.rs`), or `thinking`,
    /// `writing`; empty until the stream says something.
    pub doing: String,
    /// Tokens used so far, where the stream reports them while the agent works.
    pub tokens: Option<u64>,
}

/// The keys of a tool's input that hold a shell command.
const COMMAND_KEYS: &[&str] = &["command", "cmd"];

/// A tool call: its name and whole input hashed (a repeat hashes the same), its label.
pub(super) fn tool_call(tool: &str, input: &Json, label: String) -> ToolCall {
    use std::hash::{Hash, Hasher};
    /// Bytes written into a hasher (no copy of a large input is made).
    struct HashSink<'a>(&'a mut std::collections::hash_map::DefaultHasher);
    impl std::io::Write for HashSink<'_> {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.write(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tool.hash(&mut h);
    // A shell command is compared without its comments and spacing (`cargo test # again`
    // repeats `cargo test`); everything else as it is. serde_json's maps are ordered by key:
    // the same input hashes the same.
    match input {
        Json::String(cmd) => command_key(cmd).hash(&mut h),
        Json::Object(map) => {
            for (k, v) in map {
                k.hash(&mut h);
                match v.as_str() {
                    Some(cmd) if COMMAND_KEYS.contains(&k.as_str()) => {
                        command_key(cmd).hash(&mut h)
                    }
                    _ => {
                        let _ = serde_json::to_writer(HashSink(&mut h), v);
                    }
                }
            }
        }
        _ => {
            let _ = serde_json::to_writer(HashSink(&mut h), input);
        }
    }
    ToolCall {
        fingerprint: h.finish(),
        label,
    }
}

/// The longest `doing` kept: the view cuts it to the terminal's width anyway.
pub(super) const DOING_MAX: usize = 160;

/// `tool: subject`, the subject on one line and bounded.
pub(super) fn doing(tool: &str, subject: Option<&str>) -> String {
    // What an agent prints is shown on the user's terminal: no control characters.
    use crate::text::controls_to_spaces;
    let mut s = String::with_capacity(DOING_MAX);
    s.push_str(controls_to_spaces(tool).trim());
    if let Some(subject) = subject.map(controls_to_spaces) {
        s.push_str(": ");
        for word in subject.split_whitespace() {
            if s.len() + word.len() + 1 > DOING_MAX {
                s.push('…');
                break;
            }
            if !s.ends_with(": ") {
                s.push(' ');
            }
            s.push_str(word);
        }
    }
    s
}
