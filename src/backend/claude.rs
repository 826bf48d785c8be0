//! Claude Code in print mode: its command line and its stream-json output.

use serde_json::Value as Json;

use super::streams::{self, StreamState};
use crate::backend::stuck::{ToolCall, command_key};
use serde::Deserialize;

mod command;

pub use command::{ClaudeOptions, DEFAULT_ALLOWED_TOOLS, OutputFormat, shell_quote};

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
    pub agent: super::Agent,
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
const DOING_MAX: usize = 160;

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

/// Most bytes of text kept for the text output format.
const TEXT_TAIL: usize = 64 * 1024;
/// Most QUESTION lines kept from text that scrolled out of the tail.
const ASKED_KEPT: usize = 16;

/// Parses a worker's stdout line by line. Tolerates unknown events, non-JSON lines and
/// invalid UTF-8.
#[derive(Debug)]
pub struct StreamParser {
    format: OutputFormat,
    outcome: Outcome,
    last_assistant_text: Option<String>,
    text: Vec<u8>,
    /// Text formats: bytes fed, and bytes cut off the front of `text`, so far.
    fed: usize,
    dropped: usize,
    /// Text formats: each QUESTION line as it came (where it began in the fed bytes, the
    /// line bounded), so that one which scrolls out of the kept tail, however long, is
    /// still asked.
    asked: Vec<(usize, String)>,
    other: StreamState,
    /// What the worker does now, and whether that changed since it was last taken.
    activity: Activity,
    activity_changed: bool,
    /// claude: the last assistant message counted into `activity.tokens`.
    last_message: Option<String>,
    /// Tool calls read since they were last taken (for the stuck watch).
    calls: Vec<ToolCall>,
}

impl StreamParser {
    pub fn new(format: OutputFormat) -> Self {
        StreamParser {
            format,
            outcome: Outcome::default(),
            last_assistant_text: None,
            text: Vec::new(),
            fed: 0,
            dropped: 0,
            asked: Vec::new(),
            other: StreamState::default(),
            activity: Activity::default(),
            activity_changed: false,
            last_message: None,
            calls: Vec::new(),
        }
    }

    /// The tool calls read since the last call, in order.
    pub fn take_calls(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.calls)
    }

    /// What the worker is doing now, when that changed since the last call (display only).
    pub fn take_activity(&mut self) -> Option<Activity> {
        std::mem::take(&mut self.activity_changed).then(|| self.activity.clone())
    }

    fn set_doing(&mut self, doing: String) {
        if self.activity.doing != doing {
            self.activity.doing = doing;
            self.activity_changed = true;
        }
    }

    fn set_tokens(&mut self, tokens: u64) {
        if self.activity.tokens != Some(tokens) {
            self.activity.tokens = Some(tokens);
            self.activity_changed = true;
        }
    }

    /// Feeds one line of stdout (without its `\n`).
    pub fn feed_line(&mut self, line: &[u8]) {
        if matches!(self.format, OutputFormat::Text | OutputFormat::ResultLines) {
            if self.asked.len() < ASKED_KEPT && line.windows(9).any(|w| w == b"QUESTION:") {
                let text = String::from_utf8_lossy(line);
                if let Some(q) = super::verdict::question_lines(&text).pop() {
                    self.asked
                        .push((self.fed, format!("QUESTION: {} {}", q.id, q.text)));
                }
            }
            self.text.extend_from_slice(line);
            self.text.push(b'\n');
            self.fed += line.len() + 1;
            if self.text.len() > 2 * TEXT_TAIL {
                let cut = self.text.len() - TEXT_TAIL;
                self.text.drain(..cut);
                self.dropped += cut;
            }
            return;
        }
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            return;
        }
        let (o, st) = (&mut self.outcome, &mut self.other);
        type Read = fn(&mut Outcome, &mut StreamState, &Json);
        type Doing = fn(&Json) -> Option<(String, Option<ToolCall>)>;
        let (other, doing): (Read, Doing) = match self.format {
            OutputFormat::CodexJson => (streams::codex, streams::codex_doing),
            OutputFormat::GeminiStreamJson => (streams::gemini, streams::gemini_doing),
            OutputFormat::OpencodeJson => (streams::opencode, streams::opencode_doing),
            _ => {
                match serde_json::from_slice::<Event>(trimmed) {
                    Ok(e) => self.event(e),
                    Err(_) => {
                        self.outcome.unparsed_lines += 1;
                        if trimmed.starts_with(b"RESULT:") {
                            self.outcome.plain_result_line = true;
                        }
                    }
                }
                return;
            }
        };
        match serde_json::from_slice::<Json>(trimmed) {
            Ok(e) if e.is_object() => {
                other(o, st, &e);
                let tokens = o.tokens_reported.then(|| o.usage.total());
                if let Some((d, call)) = doing(&e) {
                    self.calls.extend(call);
                    self.set_doing(d);
                }
                if let Some(t) = tokens {
                    self.set_tokens(t);
                }
            }
            _ => o.unparsed_lines += 1,
        }
    }

    fn event(&mut self, e: Event) {
        let o = &mut self.outcome;
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
                    let so_far = self.activity.tokens.unwrap_or(0) + u.total();
                    self.set_tokens(so_far);
                }
                for b in message.content {
                    match b {
                        Block::Text { text } => {
                            self.set_doing("writing".into());
                            self.last_assistant_text = Some(text);
                        }
                        Block::ToolUse { name, input } => {
                            let fields = ToolInput::deserialize(&input).unwrap_or_default();
                            let label = doing(&name, fields.subject());
                            self.calls.push(tool_call(&name, &input, label.clone()));
                            self.set_doing(label);
                        }
                        Block::Thinking {} => self.set_doing("thinking".into()),
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

    pub fn finish(mut self) -> Outcome {
        self.outcome.agent = self.format.agent();
        if matches!(self.format, OutputFormat::Text | OutputFormat::ResultLines) {
            // The questions whose line began in what was cut off, bounded, then the tail.
            let mut text: String = self
                .asked
                .iter()
                .filter(|(at, _)| *at < self.dropped)
                .map(|(_, q)| format!("{q}\n"))
                .collect();
            text.push_str(&String::from_utf8_lossy(&self.text));
            self.outcome.final_text = (!text.trim().is_empty()).then_some(text);
            if self.format == OutputFormat::ResultLines {
                streams::finish_result_lines(&mut self.outcome);
            }
        } else if self.format == OutputFormat::GeminiStreamJson {
            streams::finish_gemini(&mut self.outcome, &mut self.other);
        } else if self.format == OutputFormat::CodexJson {
            streams::finish_codex(&mut self.outcome, &mut self.other);
        } else if self.outcome.final_text.is_none() {
            self.outcome.final_text = self.last_assistant_text.take();
        }
        self.outcome
    }
}

#[cfg(test)]
mod tests;
