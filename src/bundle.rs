//! A shard's bundle: what `run --shard i/N --bundle DIR` hands to `prdloop merge`. A folder
//! with `bundle.json` (the manifest: the base commit, the PRD it belongs to, each criterion's
//! outcome, attempts, cost and tokens, the iterations), `changes.patch` (a binary patch of
//! what the shard's run merged into its checkout, against the checkout as the run found it)
//! and `logs/` (the session's worker and check logs). Written once, at the run's end, as a
//! whole: a temporary folder beside DIR that takes DIR's place by a rename. Read back by
//! `read.rs` ([`Bundle::load`]) as untrusted input (it comes back as a CI artifact).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::backend::Usage;
use crate::isolation::git::Git;
use crate::shard::Shard;
use crate::state::{CriterionState, CriterionStatus, Evidence, LoopEntry, SessionState};

mod read;
pub use read::{
    Bundle, DEFAULT_MAX_SIZE, LOG_DEPTH_MAX, LOG_FILES_MAX, Limits, LogFile, MANIFEST_MAX, Refused,
    StagedPatch, parse_size, shown,
};

/// The manifest's format; a newer one is refused.
pub const VERSION: u32 = 1;
pub const MANIFEST: &str = "bundle.json";
pub const PATCH: &str = "changes.patch";
pub const LOGS: &str = "logs";

/// Which PRD a bundle belongs to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrdId {
    /// The PRD's path from the top of the repository.
    pub path: String,
    /// Its front matter `id`.
    #[serde(default)]
    pub id: Option<String>,
    /// A hash of its text when the shard began.
    pub hash: String,
}

/// What became of one of the shard's criteria.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriterionEnd {
    /// A worker's attempt or the runner's check passed, and its work was merged.
    Pass,
    /// Attempted, and not passing at the end.
    Fail,
    /// Never attempted (the run ended first).
    Untried,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CriterionRecord {
    pub id: String,
    pub outcome: CriterionEnd,
    /// The state file's record of it; `lastLog` is a path inside the bundle.
    pub state: CriterionState,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub version: u32,
    /// The prdloop version that wrote it.
    pub prdloop: String,
    pub shard: Shard,
    /// The commit the shard's checkout was at (HEAD) when its run began.
    pub base: String,
    pub prd: PrdId,
    /// The shard's criteria.
    pub criteria: Vec<String>,
    pub outcomes: Vec<CriterionRecord>,
    /// The shard run's exit code.
    pub exit_code: u8,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    pub iterations: Vec<LoopEntry>,
    pub cost_usd: f64,
    pub usage: Usage,
    /// The files the patch changes.
    pub files: Vec<String>,
    pub started_at: u64,
    pub completed_at: u64,
    #[serde(default)]
    pub session: Option<String>,
}

/// The verdict on one of the shard's criteria from its state at the run's end.
pub fn verdict(state: &CriterionState) -> CriterionEnd {
    let passed = state.status == CriterionStatus::Completed
        && matches!(
            state.verified_by,
            Some(Evidence::Checked | Evidence::Reviewed | Evidence::Claimed)
        );
    if passed {
        CriterionEnd::Pass
    } else if state.attempts > 0 || state.last_failure.is_some() {
        CriterionEnd::Fail
    } else {
        CriterionEnd::Untried
    }
}

/// A shard's run in progress: what it started from, to make its bundle at the end.
pub struct ShardRun {
    pub shard: Shard,
    pub ids: Vec<String>,
    dir: PathBuf,
    repo: Git,
    base: String,
    /// The checkout as the run found it, as a commit on `base`.
    start: String,
    exclude: Vec<String>,
    scratch: tempfile::TempDir,
    prd: PrdId,
    started_at: u64,
}

impl ShardRun {
    /// Takes the checkout as it is before the run. `own`: prdloop's paths (the PRD, the
    /// state folder, …), never part of the patch; the bundle folder is added to them.
    pub fn begin(
        shard: Shard,
        ids: Vec<String>,
        bundle_dir: &Path,
        prd_path: &Path,
        prd: &crate::prd::Prd,
        workdir: &Path,
        own: &[&Path],
    ) -> Result<ShardRun> {
        let repo = crate::isolation::find_repo(workdir).map_err(|why| {
            anyhow::anyhow!("--shard needs a git repository with a commit: {why}")
        })?;
        let git = Git::new(&repo.top);
        let base = git.commit_of("HEAD").context("no HEAD commit")?;
        let dir = std::path::absolute(bundle_dir)
            .with_context(|| format!("failed to resolve --bundle `{}`", bundle_dir.display()))?;
        let mut paths: Vec<&Path> = own.to_vec();
        paths.push(&dir);
        let exclude = crate::isolation::own_exclusions(&repo.top, &paths);
        let scratch = tempfile::Builder::new()
            .prefix("prdloop-shard-")
            .tempdir()
            .context("failed to make a temporary folder")?;
        let prd_id = prd_id(&repo.top, prd_path, prd);
        // Before any work: a folder the bundle cannot be written to, or one holding another
        // shard's or another commit's bundle (which a run would overwrite), is refused now.
        check_target(&dir, shard, &base, &prd_id)?;
        let start = git.snapshot(&base, &exclude, scratch.path())?;
        Ok(ShardRun {
            shard,
            ids,
            prd: prd_id,
            repo: git,
            base,
            start,
            exclude,
            scratch,
            dir,
            started_at: crate::state::now_ms(),
        })
    }

    /// Writes the bundle from the checkout as the run left it and the run's state (`None`
    /// when the run never got as far as saving one).
    pub fn finish(self, state: Option<&SessionState>, exit: crate::exit::Exit) -> Result<PathBuf> {
        let exit_code = exit.code();
        let end = self
            .repo
            .snapshot(&self.start, &self.exclude, self.scratch.path())?;
        let files = self.repo.changed(&self.start, &end, &self.exclude)?;
        let patch = self.repo.patch(&self.start, &end, &self.exclude)?;
        let logs = state
            .map(|s| PathBuf::from(&s.log_dir))
            .filter(|d| d.is_dir());
        let outcomes = self
            .ids
            .iter()
            .map(|id| {
                let mut st = state
                    .and_then(|s| s.criteria.iter().find(|c| &c.id == id))
                    .cloned()
                    .unwrap_or_else(|| CriterionState {
                        id: id.clone(),
                        ..CriterionState::default()
                    });
                // Its log, as the bundle holds it.
                st.last_log = st.last_log.as_ref().and_then(|l| {
                    let l = Path::new(l);
                    let rel = l.strip_prefix(logs.as_deref()?).ok()?;
                    Some(format!("{LOGS}/{}", rel.display()))
                });
                CriterionRecord {
                    id: id.clone(),
                    outcome: verdict(&st),
                    state: st,
                }
            })
            .collect();
        let manifest = Manifest {
            version: VERSION,
            prdloop: env!("CARGO_PKG_VERSION").to_string(),
            shard: self.shard,
            base: self.base.clone(),
            prd: self.prd.clone(),
            criteria: self.ids.clone(),
            outcomes,
            exit_code,
            summary: state.and_then(|s| s.summary.clone()),
            stop_reason: state.and_then(|s| s.stop_reason.clone()),
            iterations: state.map(|s| s.loop_history.clone()).unwrap_or_default(),
            cost_usd: state.map_or(0.0, |s| s.total_cost_usd),
            usage: state.map(|s| s.usage).unwrap_or_default(),
            files,
            started_at: self.started_at,
            completed_at: crate::state::now_ms(),
            session: state.map(|s| s.session_id.clone()),
        };
        write(&self.dir, &manifest, &patch, logs.as_deref())?;
        Ok(self.dir)
    }
}

/// The PRD's identity in a repository whose top is `top`.
pub fn prd_id(top: &Path, prd_path: &Path, prd: &crate::prd::Prd) -> PrdId {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let path = canon(prd_path)
        .strip_prefix(canon(top))
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .unwrap_or_else(|_| prd_path.display().to_string());
    PrdId {
        path,
        id: prd.id().map(String::from),
        hash: crate::state::text_hash(prd.text()),
    }
}

/// Whether `dir` may receive this shard's bundle: new, empty, or this very shard's bundle of
/// this commit and PRD (a re-run).
fn check_target(dir: &Path, shard: Shard, base: &str, prd: &PrdId) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let empty = std::fs::read_dir(dir)
        .with_context(|| format!("failed to read `{}`", dir.display()))?
        .next()
        .is_none();
    if empty {
        return Ok(());
    }
    // As merge reads one: a plain file, bounded.
    let text = read::read_plain(&dir.join(MANIFEST), MANIFEST_MAX, "").map_err(|_| {
        anyhow::anyhow!(
            "--bundle `{}` is a folder that holds other files, not a bundle; give a new or empty folder",
            dir.display()
        )
    })?;
    let m: Manifest = serde_json::from_slice(&text)
        .with_context(|| format!("--bundle `{}` holds an unreadable bundle", dir.display()))?;
    if m.shard != shard || m.base != base || m.prd.path != prd.path || m.prd.hash != prd.hash {
        bail!(
            "--bundle `{}` holds the bundle of shard {} of {} at commit {} (from another start: the PRD or the commit differ); give another folder (it would be replaced)",
            dir.display(),
            m.shard,
            m.prd.path,
            &m.base[..m.base.len().min(10)]
        );
    }
    Ok(())
}

/// Writes a bundle folder as a whole: everything goes into a temporary folder beside `dir`,
/// which then takes `dir`'s place. An existing `dir` must be empty or an earlier bundle.
pub fn write(dir: &Path, manifest: &Manifest, patch: &[u8], logs: Option<&Path>) -> Result<()> {
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("failed to create `{}`", parent.display()))?;
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .with_context(|| format!("failed to read `{}`", dir.display()))?
            .next()
            .is_none();
        if !empty && !dir.join(MANIFEST).is_file() {
            bail!(
                "--bundle `{}` is a folder that holds other files, not a bundle; give a new or empty folder",
                dir.display()
            );
        }
    }
    let tmp = tempfile::Builder::new()
        .prefix(".prdloop-bundle-")
        .tempdir_in(parent)
        .with_context(|| {
            format!(
                "failed to make a temporary folder in `{}`",
                parent.display()
            )
        })?;
    std::fs::write(tmp.path().join(PATCH), patch).context("failed to write the bundle's patch")?;
    if let Some(logs) = logs {
        copy_dir(logs, &tmp.path().join(LOGS))
            .with_context(|| format!("failed to copy the logs of `{}`", logs.display()))?;
    }
    let mut json = serde_json::to_string_pretty(manifest)?;
    json.push('\n');
    std::fs::write(tmp.path().join(MANIFEST), json).context("failed to write the manifest")?;
    sync_dir(tmp.path());
    let staged = tmp.keep();
    if dir.exists() {
        let old = parent.join(format!(".prdloop-bundle-old-{}", uuid::Uuid::new_v4()));
        std::fs::rename(dir, &old)
            .with_context(|| format!("failed to move the old bundle `{}` aside", dir.display()))?;
        let _ = std::fs::remove_dir_all(&old);
    }
    std::fs::rename(&staged, dir)
        .with_context(|| format!("failed to write the bundle `{}`", dir.display()))?;
    sync_dir(parent);
    Ok(())
}

fn sync_dir(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// Copies a folder's files and subfolders (not symlinks' targets).
pub fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let ty = e.file_type()?;
        let dest = to.join(e.file_name());
        if ty.is_dir() {
            copy_dir(&e.path(), &dest)?;
        } else if ty.is_file() && e.file_name() != crate::worker::output_log::FILE {
            std::fs::copy(e.path(), &dest)?;
        }
    }
    // The logs prdloop keeps in one file, as a file each: a bundle holds plain files.
    crate::worker::output_log::export(from, to)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let mut s = CriterionState::default();
        assert_eq!(verdict(&s), CriterionEnd::Untried);
        s.attempts = 2;
        assert_eq!(verdict(&s), CriterionEnd::Fail);
        s.status = CriterionStatus::Completed;
        s.verified_by = Some(Evidence::Before);
        assert_eq!(verdict(&s), CriterionEnd::Fail, "ticked before the run");
        s.verified_by = Some(Evidence::Claimed);
        assert_eq!(verdict(&s), CriterionEnd::Pass);
    }

    #[test]
    fn a_bundle_replaces_an_earlier_one_whole_and_refuses_a_foreign_folder() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("b");
        let m = Manifest {
            version: VERSION,
            prdloop: "0".into(),
            shard: Shard { index: 1, count: 2 },
            base: "abc".into(),
            prd: PrdId {
                path: "PRD.md".into(),
                id: None,
                hash: "h".into(),
            },
            criteria: vec![],
            outcomes: vec![],
            exit_code: 0,
            summary: None,
            stop_reason: None,
            iterations: vec![],
            cost_usd: 0.0,
            usage: Usage::default(),
            files: vec![],
            started_at: 0,
            completed_at: 0,
            session: None,
        };
        write(&dir, &m, b"one", None).unwrap();
        write(&dir, &m, b"two", None).unwrap();
        let b = Bundle::load(&dir, &Limits::default()).unwrap();
        assert_eq!(b.patch().unwrap(), b"two");
        let found = Bundle::find(&[t.path().to_path_buf()], &Limits::default()).unwrap();
        assert_eq!(found.len(), 1);
        // Nothing but the bundle is left beside it.
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);
        let foreign = t.path().join("src");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("main.rs"), "").unwrap();
        assert!(write(&foreign, &m, b"", None).is_err());
        assert!(foreign.join("main.rs").exists());
    }
}
