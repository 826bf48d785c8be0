//! Step 2 of a transaction: each new file's content written beside its target, as the
//! checkout would have it (filters and line endings applied), then made durable. A few files
//! are written one by one (`git cat-file`, `fsync`); many by one `git checkout-index` into
//! the journal's staging folder (one process for 20,000 files, not one each), from which each
//! is moved beside its target, and made durable by one `syncfs` (not one `fsync` each).

use std::path::Path;

use anyhow::{Context, Result};

use super::{EXECUTABLE, Entry, Journal, Op, TxError, remove_any};
use crate::isolation::git::Git;
use crate::isolation::repo_path::RepoPath;

/// Writes each new file's content beside its target (`journal`: where the journal is; a
/// temporary index is made beside it).
pub(super) fn stage(top: &Git, j: &Journal, journal: &Path) -> std::result::Result<(), TxError> {
    stage_all(top, j, journal).map_err(TxError::Failed)
}

fn stage_all(top: &Git, j: &Journal, journal: &Path) -> Result<()> {
    let files: Vec<&Op> = j
        .ops
        .iter()
        .filter(|op| op.change.after.as_ref().is_some_and(|e| !e.is_link()))
        .collect();
    // A few files are written one by one (each `git cat-file` and `fsync` is quicker than
    // the batch's set-up and a whole file system's sync, and the window in which an editor
    // saving makes the landing start again stays short); many through the staging folder.
    let batch = files.len() > FEW;
    if let (Some(stage), true) = (&j.stage, batch) {
        check_out(top, &files, stage, journal)?;
    }
    for op in &j.ops {
        let Some(after) = &op.change.after else {
            continue;
        };
        let staged = j.stage.as_ref().map(|s| s.join(op.change.path.as_path()));
        // Moved from the staging folder; written alone where that cannot be (a symbolic
        // link, a file on another file system than the top of the checkout).
        let moved =
            !after.is_link() && staged.is_some_and(|from| std::fs::rename(from, &op.temp).is_ok());
        if !moved {
            write_blob(top, &op.change.path, after, &op.temp)?;
        }
        if !after.is_link() {
            set_mode(top, &op.change.path, after, &op.temp)?;
        }
    }
    if let Some(stage) = &j.stage {
        remove_any(stage).with_context(|| format!("could not remove {}", stage.display()))?;
    }
    durable(&j.top, &j.ops, batch)
}

/// Up to how many regular files are written one by one.
const FEW: usize = 32;

/// Every regular file of `ops` written under `stage` at its path, by one `git
/// checkout-index` from a temporary index holding their entries.
fn check_out(top: &Git, ops: &[&Op], stage: &Path, journal: &Path) -> Result<()> {
    let dir = journal.parent().unwrap_or(Path::new("."));
    let index = tempfile::Builder::new()
        .prefix("landing-index-")
        .tempfile_in(dir)
        .with_context(|| format!("could not make a temporary index in {}", dir.display()))?
        .into_temp_path();
    let _ = std::fs::remove_file(&index);
    let mut info = Vec::new();
    let mut paths = Vec::new();
    for op in ops {
        if let Some(e) = &op.change.after {
            info.extend_from_slice(&super::index_info(&op.change.path, Some(e)));
            paths.extend_from_slice(op.change.path.as_bytes());
            paths.push(0);
        }
    }
    top.cmd()
        .args(&["update-index", "-z", "--index-info"])
        .input(&info)
        .index(&index)
        .run()?;
    std::fs::create_dir(stage).with_context(|| format!("could not create {}", stage.display()))?;
    let mut prefix = stage.as_os_str().to_owned();
    prefix.push("/");
    let mut arg = std::ffi::OsString::from("--prefix=");
    arg.push(&prefix);
    top.cmd()
        .args(&["checkout-index", "-z", "--stdin"])
        .arg(&arg)
        .input(&paths)
        .index(&index)
        .run()
        .with_context(|| format!("could not write the new files into {}", stage.display()))
}

/// Streams a blob, as the checkout would have it, into a new file at `temp`.
fn write_blob(top: &Git, rel: &RepoPath, e: &Entry, temp: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if e.is_link() {
        use std::os::unix::ffi::OsStrExt;
        let (target, _) = top.cmd().args(&["cat-file", "blob", &e.oid]).output()?;
        std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), temp)
            .with_context(|| format!("could not create {}", temp.display()))?;
        return Ok(());
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if e.mode == EXECUTABLE { 0o777 } else { 0o666 })
        .open(temp)
        .with_context(|| format!("could not create {}", temp.display()))?;
    let path_arg = rel.after("--path=");
    top.cmd()
        .args(&["cat-file", "--filters"])
        .arg(&path_arg)
        .arg(&e.oid)
        .to_file(file)
        .with_context(|| format!("could not write {}", temp.display()))
}

/// A file replaced keeps its permissions, with the executable bits as the tree says; its
/// setuid, setgid and sticky bits are dropped, as `git checkout` drops them (they were given
/// to the old content, not to the worker's).
fn set_mode(top: &Git, rel: &RepoPath, e: &Entry, temp: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(m) = std::fs::metadata(top.dir.join(rel.as_path())) else {
        return Ok(());
    };
    if !m.is_file() {
        return Ok(());
    }
    let old = m.permissions().mode() & 0o777;
    let mode = if e.mode == EXECUTABLE {
        old | ((old & 0o444) >> 2)
    } else {
        old & !0o111
    };
    std::fs::set_permissions(temp, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("could not set the permissions of {}", temp.display()))
}

/// The staged files on disk for good before the journal is committed: for a `batch`, one
/// `syncfs` of the checkout's file system where there is one; else each file's `fsync`.
fn durable(top: &Path, ops: &[Op], batch: bool) -> Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if batch {
        let dir = std::fs::File::open(top)
            .with_context(|| format!("could not open {}", top.display()))?;
        if nix::unistd::syncfs(&dir).is_ok() {
            return Ok(());
        }
    }
    for op in ops
        .iter()
        .filter(|op| op.change.after.as_ref().is_some_and(|e| !e.is_link()))
    {
        let f = std::fs::File::open(&op.temp)
            .with_context(|| format!("could not open {}", op.temp.display()))?;
        f.sync_all()
            .with_context(|| format!("could not write {}", op.temp.display()))?;
    }
    Ok(())
}
