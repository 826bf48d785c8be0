//! Reading a bundle's files as untrusted input: plain files only (no symbolic link, device,
//! FIFO or hard link), opened without following links, each read with a bound on its size;
//! the log folder walked with bounds on its count, depth and total size.

use super::*;

pub(super) const PATCH_HINT: &str = "; --max-bundle-size raises it";

pub(super) fn too_big(path: &Path, len: u64, max: u64, hint: &str) -> Refused {
    refused(
        path,
        None,
        format!("{len} bytes or more, above the limit of {max}{hint}"),
    )
}

/// The size of `path`, which must be a plain file of at most `max` bytes (`hint`: how to
/// raise the bound, for the message).
pub(super) fn plain_size(path: &Path, max: u64, hint: &str) -> Result<u64, Refused> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| refused(path, None, format!("cannot be read: {e}")))?;
    plain_file(path, &meta)?;
    if meta.len() > max {
        return Err(too_big(path, meta.len(), max, hint));
    }
    Ok(meta.len())
}

/// The bytes of `path`, which must be a plain file of at most `max` bytes.
pub(crate) fn read_plain(path: &Path, max: u64, hint: &str) -> Result<Vec<u8>, Refused> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| refused(path, None, format!("cannot be read: {e}")))?;
    plain_file(path, &meta)?;
    let too_big = |len: u64| too_big(path, len, max, hint);
    if meta.len() > max {
        return Err(too_big(meta.len()));
    }
    let file =
        open_no_follow(path).map_err(|e| refused(path, None, format!("cannot be read: {e}")))?;
    // What was opened is what was looked at (not a link or FIFO swapped in between).
    let opened = file
        .metadata()
        .map_err(|e| refused(path, None, format!("cannot be read: {e}")))?;
    plain_file(path, &opened)?;
    if !same_file(&meta, &opened) {
        return Err(refused(path, None, "changed while it was read"));
    }
    let mut bytes = Vec::with_capacity(opened.len().min(max) as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refused(path, None, format!("cannot be read: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

pub(super) fn plain_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), Refused> {
    let ty = meta.file_type();
    if !ty.is_file() {
        return Err(refused(
            path,
            None,
            format!("{}, not a plain file", kind(&ty)),
        ));
    }
    // A second name of a file elsewhere (a bundle's files are written fresh: one name each).
    let names = link_count(meta);
    if names > 1 {
        return Err(refused(
            path,
            None,
            format!("a hard link (one of {names} names of a file), not a plain file"),
        ));
    }
    Ok(())
}

#[cfg(unix)]
pub(super) fn link_count(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.nlink()
}

#[cfg(not(unix))]
pub(super) fn link_count(_: &std::fs::Metadata) -> u64 {
    1
}

pub(super) fn kind(ty: &std::fs::FileType) -> &'static str {
    if ty.is_symlink() {
        "a symbolic link"
    } else if ty.is_dir() {
        "a folder"
    } else {
        "a device, FIFO or socket"
    }
}

pub(super) use crate::fsutil::open_no_follow;

#[cfg(unix)]
pub(super) fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
pub(super) fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.len() == b.len()
}

/// The files under `root` (`logs/`): plain files and folders only, at most
/// [`LOG_FILES_MAX`] files, [`LOG_DEPTH_MAX`] deep and `limits.size` bytes together. No
/// `logs/` at all is no logs.
pub(super) fn walk_logs(root: &Path, limits: &Limits) -> Result<Vec<LogFile>, Refused> {
    let meta = match std::fs::symlink_metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(refused(root, None, format!("cannot be read: {e}"))),
    };
    if !meta.file_type().is_dir() {
        return Err(refused(
            root,
            None,
            format!("{}, not a plain folder", kind(&meta.file_type())),
        ));
    }
    let mut files = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = stack.pop() {
        let dir = root.join(&rel);
        let rd = std::fs::read_dir(&dir)
            .map_err(|e| refused(&dir, None, format!("cannot be read: {e}")))?;
        for e in rd {
            let e = e.map_err(|e| refused(&dir, None, format!("cannot be read: {e}")))?;
            let path = e.path();
            let rel = rel.join(e.file_name());
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| refused(&path, None, format!("cannot be read: {e}")))?;
            let ty = meta.file_type();
            if ty.is_dir() {
                if depth + 1 > LOG_DEPTH_MAX {
                    return Err(refused(
                        &path,
                        None,
                        format!("folders deeper than {LOG_DEPTH_MAX} under {LOGS}/"),
                    ));
                }
                stack.push((rel, depth + 1));
            } else if ty.is_file() {
                plain_file(&path, &meta)?;
                total = total.saturating_add(meta.len());
                if total > limits.size {
                    return Err(refused(
                        root,
                        None,
                        format!(
                            "{total} bytes or more, above the limit of {}; --max-bundle-size raises it",
                            limits.size
                        ),
                    ));
                }
                files.push(LogFile {
                    rel,
                    len: meta.len(),
                });
                if files.len() > LOG_FILES_MAX {
                    return Err(refused(
                        root,
                        None,
                        format!("more than {LOG_FILES_MAX} files"),
                    ));
                }
            } else {
                return Err(refused(
                    &path,
                    None,
                    format!("{}, not a plain file", kind(&ty)),
                ));
            }
        }
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(files)
}
