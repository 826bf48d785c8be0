//! Files the runner writes into a folder a worker can change (its lane), resolved beneath
//! that folder without following any link: the folder is opened once (itself not a link),
//! and every path under it is walked one component at a time from that descriptor, each
//! with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` on Linux (`openat(O_NOFOLLOW)`
//! elsewhere). A link a worker planted anywhere on the way is an error, never a way out of
//! the lane; one in the place of the file written is replaced, not written through.
//!
//! nix (already prdloop's way to the kernel: signals, locks, terminals) has `openat2` and the
//! other `*at` calls, so this needs no crate of its own and no `unsafe` here.

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};

/// A folder opened for the runner's own writes.
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    /// Its path, for messages.
    shown: PathBuf,
}

/// Which file a folder is: its device and inode, and its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ident {
    pub dev: u64,
    pub ino: u64,
    pub uid: u32,
}

impl Ident {
    // `st_dev` and `st_ino` are not `u64` on every Unix.
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &FileStat) -> Ident {
        Ident {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            uid: st.st_uid,
        }
    }
}

impl Folder {
    /// Opens the folder at `path`; a symbolic link there is refused (`ELOOP`), so is
    /// anything that is not a folder.
    pub fn open(path: &Path) -> std::io::Result<Folder> {
        let fd = nix::fcntl::open(path, dir_flags(), Mode::empty())?;
        Ok(Folder {
            fd,
            shown: path.to_path_buf(),
        })
    }

    /// Which folder it is (from the open descriptor, not its path).
    pub fn ident(&self) -> std::io::Result<Ident> {
        Ok(Ident::of(&nix::sys::stat::fstat(&self.fd)?))
    }

    /// The folder `rel` beneath this one, made (mode 0755) where missing when `create`.
    pub fn dir(&self, rel: &Path, create: bool) -> Result<Folder> {
        let mut cur = self.fd.try_clone()?;
        for name in parts(rel)? {
            cur = match open_one(&cur, name, dir_flags()) {
                Err(Errno::ENOENT) if create => {
                    match nix::sys::stat::mkdirat(&cur, name, Mode::from_bits_truncate(0o755)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(e) => return Err(self.failed("create", rel, e)),
                    }
                    open_one(&cur, name, dir_flags()).map_err(|e| self.failed("open", rel, e))?
                }
                r => r.map_err(|e| self.failed("open", rel, e))?,
            };
        }
        Ok(Folder {
            fd: cur,
            shown: self.shown.join(rel),
        })
    }

    /// Writes `bytes` as the file `rel` beneath this folder, its folders made where missing:
    /// written to a new file beside it, then renamed over it, so whatever stood there (a
    /// link, a folder, a file) is replaced and never written through.
    pub fn write(&self, rel: &Path, bytes: &[u8]) -> Result<()> {
        self.put(rel, bytes, 0o644, true)
    }

    /// A copy of the file `from` as `rel` beneath this folder, as [`Folder::write`] makes
    /// one (its permission bits kept; a link copied as the same link, not followed), not
    /// synced: for a tree that is thrown away or made anew.
    pub fn copy_in(&self, rel: &Path, from: &Path) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(from)
            .with_context(|| format!("could not read {}", from.display()))?;
        if meta.file_type().is_symlink() {
            let to = std::fs::read_link(from)
                .with_context(|| format!("could not read the link {}", from.display()))?;
            let (parent, name) = self.parent_of(rel)?;
            parent.clear(name)?;
            return nix::unistd::symlinkat(to.as_path(), &parent.fd, name)
                .map_err(|e| self.failed("link", rel, e));
        }
        if !meta.is_file() {
            bail!("{} is not a file", from.display());
        }
        let bytes =
            std::fs::read(from).with_context(|| format!("could not read {}", from.display()))?;
        self.put(rel, &bytes, meta.permissions().mode() & 0o777, false)
    }

    /// The folder `rel` is in (made where missing), and its last name.
    fn parent_of<'a>(&self, rel: &'a Path) -> Result<(Folder, &'a OsStr)> {
        let names = parts(rel)?;
        let Some((name, up)) = names.split_last() else {
            bail!("no file name in `{}`", rel.display());
        };
        Ok((self.dir(&up.iter().collect::<PathBuf>(), true)?, name))
    }

    /// Removes what stands as `name` in this folder (a folder with all it holds, a file, a
    /// link: not followed), if anything does.
    fn clear(&self, name: &OsStr) -> Result<()> {
        match nix::sys::stat::fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {
                self.remove_folder(name)
            }
            Ok(_) => nix::unistd::unlinkat(&self.fd, name, nix::unistd::UnlinkatFlags::NoRemoveDir)
                .map_err(|e| self.failed("remove", Path::new(name), e)),
            Err(_) => Ok(()),
        }
    }

    /// `bytes` as the file `rel` (mode `mode`): a new file renamed over what stood there.
    fn put(&self, rel: &Path, bytes: &[u8], mode: u32, sync: bool) -> Result<()> {
        let (parent, name) = self.parent_of(rel)?;
        if let Ok(st) = nix::sys::stat::fstatat(&parent.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            && SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
        {
            parent.remove_folder(name)?;
        }
        let tmp = format!(".prdloop-{}.tmp", uuid::Uuid::new_v4().simple());
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        let fd = nix::fcntl::openat(
            &parent.fd,
            tmp.as_str(),
            flags | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o644),
        )
        .map_err(|e| self.failed("create", rel, e))?;
        let mut file = std::fs::File::from(fd);
        let written = file
            .write_all(bytes)
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                file.set_permissions(std::fs::Permissions::from_mode(mode))
            })
            .and_then(|()| if sync { file.sync_all() } else { Ok(()) });
        let renamed = written.map_err(anyhow::Error::from).and_then(|()| {
            nix::fcntl::renameat(&parent.fd, tmp.as_str(), &parent.fd, name)
                .map_err(|e| self.failed("write", rel, e))
        });
        if renamed.is_err() {
            let _ = nix::unistd::unlinkat(
                &parent.fd,
                tmp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        renamed
    }

    /// Removes the folder `name` in this one with all it holds, following no link in it.
    fn remove_folder(&self, name: &OsStr) -> Result<()> {
        // The path through this folder's own descriptor: the folder opened, not a path a
        // worker could have bent since (std's removal does not follow links inside it).
        #[cfg(target_os = "linux")]
        let path = {
            use std::os::fd::AsRawFd;
            PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd())).join(name)
        };
        #[cfg(not(target_os = "linux"))]
        let path = self.shown.join(name);
        std::fs::remove_dir_all(&path)
            .with_context(|| format!("could not remove {}", self.shown.join(name).display()))
    }

    fn failed(&self, what: &str, rel: &Path, e: Errno) -> anyhow::Error {
        let why = match e {
            Errno::ELOOP | Errno::EXDEV | Errno::ENOTDIR => {
                "a symbolic link (or a file) is where a folder should be".to_string()
            }
            e => e.desc().to_string(),
        };
        anyhow::anyhow!(
            "could not {what} {} without following links: {why}",
            self.shown.join(rel).display()
        )
    }
}

/// A folder, not followed if it is a link.
fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

/// The names along `rel`: plain names only (no `..`, no root).
fn parts(rel: &Path) -> Result<Vec<&OsStr>> {
    rel.components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => bail!("`{}` is not a path beneath the folder", rel.display()),
        })
        .collect()
}

/// One name in `dir`, opened with `flags`, never through a link.
#[cfg(target_os = "linux")]
fn open_one(dir: &OwnedFd, name: &OsStr, flags: OFlag) -> nix::Result<OwnedFd> {
    use nix::fcntl::{OpenHow, ResolveFlag};
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    match nix::fcntl::openat2(dir.as_fd(), name, how) {
        // A kernel before 5.6: the same with O_NOFOLLOW, one plain name at a time.
        Err(Errno::ENOSYS) => nix::fcntl::openat(dir.as_fd(), name, flags, Mode::empty()),
        r => r,
    }
}

#[cfg(not(target_os = "linux"))]
fn open_one(dir: &OwnedFd, name: &OsStr, flags: OFlag) -> nix::Result<OwnedFd> {
    nix::fcntl::openat(dir.as_fd(), name, flags, Mode::empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn writes_beneath_make_folders_and_replace_what_stands_there() {
        let d = tempfile::tempdir().unwrap();
        let top = Folder::open(d.path()).unwrap();
        top.write(Path::new("a/b/PRD.md"), b"one").unwrap();
        assert_eq!(std::fs::read(d.path().join("a/b/PRD.md")).unwrap(), b"one");
        top.write(Path::new("a/b/PRD.md"), b"two").unwrap();
        assert_eq!(std::fs::read(d.path().join("a/b/PRD.md")).unwrap(), b"two");
        // A folder where the file goes is replaced by the file.
        std::fs::create_dir_all(d.path().join("x/y")).unwrap();
        top.write(Path::new("x"), b"file").unwrap();
        assert_eq!(std::fs::read(d.path().join("x")).unwrap(), b"file");
        // No temp file is left.
        let left: Vec<_> = std::fs::read_dir(d.path().join("a/b")).unwrap().collect();
        assert_eq!(left.len(), 1);
        assert!(top.write(Path::new("../out"), b"x").is_err());
        assert!(top.write(Path::new("/etc/out"), b"x").is_err());
    }

    /// A link on the way is refused; a link in the file's place is replaced by the file, and
    /// what it pointed to is left as it was.
    #[test]
    fn no_link_is_followed() {
        let d = tempfile::tempdir().unwrap();
        let (lane, user) = (d.path().join("lane"), d.path().join("user"));
        std::fs::create_dir_all(&lane).unwrap();
        std::fs::create_dir_all(user.join("docs")).unwrap();
        std::fs::write(user.join("docs/PRD.md"), "the user's").unwrap();
        symlink(user.join("docs"), lane.join("docs")).unwrap();
        let top = Folder::open(&lane).unwrap();
        let err = top.write(Path::new("docs/PRD.md"), b"copy").unwrap_err();
        assert!(format!("{err:#}").contains("symbolic link"), "{err:#}");
        assert!(top.dir(Path::new("docs"), true).is_err());
        // A relative link that stays inside is refused too.
        std::fs::create_dir(lane.join("real")).unwrap();
        symlink("real", lane.join("inside")).unwrap();
        assert!(top.write(Path::new("inside/f"), b"x").is_err());
        // The file itself a link: the link goes, its target stays.
        symlink(user.join("docs/PRD.md"), lane.join("PRD.md")).unwrap();
        top.write(Path::new("PRD.md"), b"copy").unwrap();
        assert!(!lane.join("PRD.md").is_symlink());
        assert_eq!(std::fs::read(lane.join("PRD.md")).unwrap(), b"copy");
        assert_eq!(
            std::fs::read_to_string(user.join("docs/PRD.md")).unwrap(),
            "the user's"
        );
        // The folder itself a link: not opened.
        let link = d.path().join("link");
        symlink(&user, &link).unwrap();
        assert!(Folder::open(&link).is_err());
    }

    /// A copied file keeps its permission bits, a copied link is the same link (not
    /// followed), and a link on the way in the destination is refused.
    #[test]
    fn a_copy_in_keeps_modes_and_links_and_follows_none() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let (from, to) = (d.path().join("from"), d.path().join("to"));
        std::fs::create_dir_all(from.join("bin")).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        std::fs::write(from.join("bin/tool"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            from.join("bin/tool"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        symlink("tool", from.join("bin/alias")).unwrap();
        let top = Folder::open(&to).unwrap();
        top.copy_in(Path::new("bin/tool"), &from.join("bin/tool"))
            .unwrap();
        top.copy_in(Path::new("bin/alias"), &from.join("bin/alias"))
            .unwrap();
        let mode = std::fs::metadata(to.join("bin/tool"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(
            std::fs::read_link(to.join("bin/alias")).unwrap(),
            Path::new("tool")
        );
        symlink(&from, to.join("out")).unwrap();
        assert!(
            top.copy_in(Path::new("out/x"), &from.join("bin/tool"))
                .is_err()
        );
        assert!(!from.join("x").exists());
    }

    #[test]
    fn a_folder_is_known_by_its_inode() {
        let d = tempfile::tempdir().unwrap();
        let a = Folder::open(d.path()).unwrap().ident().unwrap();
        let again = Folder::open(d.path()).unwrap().ident().unwrap();
        assert_eq!(a, again);
        std::fs::create_dir(d.path().join("b")).unwrap();
        let b = Folder::open(&d.path().join("b")).unwrap().ident().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.uid, nix::unistd::geteuid().as_raw());
    }
}
