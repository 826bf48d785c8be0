//! Merging a commit into a checkout: the one flow isolated workers and `prdloop merge` share.

use std::path::Path;

use anyhow::Result;

use super::git::{Git, Merge};
use super::guard::{self, Refusal};
use super::transaction::{self, TxError};
use super::undo::{self, Origin, Point};

/// What merging a commit into a checkout came to ([`merge_into_checkout`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// The checkout already holds it.
    Unchanged,
    /// These files collide with the checkout's: nothing was applied. `theirs`: the
    /// checkout's own change to them since `base` (a diff, cut short).
    Conflict { files: Vec<String>, theirs: String },
    /// A guard kept it out (it would delete or undo the user's own work, …): nothing was
    /// applied.
    Refused(Refusal),
    /// Applied to the checkout: these files changed; `undo` is the point that puts them
    /// back.
    Applied {
        files: Vec<String>,
        undo: Box<Point>,
    },
}

/// How often a landing is tried when the checkout keeps changing under it.
const TRIES: usize = 6;

/// How a merge may change the checkout.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// `--allow-deletions`: let through what the guards would refuse.
    pub allow_deletions: bool,
    /// Named in the undo point.
    pub origin: Origin,
}

/// The three-way merge of commit `a` (made on `base`) into the checkout of `repo`: the
/// checkout is taken as a snapshot U on `base`, the trees of U and `a` merged
/// (`merge-tree`), the guards asked, an undo point kept, and the difference between U and
/// the merge written to the checkout as one transaction ([`transaction::apply`]). Paths in
/// `exclude` are neither taken nor touched. Used by isolated workers as each criterion
/// passes and by `prdloop merge` for each shard's bundle. The caller holds the repository
/// lock ([`super::pool::RepoLock`]), which `journal` (the repository's landing journal)
/// needs.
pub fn merge_into_checkout(
    repo: &Git,
    base: &str,
    a: &str,
    exclude: &[String],
    scratch: &Path,
    journal: &Path,
    policy: &Policy,
) -> Result<Merged> {
    // The checkout may change under us (an editor saving, a log appended to): another try
    // from a new snapshot, a little later each time.
    let mut last_err = None;
    for attempt in 0..TRIES {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20 * attempt as u64));
        }
        let u = repo.snapshot(base, exclude, scratch)?;
        let merged = match repo.merge_tree(&u, a)? {
            Merge::Clean(tree) => tree,
            Merge::Conflict(files) => {
                let theirs = repo.diff_of(base, &u, &files).unwrap_or_default();
                return Ok(Merged::Conflict { files, theirs });
            }
        };
        let u_tree = repo.tree_of(&u)?;
        if u_tree == merged {
            return Ok(Merged::Unchanged);
        }
        let head = repo.commit_of("HEAD").unwrap_or_else(|| base.to_string());
        let changes = transaction::changes(repo, &u_tree, &merged)?;
        if let Some(r) = guard::check(repo, &head, &changes, policy.allow_deletions)? {
            return Ok(Merged::Refused(r));
        }
        // The undo point first: the transaction's window, from checking the files to
        // swapping them, stays as short as it can be.
        let files = changes.iter().map(|c| c.path.clone()).collect();
        let point = undo::create(repo, scratch, &u, &merged, &policy.origin, files)?;
        let applied = transaction::apply_changes(repo, journal, changes, &policy.origin.label);
        if applied.is_err() {
            let _ = undo::drop_point(repo, &point);
        }
        match applied {
            Ok(changes) => {
                let files = changes.into_iter().map(|c| c.path).collect();
                let undo = Box::new(point);
                return Ok(Merged::Applied { files, undo });
            }
            Err(TxError::Changed(path)) => {
                last_err = Some(anyhow::anyhow!(
                    "{path} kept changing while the work was being merged"
                ));
            }
            Err(TxError::Unsupported(why)) => {
                return Ok(Merged::Refused(Refusal::Unsupported { why }));
            }
            Err(TxError::Failed(e)) => return Err(e),
            Err(e @ TxError::Partial(..)) => return Err(e.into()),
        }
    }
    Err(last_err.expect("tried"))
}

/// [`merge_into_checkout`] for a caller holding no lock (`prdloop merge`): takes the
/// repository's lock and uses its landing journal.
pub fn merge_into_checkout_locked(
    repo: &Git,
    base: &str,
    a: &str,
    exclude: &[String],
    scratch: &Path,
    policy: &Policy,
) -> Result<Merged> {
    let common = std::path::PathBuf::from(repo.text(&[
        "rev-parse",
        "--path-format=absolute",
        "--git-common-dir",
    ])?);
    let _lock = super::pool::RepoLock::take(&common)?;
    let journal = transaction::journal_path(&common);
    if journal.exists() {
        transaction::recover(&journal)?;
    }
    merge_into_checkout(repo, base, a, exclude, scratch, &journal, policy)
}
