//! Claude Code's command line in print mode: the output format, the options prdloop passes,
//! and quoting for the command line shown to people.

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
    /// `codex exec --json` (see `backend::codex`).
    CodexJson,
    /// `gemini -o stream-json`.
    GeminiStreamJson,
    /// `opencode run --format json`.
    OpencodeJson,
    /// A `command` agent's plain stdout: its `RESULT:` line is its result.
    ResultLines,
    /// amp's and cursor's claude-compatible stream-json (read by claude's parser; the
    /// variant tells whose failures they are).
    AmpStreamJson,
    CursorStreamJson,
}

impl OutputFormat {
    /// Whether the output streams the agent's tool calls as it makes them (what the stuck
    /// watch reads): not plain text, nor claude's one `json` object at the end.
    pub fn streams_tool_calls(self) -> bool {
        !matches!(
            self,
            OutputFormat::Text | OutputFormat::ResultLines | OutputFormat::Json
        )
    }
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
