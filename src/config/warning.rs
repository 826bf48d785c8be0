//! What making a command's settings has to say about its options: a value clamped, an option
//! that does not apply. The command prints these beside its own output (stderr).

use std::fmt;

use super::MAX_AGENTS;
use crate::backend::Agent;
use crate::cli::BestOf;

/// One warning about the options given. Its text is its `Display`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warning {
    /// `-a` outside 1..=[`MAX_AGENTS`]: `used` instead.
    AgentsClamped { given: i64, used: usize },
    /// `--claude-arg` with another agent: ignored.
    ClaudeArgIgnored { agent: Agent },
    /// `--permission-mode` or `--max-turns` with another agent: ignored.
    ClaudeLimitsIgnored { agent: Agent },
    /// `-a` lanes times `--best-of` samples: more workers at once than 16.
    ManyWorkers { agents: usize, best_of: BestOf },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Warning::AgentsClamped { given, used } => {
                write!(
                    f,
                    "-a/--agents {given} is outside 1..={MAX_AGENTS}; using {used}"
                )
            }
            Warning::ClaudeArgIgnored { agent } => write!(
                f,
                "--claude-arg applies to claude only; ignored with --agent {agent} (use --agent-arg)"
            ),
            Warning::ClaudeLimitsIgnored { agent } => write!(
                f,
                "--permission-mode and --max-turns apply to claude only; ignored with --agent {agent}"
            ),
            Warning::ManyWorkers { agents, best_of } => write!(
                f,
                "-a {agents} × --best-of {best_of} = {} workers at once{}",
                agents * best_of.most() as usize,
                if matches!(best_of, BestOf::Auto { .. }) {
                    " at most"
                } else {
                    ""
                }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are the ones the commands print (stderr, after `warning:`).
    #[test]
    fn each_says_what_it_always_said() {
        let said = [
            Warning::AgentsClamped {
                given: 40,
                used: 16,
            },
            Warning::ClaudeArgIgnored {
                agent: Agent::Codex,
            },
            Warning::ClaudeLimitsIgnored {
                agent: Agent::Gemini,
            },
            Warning::ManyWorkers {
                agents: 8,
                best_of: BestOf::Fixed(3),
            },
            Warning::ManyWorkers {
                agents: 6,
                best_of: BestOf::Auto { max: 3 },
            },
        ]
        .map(|w| w.to_string());
        assert_eq!(
            said,
            [
                "-a/--agents 40 is outside 1..=16; using 16",
                "--claude-arg applies to claude only; ignored with --agent codex (use --agent-arg)",
                "--permission-mode and --max-turns apply to claude only; ignored with --agent gemini",
                "-a 8 × --best-of 3 = 24 workers at once",
                "-a 6 × --best-of auto:3 = 18 workers at once at most",
            ]
        );
    }
}
