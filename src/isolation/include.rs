//! The ignored files a fresh tree of the checkout gets from it: those its `.worktreeinclude`
//! names (gitignore patterns: `.env`, local configuration, dependency folders such as
//! `node_modules/`, `.venv/` or `deps/`). A new lane gets them, and so does the copy the
//! runner's own checks run in, so a check finds there what it found in the lane. They are
//! read from the user's checkout (never from a lane) and written beneath the tree without
//! following a link (the tree's tracked files are landed work: a link among them is not a
//! way out).

use std::path::Path;

use anyhow::{Context, Result};

use super::beneath::Folder;
use super::git::Git;

/// The list, at the top of the checkout. It is the user's to write: a worker's change to it
/// (which could name your `.env` for every lane) is held, never landed
/// ([`super::guard::check`]).
pub const LIST: &str = ".worktreeinclude";

/// Copies into `dest` (the top of a fresh tree of the checkout whose top is `top`) the
/// ignored files `top/.worktreeinclude` names; how many.
pub fn into_tree(top: &Path, dest: &Path) -> Result<usize> {
    let folder =
        Folder::open(dest).with_context(|| format!("could not open {}", dest.display()))?;
    into(top, &folder)
}

/// The same into a folder already opened (a lane's top, known to be prdloop's).
pub(super) fn into(top: &Path, dest: &Folder) -> Result<usize> {
    let list = top.join(LIST);
    if !list.is_file() {
        return Ok(0);
    }
    let from = format!("--exclude-from={}", list.display());
    let (out, _) = Git::new(top)
        .cmd()
        .args(&["ls-files", "-z", "--others", "--ignored", &from])
        .output()?;
    let mut n = 0;
    for name in String::from_utf8_lossy(&out).split('\0') {
        if name.is_empty() {
            continue;
        }
        let src = top.join(name);
        dest.copy_in(Path::new(name), &src).with_context(|| {
            format!(
                "could not copy {} (named by .worktreeinclude)",
                src.display()
            )
        })?;
        n += 1;
    }
    Ok(n)
}
