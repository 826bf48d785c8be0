//! prdloop's integration tests: one binary (as just and cargo-nextest do), so the shared
//! helpers in `common` compile and link once. Each module is one area of the product; they run
//! the real `prdloop` binary and the scriptable fake agent (`tests/support/fake_agent.rs`).

mod common;

mod agent_failures;
mod agents;
mod backends;
mod best_of;
mod checks;
mod ci_report;
mod classify;
mod cli;
mod commands;
mod deputy;
mod docs;
mod e2e_claude;
mod e2e_codex;
mod e2e_command;
mod e2e_gemini;
mod fanout;
mod faults;
mod formats;
mod hostile;
mod isolation;
mod limits;
mod mcp;
mod prd_model;
mod prd_race;
mod progress;
mod questions;
mod real_prds;
mod recovery;
mod run_loop;
mod scheduler;
mod subloops;
mod tracker;
mod trust;
mod verify;
mod whole_outputs;
