//! The worktrees: one per lane, outside the user's tree, detached and locked with a reason
//! naming the session and the runner's pid; and the clean-up of those a dead run left.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::git::Git;

/// What a prdloop worktree's lock reason starts with.
const REASON: &str = "prdloop session ";

#[derive(Debug)]
pub struct Pool {
    root: PathBuf,
    session: String,
    repo: Git,
}

impl Pool {
    pub fn new(root: PathBuf, session: &str, top: &Path) -> Pool {
        Pool {
            root,
            session: session.to_string(),
            repo: Git::new(top),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, lane: usize) -> PathBuf {
        self.root.join(format!("lane-{}", lane + 1))
    }

    pub fn exists(&self, lane: usize) -> bool {
        self.path(lane).join(".git").exists()
    }

    /// A new worktree for a lane at `base` (the caller holds the repository lock).
    pub fn add(&self, lane: usize, base: &str) -> Result<()> {
        let path = self.path(lane);
        std::fs::create_dir_all(&self.root)
            .with_context(|| format!("could not create {}", self.root.display()))?;
        let reason = format!("{REASON}{} pid {}", self.session, std::process::id());
        self.repo
            .cmd()
            .args(&[
                "worktree", "add", "-q", "--detach", "--lock", "--reason", &reason,
            ])
            .arg(&path)
            .arg(base)
            .run()
    }

    /// Back to `base`: tracked files as there, untracked ones removed, ignored ones kept.
    pub fn reset(&self, lane: usize, base: &str) -> Result<()> {
        let wt = Git::new(self.path(lane));
        wt.cmd().args(&["reset", "-q", "--hard", base]).run()?;
        wt.cmd().args(&["clean", "-q", "-f", "-d"]).run()
    }

    /// Copies in the untracked files `.worktreeinclude` names (gitignore patterns: `.env`,
    /// local configuration) that a fresh worktree lacks.
    pub fn include(&self, lane: usize, top: &Path) -> Result<()> {
        let list = top.join(".worktreeinclude");
        if !list.is_file() {
            return Ok(());
        }
        let from = format!("--exclude-from={}", list.display());
        let (out, _) = self
            .repo
            .cmd()
            .args(&["ls-files", "-z", "--others", "--ignored", &from])
            .output()?;
        let dest = self.path(lane);
        for name in String::from_utf8_lossy(&out).split('\0') {
            if name.is_empty() {
                continue;
            }
            let src = top.join(name);
            let to = dest.join(name);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::copy(&src, &to).with_context(|| {
                format!(
                    "could not copy {} (named by .worktreeinclude) into the worktree",
                    src.display()
                )
            })?;
        }
        Ok(())
    }

    /// Removes one lane's worktree.
    pub fn remove(&self, lane: usize) -> Result<()> {
        remove(&self.repo, &self.path(lane))
    }

    /// Removes every worktree of this pool; warnings for those that would not go.
    pub fn remove_all(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return warnings;
        };
        for e in entries.flatten() {
            // Only the lanes' folders (a worker may have written a file beside its worktree).
            let lane = e.file_name().to_string_lossy().starts_with("lane-");
            if !lane || !e.path().is_dir() {
                let _ = std::fs::remove_file(e.path());
                continue;
            }
            if let Err(err) = remove(&self.repo, &e.path()) {
                warnings.push(format!("{err:#}"));
            }
        }
        let _ = std::fs::remove_dir(&self.root);
        warnings
    }
}

/// Removes a worktree (locked or not, changes and all) and its folder.
fn remove(repo: &Git, path: &Path) -> Result<()> {
    let r = repo
        .cmd()
        .args(&["worktree", "remove", "--force", "--force"])
        .arg(path)
        .run();
    if path.exists() {
        std::fs::remove_dir_all(path)
            .with_context(|| format!("could not remove the worktree {}", path.display()))?;
    }
    if r.is_err() {
        // Its folder was gone already, or git did not know it: forget it.
        let _ = repo.cmd().args(&["worktree", "prune"]).run();
    }
    Ok(())
}

/// Runs `--setup` in a new worktree.
pub fn setup(cmd: &str, dir: &Path) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("could not run --setup `{cmd}`"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        bail!(
            "--setup `{cmd}` failed in {} ({}){}{}",
            dir.display(),
            out.status,
            if last.is_empty() { "" } else { ": " },
            last.trim()
        );
    }
    Ok(())
}

/// The repository-wide lock: git operations that write shared metadata take it, so that two
/// runs in one repository never race on `.git/worktrees` or `.git/config.lock`.
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

/// One of prdloop's worktrees, as `git worktree list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub path: PathBuf,
    pub head: String,
    pub session: String,
    pub pid: u32,
}

impl Listed {
    pub fn alive(&self) -> bool {
        crate::platform::is_alive(self.pid)
    }
}

/// prdloop's worktrees of a repository.
pub fn list(repo: &Git) -> Result<Vec<Listed>> {
    let text = repo.text(&["worktree", "list", "--porcelain"])?;
    Ok(parse_list(&text))
}

fn parse_list(text: &str) -> Vec<Listed> {
    let mut v = Vec::new();
    for block in text.split("\n\n") {
        let mut path = None;
        let mut head = String::new();
        let mut owner = None;
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(h) = line.strip_prefix("HEAD ") {
                head = h.to_string();
            } else if let Some(r) = line.strip_prefix("locked ") {
                owner = r.strip_prefix(REASON).and_then(|rest| {
                    let (session, pid) = rest.split_once(" pid ")?;
                    Some((session.to_string(), pid.trim().parse().ok()?))
                });
            }
        }
        if let (Some(path), Some((session, pid))) = (path, owner) {
            v.push(Listed {
                path,
                head,
                session,
                pid,
            });
        }
    }
    v
}

/// What [`sweep`] did.
#[derive(Debug, Default)]
pub struct Swept {
    /// Worktrees removed.
    pub removed: usize,
    /// Refs the work left in them was pinned under.
    pub pinned: Vec<String>,
    /// Bytes freed on disk.
    pub bytes: u64,
    pub warnings: Vec<String>,
}

/// Removes the worktrees of runs that are no longer alive, after pinning what was left in
/// them as `refs/prdloop/<session>/crashed/<name>` (when it differs from where it began).
/// `except`: a session to leave alone (this run's).
pub fn sweep(repo: &Git, common_dir: &Path, scratch: &Path, except: Option<&str>) -> Swept {
    let mut out = Swept::default();
    let listed = match list(repo) {
        Ok(l) => l,
        Err(e) => {
            out.warnings.push(format!("{e:#}"));
            return out;
        }
    };
    let stale: Vec<Listed> = listed
        .into_iter()
        .filter(|l| Some(l.session.as_str()) != except && !l.alive())
        .collect();
    if stale.is_empty() {
        return out;
    }
    let _lock = match RepoLock::take(common_dir) {
        Ok(l) => l,
        Err(e) => {
            out.warnings.push(format!("{e:#}"));
            return out;
        }
    };
    for l in stale {
        if l.path.exists() {
            let wt = Git::new(&l.path);
            let name = l
                .path
                .file_name()
                .map_or_else(|| "worktree".into(), |n| n.to_string_lossy().into_owned());
            match wt.snapshot(&l.head, &[], scratch) {
                Ok(c) if repo.tree_of(&c).ok() != repo.tree_of(&l.head).ok() => {
                    let r = format!(
                        "refs/prdloop/{}/crashed/{name}-{}",
                        l.session,
                        crate::state::now_ms()
                    );
                    match repo.pin(&r, &c) {
                        Ok(()) => out.pinned.push(r),
                        Err(e) => {
                            out.warnings.push(format!("{e:#}"));
                            continue;
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    // Not removed: what is in it could not be kept.
                    out.warnings.push(format!(
                        "left {} in place: its changes could not be saved: {e:#}",
                        l.path.display()
                    ));
                    continue;
                }
            }
            out.bytes += crate::fsutil::disk_usage(&l.path);
        }
        match remove(repo, &l.path) {
            Ok(()) => out.removed += 1,
            Err(e) => out.warnings.push(format!("{e:#}")),
        }
        if let Some(parent) = l.path.parent() {
            // The session's pool folder, once empty.
            let _ = std::fs::remove_dir(parent);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_only_prdloop_worktrees() {
        let text = "worktree /repo\nHEAD aaa\nbranch refs/heads/main\n\n\
worktree /state/worktrees/s1/lane-1\nHEAD bbb\ndetached\nlocked prdloop session s1 pid 42\n\n\
worktree /elsewhere\nHEAD ccc\ndetached\nlocked on a USB disk\n";
        assert_eq!(
            parse_list(text),
            vec![Listed {
                path: "/state/worktrees/s1/lane-1".into(),
                head: "bbb".into(),
                session: "s1".into(),
                pid: 42,
            }]
        );
    }
}
