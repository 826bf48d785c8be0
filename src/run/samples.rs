//! Best-of-N: an attempt at a criterion run as several samples at once, each in its own
//! worktree from the same base. With `--select first` the first sample that passes and merges
//! wins and its siblings are ended; with `--select best` every sample finishes and the valid
//! ones are ranked. Only the winner's work is merged. One attempt is counted per group, not
//! per sample; an ended sibling is not a failure.

use std::path::PathBuf;

use super::event::{SampleTag, WorkerDone};

/// The samples of one attempt at one criterion, in one lane.
#[derive(Debug)]
pub struct SampleSet {
    pub id: String,
    /// Samples that have not come back yet.
    pub running: u32,
    pub winner: Option<SampleTag>,
    /// A merge of one of its samples is under way.
    pub landing: bool,
    /// Passing samples not merged yet: with `first`, those that passed while a merge was
    /// under way; with `best`, all of them until every sample is back.
    pub candidates: Vec<WorkerDone>,
    /// Why samples failed, for the attempt's reason (the next attempt's prompt gets them all).
    pub failures: Vec<crate::run::ledger::Failure>,
    /// Samples whose agent failed (not the criterion): a group with only those is no attempt.
    pub agent_failures: u32,
    pub last_log: Option<PathBuf>,
    /// A sample asked a person (`QUESTION:`): with no winner, the criterion parks on it.
    pub question: Option<String>,
}

impl SampleSet {
    pub fn new(id: &str, samples: u32) -> SampleSet {
        SampleSet {
            id: id.to_string(),
            running: samples,
            winner: None,
            landing: false,
            candidates: Vec::new(),
            failures: Vec::new(),
            question: None,
            agent_failures: 0,
            last_log: None,
        }
    }
}
