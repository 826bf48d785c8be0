//! Writing a computed change into the user's checkout as one transaction: the change from
//! tree `before` (the checkout as it was taken) to tree `after` (the merge), file by file,
//! so that a failure at any point (disk full, a signal, `kill -9`) leaves the checkout as it
//! was or as it should be, never between.
//!
//! 1. Every file the change touches is checked to be as `before` says (else
//!    [`TxError::Changed`]: the caller takes the checkout again and merges anew).
//! 2. A journal (`prdloop/landing.json` in the git folder) names the temporary files, then
//!    each new file's content is streamed from git into a temporary file beside its target
//!    (`git cat-file --filters`: bounded memory, the checkout's line endings and filters),
//!    and fsynced. A failure here (disk full) removes them: nothing changed.
//! 3. The journal is marked committed (one atomic rename): from here the change is applied
//!    to the end, also by the next run or `prdloop clean` after a crash.
//! 4. Each file takes its target's place by an atomic exchange where the system has one
//!    (the old file is then checked again: a write that came in meanwhile undoes the whole
//!    landing and the caller tries again), deletions are renamed aside; the old files are
//!    removed and the journal with them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use super::git::Git;
use super::owed_book::Owed;
use super::repo_path::RepoPath;

mod entries;
mod recover;
mod stage;

pub use entries::{Change, Entry, changes, entries, index_info};
use entries::{EXECUTABLE, GITLINK, SYMLINK};
pub use recover::recover;
use recover::recover_journal;
use stage::stage;

/// Why a transaction did not apply. Nothing was changed in every case but `Partial`.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// The checkout changed under us (an editor saving): take it again and merge anew.
    #[error("{0} changed while the change was being applied")]
    Changed(String),
    /// The change cannot be written as files here (a submodule, a path through a symlink).
    #[error("{0}")]
    Unsupported(String),
    /// Staging failed (disk full, permissions): nothing was changed.
    #[error("{0:#}")]
    Failed(anyhow::Error),
    /// Committed but not finished (the journal is kept: the next run or `prdloop clean`
    /// finishes it).
    #[error("{0:#}; the journal {1} is kept: `prdloop clean` finishes the change")]
    Partial(anyhow::Error, PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Phase {
    /// Temporary files are being written: roll back (remove them).
    Staging,
    /// The change is decided: roll forward.
    Committed,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Op {
    change: Change,
    /// Where the new content is staged, or (after the swap) the old content waits.
    temp: PathBuf,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Journal {
    phase: Phase,
    /// The checkout's top.
    top: PathBuf,
    /// What the change is (for messages): `ISC-1's work`.
    label: String,
    ops: Vec<Op>,
    /// The folder the new files' content is written into before each is moved beside its
    /// target (removed before the journal is committed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stage: Option<PathBuf>,
    /// What the landing is owed once its files are in place: kept in the folder of owed
    /// landings ([`super::owed`]) before the journal goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owed: Option<Owed>,
}

/// Where a repository's landing journal lives.
pub fn journal_path(common: &Path) -> PathBuf {
    common.join("prdloop").join("landing.json")
}

fn save(path: &Path, j: &Journal) -> Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("could not create {}", d.display()))?;
    }
    crate::fsutil::write_atomic(path, &serde_json::to_vec_pretty(j)?)
}

/// A file's identity on disk, to see whether it changed between two looks.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    mode: u32,
}

fn seen(path: &Path) -> Option<Seen> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some(Seen {
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
        mode: m.mode(),
    })
}

/// The object id git would give the file at `abs` as `rel` of the checkout (filters and
/// line endings applied as `git add` applies them); a symlink's target hashed as git does.
fn hash_file(top: &Git, rel: &RepoPath, abs: &Path) -> Result<Option<Entry>> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(abs) else {
        return Ok(None);
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(abs)?;
        let oid = top
            .cmd()
            .args(&["hash-object", "--stdin"])
            .input(target.as_os_str().as_encoded_bytes())
            .text()?;
        return Ok(Some(Entry { mode: SYMLINK, oid }));
    }
    if !meta.is_file() {
        // A folder or something else where a file was: not what the tree says.
        return Ok(Some(Entry {
            mode: 0o040000,
            oid: String::new(),
        }));
    }
    let path_arg = rel.after("--path=");
    let oid = top
        .cmd()
        .args(&["hash-object"])
        .arg(&path_arg)
        .arg("--")
        .arg(abs)
        .text()?;
    let mode = if meta.permissions().mode() & 0o111 != 0 {
        EXECUTABLE
    } else {
        0o100644
    };
    Ok(Some(Entry { mode, oid }))
}

/// Whether what is on disk matches a tree entry (for a regular file, the executable bit
/// counts as git counts it).
fn matches(on_disk: &Option<Entry>, want: &Option<Entry>) -> bool {
    match (on_disk, want) {
        (None, None) => true,
        (Some(d), Some(w)) => d.oid == w.oid && d.mode == w.mode,
        _ => false,
    }
}

/// The nearest folder above `rel` that exists, checked to be a real folder all the way up
/// from `top` (never a path through a symbolic link, which could lead out of the checkout).
fn nearest_dir(top: &Path, rel: &RepoPath) -> std::result::Result<PathBuf, TxError> {
    let mut dir = top.to_path_buf();
    let parts: Vec<&std::ffi::OsStr> = rel.as_path().iter().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        let next = dir.join(part);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(TxError::Unsupported(format!(
                    "{rel} is beyond a symbolic link in the checkout ({})",
                    next.display()
                )));
            }
            Ok(m) if m.is_dir() => dir = next,
            // Missing, or a file that this change replaces by a folder.
            _ => break,
        }
    }
    Ok(dir)
}

/// Applies the change from tree `before` to tree `after` to the checkout at `top`,
/// `label` naming it in messages.
pub fn apply(
    top: &Git,
    journal: &Path,
    before: &str,
    after: &str,
    label: &str,
) -> std::result::Result<Vec<Change>, TxError> {
    let changes = changes(top, before, after).map_err(TxError::Failed)?;
    apply_changes(top, journal, changes, label, None)
}

/// [`apply`] of changes already listed ([`changes`]); `owed`: what the landing is owed once
/// its files are in place, kept with it ([`super::owed`]).
pub fn apply_changes(
    top: &Git,
    journal: &Path,
    changes: Vec<Change>,
    label: &str,
    owed: Option<Owed>,
) -> std::result::Result<Vec<Change>, TxError> {
    if changes.is_empty() {
        return Ok(changes);
    }
    if let Some(c) = changes.iter().find(|c| {
        c.before.as_ref().is_some_and(|e| e.mode == GITLINK)
            || c.after.as_ref().is_some_and(|e| e.mode == GITLINK)
    }) {
        return Err(TxError::Unsupported(format!(
            "{} is a submodule: prdloop does not change submodules",
            c.path
        )));
    }
    let root = top.dir.clone();
    // 1. The checkout is as `before` says.
    let mut seen_at = Vec::with_capacity(changes.len());
    for c in &changes {
        let abs = root.join(c.path.as_path());
        let on_disk = hash_file(top, &c.path, &abs).map_err(TxError::Failed)?;
        if !matches(&on_disk, &c.before) {
            return Err(TxError::Changed(c.path.lossy()));
        }
        seen_at.push(seen(&abs));
    }
    // 2. Staged beside their targets, after a journal names them.
    let mut ops = Vec::with_capacity(changes.len());
    for (i, c) in changes.iter().enumerate() {
        // A deleted file is moved aside to the top (its folder may have to go, or become a
        // file); a new one is staged in the nearest folder that exists.
        let dir = match c.after {
            None => root.clone(),
            Some(_) => nearest_dir(&root, &c.path)?,
        };
        let temp = dir.join(format!(".prdloop-landing-{}-{i}", std::process::id()));
        ops.push(Op {
            change: c.clone(),
            temp,
        });
    }
    let mut j = Journal {
        phase: Phase::Staging,
        top: root.clone(),
        label: label.to_string(),
        ops,
        stage: Some(root.join(format!(".prdloop-landing-{}-stage", std::process::id()))),
        owed,
    };
    save(journal, &j).map_err(TxError::Failed)?;
    let staged = stage(top, &j, journal);
    let cancel = |j: &Journal| {
        remove_temporaries(j);
        let _ = std::fs::remove_file(journal);
    };
    if let Err(e) = staged {
        cancel(&j);
        return Err(e);
    }
    // Nothing changed since step 1 (the staging may have taken a while).
    for (c, before) in changes.iter().zip(&seen_at) {
        if seen(&root.join(c.path.as_path())) != *before {
            cancel(&j);
            return Err(TxError::Changed(c.path.lossy()));
        }
    }
    // 3. Committed.
    j.phase = Phase::Committed;
    if let Err(e) = save(journal, &j) {
        cancel(&j);
        return Err(TxError::Failed(e));
    }
    // 4. Into place.
    match swap_all(top, &j) {
        Ok(()) => {}
        Err(SwapError::Changed(path, done)) => {
            // A write came in during the swap: everything swapped goes back.
            let back = unswap(&j, done);
            remove_temporaries(&j);
            if let Err(e) = back {
                return Err(TxError::Partial(e, journal.to_path_buf()));
            }
            let _ = std::fs::remove_file(journal);
            return Err(TxError::Changed(path));
        }
        Err(SwapError::Io(e)) => {
            // Committed: `recover` finishes it from the journal.
            return match recover_journal(top, journal, &j) {
                Ok(_) => Ok(changes),
                Err(_) => Err(TxError::Partial(e, journal.to_path_buf())),
            };
        }
    }
    finish(&j, journal).map_err(|e| TxError::Partial(e, journal.to_path_buf()))?;
    Ok(changes)
}

enum SwapError {
    /// This path changed during the swap; the first `usize` ops were swapped.
    Changed(String, usize),
    Io(anyhow::Error),
}

/// Every op into place, in order: deletions first (renamed aside to their temp name), then
/// new and changed files.
fn swap_all(top: &Git, j: &Journal) -> std::result::Result<(), SwapError> {
    let order = order(&j.ops);
    for (n, &i) in order.iter().enumerate() {
        if n == order.len() / 2 {
            pause_for_tests();
        }
        let op = &j.ops[i];
        let target = j.top.join(op.change.path.as_path());
        match &op.change.after {
            None => {
                std::fs::rename(&target, &op.temp)
                    .with_context(|| format!("could not remove {}", target.display()))
                    .map_err(SwapError::Io)?;
                remove_empty_parents(&j.top, &target);
            }
            Some(_) => {
                if let Some(parent) = target.parent() {
                    prepare_parent(&j.top, parent).map_err(SwapError::Io)?;
                }
                let replaced = op.change.before.is_some();
                if replaced {
                    exchange(&op.temp, &target)
                        .with_context(|| format!("could not replace {}", target.display()))
                        .map_err(SwapError::Io)?;
                    // The old file is at the temp name now: still as it was checked?
                    let old = hash_file(top, &op.change.path, &op.temp).map_err(SwapError::Io)?;
                    if !matches(&old, &op.change.before) {
                        return Err(SwapError::Changed(op.change.path.lossy(), n + 1));
                    }
                } else {
                    rename_new(&op.temp, &target)
                        .map_err(|_| SwapError::Changed(op.change.path.lossy(), n))?;
                }
            }
        }
    }
    Ok(())
}

/// Test seam, in builds with the `test-agent` feature only (prdloop's own tests): with
/// `PRDLOOP_TEST_LANDING_PAUSE` set to a path, a landing halfway through putting its files
/// in place creates that file and waits there for good, for a test to `kill -9` it there.
#[cfg(feature = "test-agent")]
fn pause_for_tests() {
    if let Some(marker) = std::env::var_os("PRDLOOP_TEST_LANDING_PAUSE") {
        let _ = std::fs::write(marker, b"");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
}

#[cfg(not(feature = "test-agent"))]
fn pause_for_tests() {}

/// Deletions, then the rest (a file that becomes a folder, or the reverse, needs the old one
/// gone first).
fn order(ops: &[Op]) -> Vec<usize> {
    let mut v: Vec<usize> = (0..ops.len()).collect();
    v.sort_by_key(|&i| ops[i].change.after.is_some());
    v
}

/// Puts back the first `done` ops of [`order`].
fn unswap(j: &Journal, done: usize) -> Result<()> {
    let order = order(&j.ops);
    for &i in order[..done].iter().rev() {
        let op = &j.ops[i];
        let target = j.top.join(op.change.path.as_path());
        match (&op.change.before, &op.change.after) {
            (Some(_), None) => {
                if let Some(parent) = target.parent() {
                    prepare_parent(&j.top, parent)?;
                }
                std::fs::rename(&op.temp, &target)
                    .with_context(|| format!("could not put back {}", target.display()))?;
            }
            (Some(_), Some(_)) => exchange(&op.temp, &target)
                .with_context(|| format!("could not put back {}", target.display()))?,
            (None, _) => {
                std::fs::remove_file(&target)
                    .with_context(|| format!("could not remove {}", target.display()))?;
                remove_empty_parents(&j.top, &target);
            }
        }
    }
    Ok(())
}

/// The old files and the journal, removed: done, once what the landing is owed is kept (if
/// it cannot be, the journal stays, for the next run to keep it).
fn finish(j: &Journal, journal: &Path) -> Result<()> {
    remove_temporaries(j);
    if let Some(owed) = &j.owed {
        super::owed_book::keep(journal, owed)?;
    }
    let _ = std::fs::remove_file(journal);
    Ok(())
}

/// Every temporary file and folder the journal names, removed.
fn remove_temporaries(j: &Journal) {
    for op in &j.ops {
        let _ = remove_any(&op.temp);
    }
    if let Some(s) = &j.stage {
        let _ = remove_any(s);
    }
}

/// Creates the folders down to `dir`; a file standing where a folder must be (the change
/// deleted it already) is an error.
fn prepare_parent(top: &Path, dir: &Path) -> Result<()> {
    if dir.starts_with(top) {
        std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))
    } else {
        Err(anyhow!("{} is outside the checkout", dir.display()))
    }
}

/// Removes the folders a deletion left empty, up to (not including) `top`.
fn remove_empty_parents(top: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == top || !d.starts_with(top) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

fn remove_any(p: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(_) => Ok(()),
    }
}

/// Swaps two names in one step (Linux); elsewhere the old file is moved aside first.
fn exchange(a: &Path, b: &Path) -> Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        if renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE).is_ok() {
            return Ok(());
        }
    }
    let aside = a.with_extension("old");
    std::fs::rename(b, &aside)?;
    std::fs::rename(a, b)?;
    std::fs::rename(&aside, a)?;
    Ok(())
}

/// Moves a new file into place, never over a file that appeared meanwhile.
fn rename_new(from: &Path, to: &Path) -> Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
        match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EEXIST) => {
                return Err(anyhow!("{} appeared meanwhile", to.display()));
            }
            Err(_) => {}
        }
    }
    if std::fs::symlink_metadata(to).is_ok() {
        return Err(anyhow!("{} appeared meanwhile", to.display()));
    }
    std::fs::rename(from, to).with_context(|| format!("could not create {}", to.display()))
}

#[cfg(test)]
mod tests;
