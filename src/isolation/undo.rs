//! Undo points: before a landing changes the checkout, its whole working state (tracked,
//! staged and untracked files) is kept under `refs/prdloop-undo/<time>-<n>`, with what the
//! landing wrote; `prdloop undo` puts the files back, refusing where the user has changed
//! them since.
//!
//! The ref names a commit whose tree is the checkout as it was, whose first parent is that
//! snapshot, whose second is the landing's result, and (when the index could be read) whose
//! third holds the index as a tree; its message carries a [`Point`] as JSON.

use std::path::Path;

use anyhow::{Context, Result};

use super::git::Git;
use super::repo_path::RepoPath;
use super::transaction::{self, Entry};

/// Where undo points live (outside `refs/prdloop/`, which `clean --all` empties).
pub const PREFIX: &str = "refs/prdloop-undo/";

/// How long `prdloop clean` keeps undo points.
pub const KEEP_DAYS: u64 = 14;

const TITLE: &str = "prdloop undo point: ";

/// What one landing changed, as kept for undoing it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    /// The ref it is kept under (not stored: read from the ref).
    #[serde(skip)]
    pub name: String,
    pub at_ms: u64,
    /// What landed: a criterion's id, a shard.
    pub label: String,
    /// The PRD it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The files the landing changed.
    pub files: Vec<RepoPath>,
    /// HEAD when it landed.
    pub head: String,
    /// The commit `--commit` made of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The snapshot of the checkout before (filled from the commit's parents).
    #[serde(skip)]
    pub before: String,
    /// The landing's result (from the parents).
    #[serde(skip)]
    pub after: String,
    /// The index before, as a commit (from the parents), when it could be read.
    #[serde(skip)]
    pub index: Option<String>,
}

/// Who and what a landing is, for its undo point.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    pub label: String,
    pub prd: Option<String>,
    pub session: Option<String>,
}

/// Keeps an undo point: `before` is the checkout as a commit, `after_tree` what the
/// landing writes. Returns the point (its ref made).
pub fn create(
    repo: &Git,
    scratch: &Path,
    before: &str,
    after_tree: &str,
    origin: &Origin,
    files: Vec<RepoPath>,
) -> Result<Point> {
    let head = repo
        .commit_of("HEAD")
        .context("the checkout has no HEAD commit")?;
    let after = repo.commit_tree(after_tree, &[before], "prdloop: a landing's result")?;
    // The index, read through a copy (writing a tree from the real one would touch it).
    let index = index_tree(repo, scratch)
        .ok()
        .map(|t| repo.commit_tree(&t, &[&head], "prdloop: the index before a landing"))
        .transpose()?;
    let at_ms = crate::clock::now_ms();
    let point = Point {
        name: String::new(),
        at_ms,
        label: origin.label.clone(),
        prd: origin.prd.clone(),
        session: origin.session.clone(),
        files,
        head,
        commit: None,
        before: before.to_string(),
        after,
        index,
    };
    write(repo, &point, &format!("{PREFIX}{at_ms}-{}", unique()))
}

fn unique() -> String {
    format!("{:08x}", fastrand::u32(..))
}

/// Writes a point's commit under `name`.
fn write(repo: &Git, point: &Point, name: &str) -> Result<Point> {
    let tree = repo.tree_of(&point.before)?;
    let message = format!(
        "{TITLE}{}\n\n{}\n",
        point.label,
        serde_json::to_string_pretty(point)?
    );
    let mut parents = vec![point.before.as_str(), point.after.as_str()];
    if let Some(i) = &point.index {
        parents.push(i);
    }
    let c = repo.commit_tree(&tree, &parents, &message)?;
    repo.pin(name, &c)?;
    Ok(Point {
        name: name.to_string(),
        ..point.clone()
    })
}

/// Records the commit `--commit` made of a point's landing.
pub fn set_commit(repo: &Git, point: &Point, commit: &str) -> Result<()> {
    let p = Point {
        commit: Some(commit.to_string()),
        ..point.clone()
    };
    write(repo, &p, &point.name).map(drop)
}

fn index_tree(repo: &Git, scratch: &Path) -> Result<String> {
    let copy = tempfile::Builder::new()
        .prefix("index-")
        .tempfile_in(scratch)?
        .into_temp_path();
    std::fs::copy(repo.git_dir()?.join("index"), &copy)?;
    repo.cmd().arg("write-tree").index(&copy).text()
}

/// The repository's undo points, newest first.
pub fn list(repo: &Git) -> Result<Vec<Point>> {
    let text = repo.text(&["for-each-ref", "--format=%(refname)", PREFIX])?;
    let mut v = Vec::new();
    for name in text.lines().filter(|l| !l.is_empty()) {
        if let Some(p) = read(repo, name) {
            v.push(p);
        }
    }
    v.sort_by(|a, b| b.at_ms.cmp(&a.at_ms).then(b.name.cmp(&a.name)));
    Ok(v)
}

fn read(repo: &Git, name: &str) -> Option<Point> {
    let raw = repo.text(&["cat-file", "commit", name]).ok()?;
    let (headers, message) = raw.split_once("\n\n")?;
    let parents: Vec<&str> = headers
        .lines()
        .filter_map(|l| l.strip_prefix("parent "))
        .collect();
    let json = message.split_once("\n\n")?.1;
    let mut p: Point = serde_json::from_str(json.trim()).ok()?;
    p.name = name.to_string();
    p.before = parents.first()?.to_string();
    p.after = parents.get(1)?.to_string();
    p.index = parents.get(2).map(|s| s.to_string());
    Some(p)
}

/// Deletes a point's ref.
pub fn drop_point(repo: &Git, point: &Point) -> Result<()> {
    repo.cmd().args(&["update-ref", "-d", &point.name]).run()
}

/// Why a point could not be undone; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error("these files changed since {label} landed: {}; undo them by hand or put them back first", files.join(", "))]
    ChangedSince { label: String, files: Vec<String> },
    #[error("HEAD moved since {label} was committed as {commit}: use `git revert {commit}`")]
    HeadMoved { label: String, commit: String },
    #[error("{0:#}")]
    Failed(anyhow::Error),
}

/// The entries of `files` in `rev`, in their order (`None`: not there).
fn entries(repo: &Git, rev: &str, files: &[RepoPath]) -> Result<Vec<Option<Entry>>> {
    let mut map = transaction::entries(repo, rev, files)?;
    Ok(files.iter().map(|f| map.remove(f)).collect())
}

/// Puts the files of one landing back as they were before it (and HEAD and the index, when
/// `--commit` moved them and nothing moved them since). The caller holds the repository
/// lock.
pub fn restore(
    repo: &Git,
    journal: &Path,
    scratch: &Path,
    point: &Point,
) -> std::result::Result<(), UndoError> {
    let f = UndoError::Failed;
    let head = repo.commit_of("HEAD").unwrap_or_default();
    if let Some(c) = &point.commit
        && head != *c
    {
        return Err(UndoError::HeadMoved {
            label: point.label.clone(),
            commit: c.clone(),
        });
    }
    let now = repo.snapshot(&head, &[], scratch).map_err(f)?;
    let is_now = entries(repo, &now, &point.files).map_err(f)?;
    let landed = entries(repo, &point.after, &point.files).map_err(f)?;
    let was = entries(repo, &point.before, &point.files).map_err(f)?;
    if is_now == was && point.commit.is_none() {
        // It never landed (a crash came between the point and the change): nothing to do.
        drop_point(repo, point).map_err(f)?;
        return Ok(());
    }
    let changed: Vec<String> = point
        .files
        .iter()
        .zip(is_now.iter().zip(&landed))
        .filter(|(_, (n, l))| n != l)
        .map(|(p, _)| p.lossy())
        .collect();
    if !changed.is_empty() {
        return Err(UndoError::ChangedSince {
            label: point.label.clone(),
            files: changed,
        });
    }
    let target = with_entries(repo, scratch, &now, &point.files, &was).map_err(f)?;
    let label = format!("the undoing of {}", point.label);
    transaction::apply(repo, journal, &now, &target, &label)
        .map_err(|e| UndoError::Failed(anyhow::anyhow!("{e}")))?;
    if let Some(c) = &point.commit {
        // HEAD back to where it was, and the index entries of the landed files with it.
        let index_from = point.index.as_deref().unwrap_or(&point.head);
        let staged = entries(repo, index_from, &point.files).map_err(f)?;
        let info: Vec<u8> = point
            .files
            .iter()
            .zip(&staged)
            .flat_map(|(p, e)| transaction::index_info(p, e.as_ref()))
            .collect();
        repo.cmd()
            .args(&["update-ref", "-m", "prdloop undo", "HEAD", &point.head, c])
            .run()
            .map_err(f)?;
        repo.cmd()
            .args(&["update-index", "-z", "--index-info"])
            .input(&info)
            .run()
            .map_err(f)?;
    }
    drop_point(repo, point).map_err(f)
}

/// The tree of commit `base` with `files` set to `entries` (absent = removed).
fn with_entries(
    repo: &Git,
    scratch: &Path,
    base: &str,
    files: &[RepoPath],
    entries: &[Option<Entry>],
) -> Result<String> {
    let index = tempfile::Builder::new()
        .prefix("index-")
        .tempfile_in(scratch)?
        .into_temp_path();
    let _ = std::fs::remove_file(&index);
    repo.cmd().args(&["read-tree", base]).index(&index).run()?;
    let info: Vec<u8> = files
        .iter()
        .zip(entries)
        .flat_map(|(p, e)| transaction::index_info(p, e.as_ref()))
        .collect();
    repo.cmd()
        .args(&["update-index", "-z", "--index-info"])
        .input(&info)
        .index(&index)
        .run()?;
    repo.cmd().arg("write-tree").index(&index).text()
}

/// Removes undo points older than [`KEEP_DAYS`] (all of them with `all`); how many went.
pub fn expire(repo: &Git, all: bool) -> Result<usize> {
    let cutoff = crate::clock::now_ms().saturating_sub(KEEP_DAYS * 24 * 3600 * 1000);
    let mut n = 0;
    for p in list(repo)? {
        if all || p.at_ms < cutoff {
            drop_point(repo, &p)?;
            n += 1;
        }
    }
    Ok(n)
}
