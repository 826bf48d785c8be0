//! Merging a commit into a checkout: the one flow isolated workers and `prdloop merge` share.

use std::path::Path;

use anyhow::Result;

use super::git::{Git, Merge};

/// What merging a commit into a checkout came to ([`merge_into_checkout`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// The checkout already holds it.
    Unchanged,
    /// These files collide with the checkout's: nothing was applied. `theirs`: the
    /// checkout's own change to them since `base` (a diff, cut short).
    Conflict { files: Vec<String>, theirs: String },
    /// Applied to the checkout: these files changed, by this patch.
    Applied { files: Vec<String>, patch: Vec<u8> },
}

/// The three-way merge of commit `a` (made on `base`) into the checkout of `repo`: the
/// checkout is taken as a snapshot U on `base`, the trees of U and `a` merged
/// (`merge-tree`), and only the difference between U and the merge applied to the checkout,
/// all or nothing. Paths in `exclude` are neither taken nor touched. Used by isolated workers
/// as each criterion passes and by `prdloop merge` for each shard's bundle. The caller holds
/// whatever lock keeps other writers of the checkout out.
pub fn merge_into_checkout(
    repo: &Git,
    base: &str,
    a: &str,
    exclude: &[String],
    scratch: &Path,
) -> Result<Merged> {
    // The checkout may change under us (an editor saving): one more try from a new snapshot
    // when the patch no longer applies.
    let mut last_err = None;
    for _ in 0..2 {
        let u = repo.snapshot(base, exclude, scratch)?;
        let merged = match repo.merge_tree(&u, a)? {
            Merge::Clean(tree) => tree,
            Merge::Conflict(files) => {
                let theirs = repo.diff_of(base, &u, &files).unwrap_or_default();
                return Ok(Merged::Conflict { files, theirs });
            }
        };
        let files = repo.changed(&u, &merged, exclude)?;
        if files.is_empty() {
            return Ok(Merged::Unchanged);
        }
        let patch = repo.patch(&u, &merged, exclude)?;
        match repo.apply(&patch) {
            Ok(()) => return Ok(Merged::Applied { files, patch }),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.expect("tried"))
}
