//! Isolated workers: each worker works in a git worktree of its own, made from the user's
//! whole working state (uncommitted and untracked files included), and what it changed is
//! merged back into the user's checkout, one criterion at a time, only when it passes.
//!
//! ```text
//! user's checkout ──snapshot──▶ S (base) ──reset──▶ lane worktree ──worker──▶ snapshot A
//!                                                         │
//! user's checkout ◀──apply U→M── merge-tree(U, A), U = the checkout now, parent S
//! ```
//!
//! Every commit made here hangs under `refs/prdloop/<session>/…`, so nothing is lost to
//! garbage collection; the user's index, stash, branches and HEAD are left alone (HEAD moves
//! only with `--commit`). Git operations that write shared repository metadata (worktrees
//! added or removed, merges into the checkout) go one at a time, also across processes.

pub mod git;
pub mod pool;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result, bail};

use self::git::{Git, Merge};

/// `--isolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A git worktree per worker (the default inside a git repository with a commit).
    Worktree,
    /// Every worker in the one checkout.
    None,
}

/// What the run asked for.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `--isolation`; `None` = decide from the folder.
    pub mode: Option<Mode>,
    /// `--setup CMD`: run once in each new worktree.
    pub setup: Option<String>,
    /// `--commit`: one commit per passed criterion.
    pub commit: bool,
    /// `--keep-worktrees`.
    pub keep: bool,
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
        (Err(why), Some(Mode::Worktree)) => {
            bail!("--isolation worktree: {why}; use --isolation none to run in the folder itself")
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

/// The stash list, newest first: (commit, message).
fn stash_list(g: &Git) -> Vec<(String, String)> {
    g.cmd()
        .args(&["reflog", "show", "--format=%H%x09%gs", "refs/stash", "--"])
        .text()
        .map(|t| {
            t.lines()
                .filter_map(|l| l.split_once('\t'))
                .map(|(h, m)| (h.to_string(), m.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Paths as literal pathspecs (no globbing of `*`, `?`, `[`).
fn literal(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| format!(":(literal){p}")).collect()
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

/// How a passed attempt's work reached the user's checkout.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Landing {
    /// Applied to the checkout: these files changed (and the commit, with `--commit`).
    Merged {
        files: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        /// With `--commit`, why it was left uncommitted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The attempt changed nothing.
    Unchanged,
    /// Its changes collide with the checkout's: nothing applied; the attempt is kept.
    /// `theirs`: what changed in those files in the checkout since the attempt's base (a
    /// diff, cut short), for the next attempt's prompt.
    Conflict {
        files: Vec<String>,
        kept: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        theirs: String,
    },
    /// It failed (or another sample won): its work was not merged; it is kept under `kept`.
    Discarded { files: Vec<String>, kept: String },
    /// Git failed: nothing applied.
    Error { message: String },
}

impl Landing {
    /// A few words for a worker's line: `merged 3 files`.
    pub fn brief(&self) -> String {
        match self {
            Landing::Merged {
                files,
                commit,
                note,
            } => {
                let n = files.len();
                let mut s = format!("merged {n} file{}", if n == 1 { "" } else { "s" });
                if let Some(c) = commit {
                    s.push_str(&format!(", committed {}", &c[..c.len().min(10)]));
                }
                if let Some(why) = note {
                    s.push_str(&format!(" ({why})"));
                }
                s
            }
            Landing::Unchanged => "no changes to merge".to_string(),
            Landing::Conflict { files, .. } => format!("merge conflict in {}", files.join(", ")),
            Landing::Discarded { files, kept } if !files.is_empty() => {
                format!("its changes to {} discarded (kept as {kept})", files.len())
            }
            Landing::Discarded { .. } => "no changes".to_string(),
            Landing::Error { .. } => "not merged".to_string(),
        }
    }

    /// Why the attempt does not count as passed, when it does not.
    pub fn failure(&self) -> Option<String> {
        match self {
            Landing::Merged { .. } | Landing::Unchanged | Landing::Discarded { .. } => None,
            Landing::Conflict {
                files,
                kept,
                theirs,
            } => {
                let mut s = format!(
                    "merge conflict in {}: the checkout changed them since this attempt began (another criterion's merged work or an edit); nothing was applied, the attempt is kept as {kept}",
                    files.join(", ")
                );
                if !theirs.is_empty() {
                    s.push_str(&format!(
                        "\nWhat changed in the checkout meanwhile (start from it this time):\n```diff\n{theirs}\n```"
                    ));
                }
                Some(s)
            }
            Landing::Error { message } => Some(format!("could not merge the work back: {message}")),
        }
    }
}

/// What merging a commit into a checkout came to ([`merge_into_checkout`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// The checkout already holds it.
    Unchanged,
    /// These files collide with the checkout's: nothing was applied. `theirs`: the
    /// checkout's own change to them since `base` (a diff, cut short).
    Conflict { files: Vec<String>, theirs: String },
    /// Applied to the checkout: these files changed, by this patch.
    Applied { files: Vec<String>, patch: Vec<u8> },
}

/// The three-way merge of commit `a` (made on `base`) into the checkout of `repo`: the
/// checkout is taken as a snapshot U on `base`, the trees of U and `a` merged
/// (`merge-tree`), and only the difference between U and the merge applied to the checkout,
/// all or nothing. Paths in `exclude` are neither taken nor touched. Used by isolated workers
/// as each criterion passes and by `prdloop merge` for each shard's bundle. The caller holds
/// whatever lock keeps other writers of the checkout out.
pub fn merge_into_checkout(
    repo: &Git,
    base: &str,
    a: &str,
    exclude: &[String],
    scratch: &Path,
) -> Result<Merged> {
    // The checkout may change under us (an editor saving): one more try from a new snapshot
    // when the patch no longer applies.
    let mut last_err = None;
    for _ in 0..2 {
        let u = repo.snapshot(base, exclude, scratch)?;
        let merged = match repo.merge_tree(&u, a)? {
            Merge::Clean(tree) => tree,
            Merge::Conflict(files) => {
                let theirs = repo.diff_of(base, &u, &files).unwrap_or_default();
                return Ok(Merged::Conflict { files, theirs });
            }
        };
        let files = repo.changed(&u, &merged, exclude)?;
        if files.is_empty() {
            return Ok(Merged::Unchanged);
        }
        let patch = repo.patch(&u, &merged, exclude)?;
        match repo.apply(&patch) {
            Ok(()) => return Ok(Merged::Applied { files, patch }),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.expect("tried"))
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
    /// The repository's common git folder (its lock file lives there).
    common: PathBuf,
    /// The stash list when the run began (`refs/stash` is shared by every worktree): entries
    /// a worker drops are put back.
    stash: Vec<(String, String)>,
}

impl Isolation {
    /// `state_dir`: where the worktrees and temporary files go (outside the checkout).
    pub fn new(
        repo: Repo,
        settings: Settings,
        session: &str,
        state_dir: &Path,
        own_paths: &[&Path],
    ) -> Result<Isolation> {
        let scratch = state_dir.join("worktrees").join(".scratch");
        std::fs::create_dir_all(&scratch)
            .with_context(|| format!("could not create {}", scratch.display()))?;
        let exclude = own_exclusions(&repo.top, own_paths);
        let git = Git::new(&repo.top);
        let stash = stash_list(&git);
        let common = PathBuf::from(git.text(&[
            "rev-parse",
            "--path-format=absolute",
            "--git-common-dir",
        ])?);
        let pool = pool::Pool::new(
            state_dir.join("worktrees").join(session),
            session,
            &repo.top,
        );
        Ok(Isolation {
            repo: git,
            top: repo.top,
            rel: repo.rel,
            session: session.to_string(),
            pool,
            exclude,
            lock: Mutex::new(()),
            settings,
            stash,
            scratch,
            common,
        })
    }

    pub fn top(&self) -> &Path {
        &self.top
    }

    /// The folder a lane's worker works in (its worktree, at the workers' folder).
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

    /// Makes a lane's worktree ready for an attempt from `base`: created the first time
    /// (with `.worktreeinclude`'s files and `--setup`), else reset to it with untracked files
    /// removed and ignored ones (build caches) kept.
    pub fn prepare(&self, lane: usize, base: &str) -> Result<Prepared> {
        if self.pool.exists(lane) && self.pool.reset(lane, base).is_err() {
            // It is prdloop's own (its last work is pinned already): made anew, e.g. after a
            // worker was killed holding its index.lock.
            let _g = self.guard()?;
            self.pool.remove(lane)?;
        }
        if !self.pool.exists(lane) {
            {
                let _g = self.guard()?;
                self.pool.add(lane, base)?;
            }
            self.pool.include(lane, &self.top)?;
            if let Some(cmd) = &self.settings.setup {
                pool::setup(cmd, &self.lane_dir(lane))?;
            }
        }
        Ok(Prepared {
            base: base.to_string(),
        })
    }

    /// Puts back the stash entries the run began with that a worker dropped (`git stash pop`
    /// in a worktree pops the user's stash); a warning when it had to.
    pub fn guard_stash(&self) -> Option<String> {
        if self.stash.is_empty() {
            return None;
        }
        let _g = self.guard().ok()?;
        let now = stash_list(&self.repo);
        let missing: Vec<&(String, String)> = self
            .stash
            .iter()
            .filter(|(h, _)| !now.iter().any(|(n, _)| n == h))
            .collect();
        if missing.is_empty() {
            return None;
        }
        // Oldest first, so that their order stays.
        for (h, m) in missing.iter().rev() {
            let _ = self.repo.cmd().args(&["stash", "store", "-m", m, h]).run();
        }
        Some(format!(
            "a worker dropped {} of your stash entries (the stash is shared by every worktree); they were put back",
            missing.len()
        ))
    }

    /// Where an attempt is pinned.
    pub fn attempt_ref(&self, id: &str, attempt: &str) -> String {
        self.refname(&format!("{id}/{attempt}"))
    }

    /// What the worker left in its worktree, as a commit on its base, pinned as
    /// `refs/prdloop/<session>/<criterion>/<attempt>`.
    pub fn take(&self, lane: usize, base: &str, id: &str, attempt: &str) -> Result<String> {
        let wt = Git::new(self.pool.path(lane));
        let a = wt.snapshot(base, &self.exclude, &self.scratch)?;
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
    /// checkout and the merge applied to it, all or nothing. `message`: the commit's, with
    /// `--commit`.
    pub fn land(&self, base: &str, a: &str, kept: &str, message: &str) -> Landing {
        match self.try_land(base, a, kept, message) {
            Ok(l) => l,
            Err(e) => Landing::Error {
                message: format!("{e:#}"),
            },
        }
    }

    fn try_land(&self, base: &str, a: &str, kept: &str, message: &str) -> Result<Landing> {
        if self.repo.tree_of(a)? == self.repo.tree_of(base)? {
            return Ok(Landing::Unchanged);
        }
        let _g = self.guard()?;
        match merge_into_checkout(&self.repo, base, a, &self.exclude, &self.scratch)? {
            Merged::Unchanged => Ok(Landing::Unchanged),
            Merged::Conflict { files, theirs } => Ok(Landing::Conflict {
                files,
                kept: kept.to_string(),
                theirs,
            }),
            Merged::Applied { files, patch } => {
                let (commit, note) = if self.settings.commit {
                    match self.commit(base, a, &patch, &files, message) {
                        Ok(c) => (Some(c), None),
                        Err(why) => (None, Some(format!("not committed: {why}"))),
                    }
                } else {
                    (None, None)
                };
                Ok(Landing::Merged {
                    files,
                    commit,
                    note,
                })
            }
        }
    }

    /// `--commit`: the landed change alone (not the user's other uncommitted edits) as a
    /// commit on HEAD; the index entries of its files follow HEAD unless the user has staged
    /// something in them. `Err`: why it was not committed (the change is in the checkout
    /// either way; nothing else changed).
    fn commit(
        &self,
        base: &str,
        a: &str,
        patch: &[u8],
        files: &[String],
        message: &str,
    ) -> std::result::Result<String, String> {
        let e = |e: anyhow::Error| format!("{e:#}");
        let head = self.repo.commit_of("HEAD").ok_or("no HEAD commit")?;
        let tree = self.commit_tree(&head, base, a, patch).ok_or(
            "its change cannot be separated from your uncommitted edits next to it".to_string(),
        )?;
        let git_dir = self.repo.git_dir().map_err(e)?;
        if git_dir.join("index.lock").exists() {
            return Err("another git process holds the index (index.lock)".into());
        }
        // Files whose index entries the user changed: left as they are.
        let staged: Vec<String> = {
            let (out, _) = self
                .repo
                .cmd()
                .args(&["diff", "--cached", "--name-only", "-z", &head, "--"])
                .args(&literal(files))
                .output()
                .map_err(e)?;
            String::from_utf8_lossy(&out)
                .split('\0')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        };
        let ident = self.repo.text(&["var", "GIT_COMMITTER_IDENT"]).is_ok();
        let args = ["commit-tree", &tree, "-p", &head, "-m", message];
        let mut c = self.repo.cmd().args(&args);
        if !ident {
            c = c.as_self();
        }
        let commit = c.text().map_err(e)?;
        self.repo
            .cmd()
            .args(&[
                "update-ref",
                "-m",
                "prdloop: criterion passed",
                "HEAD",
                &commit,
                &head,
            ])
            .run()
            .map_err(e)?;
        // Where the user staged something, the change is merged into what they staged.
        for f in &staged {
            if let Err(why) = self.merge_staged(&head, &commit, f) {
                let _ = self
                    .repo
                    .cmd()
                    .args(&["update-ref", "-m", "prdloop: undo", "HEAD", &head, &commit])
                    .run();
                return Err(format!(
                    "your staged changes to {f} and the criterion's could not be combined in the index ({why})"
                ));
            }
        }
        let follow: Vec<String> = files
            .iter()
            .filter(|f| !staged.contains(f))
            .cloned()
            .collect();
        if !follow.is_empty()
            && let Err(err) = self
                .repo
                .cmd()
                .args(&["reset", "-q", "--"])
                .args(&literal(&follow))
                .run()
        {
            // The index could not follow: HEAD goes back, so that nothing looks reverted.
            let _ = self
                .repo
                .cmd()
                .args(&["update-ref", "-m", "prdloop: undo", "HEAD", &head, &commit])
                .run();
            return Err(format!("the index could not be updated: {err:#}"));
        }
        Ok(commit)
    }

    /// The index entry of `path`, which the user changed from `old` (HEAD before the commit),
    /// gets the commit's change too: `git merge-file` of the three versions.
    fn merge_staged(&self, old: &str, commit: &str, path: &str) -> std::result::Result<(), String> {
        let e = |e: anyhow::Error| format!("{e:#}");
        let blob = |rev: String| -> std::result::Result<Vec<u8>, String> {
            let (out, _) = self
                .repo
                .cmd()
                .args(&["cat-file", "blob", &rev])
                .output()
                .map_err(e)?;
            Ok(out)
        };
        let mode = self
            .repo
            .cmd()
            .args(&["ls-files", "-s", "--"])
            .args(&literal(&[path.to_string()]))
            .text()
            .map_err(e)?;
        let mode = mode
            .split_whitespace()
            .next()
            .ok_or("it is not in the index")?;
        let dir = tempfile::tempdir_in(&self.scratch).map_err(|x| x.to_string())?;
        let write = |name: &str, bytes: Vec<u8>| -> std::result::Result<PathBuf, String> {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).map_err(|x| x.to_string())?;
            Ok(p)
        };
        let ours = write("ours", blob(format!(":{path}"))?)?;
        let base = write("base", blob(format!("{old}:{path}"))?)?;
        let theirs = write("theirs", blob(format!("{commit}:{path}"))?)?;
        let (merged, conflicts) = self
            .repo
            .cmd()
            .arg("merge-file")
            .arg("-p")
            .arg(&ours)
            .arg(&base)
            .arg(&theirs)
            .ok_codes(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
            .output()
            .map_err(e)?;
        if conflicts != 0 {
            return Err("they overlap".into());
        }
        let sha = {
            let (out, _) = self
                .repo
                .cmd()
                .args(&["hash-object", "-w", "--stdin"])
                .input(&merged)
                .output()
                .map_err(e)?;
            String::from_utf8_lossy(&out).trim().to_string()
        };
        self.repo
            .cmd()
            .args(&[
                "update-index",
                "--cacheinfo",
                &format!("{mode},{sha},{path}"),
            ])
            .run()
            .map_err(e)
    }

    /// HEAD's tree with the attempt's change (from `base` to `a`) in it: a three-way merge
    /// where git has `merge-tree --merge-base` (2.40), else the patch applied to HEAD's tree.
    fn commit_tree(&self, head: &str, base: &str, a: &str, patch: &[u8]) -> Option<String> {
        if Git::version().is_ok_and(|v| v >= (2, 40)) {
            let (out, code) = self
                .repo
                .cmd()
                .args(&["merge-tree", "--write-tree", "--no-messages"])
                .arg(&format!("--merge-base={base}"))
                .args(&[head, a])
                .ok_codes(&[1])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out);
            let tree = text.lines().next().unwrap_or_default().trim().to_string();
            return (code == 0 && !tree.is_empty()).then_some(tree);
        }
        let index = tempfile::Builder::new()
            .prefix("index-")
            .tempfile_in(&self.scratch)
            .ok()?
            .into_temp_path();
        let _ = std::fs::remove_file(&index);
        self.repo
            .cmd()
            .args(&["read-tree", head])
            .index(&index)
            .run()
            .ok()?;
        self.repo
            .cmd()
            .args(&["apply", "--cached", "--whitespace=nowarn", "-"])
            .input(patch)
            .index(&index)
            .run()
            .ok()?;
        self.repo.cmd().arg("write-tree").index(&index).text().ok()
    }

    /// Removes this run's worktrees (their attempts are pinned already), unless kept.
    pub fn finish(&self) -> Vec<String> {
        if self.settings.keep {
            return Vec::new();
        }
        let _g = self.guard();
        self.pool.remove_all()
    }

    pub fn keep(&self) -> bool {
        self.settings.keep
    }

    /// Removes the worktrees that runs no longer alive left in this repository (their work
    /// pinned first).
    pub fn sweep(&self) -> pool::Swept {
        // By pid only: a resumed session's own worktrees from its crashed run are swept too
        // (their work pinned first); this process's are alive.
        pool::sweep(&self.repo, &self.common, &self.scratch, None)
    }

    /// The pool folder's worktrees, for `--keep-worktrees`' message.
    pub fn pool_root(&self) -> &Path {
        self.pool.root()
    }
}
