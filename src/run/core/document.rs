//! The PAI state document (`<session>.json`), built from the run state each time it is saved.
//! `Core::pai` keeps only what PAI's format itself records (its phases and history, the
//! lanes as its agents, how the run ended); what the run knows elsewhere (each criterion's
//! state, costs, usage, reviews, conflicts, spend, the sampling estimates, the pause, the
//! time waited, why the run stopped, the questions) is taken from its
//! owner here, when the document is built, and never copied into it in between.

use std::path::PathBuf;

use super::{Core, Now};
use crate::state::{self, SessionState};

impl Core {
    /// The state document as of `now`; `prd_text` is the PRD as the run last wrote or read it
    /// (its hash tells the next session whether the PRD is still as this one left it).
    pub(in crate::run) fn state_document(&self, prd_text: &str, now: Now) -> SessionState {
        let mut doc = self.pai.clone();
        let running: std::collections::HashSet<&str> = doc
            .agents
            .iter()
            .filter_map(|a| a.current_criterion.as_deref())
            .collect();
        let criteria: Vec<state::CriterionState> = self
            .doc
            .criteria
            .iter()
            .map(|c| {
                self.ledger
                    .criterion_state(c, running.contains(c.id.as_str()))
            })
            .collect();
        // What `progress()` says, without a second pass over the ledger.
        let p = criteria.iter().filter(|s| s.verified_by.is_some()).count();
        let t = criteria.len();
        let title = self.doc.id().map_or_else(|| self.title(), String::from);
        doc.task_description = format!("Loop: {title} [{p}/{t} iter {}]", doc.loop_iteration);
        doc.criteria = criteria;
        doc.paused_until = self.brakes.pause_until_ms();
        doc.waited_ms = self.brakes.waited_in_all().as_millis() as u64;
        doc.stop_reason = self.brakes.stop().map(ToString::to_string);
        // The questions, for `status` and the dashboard (the book on disk is the record).
        doc.questions = self.questions.all().to_vec();
        doc.questions_file =
            (!doc.questions.is_empty()).then(|| self.questions.path().display().to_string());
        doc.total_cost_usd = self.ledger.total_cost;
        doc.usage = self.ledger.usage;
        doc.reviews = self.ledger.reviews;
        doc.conflicts = self.counts.conflicts();
        doc.refused_connections = self.counts.refused().to_vec();
        doc.review_cost_usd = self.ledger.review_cost;
        doc.prd_text_hash = Some(state::text_hash(prd_text));
        self.spend_into(&mut doc, now);
        doc
    }

    /// Where the run's attempts are logged (one JSON line each).
    pub(in crate::run) fn attempts_log(&self) -> PathBuf {
        PathBuf::from(&self.pai.attempts_log)
    }

    /// The run failed (`why`): the state says so.
    pub(in crate::run) fn failed(&mut self, why: &anyhow::Error) {
        self.pai.active = false;
        self.pai.summary = Some(format!("failed: {why:#}"));
    }

    /// The process is about to exit (the third Ctrl-C): the state says the run is not active.
    pub(in crate::run) fn exiting(&mut self) {
        self.pai.active = false;
    }
}
