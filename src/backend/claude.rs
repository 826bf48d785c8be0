//! Claude Code in print mode: its command line, its stream-json output, its failures (the
//! shared rules), its log and its login. Amp and cursor print the same stream (`compatible`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value as Json;

use super::agents::{Agent, AgentOptions};
use super::classify::{AgentFailure, classify};
use super::contract::{Backend, Login, Reader, Seen, Var, key_set, login_file, moved};
use super::outcome::{Outcome, Usage, doing, tool_call};
use super::verdict::Exit;

pub mod command;
mod compatible;
mod render;

pub use command::{ClaudeOptions, DEFAULT_ALLOWED_TOOLS, OutputFormat, shell_quote};
pub use compatible::{Amp, Cursor};

/// One line of claude's stream-json, as far as prdloop reads it. Unknown event types and
/// fields are ignored (they appear between releases).
#[derive(Debug, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    Result(ResultEvent),
    Assistant {
        message: Message,
    },
    System(SystemEvent),
    #[serde(rename = "rate_limit_event")]
    RateLimit {
        #[serde(default)]
        rate_limit_info: Option<RateLimitInfo>,
    },
    #[serde(other)]
    Other,
}

/// The final `result` object.
#[derive(Debug, serde::Deserialize)]
struct ResultEvent {
    #[serde(default, deserialize_with = "lenient")]
    is_error: bool,
    #[serde(default, deserialize_with = "lenient")]
    subtype: Option<String>,
    /// A number, or null; read leniently so that an odd value never costs the result.
    #[serde(default, deserialize_with = "lenient")]
    api_error_status: Option<Json>,
    #[serde(default, deserialize_with = "lenient")]
    result: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    errors: Option<Vec<Json>>,
    #[serde(default, deserialize_with = "lenient")]
    total_cost_usd: Option<f64>,
    #[serde(default, deserialize_with = "snake_usage")]
    usage: Option<Usage>,
    #[serde(default, deserialize_with = "lenient")]
    num_turns: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    session_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    permission_denials: Vec<Denial>,
}

#[derive(Debug, serde::Deserialize)]
struct Denial {
    #[serde(default, deserialize_with = "lenient")]
    tool_name: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct Message {
    #[serde(default)]
    content: Vec<Block>,
    /// The same message comes in one event per content block, with the same usage.
    #[serde(default, deserialize_with = "lenient")]
    id: Option<String>,
    #[serde(default, deserialize_with = "snake_usage")]
    usage: Option<Usage>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        #[serde(default, deserialize_with = "lenient")]
        name: String,
        /// The whole input: its hash tells a new call from a repeat; the fields that say
        /// what it works on are read from it.
        #[serde(default)]
        input: Json,
    },
    Thinking {},
    #[serde(other)]
    Other,
}

/// The fields of a tool call's input that say what it works on (only those are kept: a
/// Write's whole file content is not).
#[derive(Debug, Default, serde::Deserialize)]
struct ToolInput {
    #[serde(default, deserialize_with = "lenient")]
    command: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    file_path: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    notebook_path: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pattern: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    url: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    query: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    description: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    path: Option<String>,
}

impl ToolInput {
    /// What the call works on, in the order a reader wants it: the command, the file, …
    fn subject(&self) -> Option<&str> {
        [
            &self.command,
            &self.file_path,
            &self.notebook_path,
            &self.pattern,
            &self.url,
            &self.query,
            &self.description,
            &self.path,
        ]
        .into_iter()
        .find_map(|v| v.as_deref().filter(|s| !s.trim().is_empty()))
    }
}

#[derive(Debug, serde::Deserialize)]
struct SystemEvent {
    #[serde(default)]
    subtype: Option<String>,
    #[serde(default)]
    error_status: Option<Json>,
    #[serde(default)]
    session_id: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
struct RateLimitInfo {
    #[serde(default)]
    status: Option<String>,
    #[serde(default, rename = "resetsAt")]
    resets_at: Option<i64>,
}

/// A field read leniently: `null` or a value of another type is the default, so that one odd
/// field never costs the whole `result` object.
fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let v: Json = serde::Deserialize::deserialize(d)?;
    Ok(serde_json::from_value(v).unwrap_or_default())
}

/// An HTTP status given as a number (or a numeric string).
fn status(v: Option<&Json>) -> Option<u16> {
    match v? {
        Json::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// claude's `usage` object (snake_case keys; missing counts are 0).
fn snake_usage<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Usage>, D::Error> {
    #[derive(serde::Deserialize)]
    struct Snake {
        #[serde(default, deserialize_with = "lenient")]
        input_tokens: u64,
        #[serde(default, deserialize_with = "lenient")]
        output_tokens: u64,
        #[serde(default, deserialize_with = "lenient")]
        cache_creation_input_tokens: u64,
        #[serde(default, deserialize_with = "lenient")]
        cache_read_input_tokens: u64,
    }
    let v: Json = serde::Deserialize::deserialize(d)?;
    let u: Option<Snake> = serde_json::from_value(v).ok().flatten();
    Ok(u.map(|u| Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
        cache_creation_input_tokens: u.cache_creation_input_tokens,
        cache_read_input_tokens: u.cache_read_input_tokens,
    }))
}

/// Claude Code's backend (its claude-compatible cousins are in `compatible`).
pub struct Claude;

impl Backend for Claude {
    fn args(&self, o: &AgentOptions, _prompt: &str) -> Vec<String> {
        o.claude.args()
    }

    fn prompt_on_stdin(&self) -> bool {
        true
    }

    fn format(&self, o: &AgentOptions) -> OutputFormat {
        o.claude.output_format()
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<ClaudeReader>::default()
    }

    /// Claude's failures are the shared rules' own.
    fn classify(
        &self,
        exit: &Exit,
        o: &Outcome,
        stderr_tail: &str,
        now: i64,
    ) -> Option<AgentFailure> {
        classify(exit, o, stderr_tail, now)
    }

    fn render(&self, v: &Json) -> Option<String> {
        render::line(v)
    }

    fn login(&self, var: Var, home: &Path) -> Login {
        let keys = Agent::Claude.key_vars();
        if let Some(yes) = key_set(var, keys) {
            return yes;
        }
        let f = moved(var, "CLAUDE_CONFIG_DIR", home.join(".claude")).join(".credentials.json");
        let keys = keys.join(" or ");
        if cfg!(target_os = "macos") && !f.is_file() {
            Login::Unknown(format!("the login may be in the keychain; {keys} not set"))
        } else {
            login_file(f, &format!("{keys} not set"))
        }
    }

    fn state_dirs(&self, var: Var, home: &Path) -> Vec<PathBuf> {
        vec![moved(var, "CLAUDE_CONFIG_DIR", home.join(".claude"))]
    }
}

/// Reads claude's stream-json (and the one object of its `json` format). Tolerates unknown
/// events and lines that are not JSON.
#[derive(Debug, Default)]
pub(super) struct ClaudeReader {
    last_assistant_text: Option<String>,
    /// The last assistant message counted into the activity's tokens.
    last_message: Option<String>,
}

impl Reader for ClaudeReader {
    fn line(&mut self, seen: &mut Seen, line: &[u8]) {
        match serde_json::from_slice::<Event>(line) {
            Ok(e) => self.event(seen, e),
            Err(_) => {
                seen.outcome.unparsed_lines += 1;
                if line.starts_with(b"RESULT:") {
                    seen.outcome.plain_result_line = true;
                }
            }
        }
    }

    /// Without a `result` object the answer is the last assistant text.
    fn finish(&mut self, o: &mut Outcome) {
        if o.final_text.is_none() {
            o.final_text = self.last_assistant_text.take();
        }
    }
}

impl ClaudeReader {
    fn event(&mut self, seen: &mut Seen, e: Event) {
        let o = &mut seen.outcome;
        match e {
            Event::Result(r) => {
                o.has_result = true;
                o.is_error = r.is_error;
                o.subtype = r.subtype;
                o.api_error_status = status(r.api_error_status.as_ref());
                if r.result.is_some() {
                    o.final_text = r.result;
                }
                if let Some(errs) = r.errors {
                    o.errors = errs
                        .iter()
                        .map(|e| e.as_str().map_or_else(|| e.to_string(), String::from))
                        .collect();
                }
                o.cost_usd = r.total_cost_usd;
                if let Some(u) = r.usage {
                    o.usage = u;
                    o.tokens_reported = true;
                }
                o.num_turns = r.num_turns;
                o.session_id = r.session_id;
                o.permission_denials = r
                    .permission_denials
                    .into_iter()
                    .map(|d| d.tool_name.unwrap_or_else(|| "?".into()))
                    .collect();
            }
            Event::Assistant { message } => {
                if let Some(u) = message.usage
                    && (message.id.is_none() || message.id != self.last_message)
                {
                    self.last_message = message.id;
                    let so_far = seen.tokens().unwrap_or(0) + u.total();
                    seen.set_tokens(so_far);
                }
                for b in message.content {
                    match b {
                        Block::Text { text } => {
                            seen.set_doing("writing".into());
                            self.last_assistant_text = Some(text);
                        }
                        Block::ToolUse { name, input } => {
                            let fields = ToolInput::deserialize(&input).unwrap_or_default();
                            let label = doing(&name, fields.subject());
                            seen.call(tool_call(&name, &input, label.clone()));
                            seen.set_doing(label);
                        }
                        Block::Thinking {} => seen.set_doing("thinking".into()),
                        Block::Other => {}
                    }
                }
            }
            Event::System(sys) => {
                if sys.subtype.as_deref() == Some("api_retry") {
                    o.api_retries += 1;
                    o.retry_status = status(sys.error_status.as_ref());
                }
                if o.session_id.is_none() {
                    o.session_id = sys.session_id;
                }
            }
            Event::RateLimit { rate_limit_info } => {
                if let Some(info) = rate_limit_info {
                    o.rate_limit_status = info.status;
                    o.rate_limit_resets_at = info.resets_at;
                }
            }
            Event::Other => {}
        }
    }
}

#[cfg(test)]
mod tests;
