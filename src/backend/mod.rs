//! Agent backends: the worker command line and the parser of the agent's output.
//! claude (Claude Code in print mode) is the one backend so far; any program that reads the
//! prompt on stdin and prints a `RESULT:` line works through it with a non-JSON output format.

pub mod classify;
pub mod claude;
pub mod verdict;

pub use classify::{AgentFailure, Kind, classify};
pub use claude::{ClaudeOptions, Outcome, OutputFormat, StreamParser, Usage};
pub use verdict::{Verdict, verdict};
