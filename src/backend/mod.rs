//! Agent backends: the worker command line, the parser of the agent's output and the
//! classification of its failures. `agents` chooses among claude (Claude Code in print mode),
//! codex, gemini, opencode, cursor, amp and any `command` that prints a `RESULT:` line.

pub mod agents;
pub mod classify;
pub mod claude;
pub mod render;
mod streams;
pub mod stuck;
pub mod verdict;

pub use agents::{Agent, AgentOptions, Invocation, classify_for};
pub use classify::{AgentFailure, Kind, classify};
pub use claude::{ClaudeOptions, Outcome, OutputFormat, StreamParser, Usage};
pub use verdict::{Verdict, verdict};
