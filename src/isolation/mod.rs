//! Isolated workers: each lane is a repository of its own (sealed: its own refs, config,
//! hooks, stash and index; the user's objects borrowed read-only), filled from the user's
//! whole working state (uncommitted and untracked files included), and what a worker changed
//! is merged back into the user's checkout, one criterion at a time, only when it passes, as
//! a transaction with an undo point.
//!
//! ```text
//! user's checkout ──snapshot──▶ S (base) ──reset──▶ lane (own .git) ──worker──▶ snapshot A
//!                                                         │
//! user's checkout ◀──transaction U→M── merge-tree(U, A), U = the checkout now, parent S
//! ```
//!
//! Every commit made here hangs under `refs/prdloop/<session>/…` (undo points under
//! `refs/prdloop-undo/`), so nothing is lost to garbage collection; the user's index, stash,
//! branches and HEAD are left alone (HEAD moves only with `--commit`). Writes to the user's
//! checkout and to prdloop's records in its git folder go one at a time, also across
//! processes.

mod beneath;
mod commit;
pub mod git;
pub mod guard;
pub mod include;
mod landing;
mod merge;
pub mod owed;
pub mod owed_book;
pub mod pool;
pub mod repo_path;
pub mod transaction;
pub mod undo;
pub mod warning;

pub use landing::{Landing, ToLand};
pub use merge::{Merged, Policy, merge_into_checkout, merge_into_checkout_locked};
pub use warning::Warning;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};

use self::git::Git;

/// `--isolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A repository of its own per lane (the default inside a git repository with a
    /// commit).
    Lane,
    /// Every worker in the one checkout.
    None,
}

/// What the run asked for.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `--isolation`; `None` = decide from the folder.
    pub mode: Option<Mode>,
    /// `--setup CMD`: run once in each new worktree (by the attempt that made it, under a
    /// check's sandbox rules: it runs what landed).
    pub setup: Option<String>,
    /// `--commit`: one commit per passed criterion.
    pub commit: bool,
    /// `--keep-worktrees`.
    pub keep: bool,
    /// `--allow-deletions`: landings the guards would refuse go through.
    pub allow_deletions: bool,
}

/// Where the workers' folder is in git's eyes.
#[derive(Debug, Clone)]
pub struct Repo {
    /// The top of the user's checkout.
    pub top: PathBuf,
    /// The workers' folder, relative to `top`.
    pub rel: PathBuf,
}

/// Whether and where isolation applies: `Ok(Some)` for worktrees, `Ok(None)` with the notice
/// to print when it falls back to one checkout, `Err` when worktrees were asked for and
/// cannot be had.
pub fn decide(mode: Option<Mode>, workdir: &Path) -> Result<(Option<Repo>, Option<String>)> {
    if mode == Some(Mode::None) {
        return Ok((None, None));
    }
    let found = find_repo(workdir);
    let repo = match (found, mode) {
        (Ok(r), _) => r,
        (Err(why), Some(Mode::Lane)) => {
            bail!("--isolation lane: {why}; use --isolation none to run in the folder itself")
        }
        (Err(why), _) => {
            return Ok((
                None,
                Some(format!(
                    "isolation: none ({why}); every worker works in the folder itself"
                )),
            ));
        }
    };
    let (major, minor) = Git::version()?;
    if (major, minor) < git::MIN_VERSION {
        bail!(
            "isolated workers need git {}.{} or newer (found {major}.{minor}); upgrade git or use --isolation none",
            git::MIN_VERSION.0,
            git::MIN_VERSION.1
        );
    }
    Ok((Some(repo), None))
}

pub fn find_repo(workdir: &Path) -> std::result::Result<Repo, String> {
    let g = Git::new(workdir);
    let top = g
        .text(&["rev-parse", "--show-toplevel"])
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| format!("{} is not in a git repository", workdir.display()))?;
    if g.commit_of("HEAD").is_none() {
        return Err(format!("the git repository at {top} has no commit yet"));
    }
    let top = PathBuf::from(top);
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let rel = canon(workdir)
        .strip_prefix(canon(&top))
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(Repo { top, rel })
}

/// Whether git ignores a path (relative to the top).
fn is_ignored(top: &Path, rel: &str) -> bool {
    Git::new(top)
        .cmd()
        .args(&["check-ignore", "-q", "--", rel])
        .ok_codes(&[1])
        .output()
        .is_ok_and(|(_, code)| code == 0)
}

/// prdloop's own paths (the PRD, state folders, bundles) as paths from the top of the
/// checkout at `top`, for leaving them out of snapshots and merges: those outside the
/// checkout, and those git ignores anyway (git refuses to be told to leave out what it
/// ignores), are dropped.
pub fn own_exclusions(top: &Path, own_paths: &[&Path]) -> Vec<String> {
    let canon_top = std::fs::canonicalize(top).unwrap_or_else(|_| top.to_path_buf());
    own_paths
        .iter()
        .filter_map(|p| {
            let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            p.strip_prefix(&canon_top)
                .ok()
                .map(|r| r.to_string_lossy().into_owned())
        })
        .filter(|r| !r.is_empty())
        .filter(|r: &String| !is_ignored(top, r))
        .collect()
}

/// A worker's worktree, made ready for an attempt.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The commit it starts from.
    pub base: String,
    /// Whether the lane was made anew (so `--setup` is to run in it).
    pub fresh: bool,
}

/// Isolation for one run.
#[derive(Debug)]
pub struct Isolation {
    repo: Git,
    top: PathBuf,
    rel: PathBuf,
    session: String,
    pool: pool::Pool,
    /// Paths (from the top) that are never snapshotted nor merged: the PRD (the runner's to
    /// write) and prdloop's own folders inside the checkout.
    exclude: Vec<String>,
    /// Serialises git operations that write shared metadata or the user's checkout.
    lock: Mutex<()>,
    settings: Settings,
    /// Temporary indexes.
    scratch: PathBuf,
    /// The repository's common git folder (its lock file and landing journal live there).
    common: PathBuf,
    /// The PRD, as the user's path and, when it is inside the checkout, its path from the top.
    prd: (PathBuf, Option<PathBuf>),
    /// The landings whose bookkeeping this run owes ([`owed`]), by name.
    owing: Mutex<Vec<String>>,
}

impl Isolation {
    /// `state_dir`: where the worktrees and temporary files go (outside the checkout).
    /// `own_paths`: the PRD first, then prdloop's other files and folders.
    pub fn new(
        repo: Repo,
        settings: Settings,
        session: &str,
        state_dir: &Path,
        own_paths: &[&Path],
    ) -> Result<Isolation> {
        let scratch = state_dir.join("lanes").join(".scratch");
        std::fs::create_dir_all(&scratch)
            .with_context(|| format!("could not create {}", scratch.display()))?;
        let exclude = own_exclusions(&repo.top, own_paths);
        let git = Git::new(&repo.top);
        let common = PathBuf::from(git.text(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-common-dir",
        ])?);
        let pool = pool::Pool::new(state_dir.join("lanes").join(session), session, &common);
        let prd_path = own_paths
            .first()
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let prd_rel = canon(&prd_path)
            .strip_prefix(canon(&repo.top))
            .ok()
            .map(Path::to_path_buf);
        Ok(Isolation {
            repo: git,
            top: repo.top,
            rel: repo.rel,
            session: session.to_string(),
            pool,
            exclude,
            lock: Mutex::new(()),
            settings,
            scratch,
            common,
            prd: (prd_path, prd_rel),
            owing: Mutex::new(Vec::new()),
        })
    }

    pub fn top(&self) -> &Path {
        &self.top
    }

    /// The top of a lane's own copy of the repository: everything a worker of that lane may
    /// write, its git metadata included.
    pub fn lane_top(&self, lane: usize) -> PathBuf {
        self.pool.path(lane)
    }

    /// The lane's own copy of the PRD, which the worker is given (its path in the lane when
    /// the PRD is in the checkout; else beside the lane, outside it).
    pub fn prd_copy(&self, lane: usize) -> PathBuf {
        match &self.prd.1 {
            Some(rel) => self.lane_top(lane).join(rel),
            None => {
                let name = self.prd.0.file_name().unwrap_or_else(|| "PRD.md".as_ref());
                self.pool
                    .root()
                    .join(format!("lane-{}.prd", lane + 1))
                    .join(name)
            }
        }
    }

    /// The folder a lane's worker works in (its copy of the checkout, at the workers'
    /// folder).
    pub fn lane_dir(&self, lane: usize) -> PathBuf {
        self.pool.path(lane).join(&self.rel)
    }

    fn guard(&self) -> Result<(std::sync::MutexGuard<'_, ()>, pool::RepoLock)> {
        let g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let file = pool::RepoLock::take(&self.common)?;
        Ok((g, file))
    }

    fn refname(&self, rest: &str) -> String {
        format!("refs/prdloop/{}/{rest}", self.session)
    }

    /// The user's checkout as it is now, as a commit on HEAD (pinned as the session's base).
    pub fn base(&self) -> Result<String> {
        let _g = self.guard()?;
        let head = self
            .repo
            .commit_of("HEAD")
            .context("the checkout has no HEAD commit")?;
        let s = self.repo.snapshot(&head, &self.exclude, &self.scratch)?;
        self.repo.pin(&self.refname("base"), &s)?;
        Ok(s)
    }

    /// Makes a lane ready for an attempt from `base`: created the first time (with
    /// `.worktreeinclude`'s files; the caller runs `--setup` in it), else reset to it with
    /// untracked files removed and ignored ones (build caches) kept; its `.git` made anew
    /// either way, and the PRD as it is now copied in.
    pub fn prepare(&self, lane: usize, base: &str) -> Result<Prepared> {
        let mut fresh = false;
        if self.pool.exists(lane) {
            match self.pool.lane(lane) {
                // Never entered: thrown away (a link removed, not its target), made anew.
                Err(not_ours) => {
                    tracing::warn!("{not_ours}: thrown away and made anew");
                    self.pool.remove(lane)?;
                }
                // It is prdloop's own (its last work is pinned already): made anew when it
                // will not reset, e.g. after a worker took the write bit off its files.
                Ok(_) if self.pool.reset(lane, base).is_err() => self.pool.remove(lane)?,
                Ok(_) => {}
            }
        }
        if !self.pool.exists(lane) {
            self.make(lane, base)?;
            fresh = true;
        }
        if let Err(e) = self.copy_prd(lane) {
            // A link on the way to the PRD's copy in the lane: the lane goes, not the copy.
            if self.prd.1.is_none() {
                return Err(e);
            }
            tracing::warn!("{e:#}: lane {} thrown away and made anew", lane + 1);
            self.pool.remove(lane)?;
            self.make(lane, base)?;
            fresh = true;
            self.copy_prd(lane)?;
        }
        Ok(Prepared {
            base: base.to_string(),
            fresh,
        })
    }

    /// A new lane at `base`, with `.worktreeinclude`'s files.
    fn make(&self, lane: usize, base: &str) -> Result<()> {
        {
            let _g = self.guard()?;
            self.pool.add(lane, base)?;
        }
        self.pool.include(lane, &self.top)
    }

    /// The PRD as it is now, copied into the lane (or beside it), following no link: in
    /// the lane beneath its top, else into the lane's PRD folder in the pool, which is
    /// thrown away and made anew when it is not a plain folder.
    fn copy_prd(&self, lane: usize) -> Result<()> {
        let text = std::fs::read(&self.prd.0)
            .with_context(|| format!("could not read {}", self.prd.0.display()))?;
        let copy = self.prd_copy(lane);
        let (folder, rel) = match &self.prd.1 {
            Some(rel) => (self.pool.lane(lane)?, rel.clone()),
            None => {
                let root = self.pool.root();
                let dir = copy.parent().unwrap_or(root);
                if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
                    tracing::warn!(
                        "lane {}'s PRD folder {} is not the one prdloop made (not a folder): thrown away and made anew",
                        lane + 1,
                        dir.display()
                    );
                    pool::remove_tree(dir)?;
                }
                let rel = copy.strip_prefix(root).unwrap_or(&copy).to_path_buf();
                let root = beneath::Folder::open(root)
                    .with_context(|| format!("could not open {}", root.display()))?;
                (root, rel)
            }
        };
        folder.write(&rel, &text).with_context(|| {
            format!(
                "could not copy {} into the lane as {}",
                self.prd.0.display(),
                copy.display()
            )
        })
    }

    /// The workers' folder, from the top of the checkout (`""` at the top).
    pub fn rel(&self) -> String {
        self.rel.to_string_lossy().into_owned()
    }

    /// An attempt's change as a textual diff, read only up to `max` bytes (for the
    /// verifier's prompt).
    pub fn diff_text(&self, base: &str, commit: &str, max: usize) -> Result<String> {
        let out = self
            .repo
            .cmd()
            .args(&[
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "--stat",
                "--patch",
                base,
                commit,
                "--",
            ])
            .args(&git::pathspec(&self.exclude))
            .head(max + 1)?;
        let text = crate::text::cut_to(
            String::from_utf8_lossy(&out).into_owned(),
            max,
            "\n… (cut short: look at the files)",
        );
        Ok(text)
    }

    /// A file of commit `rev` (`path` from the workers' folder), read from git's objects
    /// (nothing in a lane is followed), up to 1 MiB; `None` when it has no such file.
    pub fn file_at(&self, rev: &str, path: &str) -> Option<String> {
        const MAX: usize = 1024 * 1024;
        let from_top = self.rel.join(path);
        let spec = format!("{rev}:{}", from_top.to_string_lossy());
        let size: usize = self
            .repo
            .cmd()
            .args(&["cat-file", "-s", &spec])
            .text()
            .ok()?
            .parse()
            .ok()?;
        let out = self
            .repo
            .cmd()
            .args(&["cat-file", "blob", &spec])
            .head(size.min(MAX))
            .ok()?;
        Some(String::from_utf8_lossy(&out).into_owned())
    }

    /// The part of an attempt's change to `paths` (from the top), as a textual diff cut to
    /// about 4 KiB.
    pub fn diff_of(&self, base: &str, commit: &str, paths: &[String]) -> Result<String> {
        self.repo.diff_of(base, commit, paths)
    }

    /// The lane's `.git` made anew once the worker's work is taken, before the runner's own
    /// checks run there (under a check's rules) and its own git commands on the lane: hooks
    /// or config a worker wrote into it (a `core.fsmonitor` command, say) never reach them.
    pub fn reseal(&self, lane: usize, base: &str) -> Result<()> {
        self.pool.seal(lane, base)
    }

    /// A lane's files as a tree now (to see whether a verifier changed them).
    pub fn lane_tree(&self, lane: usize) -> Result<String> {
        self.pool.snapshot_tree(lane, &self.exclude, &self.scratch)
    }

    /// Where an attempt is pinned (an id too long for a ref's name shortened, see
    /// [`crate::text::file_safe`]).
    pub fn attempt_ref(&self, id: &str, attempt: &str) -> String {
        self.refname(&format!("{}/{attempt}", crate::text::file_safe(id)))
    }

    /// What the worker left in its lane, as a commit on its base, pinned as
    /// `refs/prdloop/<session>/<criterion>/<attempt>`; read through prdloop's own index for
    /// the lane, never the lane's `.git`.
    pub fn take(&self, lane: usize, base: &str, id: &str, attempt: &str) -> Result<String> {
        let tree = self
            .pool
            .snapshot_tree(lane, &self.exclude, &self.scratch)?;
        let a = self.repo.commit_tree(&tree, &[base], "prdloop snapshot")?;
        self.repo.pin(&self.attempt_ref(id, attempt), &a)?;
        Ok(a)
    }

    /// The files changed from `base` to `a`, and the lines added and removed (a binary file
    /// counts as one).
    pub fn diff_size(&self, base: &str, a: &str) -> Result<(Vec<String>, u64)> {
        let (out, _) = self
            .repo
            .cmd()
            .args(&["diff", "--numstat", "-z", "--no-renames", base, a, "--"])
            .args(&git::pathspec(&self.exclude))
            .output()?;
        let mut files = Vec::new();
        let mut lines = 0;
        // `-z`: `added<TAB>removed<TAB>path<NUL>` per file.
        for rec in String::from_utf8_lossy(&out).split('\0') {
            let mut f = rec.splitn(3, '\t');
            let (Some(a), Some(d), Some(path)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            lines += match (a.parse::<u64>(), d.parse::<u64>()) {
                (Ok(a), Ok(d)) => a + d,
                _ => 1,
            };
            files.push(path.to_string());
        }
        Ok((files, lines))
    }

    /// Merges attempt `a` (made on `base`) into the user's checkout: the checkout is taken
    /// again (it may have changed), the trees merged, and only the difference between the
    /// checkout and the merge applied to it, all or nothing.
    pub fn land(&self, job: &ToLand) -> Landing {
        match self.try_land(job) {
            Ok(l) => l,
            Err(e) => Landing::Error {
                message: format!("{e:#}"),
            },
        }
    }

    fn try_land(&self, job: &ToLand) -> Result<Landing> {
        let (base, a, kept) = (job.base.as_str(), job.attempt.as_str(), job.kept.as_str());
        let (id, message) = (job.id.as_str(), job.message.as_str());
        if self.repo.tree_of(a)? == self.repo.tree_of(base)? {
            return Ok(Landing::Unchanged);
        }
        let _g = self.guard()?;
        let policy = Policy {
            allow_deletions: self.settings.allow_deletions,
            origin: undo::Origin {
                label: id.to_string(),
                prd: Some(self.prd.0.display().to_string()),
                session: Some(self.session.clone()),
            },
            credit: job.record.clone().map(|record| owed::Credit {
                base: base.to_string(),
                attempt: a.to_string(),
                message: message.to_string(),
                record,
            }),
        };
        let journal = transaction::journal_path(&self.common);
        let merged = merge_into_checkout(
            &self.repo,
            base,
            a,
            &self.exclude,
            &self.scratch,
            &journal,
            &policy,
        )?;
        match merged {
            Merged::Unchanged => Ok(Landing::Unchanged),
            Merged::Conflict { files, theirs } => Ok(Landing::Conflict {
                files,
                kept: kept.to_string(),
                theirs,
            }),
            Merged::Refused(reason) => Ok(Landing::Refused {
                reason,
                kept: kept.to_string(),
            }),
            Merged::Applied { files, undo } => {
                if policy.credit.is_some() {
                    self.owing().push(owed::name_of(&undo));
                }
                let (commit, note) = if self.settings.commit {
                    match self.commit(base, a, &files, message) {
                        Ok(c) => {
                            let _ = undo::set_commit(&self.repo, &undo, &c);
                            (Some(c), None)
                        }
                        Err(why) => (None, Some(format!("not committed: {why}"))),
                    }
                } else {
                    (None, None)
                };
                Ok(Landing::Merged {
                    files: repo_path::lossy(&files),
                    commit,
                    note,
                    undo: Some(undo.name),
                })
            }
        }
    }

    /// Removes this run's lanes (their attempts are pinned already), unless kept. What would
    /// not go.
    pub fn finish(&self) -> Vec<Warning> {
        if self.settings.keep {
            return Vec::new();
        }
        let _g = self.guard();
        self.pool.remove_all()
    }

    pub fn keep(&self) -> bool {
        self.settings.keep
    }

    /// Finishes a landing a crash interrupted, then removes the lanes that runs no longer
    /// alive left in this repository (their work pinned first). `Err`: the interrupted
    /// landing could not be put right (a damaged journal): the run must not go on.
    pub fn sweep(&self) -> Result<pool::Swept> {
        let recovered = recover_crash(&self.repo, &self.common)?;
        let mut swept = pool::sweep(&self.repo, &self.common, &self.scratch);
        swept.recovered = recovered;
        Ok(swept)
    }

    /// The pool folder of lanes, for `--keep-worktrees`' message.
    pub fn pool_root(&self) -> &Path {
        self.pool.root()
    }
}

/// What a crash left in a repository, put right: an interrupted landing finished (or rolled
/// back, if it had not begun), then the lanes of runs no longer alive removed, their work
/// pinned first. By pid only: a resumed session's own lanes from its crashed run are swept
/// too; this process's are alive. A landing that could not be put right is a warning here
/// (for `prdloop clean`).
pub fn recover_and_sweep(repo: &Git, common: &Path, scratch: &Path) -> pool::Swept {
    let recovered = recover_crash(repo, common);
    let mut swept = pool::sweep(repo, common, scratch);
    match recovered {
        Ok(msg) => swept.recovered = msg,
        Err(e) => swept.warnings.insert(
            0,
            Warning::NotRecovered {
                error: format!("{e:#}"),
            },
        ),
    }
    swept
}

/// An interrupted landing (and `--commit`) finished or rolled back, under the repository's
/// lock; what was done, for the user.
fn recover_crash(repo: &Git, common: &Path) -> Result<Option<String>> {
    let journal = transaction::journal_path(common);
    if !journal.exists() && !commit::CommitStep::pending(common) {
        return Ok(None);
    }
    let _lock = pool::RepoLock::take(common)?;
    let landed = transaction::recover(&journal, &repo.dir)?;
    let committed = commit::CommitStep::recover(repo, common)?;
    Ok(match (landed, committed) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    })
}
