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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};

use super::git::Git;

/// A mode and object as git's trees hold them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub mode: u32,
    pub oid: String,
}

const SYMLINK: u32 = 0o120000;
const GITLINK: u32 = 0o160000;
const EXECUTABLE: u32 = 0o100755;

impl Entry {
    fn is_link(&self) -> bool {
        self.mode == SYMLINK
    }
}

/// One path the change touches.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    pub path: String,
    pub before: Option<Entry>,
    pub after: Option<Entry>,
}

/// The paths that differ between two trees, with both sides' entries.
pub fn changes(repo: &Git, before: &str, after: &str) -> Result<Vec<Change>> {
    let (out, _) = repo
        .cmd()
        .args(&["diff-tree", "-r", "-z", "--no-renames", before, after])
        .output()?;
    let mut v = Vec::new();
    let mut parts = out.split(|b| *b == 0);
    while let Some(meta) = parts.next() {
        if meta.is_empty() {
            continue;
        }
        let Some(path) = parts.next() else { break };
        let meta = String::from_utf8_lossy(meta);
        let f: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if f.len() < 5 {
            continue;
        }
        let entry = |mode: &str, oid: &str| -> Option<Entry> {
            let mode = u32::from_str_radix(mode, 8).ok()?;
            (mode != 0).then(|| Entry {
                mode,
                oid: oid.to_string(),
            })
        };
        v.push(Change {
            path: String::from_utf8_lossy(path).into_owned(),
            before: entry(f[0], f[2]),
            after: entry(f[1], f[3]),
        });
    }
    Ok(v)
}

/// The entries of `paths` in commit or tree `rev` (a path it does not hold is absent).
pub fn entries(repo: &Git, rev: &str, paths: &[String]) -> Result<BTreeMap<String, Entry>> {
    let mut map = BTreeMap::new();
    if paths.is_empty() {
        return Ok(map);
    }
    let literal: Vec<String> = paths.iter().map(|p| format!(":(literal){p}")).collect();
    let (out, _) = repo
        .cmd()
        .args(&["ls-tree", "-r", "-z", "--full-tree", rev, "--"])
        .args(&literal)
        .output()?;
    for rec in out.split(|b| *b == 0) {
        let rec = String::from_utf8_lossy(rec);
        let Some((meta, path)) = rec.split_once('\t') else {
            continue;
        };
        let f: Vec<&str> = meta.split(' ').collect();
        if let (Some(mode), Some(oid)) = (f.first(), f.get(2))
            && let Ok(mode) = u32::from_str_radix(mode, 8)
        {
            map.insert(
                path.to_string(),
                Entry {
                    mode,
                    oid: oid.to_string(),
                },
            );
        }
    }
    Ok(map)
}

/// `git update-index -z --index-info`'s record setting `path` to `entry` (removing it when
/// there is none).
pub fn index_info(path: &str, entry: Option<&Entry>) -> String {
    match entry {
        Some(e) => format!("{:o} {}\t{path}\0", e.mode, e.oid),
        None => format!("0 {}\t{path}\0", "0".repeat(40)),
    }
}

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
fn hash_file(top: &Git, rel: &str, abs: &Path) -> Result<Option<Entry>> {
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
    let path_arg = format!("--path={rel}");
    let oid = top
        .cmd()
        .args(&["hash-object", &path_arg, "--"])
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
fn nearest_dir(top: &Path, rel: &str) -> std::result::Result<PathBuf, TxError> {
    let mut dir = top.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
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
    apply_changes(top, journal, changes, label)
}

/// [`apply`] of changes already listed ([`changes`]).
pub fn apply_changes(
    top: &Git,
    journal: &Path,
    changes: Vec<Change>,
    label: &str,
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
        let abs = root.join(&c.path);
        let on_disk = hash_file(top, &c.path, &abs).map_err(TxError::Failed)?;
        if !matches(&on_disk, &c.before) {
            return Err(TxError::Changed(c.path.clone()));
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
    };
    save(journal, &j).map_err(TxError::Failed)?;
    let staged = stage(top, &j.ops);
    let cancel = |j: &Journal| {
        for op in &j.ops {
            let _ = remove_any(&op.temp);
        }
        let _ = std::fs::remove_file(journal);
    };
    if let Err(e) = staged {
        cancel(&j);
        return Err(e);
    }
    // Nothing changed since step 1 (the staging may have taken a while).
    for (c, before) in changes.iter().zip(&seen_at) {
        if seen(&root.join(&c.path)) != *before {
            cancel(&j);
            return Err(TxError::Changed(c.path.clone()));
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
            for op in &j.ops {
                let _ = remove_any(&op.temp);
            }
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
    finish(&j, journal);
    Ok(changes)
}

/// Writes each new file's content beside its target.
fn stage(top: &Git, ops: &[Op]) -> std::result::Result<(), TxError> {
    for op in ops {
        let Some(after) = &op.change.after else {
            continue;
        };
        write_blob(top, &op.change.path, after, &op.temp).map_err(TxError::Failed)?;
    }
    Ok(())
}

/// Streams a blob, as the checkout would have it, into a new file at `temp`.
fn write_blob(top: &Git, rel: &str, e: &Entry, temp: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if e.is_link() {
        use std::os::unix::ffi::OsStrExt;
        let (target, _) = top.cmd().args(&["cat-file", "blob", &e.oid]).output()?;
        std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), temp)
            .with_context(|| format!("could not create {}", temp.display()))?;
        return Ok(());
    }
    use std::os::unix::fs::PermissionsExt;
    let exec = e.mode == EXECUTABLE;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if exec { 0o777 } else { 0o666 })
        .open(temp)
        .with_context(|| format!("could not create {}", temp.display()))?;
    // A file replaced keeps its permissions, with the executable bits as the tree says.
    if let Ok(m) = std::fs::metadata(top.dir.join(rel))
        && m.is_file()
    {
        let old = m.permissions().mode() & 0o7777;
        let mode = if exec {
            old | ((old & 0o444) >> 2)
        } else {
            old & !0o111
        };
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("could not set the permissions of {}", temp.display()))?;
    }
    let path_arg = format!("--path={rel}");
    top.cmd()
        .args(&["cat-file", "--filters", &path_arg, &e.oid])
        .to_file(file.try_clone()?)
        .with_context(|| format!("could not write {}", temp.display()))?;
    file.sync_all()
        .with_context(|| format!("could not write {}", temp.display()))?;
    Ok(())
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
        let op = &j.ops[i];
        let target = j.top.join(&op.change.path);
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
                        return Err(SwapError::Changed(op.change.path.clone(), n + 1));
                    }
                } else {
                    rename_new(&op.temp, &target)
                        .map_err(|_| SwapError::Changed(op.change.path.clone(), n))?;
                }
            }
        }
    }
    Ok(())
}

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
        let target = j.top.join(&op.change.path);
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

/// The old files and the journal, removed: done.
fn finish(j: &Journal, journal: &Path) {
    for op in &j.ops {
        let _ = remove_any(&op.temp);
    }
    let _ = std::fs::remove_file(journal);
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

/// Finishes or rolls back a landing a crash interrupted; what was done, for the user.
pub fn recover(journal: &Path) -> Result<Option<String>> {
    let Ok(bytes) = std::fs::read(journal) else {
        return Ok(None);
    };
    let j: Journal = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a landing journal", journal.display()))?;
    let top = Git::new(&j.top);
    recover_journal(&top, journal, &j).map(Some)
}

fn recover_journal(top: &Git, journal: &Path, j: &Journal) -> Result<String> {
    if j.phase == Phase::Staging {
        for op in &j.ops {
            let _ = remove_any(&op.temp);
        }
        std::fs::remove_file(journal)
            .with_context(|| format!("could not remove {}", journal.display()))?;
        return Ok(format!(
            "an interrupted landing of {} was rolled back (it had not begun to change files)",
            j.label
        ));
    }
    let mut skipped = Vec::new();
    for &i in &order(&j.ops) {
        let op = &j.ops[i];
        let target = j.top.join(&op.change.path);
        let temp_holds = hash_file(top, &op.change.path, &op.temp)?;
        let at_target = hash_file(top, &op.change.path, &target)?;
        match &op.change.after {
            None => {
                if matches(&at_target, &op.change.before) {
                    std::fs::rename(&target, &op.temp)
                        .with_context(|| format!("could not remove {}", target.display()))?;
                    remove_empty_parents(&j.top, &target);
                } else if at_target.is_some() {
                    skipped.push(op.change.path.clone());
                }
            }
            Some(_) => {
                if matches(&at_target, &op.change.after) {
                    continue;
                }
                if !matches(&temp_holds, &op.change.after) {
                    skipped.push(op.change.path.clone());
                    continue;
                }
                if let Some(parent) = target.parent() {
                    prepare_parent(&j.top, parent)?;
                }
                if matches(&at_target, &op.change.before) && at_target.is_some() {
                    exchange(&op.temp, &target)?;
                } else if at_target.is_none() {
                    rename_new(&op.temp, &target)?;
                } else {
                    skipped.push(op.change.path.clone());
                }
            }
        }
    }
    finish(j, journal);
    let mut msg = format!(
        "an interrupted landing of {} was finished ({} file(s))",
        j.label,
        j.ops.len()
    );
    if !skipped.is_empty() {
        msg.push_str(&format!(
            "; left alone because they changed since: {}",
            skipped.join(", ")
        ));
    }
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletions_come_first() {
        let op = |path: &str, after: bool| Op {
            change: Change {
                path: path.into(),
                before: Some(Entry {
                    mode: 0o100644,
                    oid: "a".into(),
                }),
                after: after.then(|| Entry {
                    mode: 0o100644,
                    oid: "b".into(),
                }),
            },
            temp: PathBuf::new(),
        };
        let ops = vec![op("p/x", true), op("p", false), op("q", true)];
        assert_eq!(order(&ops), vec![1, 0, 2]);
    }

    #[test]
    fn an_executable_bit_counts() {
        let e = |mode| {
            Some(Entry {
                mode,
                oid: "x".into(),
            })
        };
        assert!(matches(&e(0o100644), &e(0o100644)));
        assert!(!matches(&e(0o100644), &e(EXECUTABLE)));
        assert!(!matches(&None, &e(0o100644)));
        assert!(matches(&None, &None));
    }

    /// A repository with files, its tree now, and a tree with `a` changed, `b` deleted,
    /// `c/d` added, `e` made executable.
    fn fixture() -> (tempfile::TempDir, Git, String, String) {
        let dir = tempfile::tempdir().unwrap();
        let g = Git::new(dir.path());
        g.cmd().args(&["init", "-q"]).run().unwrap();
        std::fs::write(dir.path().join("a"), "a1\n").unwrap();
        std::fs::write(dir.path().join("b"), "b\n").unwrap();
        std::fs::write(dir.path().join("e"), "#!/bin/sh\n").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let before = g.snapshot_tree(&[], scratch.path()).unwrap();
        let index = scratch.path().join("i");
        g.cmd()
            .args(&["read-tree", &before])
            .index(&index)
            .run()
            .unwrap();
        let blob = |text: &str| {
            g.cmd()
                .args(&["hash-object", "-w", "--stdin"])
                .input(text.as_bytes())
                .text()
                .unwrap()
        };
        let (a2, d, e) = (blob("a2\n"), blob("d\n"), blob("#!/bin/sh\n"));
        let info = format!(
            "100644 {a2}\ta\n0 {}\tb\n100644 {d}\tc/d\n100755 {e}\te\n",
            "0".repeat(40)
        );
        g.cmd()
            .args(&["update-index", "--index-info"])
            .input(info.as_bytes())
            .index(&index)
            .run()
            .unwrap();
        let after = g.cmd().arg("write-tree").index(&index).text().unwrap();
        (dir, g, before, after)
    }

    fn assert_after(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "a2\n");
        assert!(!dir.join("b").exists());
        assert_eq!(std::fs::read_to_string(dir.join("c/d")).unwrap(), "d\n");
        let mode = std::fs::metadata(dir.join("e"))
            .unwrap()
            .permissions()
            .mode();
        assert!(mode & 0o100 != 0, "{mode:o}");
        assert_no_temporary_files(dir);
    }

    /// No `.prdloop-landing-*` file is left at the top of the checkout.
    fn assert_no_temporary_files(dir: &Path) {
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".prdloop-landing")
            })
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_change_applies_whole() {
        let (dir, g, before, after) = fixture();
        let journal = dir.path().join(".git/prdloop/landing.json");
        let done = apply(&g, &journal, &before, &after, "test").unwrap();
        assert_eq!(done.len(), 4);
        assert_after(dir.path());
        assert!(!journal.exists());
    }

    #[test]
    fn a_checkout_that_changed_is_not_touched() {
        let (dir, g, before, after) = fixture();
        std::fs::write(dir.path().join("a"), "the user's\n").unwrap();
        let journal = dir.path().join(".git/prdloop/landing.json");
        let r = apply(&g, &journal, &before, &after, "test");
        assert!(
            matches!(r, Err(TxError::Changed(ref p)) if p == "a"),
            "{r:?}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a")).unwrap(),
            "the user's\n"
        );
        assert!(dir.path().join("b").exists());
        assert!(!journal.exists());
    }

    /// The journal and temporary files as a crash at `phase`, after `swapped` ops, leaves
    /// them.
    fn crash(
        dir: &Path,
        g: &Git,
        before: &str,
        after: &str,
        phase: Phase,
        swapped: usize,
    ) -> PathBuf {
        let journal = dir.join(".git/prdloop/landing.json");
        let changes = changes(g, before, after).unwrap();
        let ops = changes
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let d = if c.after.is_none() {
                    dir.to_path_buf()
                } else {
                    nearest_dir(dir, &c.path).unwrap()
                };
                Op {
                    change: c,
                    temp: d.join(format!(".prdloop-landing-9-{i}")),
                }
            })
            .collect();
        let mut j = Journal {
            phase: Phase::Staging,
            top: dir.to_path_buf(),
            label: "ISC-1".into(),
            ops,
        };
        save(&journal, &j).unwrap();
        stage(g, &j.ops).map_err(|e| e.to_string()).unwrap();
        if phase == Phase::Committed {
            j.phase = Phase::Committed;
            save(&journal, &j).unwrap();
            for &i in order(&j.ops).iter().take(swapped) {
                let op = &j.ops[i];
                let target = dir.join(&op.change.path);
                match op.change.after {
                    None => std::fs::rename(&target, &op.temp).unwrap(),
                    Some(_) if op.change.before.is_some() => exchange(&op.temp, &target).unwrap(),
                    Some(_) => {
                        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                        rename_new(&op.temp, &target).unwrap()
                    }
                }
            }
        }
        journal
    }

    #[test]
    fn a_crash_after_the_commit_is_finished_by_recovery() {
        for swapped in 0..=4 {
            let (dir, g, before, after) = fixture();
            let journal = crash(dir.path(), &g, &before, &after, Phase::Committed, swapped);
            let msg = recover(&journal).unwrap().unwrap();
            assert!(msg.contains("was finished"), "{msg}");
            assert_after(dir.path());
            assert!(!journal.exists());
        }
    }

    #[test]
    fn a_crash_while_staging_is_rolled_back_by_recovery() {
        let (dir, g, before, after) = fixture();
        let journal = crash(dir.path(), &g, &before, &after, Phase::Staging, 0);
        let msg = recover(&journal).unwrap().unwrap();
        assert!(msg.contains("rolled back"), "{msg}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a")).unwrap(),
            "a1\n"
        );
        assert!(dir.path().join("b").exists() && !dir.path().join("c").exists());
        assert_no_temporary_files(dir.path());
    }
}
