//! A throw-away copy of the user's checkout, for checks that would otherwise run on it: the
//! start and regression checks of an isolated run, and `audit`'s re-checks. It holds what a
//! new lane holds: the files as they are now, tracked and untracked (made through git, in a
//! repository of its own on the checkout's objects), and the ignored ones `.worktreeinclude`
//! names (dependency folders, `.env`), copied from the checkout. So the user's files, index
//! and refs are never touched, a check run in it changes nothing of theirs, and it finds
//! what it found in the lane.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::isolation::git::Git;

/// A throw-away copy of the checkout as it is now (tracked and untracked files, and the
/// ignored ones `.worktreeinclude` names), made so the user's files, index and refs are
/// never touched.
pub struct Copy {
    dir: tempfile::TempDir,
    /// The workers' folder inside the copy.
    pub workdir: PathBuf,
    /// The top of the copy (what a check in it may write).
    top: PathBuf,
}

impl Copy {
    /// `what`: who makes it (`audit`, `checks`), in its folder's name.
    pub fn of(workdir: &Path, what: &str) -> Result<Copy> {
        let repo = crate::isolation::find_repo(workdir)
            .map_err(anyhow::Error::msg)
            .context("the checks run in a copy of the checkout, made with git")?;
        let g = Git::new(&repo.top);
        let common =
            PathBuf::from(g.text(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?);
        let dir = tempfile::Builder::new()
            .prefix(&format!("prdloop-{what}-"))
            .tempdir()
            .context("could not make a temporary folder")?;
        let scratch = dir.path().join(".scratch");
        let files = dir.path().join("checkout");
        std::fs::create_dir_all(&scratch)?;
        std::fs::create_dir_all(&files)?;
        let head = g
            .commit_of("HEAD")
            .context("the checkout has no HEAD commit")?;
        let snapshot = g.snapshot(&head, &[], &scratch)?;
        Git::detached(&common, &files)
            .cmd()
            .args(&["read-tree", "-u", "--reset", &snapshot])
            .index(&scratch.join("index"))
            .run()?;
        // A repository of its own on the checkout's objects (checks may run git): its HEAD
        // the checkout's, its index HEAD's tree, so it shows the checkout's changes as the
        // checkout does. Made before any check runs in it.
        let own = Git::new(&files);
        own.cmd().args(&["init", "-q"]).run()?;
        std::fs::write(
            files.join(".git/objects/info/alternates"),
            format!("{}\n", common.join("objects").display()),
        )
        .context("could not give the copy the checkout's objects")?;
        own.cmd().args(&["update-ref", "HEAD", &head]).run()?;
        own.cmd().args(&["read-tree", &head]).run()?;
        crate::isolation::include::into_tree(&repo.top, &files)
            .context("could not give the copy the checkout's files `.worktreeinclude` names")?;
        Ok(Copy {
            workdir: files.join(&repo.rel),
            top: files,
            dir,
        })
    }

    /// The top of the copy's files.
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// A folder beside the copy's files, for what the runner keeps (logs).
    pub fn scratch(&self) -> PathBuf {
        self.dir.path().join(".scratch")
    }
}
