//! What `verify` and `merge` warn of, typed: each is said on stderr when it happens (its words
//! are its `Display`) and kept for the command's report, so `--json` lists it as `warnings`
//! (`{"kind": …, …}`, as every `why`).

use std::path::PathBuf;

use serde::Serialize;

use super::plan::Why;

/// `--json` gives its fields, `kind` and its words as `message` (as every warning object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    remote = "Self",
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Warning {
    /// A criterion's command cannot run here: the gate is not green without it.
    CannotRunHere { id: String, why: Why },
    /// Its Verify command could not be started.
    NotRun { id: String, error: String },
    /// A `severity: critical` Test Strategy probe fails.
    CriticalProbeFails { id: String },
    /// `verification_summary` is the author's prose, not a count: kept.
    SummaryKept { prd: PathBuf },
    /// `merge`: no bundle of these shards (`1/3, 3/3`): their criteria stay as they are.
    MissingShards { shards: String },
    /// `merge`: a shard's changes were not applied (`text`: why, in words).
    NotApplied { shard: String, text: String },
    /// `merge`: criteria ticked on their shard's check, whose commands cannot run here
    /// (`criteria`: each id with why).
    NotRechecked { criteria: Vec<String> },
    /// `merge`: the logs of a bundle could not be kept with the merged session.
    LogsNotKept { bundle: PathBuf, error: String },
    /// `merge`: the state file could not be written.
    StateNotWritten { error: String },
}

impl Serialize for Warning {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::report::json::warning(
            Warning::serialize(self, serde_json::value::Serializer),
            self.to_string(),
            s,
        )
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::CannotRunHere { id, why } => write!(f, "{id} cannot be verified here: {why}"),
            Warning::NotRun { id, error } => {
                write!(f, "could not run the Verify command of {id}: {error}")
            }
            Warning::CriticalProbeFails { id } => write!(
                f,
                "{id}: a `severity: critical` probe fails: the product is down by its own Test Strategy"
            ),
            Warning::SummaryKept { prd } => write!(
                f,
                "{}: `verification_summary` is the author's prose, not a count: kept as it is",
                prd.display()
            ),
            Warning::MissingShards { shards } => write!(
                f,
                "no bundle of shard(s) {shards}: their criteria stay as they are"
            ),
            Warning::NotApplied { text, .. } => f.write_str(text),
            Warning::NotRechecked { criteria } => write!(
                f,
                "not re-checked on the merged tree (their Verify commands cannot run here; install what they need in the merge job): {}",
                criteria.join(", ")
            ),
            Warning::LogsNotKept { bundle, error } => write!(
                f,
                "could not keep the logs of {}: {error}",
                bundle.display()
            ),
            Warning::StateNotWritten { error } => {
                write!(f, "could not write the state file: {error}")
            }
        }
    }
}

/// The warnings of one command: each said on stderr when it happens, and kept for its report.
#[derive(Debug, Default)]
pub struct Warnings(Vec<Warning>);

impl Warnings {
    pub fn say(&mut self, w: Warning) {
        crate::report::warn(&w);
        self.0.push(w);
    }

    pub fn into_vec(self) -> Vec<Warning> {
        self.0
    }
}
