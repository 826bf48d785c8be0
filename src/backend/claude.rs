//! Claude Code in print mode: its command line and its stream-json output.

use serde_json::Value as Json;

/// PAI's worker tool list.
pub const DEFAULT_ALLOWED_TOOLS: &str =
    "Edit,Write,Bash,Read,Glob,Grep,WebFetch,WebSearch,NotebookEdit";

/// How claude prints its output; chosen by `--output-format` among the pass-through args.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputFormat {
    StreamJson,
    Json,
    Text,
}

/// The worker command's settings.
#[derive(Debug, Clone)]
pub struct ClaudeOptions {
    pub bin: String,
    pub model: Option<String>,
    pub permission_mode: Option<String>,
    pub max_turns: Option<u32>,
    pub allowed_tools: String,
    /// Passed through verbatim, after ours.
    pub extra_args: Vec<String>,
}

impl ClaudeOptions {
    /// The output format in effect: ours (`stream-json`) unless the pass-through args set one.
    pub fn output_format(&self) -> OutputFormat {
        let mut it = self.extra_args.iter();
        let mut found = None;
        while let Some(a) = it.next() {
            let v = if a == "--output-format" {
                it.next().map(String::as_str)
            } else {
                a.strip_prefix("--output-format=")
            };
            if let Some(v) = v {
                found = Some(match v {
                    "json" => OutputFormat::Json,
                    "stream-json" => OutputFormat::StreamJson,
                    _ => OutputFormat::Text,
                });
            }
        }
        found.unwrap_or(OutputFormat::StreamJson)
    }

    /// The arguments after the program name. The prompt goes on stdin.
    pub fn args(&self) -> Vec<String> {
        let mut v = vec!["-p".to_string()];
        let user_format = self
            .extra_args
            .iter()
            .any(|a| a == "--output-format" || a.starts_with("--output-format="));
        if !user_format {
            v.extend(["--output-format", "stream-json", "--verbose"].map(String::from));
        }
        if !self.allowed_tools.is_empty() {
            v.push("--allowedTools".into());
            v.push(self.allowed_tools.clone());
        }
        if let Some(m) = &self.model {
            v.push("--model".into());
            v.push(m.clone());
        }
        if let Some(p) = &self.permission_mode {
            v.push("--permission-mode".into());
            v.push(p.clone());
        }
        if let Some(n) = self.max_turns {
            v.push("--max-turns".into());
            v.push(n.to_string());
        }
        v.extend(self.extra_args.iter().cloned());
        v
    }

    /// The full command line, shell-quoted, for display.
    pub fn display(&self) -> String {
        std::iter::once(self.bin.clone())
            .chain(self.args())
            .map(|a| shell_quote(&a))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

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
}

/// Most bytes of text kept for the text output format.
const TEXT_TAIL: usize = 64 * 1024;

/// Parses a worker's stdout line by line. Tolerates unknown events, non-JSON lines and
/// invalid UTF-8.
#[derive(Debug)]
pub struct StreamParser {
    format: OutputFormat,
    outcome: Outcome,
    last_assistant_text: Option<String>,
    text: Vec<u8>,
}

impl StreamParser {
    pub fn new(format: OutputFormat) -> Self {
        StreamParser {
            format,
            outcome: Outcome::default(),
            last_assistant_text: None,
            text: Vec::new(),
        }
    }

    /// Feeds one line of stdout (without its `\n`).
    pub fn feed_line(&mut self, line: &[u8]) {
        if self.format == OutputFormat::Text {
            self.text.extend_from_slice(line);
            self.text.push(b'\n');
            if self.text.len() > 2 * TEXT_TAIL {
                let cut = self.text.len() - TEXT_TAIL;
                self.text.drain(..cut);
            }
            return;
        }
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            return;
        }
        match serde_json::from_slice::<Json>(trimmed) {
            Ok(v) => self.event(&v),
            Err(_) => self.outcome.unparsed_lines += 1,
        }
    }

    fn event(&mut self, v: &Json) {
        let o = &mut self.outcome;
        match v.get("type").and_then(Json::as_str) {
            Some("result") => {
                o.has_result = true;
                o.is_error = v.get("is_error").and_then(Json::as_bool).unwrap_or(false);
                o.subtype = v.get("subtype").and_then(Json::as_str).map(String::from);
                o.api_error_status = v
                    .get("api_error_status")
                    .and_then(Json::as_u64)
                    .and_then(|n| u16::try_from(n).ok());
                if let Some(t) = v.get("result").and_then(Json::as_str) {
                    o.final_text = Some(t.to_string());
                }
                if let Some(errs) = v.get("errors").and_then(Json::as_array) {
                    o.errors = errs
                        .iter()
                        .map(|e| e.as_str().map_or_else(|| e.to_string(), String::from))
                        .collect();
                }
                o.cost_usd = v.get("total_cost_usd").and_then(Json::as_f64);
                if let Some(u) = v.get("usage") {
                    let n = |k: &str| u.get(k).and_then(Json::as_u64).unwrap_or(0);
                    o.usage = Usage {
                        input_tokens: n("input_tokens"),
                        output_tokens: n("output_tokens"),
                        cache_creation_input_tokens: n("cache_creation_input_tokens"),
                        cache_read_input_tokens: n("cache_read_input_tokens"),
                    };
                }
                o.num_turns = v.get("num_turns").and_then(Json::as_u64);
                o.session_id = v.get("session_id").and_then(Json::as_str).map(String::from);
                if let Some(d) = v.get("permission_denials").and_then(Json::as_array) {
                    o.permission_denials = d
                        .iter()
                        .map(|x| {
                            x.get("tool_name")
                                .and_then(Json::as_str)
                                .unwrap_or("?")
                                .to_string()
                        })
                        .collect();
                }
            }
            Some("assistant") => {
                let blocks = v
                    .pointer("/message/content")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten();
                for b in blocks {
                    if b.get("type").and_then(Json::as_str) == Some("text")
                        && let Some(t) = b.get("text").and_then(Json::as_str)
                    {
                        self.last_assistant_text = Some(t.to_string());
                    }
                }
            }
            Some("system") => {
                if v.get("subtype").and_then(Json::as_str) == Some("api_retry") {
                    o.api_retries += 1;
                    o.retry_status = v
                        .get("error_status")
                        .and_then(Json::as_u64)
                        .and_then(|n| u16::try_from(n).ok());
                }
                if o.session_id.is_none() {
                    o.session_id = v.get("session_id").and_then(Json::as_str).map(String::from);
                }
            }
            Some("rate_limit_event") => {
                if let Some(info) = v.get("rate_limit_info") {
                    o.rate_limit_status =
                        info.get("status").and_then(Json::as_str).map(String::from);
                    o.rate_limit_resets_at = info.get("resetsAt").and_then(Json::as_i64);
                }
            }
            _ => {}
        }
    }

    pub fn finish(mut self) -> Outcome {
        if self.format == OutputFormat::Text {
            let text = String::from_utf8_lossy(&self.text).into_owned();
            self.outcome.final_text = (!text.trim().is_empty()).then_some(text);
        } else if self.outcome.final_text.is_none() {
            self.outcome.final_text = self.last_assistant_text.take();
        }
        self.outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ClaudeOptions {
        ClaudeOptions {
            bin: "claude".into(),
            model: Some("sonnet".into()),
            permission_mode: None,
            max_turns: Some(30),
            allowed_tools: DEFAULT_ALLOWED_TOOLS.into(),
            extra_args: vec!["--append-system-prompt".into(), "be brief".into()],
        }
    }

    #[test]
    fn default_argv() {
        assert_eq!(
            opts().display(),
            "claude -p --output-format stream-json --verbose --allowedTools \
             Edit,Write,Bash,Read,Glob,Grep,WebFetch,WebSearch,NotebookEdit --model sonnet \
             --max-turns 30 --append-system-prompt 'be brief'"
        );
        assert_eq!(opts().output_format(), OutputFormat::StreamJson);
    }

    #[test]
    fn user_output_format_wins() {
        let mut o = opts();
        o.extra_args = vec!["--output-format=text".into()];
        assert_eq!(o.output_format(), OutputFormat::Text);
        assert!(!o.args().contains(&"stream-json".to_string()));
    }

    #[test]
    fn text_format_keeps_a_bounded_tail() {
        let mut p = StreamParser::new(OutputFormat::Text);
        for _ in 0..10_000 {
            p.feed_line(&[b'a'; 100]);
        }
        p.feed_line(b"RESULT: ISC-1 PASS");
        let o = p.finish();
        let t = o.final_text.unwrap();
        assert!(t.len() <= 2 * TEXT_TAIL + 200);
        assert!(t.ends_with("RESULT: ISC-1 PASS\n"));
    }

    #[test]
    fn tolerates_garbage() {
        let mut p = StreamParser::new(OutputFormat::StreamJson);
        p.feed_line(b"not json");
        p.feed_line(&[0xff, 0xfe, b'{']);
        p.feed_line(br#"{"type":"brand_new_event","x":1}"#);
        p.feed_line(br#"{"type":"assistant","message":{"content":[{"type":"text","text":"RESULT: ISC-1 PASS"}]}}"#);
        let o = p.finish();
        assert_eq!(o.unparsed_lines, 2);
        assert!(!o.has_result);
        assert_eq!(o.final_text.as_deref(), Some("RESULT: ISC-1 PASS"));
    }
}
