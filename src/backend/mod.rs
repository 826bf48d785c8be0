//! Agent backends: the worker command line, the parser of the agent's output, the
//! classification of its failures, the rendering of its log, its login and state folders.
//! One backend per agent behind [`contract::Backend`]: claude (which amp and cursor share),
//! codex, gemini, opencode and any `command` that prints a `RESULT:` line.

pub mod agents;
pub mod classify;
pub mod claude;
mod codex;
mod command;
pub mod contract;
mod gemini;
mod lines;
mod opencode;
pub mod outcome;
mod registry;
pub mod render;
mod stream;
pub mod stuck;
pub mod verdict;

pub use agents::{Agent, AgentOptions, Invocation};
pub use classify::{AgentFailure, Kind, classify};
pub use claude::{ClaudeOptions, OutputFormat};
pub use contract::Login;
pub use outcome::{Activity, Outcome, Usage};
pub use registry::classify_for;
pub use stream::StreamParser;
pub use verdict::{Verdict, verdict};
