//! The agent a worker runs: claude, codex, gemini, opencode, cursor, amp, or any `command`.
//! For each: the command line (how the prompt gets in, tool use auto-approved the way its
//! docs say), the parser of its output, and its failures in prdloop's classes. The loop only
//! sees an [`AgentOptions`]; nothing outside this module asks which agent it is.

use std::fmt;
use std::str::FromStr;

use super::classify::{AgentFailure, Kind, classify};
use super::claude::{ClaudeOptions, Outcome, OutputFormat, shell_quote};
use super::verdict::Exit;

mod home;
pub use home::HomeLayout;

/// The agents prdloop knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Agent {
    #[default]
    Claude,
    Codex,
    Gemini,
    Opencode,
    Cursor,
    Amp,
    Command,
}

impl Agent {
    pub const ALL: [Agent; 7] = [
        Agent::Claude,
        Agent::Codex,
        Agent::Gemini,
        Agent::Opencode,
        Agent::Cursor,
        Agent::Amp,
        Agent::Command,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Opencode => "opencode",
            Agent::Cursor => "cursor",
            Agent::Amp => "amp",
            Agent::Command => "command",
        }
    }

    /// The agent's usual binary on PATH (`command` has none: `--agent-bin` is required).
    pub fn default_bin(self) -> Option<&'static str> {
        match self {
            Agent::Claude => Some("claude"),
            Agent::Codex => Some("codex"),
            Agent::Gemini => Some("gemini"),
            Agent::Opencode => Some("opencode"),
            Agent::Cursor => Some("agent"),
            Agent::Amp => Some("amp"),
            Agent::Command => None,
        }
    }

    /// How to get this agent logged in, for the advice after an authentication failure.
    pub fn login_advice(self) -> &'static str {
        match self {
            Agent::Claude => "log in (`claude /login`) or set a valid ANTHROPIC_API_KEY",
            Agent::Codex => "log in (`codex login`) or set a valid OPENAI_API_KEY",
            Agent::Gemini => {
                "log in (run `gemini` once and choose a login) or set a valid GEMINI_API_KEY"
            }
            Agent::Opencode => "log in (`opencode auth login`) or set the provider's API key",
            Agent::Cursor => "log in (`agent login`) or set a valid CURSOR_API_KEY",
            Agent::Amp => "log in (`amp login`) or set a valid AMP_API_KEY",
            Agent::Command => "fix the credentials your --agent-bin program uses",
        }
    }

    /// Whether the agent reports what a run cost (opencode: only for a model with a price
    /// in its config).
    pub fn reports_cost(self) -> bool {
        self == Agent::Claude
    }

    /// Whether the agent reports token counts.
    pub fn reports_tokens(self) -> bool {
        matches!(
            self,
            Agent::Claude | Agent::Codex | Agent::Gemini | Agent::Opencode
        )
    }

    /// Whether the agent runs its commands in a sandbox of its own by default (codex's
    /// `workspace-write`), which cannot start inside prdloop's: with `--sandbox auto` prdloop
    /// leaves its workers to that sandbox.
    pub fn sandboxes_itself(self) -> bool {
        self == Agent::Codex
    }

    /// The folders this agent keeps its own state in (login, sessions, settings, logs) for a
    /// user whose home is `home`, where the environment (`var`) moves them: what a sandboxed
    /// worker of an agent without a private home ([`Agent::home_layout`]) must be able to
    /// write.
    pub fn state_dirs(
        self,
        var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
        home: &std::path::Path,
    ) -> Vec<std::path::PathBuf> {
        use std::path::PathBuf;
        let dir = |k: &str, default: PathBuf| {
            var(k)
                .filter(|v| !v.is_empty())
                .map_or(default, PathBuf::from)
        };
        let config = || dir("XDG_CONFIG_HOME", home.join(".config"));
        let data = || dir("XDG_DATA_HOME", home.join(".local/share"));
        match self {
            Agent::Claude => vec![dir("CLAUDE_CONFIG_DIR", home.join(".claude"))],
            Agent::Codex => vec![dir("CODEX_HOME", home.join(".codex"))],
            Agent::Gemini => vec![dir("GEMINI_CLI_HOME", home.to_path_buf()).join(".gemini")],
            Agent::Opencode => vec![config().join("opencode"), data().join("opencode")],
            Agent::Cursor => vec![home.join(".cursor")],
            Agent::Amp => vec![config().join("amp"), data().join("amp")],
            Agent::Command => Vec::new(),
        }
    }

    /// The hosts this agent's API and login live on (HTTPS): what its sandboxed workers may
    /// reach under `--network agent`, with the host of [`Agent::base_url_var`] when set.
    pub fn api_hosts(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => &["api.anthropic.com", "console.anthropic.com", "claude.ai"],
            Agent::Codex => &["api.openai.com", "auth.openai.com", "chatgpt.com"],
            Agent::Gemini => &[
                "generativelanguage.googleapis.com",
                "cloudcode-pa.googleapis.com",
                "oauth2.googleapis.com",
            ],
            Agent::Opencode => &[
                "opencode.ai",
                "api.anthropic.com",
                "api.openai.com",
                "generativelanguage.googleapis.com",
            ],
            Agent::Cursor => &["api2.cursor.sh", "api.cursor.com"],
            Agent::Amp => &["ampcode.com"],
            Agent::Command => &[],
        }
    }

    /// The variable that points this agent at another API server (a proxy, a local model).
    pub fn base_url_var(self) -> Option<&'static str> {
        match self {
            Agent::Claude => Some("ANTHROPIC_BASE_URL"),
            Agent::Codex => Some("OPENAI_BASE_URL"),
            Agent::Gemini => Some("GOOGLE_GEMINI_BASE_URL"),
            _ => None,
        }
    }

    /// The variables of [`crate::worker::secrets::SECRET_ENV`] this agent's own login may
    /// need (gemini on Vertex AI: its service account's key file): its sandboxed workers keep
    /// them.
    pub fn secrets_needed(self) -> &'static [&'static str] {
        match self {
            Agent::Gemini => &["GOOGLE_APPLICATION_CREDENTIALS"],
            _ => &[],
        }
    }

    /// The environment variables that hold this agent's API key.
    pub fn key_vars(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
            Agent::Codex => &["OPENAI_API_KEY", "CODEX_API_KEY"],
            Agent::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
            Agent::Opencode => &[],
            Agent::Cursor => &["CURSOR_API_KEY"],
            Agent::Amp => &["AMP_API_KEY"],
            Agent::Command => &[],
        }
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Agent {
    type Err = String;
    fn from_str(s: &str) -> Result<Agent, String> {
        let s = s.trim().to_ascii_lowercase();
        let s = if s == "cursor-agent" { "cursor" } else { &s };
        Agent::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Agent::ALL.iter().map(|a| a.name()).collect();
                format!("`{s}` is not an agent; one of {}", names.join(", "))
            })
    }
}

/// What a worker process is given: its program, arguments and stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: String,
    pub args: Vec<String>,
    /// The prompt, or empty (closed at once) when the prompt is an argument.
    pub stdin: Vec<u8>,
}

/// The worker command's settings, for whichever agent.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub agent: Agent,
    /// The program (`--agent-bin`, else for claude `--claude-bin`, else the usual binary).
    pub bin: String,
    /// `--model`, passed as the agent's model flag.
    pub model: Option<String>,
    /// `--agent-arg`s, after prdloop's own arguments (for claude: in `claude.extra_args`).
    pub extra_args: Vec<String>,
    /// claude's own settings; used only when the agent is claude.
    pub claude: ClaudeOptions,
    /// prdloop's kernel sandbox confines this agent's workers: an agent that sandboxes its
    /// own commands ([`Agent::sandboxes_itself`]) is told not to, as its sandbox cannot start
    /// inside prdloop's.
    pub in_prdloop_sandbox: bool,
}

/// Where the prompt goes in a displayed command line.
const PROMPT: &str = "<prompt>";

impl AgentOptions {
    /// claude as before this module existed: its options as they are.
    pub fn claude(claude: ClaudeOptions) -> AgentOptions {
        AgentOptions {
            agent: Agent::Claude,
            bin: claude.bin.clone(),
            model: claude.model.clone(),
            extra_args: Vec::new(),
            claude,
            in_prdloop_sandbox: false,
        }
    }

    /// Whether the prompt goes on stdin (else it is an argument and stdin is empty).
    pub fn prompt_on_stdin(&self) -> bool {
        // codex reads it with `-`; claude and `command` read stdin. gemini, opencode, cursor
        // and amp take it as an argument (gemini and opencode would join a piped stdin to it).
        matches!(self.agent, Agent::Claude | Agent::Codex | Agent::Command)
    }

    /// The arguments, with `prompt` in its place when it is an argument.
    fn args_with(&self, prompt: &str) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let model = |flag: &str| {
            self.model
                .iter()
                .flat_map(|m| [flag.to_string(), m.clone()])
                .collect::<Vec<_>>()
        };
        let extra = self.extra_args.iter().cloned();
        match self.agent {
            Agent::Claude => self.claude.args(),
            Agent::Codex => {
                // workspace-write: edits in the workdir, no network; `-` reads stdin. Inside
                // prdloop's sandbox codex's own (bubblewrap: it writes /proc/PID/uid_map and
                // /tmp) cannot start, and prdloop's confines its writes instead.
                let mode = if self.in_prdloop_sandbox {
                    "danger-full-access"
                } else {
                    "workspace-write"
                };
                let mut v = s(&["exec", "--json", "--skip-git-repo-check", "-s", mode]);
                v.extend(model("-m"));
                v.extend(extra);
                v.push("-".into());
                v
            }
            Agent::Gemini => {
                // yolo approves tool calls; `--skip-trust` keeps a fresh worktree from
                // silently dropping to `default` and exiting 55.
                let mut v = s(&[
                    "-o",
                    "stream-json",
                    "--approval-mode",
                    "yolo",
                    "--skip-trust",
                ]);
                v.extend(model("-m"));
                v.extend(extra);
                v.extend(["-p".to_string(), prompt.to_string()]);
                v
            }
            Agent::Opencode => {
                let mut v = s(&["run", "--format", "json", "--auto"]);
                v.extend(model("-m"));
                v.extend(extra);
                v.extend(["--".to_string(), prompt.to_string()]);
                v
            }
            Agent::Cursor => {
                let mut v = s(&["-p", "--output-format", "stream-json", "--force", "--trust"]);
                v.extend(model("--model"));
                v.extend(extra);
                v.push(prompt.to_string());
                v
            }
            Agent::Amp => {
                let mut v = vec!["-x".to_string(), prompt.to_string()];
                v.extend(s(&["--stream-json", "--dangerously-allow-all"]));
                // amp has no model flag: its agent mode (`low` … `ultra`) picks the model.
                v.extend(model("--mode"));
                v.extend(extra);
                v
            }
            Agent::Command => extra.collect(),
        }
    }

    /// The worker's program, arguments and stdin for this prompt.
    pub fn command(&self, prompt: &str) -> Invocation {
        let on_stdin = self.prompt_on_stdin();
        Invocation {
            program: self.bin.clone(),
            args: self.args_with(if on_stdin { "" } else { prompt }),
            stdin: if on_stdin {
                prompt.as_bytes().to_vec()
            } else {
                Vec::new()
            },
        }
    }

    /// The arguments as `plan` shows them (`<prompt>` where the prompt goes).
    pub fn display_args(&self) -> Vec<String> {
        self.args_with(PROMPT)
    }

    /// The full command line, shell-quoted, for display; `<prompt>` marks an argument prompt.
    pub fn display(&self) -> String {
        if self.agent == Agent::Claude {
            return self.claude.display();
        }
        std::iter::once(self.bin.clone())
            .chain(self.display_args())
            .map(|a| if a == PROMPT { a } else { shell_quote(&a) })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// How the agent prints its output.
    pub fn format(&self) -> OutputFormat {
        match self.agent {
            Agent::Claude => self.claude.output_format(),
            Agent::Codex => OutputFormat::CodexJson,
            Agent::Gemini => OutputFormat::GeminiStreamJson,
            Agent::Opencode => OutputFormat::OpencodeJson,
            // Both print claude-compatible stream-json.
            Agent::Cursor => OutputFormat::CursorStreamJson,
            Agent::Amp => OutputFormat::AmpStreamJson,
            Agent::Command => OutputFormat::ResultLines,
        }
    }
}

impl OutputFormat {
    /// The agent that prints this format (claude's own formats, and the plain text of a
    /// Verify command, count as claude's: the shared rules).
    pub fn agent(self) -> Agent {
        match self {
            OutputFormat::StreamJson | OutputFormat::Json | OutputFormat::Text => Agent::Claude,
            OutputFormat::CodexJson => Agent::Codex,
            OutputFormat::GeminiStreamJson => Agent::Gemini,
            OutputFormat::OpencodeJson => Agent::Opencode,
            OutputFormat::ResultLines => Agent::Command,
            OutputFormat::AmpStreamJson => Agent::Amp,
            OutputFormat::CursorStreamJson => Agent::Cursor,
        }
    }
}

use super::classify::contains_any as has;

fn first_line(s: &str) -> String {
    crate::text::first_line(s).to_string()
}

/// Classifies a finished worker of `agent`: the agent's own failure texts and exit codes
/// first, then the shared rules of [`classify`] (claude's texts, HTTP statuses, crashes).
/// `None`: the agent worked and its verdict stands.
pub fn classify_for(
    agent: Agent,
    exit: &Exit,
    o: &Outcome,
    stderr_tail: &str,
    now: i64,
) -> Option<AgentFailure> {
    if agent == Agent::Claude
        || matches!(
            exit,
            Exit::Cancelled | Exit::TimedOut { .. } | Exit::Stuck(_)
        )
    {
        return classify(exit, o, stderr_tail, now);
    }
    let code = match exit {
        Exit::Code { code } => Some(*code),
        _ => None,
    };
    let errored = o.is_error || code != Some(0);
    if !errored {
        return None;
    }
    let said_text = o.errors.join("\n");
    let all = format!("{said_text}\n{stderr_tail}");
    let said = {
        let s = first_line(&said_text);
        if s.is_empty() {
            // The stderr line that names the error, else its last line.
            stderr_tail
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("Error:") || l.contains("rror"))
                .map(String::from)
                .unwrap_or_else(|| {
                    stderr_tail
                        .lines()
                        .rev()
                        .map(str::trim)
                        .find(|l| !l.is_empty())
                        .unwrap_or("")
                        .to_string()
                })
        } else {
            s
        }
    };
    let fail = |kind: Kind, resets_at: Option<i64>| {
        Some(AgentFailure {
            kind,
            text: said.clone(),
            resets_at,
        })
    };
    // What each agent says (see tests/fixtures/<agent>/README.md).
    let auth = match agent {
        Agent::Codex => has(
            &all,
            &["401 unauthorized", "invalid_api_key", "incorrect api key"],
        ),
        // 401 → exit 145 (status mod 256), 403 → 147; 41 is gemini's own auth exit code.
        Agent::Gemini => {
            matches!(code, Some(41 | 145 | 147))
                || has(
                    &all,
                    &["api_key_invalid", "unauthenticated", "api key not valid"],
                )
        }
        Agent::Amp => has(&all, &["invalid or missing api key", "amp login"]),
        Agent::Cursor => has(
            &all,
            &["authentication required", "agent login", "not logged in"],
        ),
        _ => false,
    };
    if auth {
        return fail(Kind::Auth, None);
    }
    // OpenAI's `insufficient_quota`: no credits left; waiting does not help.
    if has(&all, &["insufficient_quota"]) {
        return fail(Kind::Billing, None);
    }
    if has(
        &all,
        &[
            "hit your usage limit",
            "exhausted your daily quota",
            "usage_limit_reached",
        ],
    ) {
        return fail(Kind::UsageLimit, retry_time(&all, now));
    }
    let rate = match agent {
        Agent::Codex => has(&all, &["429 too many requests", "rate_limit_exceeded"]),
        Agent::Gemini => code == Some(173) || has(&all, &["resource_exhausted", "status: 429"]),
        _ => false,
    };
    if rate {
        return fail(Kind::RateLimit, retry_time(&all, now));
    }
    let overloaded = match agent {
        // codex's text for a 5xx after its retries.
        Agent::Codex => has(
            &all,
            &["experiencing high demand", "500 internal server error"],
        ),
        Agent::Gemini => matches!(code, Some(244..=248)) || has(&all, &["status: 500"]),
        Agent::Amp => has(&all, &["couldn't connect to the amp server"]),
        _ => false,
    };
    if overloaded {
        return fail(Kind::Overloaded, None);
    }
    if agent == Agent::Gemini && (code == Some(55) || has(&all, &["not running in a trusted"])) {
        return Some(AgentFailure {
            kind: Kind::Crash,
            text: "gemini refused an untrusted folder (exit 55); pass --skip-trust or set \
                   GEMINI_CLI_TRUST_WORKSPACE=true"
                .into(),
            resets_at: None,
        });
    }
    // The shared rules: HTTP statuses (opencode's `statusCode`), claude-like texts, crashes.
    let mut f = classify(exit, o, stderr_tail, now)?;
    if f.kind == Kind::RateLimit && f.resets_at.is_none() {
        f.resets_at = retry_time(&all, now);
    }
    Some(f)
}

/// When a limit lifts, from the agent's words: `try again at 2:25 PM` (codex; the local time
/// zone), `try again in 20s` / `Please try again in 1m30s` (OpenAI), `retry after 1s`
/// (gemini). Epoch seconds.
pub fn retry_time(s: &str, now: i64) -> Option<i64> {
    let lower = s.to_lowercase();
    if let Some(i) = lower.find("try again at ") {
        let rest = &lower[i + "try again at ".len()..];
        if let Some(t) = clock_time(rest, now) {
            return Some(t);
        }
    }
    for key in ["try again in ", "retry after "] {
        if let Some(i) = lower.find(key) {
            let rest = &lower[i + key.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .unwrap_or(rest.len());
            let word = rest[..end].trim_end_matches('.');
            if let Ok(d) = humantime::parse_duration(word) {
                return Some(now + d.as_secs().max(1) as i64);
            }
        }
    }
    None
}

/// `2:25 pm`, `14:25`, `9am`: the next such wall-clock time in the system's time zone.
fn clock_time(rest: &str, now: i64) -> Option<i64> {
    let end = rest
        .find(|c: char| {
            !(c.is_ascii_digit() || c == ':' || c == ' ' || c == 'a' || c == 'p' || c == 'm')
        })
        .unwrap_or(rest.len());
    let (h, m) = super::classify::parse_clock(&rest[..end])?;
    super::classify::next_clock(h, m, &jiff::tz::TimeZone::system(), now)
}

#[cfg(test)]
mod tests;
