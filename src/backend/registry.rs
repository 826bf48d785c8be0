//! Which backend answers for an agent, and what the loop asks of an [`AgentOptions`] through
//! it: the command line, the output format, the classification of a failure. Nothing outside
//! `backend` asks which agent it is.

use super::agents::{Agent, AgentOptions, Invocation};
use super::classify::AgentFailure;
use super::claude::{Amp, Claude, Cursor, OutputFormat, shell_quote};
use super::codex::Codex;
use super::command::Command;
use super::contract::Backend;
use super::gemini::Gemini;
use super::opencode::Opencode;
use super::outcome::Outcome;
use super::verdict::Exit;

impl Agent {
    /// The backend that answers for this agent.
    pub fn backend(self) -> &'static dyn Backend {
        match self {
            Agent::Claude => &Claude,
            Agent::Codex => &Codex,
            Agent::Gemini => &Gemini,
            Agent::Opencode => &Opencode,
            Agent::Cursor => &Cursor,
            Agent::Amp => &Amp,
            Agent::Command => &Command,
        }
    }
}

/// Where the prompt goes in a displayed command line.
const PROMPT: &str = "<prompt>";

impl AgentOptions {
    /// Whether the prompt goes on stdin (else it is an argument and stdin is empty).
    pub fn prompt_on_stdin(&self) -> bool {
        self.agent.backend().prompt_on_stdin()
    }

    /// The worker's program, arguments and stdin for this prompt.
    pub fn command(&self, prompt: &str) -> Invocation {
        let on_stdin = self.prompt_on_stdin();
        let backend = self.agent.backend();
        Invocation {
            program: self.bin.clone(),
            args: backend.args(self, if on_stdin { "" } else { prompt }),
            stdin: if on_stdin {
                prompt.as_bytes().to_vec()
            } else {
                Vec::new()
            },
        }
    }

    /// The arguments as `plan` shows them (`<prompt>` where the prompt goes).
    pub fn display_args(&self) -> Vec<String> {
        self.agent.backend().args(self, PROMPT)
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
        self.agent.backend().format(self)
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

/// Classifies a finished worker of `agent` (see [`Backend::classify`]). `None`: the agent
/// worked and its verdict stands.
pub fn classify_for(
    agent: Agent,
    exit: &Exit,
    o: &Outcome,
    stderr_tail: &str,
    now: i64,
) -> Option<AgentFailure> {
    agent.backend().classify(exit, o, stderr_tail, now)
}
