//! Atomic file writes: a temp file in the same folder, fsync, rename (or, on Linux, an atomic
//! exchange that hands back the file it replaced); permissions kept, symlinks followed.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Replaces `path` with `bytes` atomically. An existing file's permissions are kept.
/// A reader sees either the old or the new content, never a half-written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    Staged::new(path, bytes)?.persist()
}

/// New content written to a temporary file beside its target (fsynced, the target's
/// permissions copied), ready to take the target's place.
pub struct Staged {
    tmp: tempfile::NamedTempFile,
    /// The file replaced: a symlink's target, not the link.
    target: PathBuf,
    dir: PathBuf,
}

impl Staged {
    pub fn new(path: &Path, bytes: &[u8]) -> Result<Staged> {
        // Through a symlink, replace the file it points to, not the link.
        let target = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path)
                .with_context(|| format!("failed to follow the symlink `{}`", path.display()))?,
            _ => path.to_path_buf(),
        };
        let (mut tmp, dir) = temp_beside(&target)?;
        tmp.write_all(bytes)
            .and_then(|_| tmp.as_file().sync_all())
            .with_context(|| {
                format!(
                    "failed to write a temporary file for `{}`",
                    target.display()
                )
            })?;
        if let Ok(meta) = std::fs::metadata(&target) {
            std::fs::set_permissions(tmp.path(), meta.permissions()).with_context(|| {
                format!("failed to copy the permissions of `{}`", target.display())
            })?;
        }
        Ok(Staged { tmp, target, dir })
    }

    /// Renames the new file over the target.
    pub fn persist(self) -> Result<()> {
        self.rename(false)
    }

    /// Renames the new file into place only when the target does not exist (a file that
    /// appeared meanwhile is never replaced: the error says it exists).
    pub fn persist_new(self) -> Result<()> {
        self.rename(true)
    }

    fn rename(self, only_new: bool) -> Result<()> {
        let Staged { tmp, target, dir } = self;
        let done = if only_new {
            tmp.persist_noclobber(&target)
        } else {
            tmp.persist(&target)
        };
        done.map_err(|e| e.error).with_context(|| {
            let verb = if only_new { "create" } else { "replace" };
            format!("failed to {verb} `{}`", target.display())
        })?;
        sync_dir(&dir);
        Ok(())
    }

    /// Swaps the new file and the target in one step (Linux `renameat2(RENAME_EXCHANGE)`) and
    /// hands back the file that was replaced: open, its name removed, so that what anyone wrote
    /// into it up to the swap (or, holding it open, after) can still be read (`None` when it
    /// could not be opened). `Err(self)` when the platform or the file system cannot exchange,
    /// or the target is gone: rename instead.
    pub fn exchange(self) -> std::result::Result<Option<std::fs::File>, Staged> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
            if renameat2(
                AT_FDCWD,
                self.tmp.path(),
                AT_FDCWD,
                &self.target,
                RenameFlags::RENAME_EXCHANGE,
            )
            .is_err()
            {
                return Err(self);
            }
            let Staged { tmp, dir, .. } = self;
            // The temporary name holds the replaced file now: open it, then remove the name
            // (closing the `NamedTempFile` does).
            let old = std::fs::File::open(tmp.path()).ok();
            drop(tmp);
            sync_dir(&dir);
            Ok(old)
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        Err(self)
    }
}

/// A temporary file beside `target` (`.NAME.XXXX.tmp` in its folder, so that a rename over it
/// stays on one file system), and that folder.
fn temp_beside(target: &Path) -> Result<(tempfile::NamedTempFile, PathBuf)> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .with_context(|| format!("failed to create a temporary file in `{}`", dir.display()))?;
    Ok((tmp, dir))
}

/// Replaces `path` with `bytes` atomically (a reader sees the old or the new content), but
/// not durably: nothing is synced, so after a crash the file may hold either, or be empty.
/// For files that only show what is going on now (display), at a fraction of the cost.
pub fn write_replace_unsynced(path: &Path, bytes: &[u8]) -> Result<()> {
    let (mut tmp, _) = temp_beside(path)?;
    tmp.write_all(bytes)
        .with_context(|| format!("failed to write a temporary file for `{}`", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("failed to replace `{}`", path.display()))?;
    Ok(())
}

/// Opens a file to read without following a link in its last component, and without
/// blocking on a FIFO (a file a worker could have replaced).
#[cfg(unix)]
pub fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
}

/// A file's bytes, when it is a regular file (not a FIFO, which would block the read for
/// ever, or a device) no larger than `at_most`, its last component not a link: for files
/// found where a worker may have planted something else.
pub fn read_regular(path: &Path, at_most: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = open_no_follow(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > at_most {
        return Err(std::io::Error::other(format!(
            "larger than {at_most} bytes"
        )));
    }
    let mut bytes = Vec::new();
    file.take(at_most).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(not(unix))]
pub fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// Makes a rename in `dir` durable.
fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Bytes a folder's files take, without following symbolic links; what cannot be read counts
/// as nothing.
pub fn disk_usage(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| disk_usage(&e.path())).sum())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persist_new_never_replaces_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new.md");
        Staged::new(&p, b"first").unwrap().persist_new().unwrap();
        let e = Staged::new(&p, b"second")
            .unwrap()
            .persist_new()
            .unwrap_err();
        assert!(format!("{e:#}").contains("failed to create"), "{e:#}");
        assert_eq!(std::fs::read(&p).unwrap(), b"first");
        // No temporary file is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn keeps_permissions_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.md");
        std::fs::write(&p, "old").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o640);
        }
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1);
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn exchange_hands_back_the_replaced_file() {
        use std::io::{Read, Write};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.md");
        std::fs::write(&p, "old").unwrap();
        let mut appender = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        let Ok(Some(mut old)) = Staged::new(&p, b"new").unwrap().exchange() else {
            panic!("no exchange on Linux");
        };
        // A write through a handle opened before the swap lands in the replaced file.
        appender.write_all(b" and late").unwrap();
        let mut was = String::new();
        old.read_to_string(&mut was).unwrap();
        assert_eq!(was, "old and late");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1);
    }

    #[cfg(unix)]
    #[test]
    fn writes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.md");
        let link = dir.path().join("link.md");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }
}
