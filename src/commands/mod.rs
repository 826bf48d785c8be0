//! One file per subcommand.

pub mod answer;
pub mod audit;
pub mod clean;
pub mod config;
pub mod control;
pub mod doctor;
pub mod import;
pub mod interactive;
pub mod logs;
pub mod merge;
pub mod multi;
pub mod new;
pub mod plan;
pub mod pull_request;
pub mod reference;
pub mod run;
pub mod status;
pub mod trust;
pub mod undo;
pub mod verify;
pub mod warning;

use std::path::Path;

/// Loads a PRD for a command and prints its warnings (`path:line: warning`).
pub fn load_prd(path: &Path) -> anyhow::Result<crate::prd::Prd> {
    let doc = read_prd(path)?;
    for w in &doc.warnings {
        crate::report::warn(warning::Warning::InPrd {
            prd: path.to_path_buf(),
            line: w.line,
            text: w.message.clone(),
        });
    }
    Ok(doc)
}

/// Reads and parses a PRD for a command: the one read of a run's PRD before its loop (a
/// debug line says each, so that a test can count them).
pub fn read_prd(path: &Path) -> anyhow::Result<crate::prd::Prd> {
    tracing::debug!(target: "prdloop::prd_read", prd = %path.display(), "PRD read and parsed");
    crate::prd::load(path)
}

/// What `run`, `plan` and `verify` say of a file without criteria.
pub fn no_criteria_message(path: &Path, doc: &crate::prd::Prd) -> String {
    if let Some(why) = doc.misplaced() {
        return format!("{} has no criteria: {why}", path.display());
    }
    if doc.list_format() != crate::prd::ListFormat::Markdown {
        return format!(
            "{} has no tasks to run: its {} task list holds none (cancelled and deferred ones are not run)",
            path.display(),
            doc.format_name()
        );
    }
    format!(
        "{} has no criteria: add items such as `- [ ] ISC-C1: <a state that can be checked> | Verify: Test: `<command>`` under a CRITERIA heading",
        path.display()
    )
}

pub use crate::platform::runtime;
