//! Merging a commit into a checkout: the one flow isolated workers and `prdloop merge` share.

use std::path::Path;

use anyhow::Result;

use super::git::{Git, Merge};
use super::guard::{self, Refusal};
use super::owed::{Credit, Owed};
use super::repo_path::RepoPath;
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
        files: Vec<RepoPath>,
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
    /// Kept with the landing until its bookkeeping is written ([`super::owed`]).
    pub credit: Option<Credit>,
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
        let files: Vec<RepoPath> = changes.iter().map(|c| c.path.clone()).collect();
        let point = undo::create(repo, scratch, &u, &merged, &policy.origin, files.clone())?;
        let owed = policy.credit.clone().map(|credit| Owed {
            name: super::owed::name_of(&point),
            prd: policy.origin.prd.clone(),
            session: policy.origin.session.clone(),
            label: policy.origin.label.clone(),
            files,
            undo: point.name.clone(),
            credit,
        });
        let applied =
            transaction::apply_changes(repo, journal, changes, &policy.origin.label, owed);
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
        transaction::recover(&journal, &repo.dir)?;
    }
    merge_into_checkout(repo, base, a, exclude, scratch, &journal, policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with one commit, and a commit on it that adds `n` files.
    fn adding(n: usize) -> (tempfile::TempDir, Git, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let g = Git::new(dir.path());
        g.cmd().args(&["init", "-q"]).run().unwrap();
        std::fs::write(dir.path().join("README"), "r\n").unwrap();
        g.cmd().args(&["add", "README"]).run().unwrap();
        let tree = g.text(&["write-tree"]).unwrap();
        let base = g.commit_tree(&tree, &[], "one").unwrap();
        g.pin("HEAD", &base).unwrap();
        let blob = g
            .cmd()
            .args(&["hash-object", "-w", "--stdin"])
            .input(b"new\n")
            .text()
            .unwrap();
        let index = dir.path().join(".git/other-index");
        g.cmd()
            .args(&["read-tree", &base])
            .index(&index)
            .run()
            .unwrap();
        let info: String = (0..n)
            .map(|i| format!("100644 {blob}\tsome/deeper/folder/new-file-number-{i:06}\0"))
            .collect();
        g.cmd()
            .args(&["update-index", "-z", "--index-info"])
            .input(info.as_bytes())
            .index(&index)
            .run()
            .unwrap();
        let after = g.cmd().arg("write-tree").index(&index).text().unwrap();
        let a = g.commit_tree(&after, &[&base], "the work").unwrap();
        (dir, g, base, a)
    }

    #[test]
    fn twenty_thousand_new_files_land() {
        let n = 20_000;
        let (dir, g, base, a) = adding(n);
        let scratch = tempfile::tempdir().unwrap();
        let journal = transaction::journal_path(&dir.path().join(".git"));
        let merged = merge_into_checkout(
            &g,
            &base,
            &a,
            &[],
            scratch.path(),
            &journal,
            &Policy::default(),
        )
        .unwrap();
        let Merged::Applied { files, undo } = merged else {
            panic!("{merged:?}");
        };
        assert_eq!(files.len(), n);
        assert_eq!(undo.files.len(), n);
        let folder = dir.path().join("some/deeper/folder");
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), n);
        assert_eq!(
            std::fs::read_to_string(folder.join("new-file-number-019999")).unwrap(),
            "new\n"
        );
        assert!(!journal.exists());
        // The undo point holds every file.
        let points = undo::list(&g).unwrap();
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].files.len(), n);
    }
}
