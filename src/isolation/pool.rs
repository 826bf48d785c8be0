//! The lanes: one repository of its own per lane, outside the user's tree, borrowing the
//! user's objects read-only (git's alternates); and the clean-up of those a dead run left.
//!
//! A lane is `<root>/lane-N`, a plain folder holding a copy of the checkout and a `.git` of
//! its own: its own refs, config, hooks, stash and index, so nothing a worker does with git
//! reaches the user's repository. The worker owns that `.git` and may wreck it (rewrite it,
//! point it at the user's repository, delete it): prdloop never runs git through it. Its
//! own operations on a lane run with the user's object store and the lane's folder as the
//! working tree (`--git-dir`, `--work-tree`) and an index prdloop keeps outside the lane
//! (`<root>/.index/lane-N`); the lane's `.git` is made anew before every attempt.
//!
//! A lane's top is known by its inode (recorded outside it, `<root>/.index/lane-N.id`):
//! before each operation on it the runner opens it without following a link and compares
//! ([`Pool::lane`]). One that is not the folder prdloop made (a link a worker put in its
//! place, say to the user's checkout) is never entered: it is thrown away (the link removed,
//! not its target) and made anew. The files the runner writes into a lane go through
//! [`super::beneath`], which follows no link.
//!
//! Each run's lanes are registered in the user's git folder (`prdloop/lanes/<session>.json`,
//! with the runner's pid), so that a later run or `prdloop clean` finds those a dead run
//! left, keeps what was in them under a ref, and removes them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::beneath::{Folder, Ident};
use super::git::Git;
use super::warning::Warning;

/// A lane's top that is not the folder prdloop made: never entered.
#[derive(Debug, thiserror::Error)]
#[error("lane {lane}'s folder {} is not the one prdloop made ({why})", .path.display())]
pub struct NotOurs {
    pub lane: usize,
    pub path: PathBuf,
    pub why: String,
}

#[derive(Debug)]
pub struct Pool {
    root: PathBuf,
    session: String,
    /// The user's repository's common git folder (objects, refs).
    common: PathBuf,
}

/// A run's entry in the repository's registry of lanes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Listed {
    /// The folder holding the run's lanes.
    pub root: PathBuf,
    pub session: String,
    pub pid: u32,
}

impl Listed {
    pub fn alive(&self) -> bool {
        crate::platform::is_alive(self.pid)
    }

    /// The lanes on disk, sorted.
    pub fn lanes(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("lane-"))
            .map(|e| e.path())
            // A link in a lane's place is not followed.
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
            .collect();
        v.sort();
        v
    }
}

fn registry(common: &Path) -> PathBuf {
    common.join("prdloop").join("lanes")
}

impl Pool {
    pub fn new(root: PathBuf, session: &str, common: &Path) -> Pool {
        Pool {
            root,
            session: session.to_string(),
            common: common.to_path_buf(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A lane's top folder (everything its worker may write).
    pub fn path(&self, lane: usize) -> PathBuf {
        self.root.join(format!("lane-{}", lane + 1))
    }

    /// prdloop's own index for a lane (outside it: the worker cannot touch it).
    fn index(&self, lane: usize) -> PathBuf {
        self.root.join(".index").join(format!("lane-{}", lane + 1))
    }

    /// The commit a lane was last reset to, as prdloop recorded it (outside the lane).
    fn began_file(&self, lane: usize) -> PathBuf {
        self.root
            .join(".index")
            .join(format!("lane-{}.base", lane + 1))
    }

    /// Which folder prdloop made as the lane's top (outside the lane).
    fn ident_file(&self, lane: usize) -> PathBuf {
        self.root
            .join(".index")
            .join(format!("lane-{}.id", lane + 1))
    }

    /// The lane's top, opened without following a link, when it is the folder prdloop
    /// made: the same inode, owned by this user.
    pub fn lane(&self, lane: usize) -> std::result::Result<Folder, NotOurs> {
        let path = self.path(lane);
        let not_ours = |why: String| NotOurs {
            lane: lane + 1,
            path: path.clone(),
            why,
        };
        if let Ok(m) = std::fs::symlink_metadata(&path)
            && m.file_type().is_symlink()
        {
            let to = std::fs::read_link(&path).unwrap_or_default();
            return Err(not_ours(format!("a symbolic link to {}", to.display())));
        }
        let top = Folder::open(&path).map_err(|e| not_ours(e.to_string()))?;
        let now = top.ident().map_err(|e| not_ours(e.to_string()))?;
        let made: Option<Ident> = std::fs::read(self.ident_file(lane))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match made {
            Some(m) if m == now && now.uid == nix::unistd::geteuid().as_raw() => Ok(top),
            Some(_) => Err(not_ours("another folder put in its place".into())),
            None => Err(not_ours("no record of the folder prdloop made".into())),
        }
    }

    /// The commit a lane was last reset to.
    pub fn began(&self, lane: usize) -> Option<String> {
        std::fs::read_to_string(self.began_file(lane))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    /// Git on a lane's files through the user's object store and prdloop's index for it.
    pub fn git(&self, lane: usize) -> Git {
        Git::detached(&self.common, self.path(lane))
    }

    /// Whether the lane was made (something is in its place, a link included: see
    /// [`Pool::lane`] for whether it is still prdloop's).
    pub fn exists(&self, lane: usize) -> bool {
        std::fs::symlink_metadata(self.path(lane)).is_ok() && self.index(lane).is_file()
    }

    /// A new lane at `base`: registered, its files checked out, its own `.git` made (the
    /// caller holds the repository lock, for the registry).
    pub fn add(&self, lane: usize, base: &str) -> Result<()> {
        let path = self.path(lane);
        if let Some(parent) = self.index(lane).parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("could not create {}", parent.display()))?;
        }
        self.register()?;
        if path.exists() {
            remove_tree(&path)?;
        }
        std::fs::create_dir_all(&path)
            .with_context(|| format!("could not create {}", path.display()))?;
        let made = Folder::open(&path)
            .and_then(|f| f.ident())
            .with_context(|| format!("could not open {}", path.display()))?;
        crate::fsutil::write_atomic(&self.ident_file(lane), &serde_json::to_vec(&made)?)?;
        let _ = std::fs::remove_file(self.index(lane));
        self.reset(lane, base)
    }

    /// Back to `base`: tracked files as there, untracked ones removed (nested repositories a
    /// worker made included), ignored ones (build caches) kept; then a fresh `.git` for the
    /// worker, at `base`, clean.
    pub fn reset(&self, lane: usize, base: &str) -> Result<()> {
        self.lane(lane)?;
        let g = self.git(lane);
        let index = self.index(lane);
        g.cmd()
            .args(&["read-tree", "-u", "--reset", base])
            .index(&index)
            .run()?;
        g.cmd()
            .args(&["clean", "-q", "-f", "-f", "-d"])
            .index(&index)
            .run()?;
        crate::fsutil::write_atomic(&self.began_file(lane), base.as_bytes())?;
        self.seal(lane, base)
    }

    /// The lane's own `.git`, made anew whatever the last worker left: an empty repository
    /// whose objects come from the user's (read-only to it), HEAD detached at `base`, and an
    /// index matching the files, so that `git status` is clean.
    pub(super) fn seal(&self, lane: usize, base: &str) -> Result<()> {
        let folder = self.lane(lane)?;
        let top = self.path(lane);
        let dotgit = top.join(".git");
        // A link there is removed, not followed; so is a folder with links in it.
        if std::fs::symlink_metadata(&dotgit).is_ok() {
            remove_tree(&dotgit)?;
        }
        Git::new(&top)
            .cmd()
            .args(&["init", "-q", "--template="])
            .run()?;
        let objects = self.common.join("objects");
        folder.write(
            Path::new(".git/objects/info/alternates"),
            format!("{}\n", objects.display()).as_bytes(),
        )?;
        Git::new(&top)
            .cmd()
            .args(&["update-ref", "--no-deref", "HEAD", base])
            .run()?;
        let index = std::fs::read(self.index(lane))
            .with_context(|| format!("could not read prdloop's index of {}", top.display()))?;
        folder
            .write(Path::new(".git/index"), &index)
            .with_context(|| format!("could not write the index of {}", top.display()))?;
        Ok(())
    }

    /// What the worker left in a lane: its files as a tree (in the user's object store),
    /// through a copy of prdloop's index for it (a stat cache: only changed files are
    /// hashed). Paths in `exclude` keep the index's entries.
    pub fn snapshot_tree(&self, lane: usize, exclude: &[String], scratch: &Path) -> Result<String> {
        self.lane(lane)?;
        self.git(lane)
            .snapshot_tree_from(&self.index(lane), exclude, scratch)
    }

    /// Copies in the ignored files `.worktreeinclude` names (`.env`, local configuration,
    /// dependency folders) that a fresh lane lacks, from the user's checkout at `top`.
    pub fn include(&self, lane: usize, top: &Path) -> Result<()> {
        let folder = self.lane(lane)?;
        super::include::into(top, &folder).map(|_| ())
    }

    /// Removes one lane.
    pub fn remove(&self, lane: usize) -> Result<()> {
        self.forget(lane);
        remove_tree(&self.path(lane))
    }

    /// Removes one lane of a run no longer alive: what would not go is a warning.
    fn remove_dead(&self, lane: usize) -> Result<(), Warning> {
        self.forget(lane);
        let path = self.path(lane);
        unlink_tree(&path).map_err(|e| Warning::not_removed(path, &e))
    }

    /// prdloop's files about `lane` (its index, where it began, whose it is) removed.
    fn forget(&self, lane: usize) {
        let _ = std::fs::remove_file(self.index(lane));
        let _ = std::fs::remove_file(self.began_file(lane));
        let _ = std::fs::remove_file(self.ident_file(lane));
    }

    /// Removes every lane of this pool and its registry entry; warnings for those that
    /// would not go.
    pub fn remove_all(&self) -> Vec<Warning> {
        let mut warnings = Vec::new();
        if let Err(e) = unlink_tree(&self.root) {
            warnings.push(Warning::not_removed(&self.root, &e));
        }
        let _ = std::fs::remove_file(registry(&self.common).join(format!("{}.json", self.session)));
        warnings
    }

    /// Enters this run in the repository's registry (once).
    fn register(&self) -> Result<()> {
        let dir = registry(&self.common);
        let file = dir.join(format!("{}.json", self.session));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
        let entry = Listed {
            root: self.root.clone(),
            session: self.session.clone(),
            pid: std::process::id(),
        };
        crate::fsutil::write_atomic(&file, &serde_json::to_vec_pretty(&entry)?)
    }
}

/// Removes a file, a symlink or a folder with everything in it, never following a link.
pub(super) fn remove_tree(path: &Path) -> Result<()> {
    unlink_tree(path).with_context(|| format!("could not remove {}", path.display()))
}

/// [`remove_tree`], with the file system's error alone.
fn unlink_tree(path: &Path) -> std::io::Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if meta.is_dir() {
        // A worker may have taken the write bit off its folders.
        make_writable(path);
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let mode = meta.permissions().mode();
    if mode & 0o700 != 0o700 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700));
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            make_writable(&e.path());
        }
    }
}

/// The repository-wide lock: operations that write the user's checkout, its registry of
/// lanes or its landing journal take it, so that two runs in one repository never race.
pub struct RepoLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl RepoLock {
    pub fn take(common_dir: &Path) -> Result<RepoLock> {
        let path = common_dir.join("prdloop.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("could not open {}", path.display()))?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| e)
            .with_context(|| format!("could not lock {}", path.display()))?;
        Ok(RepoLock { _lock: lock })
    }
}

/// The runs registered in a repository (their lanes may be gone).
pub fn list(common: &Path) -> Vec<Listed> {
    let mut v: Vec<Listed> = std::fs::read_dir(registry(common))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|bytes| serde_json::from_slice::<Listed>(&bytes).ok())
        .collect();
    v.sort_by(|a, b| a.session.cmp(&b.session));
    v
}

/// What [`sweep`] did.
#[derive(Debug, Default)]
pub struct Swept {
    /// Lanes removed.
    pub removed: usize,
    /// Refs the work left in them was pinned under.
    pub pinned: Vec<String>,
    /// Bytes freed on disk.
    pub bytes: u64,
    /// What was done about a landing a crash interrupted.
    pub recovered: Option<String>,
    pub warnings: Vec<Warning>,
}

/// Removes the lanes of runs that are no longer alive, after pinning what was left in each
/// as `refs/prdloop/<session>/crashed/<lane>-<time>` (when it differs from where it began).
pub fn sweep(repo: &Git, common: &Path, scratch: &Path) -> Swept {
    let mut out = Swept::default();
    let stale: Vec<Listed> = list(common).into_iter().filter(|l| !l.alive()).collect();
    if stale.is_empty() {
        return out;
    }
    let _lock = match RepoLock::take(common) {
        Ok(l) => l,
        Err(e) => {
            out.warnings.push(Warning::NotLocked {
                error: format!("{e:#}"),
            });
            return out;
        }
    };
    for l in stale {
        let pool = Pool::new(l.root.clone(), &l.session, common);
        let mut kept_all = true;
        for path in l.lanes() {
            let name = path
                .file_name()
                .map_or_else(|| "lane".into(), |n| n.to_string_lossy().into_owned());
            let Some(n) = name
                .strip_prefix("lane-")
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let lane = n.saturating_sub(1);
            // Where it began, as prdloop recorded it (never the lane's own `.git`, which
            // is the worker's).
            let began = pool.began(lane).filter(|c| repo.commit_of(c).is_some());
            let kept = match (began, pool.index(lane).is_file()) {
                (Some(began), true) => pool.snapshot_tree(lane, &[], scratch).and_then(|tree| {
                    if repo.tree_of(&began).ok().as_deref() == Some(tree.as_str()) {
                        return Ok(None);
                    }
                    let c = repo.commit_tree(&tree, &[&began], "prdloop: a dead run's lane")?;
                    let r = format!(
                        "refs/prdloop/{}/crashed/{name}-{}",
                        l.session,
                        crate::clock::now_ms()
                    );
                    repo.pin(&r, &c)?;
                    Ok(Some(r))
                }),
                _ => Ok(None),
            };
            match kept {
                Ok(Some(r)) => out.pinned.push(r),
                Ok(None) => {}
                Err(e) => {
                    // Not removed: what is in it could not be kept.
                    out.warnings.push(Warning::LeftInPlace {
                        lane: path,
                        error: format!("{e:#}"),
                    });
                    kept_all = false;
                    continue;
                }
            }
            out.bytes += crate::fsutil::disk_usage(&path);
            match pool.remove_dead(lane) {
                Ok(()) => out.removed += 1,
                Err(w) => {
                    out.warnings.push(w);
                    kept_all = false;
                }
            }
        }
        if kept_all {
            out.warnings.extend(pool.remove_all());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_lists_runs_and_skips_what_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let reg = registry(dir.path());
        std::fs::create_dir_all(&reg).unwrap();
        let entry = Listed {
            root: "/state/lanes/s1".into(),
            session: "s1".into(),
            pid: 42,
        };
        std::fs::write(reg.join("s1.json"), serde_json::to_vec(&entry).unwrap()).unwrap();
        std::fs::write(reg.join("s2.json"), b"{not json").unwrap();
        std::fs::write(reg.join("notes.txt"), b"x").unwrap();
        assert_eq!(list(dir.path()), vec![entry]);
    }
}
