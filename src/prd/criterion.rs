//! The model's items: a criterion, and the boxes of the criteria sections that are none.

use std::ops::Range;

use super::{HowVerified, Probe, Verify, VerifyTypes};

/// One criterion: a task-list item whose text starts with an id and a colon (`ISC-C1: text`,
/// or in bold, `**ISC-C1:** text` or `**ISC-C1**: text`; an em dash may stand for the
/// colon, and `Anti:`/`Antecedent:` may come before the id).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Criterion {
    pub id: String,
    pub description: String,
    pub verify: Option<Verify>,
    pub checked: bool,
    /// 1-based line number.
    pub line: usize,
    pub domain: String,
    /// Something that must not happen: an `Anti:` prefix, or an anti id by the file's
    /// convention (see [`id::is_anti_in`]).
    pub anti: bool,
    /// An `Antecedent:` claim (what must be true for the experience, LifeOS).
    pub antecedent: bool,
    /// For a parent of split ids (`ISC-2` with `ISC-2.1`, `ISC-2.2`): its leaves. A parent
    /// passes when all of them pass; the runner ticks it, no worker works on it.
    pub leaves: Vec<String>,
    /// What it needs to pass first: `(after: ISC-8)` in its text and ` | After: ISC-8` segments,
    /// as written (checked and ordered by [`crate::graph`]).
    pub after: Vec<String>,
    /// An inline `(probe: ...)` or `Probe: ...` in the text: shown to the worker.
    pub inline_probe: Option<String>,
    /// Its row in `## Test Strategy`, if any.
    pub probe: Option<Probe>,
    /// What its format writes beside its text (a story's description and acceptance
    /// criteria, a task's details and test strategy, Kiro's detail bullets): shown to the
    /// worker and the verifier.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Kiro's optional task (`- [ ]* 2.3 …`): worked on like the others, but no leaf of its
    /// parent, which passes with its other sub-tasks.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// Bytes of its done marker: the character inside `[ ]` (space, `x` or `X`), a JSON
    /// `passes` value, a Taskmaster `status` string.
    #[serde(skip)]
    pub marker: Range<usize>,
}

impl Criterion {
    /// Who decides whether this criterion passes: the runner (a command), the agent, or a
    /// person. `types` are the Verify types whose single-code-span method is a command. A
    /// criterion with no Verify method is decided by its Test Strategy probe, if it has one.
    pub fn how_verified(&self, types: &VerifyTypes) -> HowVerified<'_> {
        if self.is_parent() {
            return HowVerified::Agent {
                why: format!("a parent: passes when {} pass", self.leaves.join(", ")),
            };
        }
        match (&self.verify, &self.probe) {
            (Some(v), _) => v.how(types),
            (None, Some(p)) => p.how(),
            (None, None) if self.inline_probe.is_some() => HowVerified::Agent {
                why: "its probe is written in its text: the agent checks it".into(),
            },
            (None, None) => HowVerified::Agent {
                why: "no Verify method".into(),
            },
        }
    }

    /// A parent of split ids: ticked by the runner when its leaves pass, never worked on.
    pub fn is_parent(&self) -> bool {
        !self.leaves.is_empty()
    }

    /// The command the runner runs for this criterion, if it runs one.
    pub fn command(&self, types: &VerifyTypes) -> Option<&str> {
        self.how_verified(types).command()
    }

    pub fn is_custom(&self) -> bool {
        self.verify.as_ref().is_some_and(Verify::is_custom)
    }
}

/// A checkbox in a criteria section that is not a criterion.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OtherBox {
    pub line: usize,
    /// The id it was written with, when it has one (a tombstone's).
    pub id: Option<String>,
    pub checked: bool,
    /// A dropped claim (`- [ ] ISC-N: [DROPPED — see Decisions]`): not work, not counted.
    pub tombstone: bool,
    /// Set aside for later (Taskmaster's `deferred`): not worked on, and what needs it waits.
    pub deferred: bool,
    /// Its text, trimmed.
    pub text: String,
}

/// An open box in the criteria sections: what keeps a file from being marked complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenBox {
    pub line: usize,
    /// The criterion's id, or the line's first words when it is not read.
    pub label: String,
}
