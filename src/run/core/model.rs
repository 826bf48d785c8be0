//! The run's model of the PRD: the boxes it should show (the ledger's verdicts, parents
//! settled by their leaves), and taking what a sync of the file found.

use std::collections::HashMap;

use super::Core;
use crate::prd::Prd;
use crate::run::event::PrdBroken;

/// What became of the PRD on disk during the run: it stopped parsing, or criteria of the run
/// vanished from it. Either keeps new workers from starting, and stops the run.
#[derive(Debug, Default)]
pub(in crate::run) struct Damage {
    /// Set while the PRD on disk does not parse (with the parse error).
    broken: Option<PrdBroken>,
    /// Criteria of the run missing from the PRD on disk (a worker or an edit removed them).
    vanished: Vec<String>,
}

impl Damage {
    pub fn broken(&self) -> Option<&PrdBroken> {
        self.broken.as_ref()
    }

    pub fn vanished(&self) -> &[String] {
        &self.vanished
    }

    /// Whether the PRD is whole: it parses and has every criterion of the run.
    pub fn none(&self) -> bool {
        self.broken.is_none() && self.vanished.is_empty()
    }

    /// What a sync found, where it found anything (`Some(None)`: the PRD parses again;
    /// `Some` of no criteria: none is missing).
    fn take(&mut self, broken: Option<Option<PrdBroken>>, vanished: Option<Vec<String>>) {
        if let Some(broken) = broken {
            self.broken = broken;
        }
        if let Some(vanished) = vanished {
            self.vanished = vanished;
        }
    }
}

impl Core {
    /// Parents of split ids whose leaves all pass now pass too (they are never worked on);
    /// a parent the run ticked opens again when a leaf regresses. (A parent its author
    /// ticked stays as it is.)
    pub(in crate::run) fn settle_parents(&mut self) {
        let (passed, reopened) = parents_to_settle(
            &self.doc,
            |id| self.ledger.passing(id),
            |id| self.ledger.get(id).is_some_and(|r| r.ticked_in_run),
        );
        for id in passed {
            self.ledger.leaves_passed(&id);
        }
        for id in reopened {
            self.ledger.leaves_failed(&id);
        }
    }

    /// Whether each criterion of `doc` (a PRD text the writer is about to write) passes, as
    /// the run will have it once it applies the write: the ledger's verdict; a criterion the
    /// run has not admitted yet (added by someone during the run) as its box says; parents
    /// settled by their leaves as [`settle_parents`](Core::settle_parents) settles them.
    pub(in crate::run) fn boxes_for(&self, doc: &Prd) -> impl Fn(&str) -> bool + use<> {
        let mut passing: HashMap<String, bool> = doc
            .criteria
            .iter()
            .map(|c| {
                let known = self.ledger.get(&c.id).map(|r| r.passing);
                (c.id.clone(), known.unwrap_or(c.checked))
            })
            .collect();
        let (passed, reopened) = parents_to_settle(
            doc,
            |id| passing.get(id).copied().unwrap_or(false),
            |id| self.ledger.get(id).is_some_and(|r| r.ticked_in_run),
        );
        for (ids, to) in [(passed, true), (reopened, false)] {
            for id in ids {
                passing.insert(id, to);
            }
        }
        move |id| passing.get(id).copied().unwrap_or(false)
    }

    /// Takes what a sync of the PRD says the file is now: its model (criteria someone added
    /// join with their box as it was read, `admitted`, else as it is in `doc`), whether it is
    /// broken, which criteria vanished.
    pub(in crate::run) fn take_sync(
        &mut self,
        doc: Option<Prd>,
        admitted: &[(String, bool)],
        broken: Option<Option<PrdBroken>>,
        vanished: Option<Vec<String>>,
    ) {
        if let Some(doc) = doc {
            for c in &doc.criteria {
                let read = admitted.iter().find(|(id, _)| *id == c.id);
                self.ledger
                    .admit(&c.id, read.map_or(c.checked, |(_, b)| *b));
            }
            self.doc = doc;
            self.settle_parents();
        }
        self.damage.take(broken, vanished);
    }
}

/// The parents of split ids whose state follows from their leaves, by `passing` and by
/// whether the run ticked them: (those to pass: every leaf passes; those to open again: a
/// leaf fails and the run had ticked the parent).
fn parents_to_settle(
    doc: &Prd,
    passing: impl Fn(&str) -> bool,
    ticked_in_run: impl Fn(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let mut passed = Vec::new();
    let mut reopened = Vec::new();
    for c in doc.criteria.iter().filter(|c| c.is_parent()) {
        let leaves = c.leaves.iter().all(|l| passing(l));
        let parent = passing(&c.id);
        if leaves && !parent {
            passed.push(c.id.clone());
        } else if !leaves && parent && ticked_in_run(&c.id) {
            reopened.push(c.id.clone());
        }
    }
    (passed, reopened)
}
