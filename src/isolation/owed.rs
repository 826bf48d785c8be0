//! What a landing is owed once its files are in place: its bookkeeping (a criterion's pass in
//! the state file, the attempts log and the PRD; with `--commit`, its commit). The landing's
//! journal carries it, so that it is decided in the same step as the landing itself; once the
//! files are in place it is kept in `prdloop/owed/` in the git folder, until the run has
//! written that bookkeeping, or, after a crash, until the next run of its PRD has.

use anyhow::Result;

use super::undo::{self, Point};
use super::{Isolation, Landing, Warning, transaction};

pub use super::owed_book::{Credit, Owed, dir, owed_to, settle, settle_or_warn};

/// A landing a crash left owed, taken on by this run: the run's record of its pass, and the
/// landing as it stands now (with `--commit`, committed).
#[derive(Debug, Clone)]
pub struct Recovered {
    pub label: String,
    pub record: serde_json::Value,
    pub landing: Landing,
}

impl Isolation {
    /// The landings a crash left owed to this run's PRD (after [`Isolation::sweep`] finished
    /// any landing it interrupted): each one with `--commit` committed now (unless it was
    /// before the crash), and owed by this run from here on ([`Isolation::settle`]). One
    /// undone since (`prdloop undo`: its undo point is gone) is owed nothing.
    pub fn owed_from_before(&self) -> Result<Vec<Recovered>> {
        let journal = transaction::journal_path(&self.common);
        let owed = owed_to(&journal, &self.prd.0)?;
        if owed.is_empty() {
            return Ok(Vec::new());
        }
        let _g = self.guard()?;
        let points = undo::list(&self.repo)?;
        let mut out = Vec::new();
        for o in owed {
            let Some(point) = points.iter().find(|p| p.name == o.undo) else {
                settle(&journal, &o.name)?;
                continue;
            };
            let (commit, note) = match point.commit.clone() {
                Some(c) => (Some(c), None),
                None if self.settings.commit => {
                    let c = &o.credit;
                    match self.commit(&c.base, &c.attempt, &o.files, &c.message) {
                        Ok(commit) => {
                            let _ = undo::set_commit(&self.repo, point, &commit);
                            (Some(commit), None)
                        }
                        Err(why) => (None, Some(format!("not committed: {why}"))),
                    }
                }
                None => (None, None),
            };
            self.owing().push(o.name.clone());
            out.push(Recovered {
                label: o.label,
                record: o.credit.record,
                landing: Landing::Merged {
                    files: super::repo_path::lossy(&o.files),
                    commit,
                    note,
                    undo: Some(o.undo),
                },
            });
        }
        Ok(out)
    }

    /// The landings this run owes the bookkeeping of (see [`Isolation::settle`]).
    pub fn owed(&self) -> Vec<String> {
        self.owing().clone()
    }

    /// The bookkeeping of the landings `names` (from [`Isolation::owed`]) is written: they are
    /// owed no more. What could not be removed.
    pub fn settle(&self, names: &[String]) -> Vec<Warning> {
        let journal = transaction::journal_path(&self.common);
        let warnings = names
            .iter()
            .filter_map(|n| settle_or_warn(&journal, n).err())
            .collect();
        self.owing().retain(|n| !names.contains(n));
        warnings
    }

    pub(super) fn owing(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.owing.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The name an owed landing is kept under: its undo point's (unique, and in time order).
pub(super) fn name_of(point: &Point) -> String {
    crate::text::file_safe(point.name.trim_start_matches(undo::PREFIX))
}
