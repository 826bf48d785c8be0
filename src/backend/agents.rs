//! The agent a worker runs: claude, codex, gemini, opencode, cursor, amp, or any `command`;
//! what is known of each without running it (its binary, key variables, API hosts), and the
//! worker command's settings ([`AgentOptions`]). Each agent's backend (`Agent::backend`)
//! answers for its command line, output, failures, log, login and state folders.

use std::fmt;
use std::str::FromStr;

use super::claude::command::ClaudeOptions;

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
    /// need (gemini on Vertex AI: its service account's key file; claude's long-lived login token): its sandboxed workers keep
    /// them.
    pub fn secrets_needed(self) -> &'static [&'static str] {
        match self {
            Agent::Gemini => &["GOOGLE_APPLICATION_CREDENTIALS"],
            Agent::Claude => &["CLAUDE_CODE_OAUTH_TOKEN"],
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

    /// `--model` as the agent's `flag`, or nothing.
    pub(super) fn model_args(&self, flag: &str) -> Vec<String> {
        self.model
            .iter()
            .flat_map(|m| [flag.to_string(), m.clone()])
            .collect()
    }
}

/// Arguments as owned strings.
pub(super) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|a| a.to_string()).collect()
}

#[cfg(test)]
mod tests;
