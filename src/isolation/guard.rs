//! What a landing may not do to the user's checkout without being told it may: delete files
//! whose only copy is the checkout (uncommitted or untracked), put back the committed version
//! of a file the user has changed (undoing their uncommitted work), delete more than half of
//! the tracked files, or write files outside a sparse checkout's cone (they would be hidden
//! from git and look lost).

use anyhow::Result;

use super::git::Git;
use super::repo_path::RepoPath;
use super::transaction::{self, Change};

/// Why a landing was not applied (the attempt is kept on its ref).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refusal {
    /// It deletes files that are uncommitted or untracked in the checkout.
    DeletesUncommitted { files: Vec<String> },
    /// It puts back the committed version of files the user had changed.
    RevertsEdits { files: Vec<String> },
    /// It deletes more than half of the tracked files.
    DeletesMost { deleted: usize, tracked: usize },
    /// It changes files outside the sparse checkout's cone.
    OutsideSparse { files: Vec<String> },
    /// It cannot be written as files (a submodule, a path through a symbolic link).
    Unsupported { why: String },
    /// It changes prdloop's own configuration (a `prdloop.toml`, a PRD's `prdloop:` map),
    /// which can run commands and weaken the sandbox: held for a person to apply.
    ChangesConfig { files: Vec<String> },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[String]| {
            let mut s = v.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
            if v.len() > 5 {
                s.push_str(&format!(" and {} more", v.len() - 5));
            }
            s
        };
        match self {
            Refusal::DeletesUncommitted { files } => write!(
                f,
                "it deletes files whose only copy is your checkout (uncommitted or untracked): {}; \
                 --allow-deletions lets such a landing through",
                list(files)
            ),
            Refusal::RevertsEdits { files } => write!(
                f,
                "it puts back the committed version of files you had changed, undoing your \
                 uncommitted edits: {}; --allow-deletions lets such a landing through",
                list(files)
            ),
            Refusal::DeletesMost { deleted, tracked } => write!(
                f,
                "it deletes {deleted} of the {tracked} tracked files; --allow-deletions lets such \
                 a landing through"
            ),
            Refusal::OutsideSparse { files } => write!(
                f,
                "it changes files outside your sparse checkout: {} (add them with `git \
                 sparse-checkout add`, then run again)",
                list(files)
            ),
            Refusal::Unsupported { why } => f.write_str(why),
            Refusal::ChangesConfig { files } => write!(
                f,
                "it changes prdloop's own configuration, which can run commands and weaken the \
                 sandbox: {}; held for you to read and apply yourself (no flag lets a worker's \
                 change to it through)",
                list(files)
            ),
        }
    }
}

/// Whether the change from the checkout (as taken) to the merge may be applied; `head`: the
/// checkout's HEAD commit.
pub fn check(
    repo: &Git,
    head: &str,
    changes: &[Change],
    allow_deletions: bool,
) -> Result<Option<Refusal>> {
    let config = config_changes(repo, changes)?;
    if !config.is_empty() {
        return Ok(Some(Refusal::ChangesConfig { files: config }));
    }
    let sparse = sparse_paths(repo, changes)?;
    if !sparse.is_empty() {
        return Ok(Some(Refusal::OutsideSparse { files: sparse }));
    }
    if allow_deletions {
        return Ok(None);
    }
    let paths: Vec<RepoPath> = changes.iter().map(|c| c.path.clone()).collect();
    let committed = transaction::entries(repo, head, &paths)?;
    let mut uncommitted = Vec::new();
    let mut reverted = Vec::new();
    let mut deleted_tracked = 0;
    for c in changes {
        let at_head = committed.get(&c.path);
        let users_own = c.before.as_ref() != at_head;
        // A file emptied is as good as deleted: its content is gone.
        let gone = match &c.after {
            None => true,
            Some(after) => emptied(c.before.as_ref(), after),
        };
        if gone && users_own && c.before.is_some() {
            uncommitted.push(c.path.lossy());
        } else if gone {
            deleted_tracked += 1;
        } else if users_own && c.after.is_some() && c.after.as_ref() == at_head {
            reverted.push(c.path.lossy());
        }
    }
    if !uncommitted.is_empty() {
        return Ok(Some(Refusal::DeletesUncommitted { files: uncommitted }));
    }
    if !reverted.is_empty() {
        return Ok(Some(Refusal::RevertsEdits { files: reverted }));
    }
    if deleted_tracked > 1 {
        let tracked = {
            let (out, _) = repo
                .cmd()
                .args(&["ls-tree", "-r", "-z", "--name-only", "--full-tree", head])
                .output()?;
            out.split(|b| *b == 0).filter(|s| !s.is_empty()).count()
        };
        if deleted_tracked * 2 > tracked {
            return Ok(Some(Refusal::DeletesMost {
                deleted: deleted_tracked,
                tracked,
            }));
        }
    }
    Ok(None)
}

/// The repository's config files, by path from its top (`config_file::PROJECT_FILE` at the
/// top or in `.config/`; a unit test there keeps the two the same).
pub const CONFIG_FILES: [&str; 2] = ["prdloop.toml", ".config/prdloop.toml"];

/// The changed paths that are prdloop's configuration: the repository's config files, the
/// `.worktreeinclude` that says which of your ignored files each lane gets, and markdown files
/// whose front matter's `prdloop:` map the change writes, adds or removes.
fn config_changes(repo: &Git, changes: &[Change]) -> Result<Vec<String>> {
    // The front matter is at the top: this much of a file holds it.
    const HEAD: usize = 256 * 1024;
    let map_of = |e: &Option<transaction::Entry>| -> Result<Option<String>> {
        let Some(e) = e.as_ref().filter(|e| !e.is_link()) else {
            return Ok(None);
        };
        let bytes = repo.cmd().args(&["cat-file", "blob", &e.oid]).head(HEAD)?;
        Ok(crate::prd::frontmatter::prdloop_map_text(
            &String::from_utf8_lossy(&bytes),
        ))
    };
    let mut v = Vec::new();
    for c in changes {
        let md = c
            .path
            .as_bytes()
            .rsplit(|b| *b == b'.')
            .next()
            .is_some_and(|e| e.eq_ignore_ascii_case(b"md"));
        let config = CONFIG_FILES
            .iter()
            .chain([&super::include::LIST])
            .any(|f| f.as_bytes() == c.path.as_bytes());
        if config || md && map_of(&c.before)? != map_of(&c.after)? {
            v.push(c.path.lossy());
        }
    }
    Ok(v)
}

/// The object ids of the empty blob (SHA-1 and SHA-256 repositories).
const EMPTY_BLOBS: [&str; 2] = [
    "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391",
    "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813",
];

/// Whether a change leaves a file that had content empty (a symbolic link or a file that
/// was empty already does not count).
fn emptied(before: Option<&transaction::Entry>, after: &transaction::Entry) -> bool {
    let empty = |e: &transaction::Entry| EMPTY_BLOBS.contains(&e.oid.as_str());
    !after.is_link() && empty(after) && before.is_some_and(|b| !b.is_link() && !empty(b))
}

/// The changed paths git keeps out of the working tree (skip-worktree: outside a sparse
/// checkout's cone).
fn sparse_paths(repo: &Git, changes: &[Change]) -> Result<Vec<String>> {
    let on = repo
        .cmd()
        .args(&["config", "--bool", "core.sparseCheckout"])
        .ok_codes(&[1])
        .text()?;
    if on != "true" {
        return Ok(Vec::new());
    }
    let literal: Vec<std::ffi::OsString> =
        changes.iter().map(|c| c.path.after(":(literal)")).collect();
    let (out, _) = repo
        .cmd()
        .args(&["ls-files", "-t", "-z", "--"])
        .args(&literal)
        .output()?;
    let mut v: Vec<RepoPath> = out
        .split(|b| *b == 0)
        .filter_map(|rec| rec.strip_prefix(b"S ").map(RepoPath::from_bytes))
        .collect();
    // New files under a folder outside the cone: git has no entry for them, but their
    // folder is not in the working tree either.
    let cone_mode = repo
        .cmd()
        .args(&["config", "--bool", "core.sparseCheckoutCone"])
        .ok_codes(&[1])
        .text()?
        == "true";
    let cone = cone_mode
        .then(|| repo.cmd().args(&["sparse-checkout", "list"]).text().ok())
        .flatten();
    if let Some(cone) = cone.filter(|c| !c.is_empty()) {
        let dirs: Vec<&str> = cone.lines().collect();
        for c in changes.iter().filter(|c| c.before.is_none()) {
            let top_level = !c.path.as_bytes().contains(&b'/');
            let inside = dirs
                .iter()
                .any(|d| c.path.is_in(d.trim_matches('/').as_bytes()));
            if !top_level && !inside && !v.contains(&c.path) {
                v.push(c.path.clone());
            }
        }
    }
    Ok(super::repo_path::lossy(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bytes` written as a blob; its id.
    fn blob(g: &Git, bytes: &[u8]) -> String {
        g.cmd()
            .args(&["hash-object", "-w", "--stdin"])
            .input(bytes)
            .text()
            .unwrap()
    }

    /// A repository of `n` committed files, and the changes emptying the first `emptied`.
    fn emptying(n: usize, emptied: usize) -> (tempfile::TempDir, Git, String, Vec<Change>) {
        let dir = tempfile::tempdir().unwrap();
        let g = Git::new(dir.path());
        g.cmd().args(&["init", "-q"]).run().unwrap();
        for i in 0..n {
            std::fs::write(dir.path().join(format!("f{i}")), format!("{i}\n")).unwrap();
        }
        g.cmd().args(&["add", "-A"]).run().unwrap();
        let tree = g.text(&["write-tree"]).unwrap();
        let head = g.commit_tree(&tree, &[], "one").unwrap();
        let empty = blob(&g, b"");
        let paths: Vec<RepoPath> = (0..emptied)
            .map(|i| RepoPath::from(format!("f{i}").as_str()))
            .collect();
        let at_head = transaction::entries(&g, &head, &paths).unwrap();
        let changes = paths
            .iter()
            .map(|p| Change {
                path: p.clone(),
                before: at_head.get(p).cloned(),
                after: Some(transaction::Entry {
                    mode: 0o100644,
                    oid: empty.clone(),
                }),
            })
            .collect();
        (dir, g, head, changes)
    }

    #[test]
    fn emptying_most_tracked_files_counts_as_deleting_them() {
        let (_dir, g, head, changes) = emptying(4, 4);
        let r = check(&g, &head, &changes, false).unwrap();
        assert_eq!(
            r,
            Some(Refusal::DeletesMost {
                deleted: 4,
                tracked: 4
            })
        );
        assert_eq!(check(&g, &head, &changes, true).unwrap(), None);
        // Emptying one of four is an ordinary change.
        let (_dir, g, head, changes) = emptying(4, 1);
        assert_eq!(check(&g, &head, &changes, false).unwrap(), None);
    }

    #[test]
    fn emptying_a_file_with_uncommitted_content_counts_as_deleting_it() {
        let (_dir, g, head, mut changes) = emptying(3, 1);
        // The checkout's f0 is the user's own (not what HEAD has).
        let theirs = blob(&g, b"the user's\n");
        changes[0].before = Some(transaction::Entry {
            mode: 0o100644,
            oid: theirs,
        });
        let r = check(&g, &head, &changes, false).unwrap();
        assert_eq!(
            r,
            Some(Refusal::DeletesUncommitted {
                files: vec!["f0".into()]
            })
        );
    }
}
