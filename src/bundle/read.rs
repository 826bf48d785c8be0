//! Reading a bundle back, as untrusted input: a bundle reaches the fan-in job as a CI
//! artifact, and whoever can run a job in the repository (or a compromised shard) controls
//! its bytes. Nothing in it is taken on its word: every file read is a plain file inside the
//! bundle folder (no symbolic link, device or FIFO), read with a bound on its size; the
//! manifest's numbers are in range and its outcomes are of its own criteria; and, against
//! the PRD ([`Bundle::check`]), its criteria are the ones the split gives its shard and none
//! is a `Verify: Custom` one. A refusal ([`Refused`]) names the file and the field.

use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use super::{LOGS, MANIFEST, Manifest, PATCH, PrdId, VERSION};
use crate::prd::Prd;
use crate::shard::{MAX_SHARDS, Shard};

mod files;
mod validate;

pub(crate) use files::read_plain;
use files::*;
use validate::validate;

/// The most bytes of a manifest read. It is parsed whole into memory; a real one holds a few
/// hundred bytes per criterion and per iteration. Not raised by `--max-bundle-size`.
pub const MANIFEST_MAX: u64 = 4 << 20;
/// The default bound (`--max-bundle-size`) of a bundle's patch, and of its logs together.
pub const DEFAULT_MAX_SIZE: u64 = 256 << 20;
/// The most files under `logs/`.
pub const LOG_FILES_MAX: usize = 10_000;
/// The deepest folder under `logs/` (a session's logs are one level deep).
pub const LOG_DEPTH_MAX: usize = 8;
/// Bounds of the manifest's numbers: far above any real run, low enough that sums over
/// [`MAX_SHARDS`] bundles cannot overflow.
const COUNT_MAX: u64 = 1_000_000;
const TOKENS_MAX: u64 = 1_000_000_000_000_000;
const COST_MAX: f64 = 1e9;
const ID_MAX: usize = 200;

/// How much of a bundle is read: `--max-bundle-size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes of the patch, and of the logs together.
    pub size: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            size: DEFAULT_MAX_SIZE,
        }
    }
}

/// A bundle refused: which file, which field in it, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub file: PathBuf,
    /// The manifest's field (`shard.count`, `outcomes[2].id`), when the fault is in one.
    pub field: Option<String>,
    pub why: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.why)
    }
}

impl std::error::Error for Refused {}

fn refused(file: &Path, field: Option<String>, why: impl Into<String>) -> Refused {
    Refused {
        file: file.to_path_buf(),
        field,
        why: why.into(),
    }
}

/// A text from a bundle, fit to be shown: on one line, without control characters, short.
pub fn shown(s: &str) -> String {
    crate::text::one_line(s, 120)
}

/// One of the files under `logs/`, found plain and within the bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// Its path under `logs/`.
    pub rel: PathBuf,
    pub len: u64,
}

/// A bundle read back and found well-formed (not yet checked against the PRD: see
/// [`Bundle::check`]).
#[derive(Debug, Clone)]
pub struct Bundle {
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// The size of `changes.patch`, found within the bound; read by [`Bundle::patch`] when
    /// needed, one bundle at a time.
    pub patch_len: u64,
    /// The files under `logs/`.
    pub logs: Vec<LogFile>,
    limits: Limits,
}

impl Bundle {
    /// Reads the bundle in `dir`, trusting nothing in it.
    pub fn load(dir: &Path, limits: &Limits) -> Result<Bundle, Refused> {
        let manifest_path = dir.join(MANIFEST);
        let text = read_plain(&manifest_path, MANIFEST_MAX, "")?;
        let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| {
            refused(
                &manifest_path,
                None,
                format!("not a prdloop bundle manifest: {}", shown(&e.to_string())),
            )
        })?;
        drop(text);
        let patch_len = plain_size(&dir.join(PATCH), limits.size, PATCH_HINT)?;
        let logs = walk_logs(&dir.join(LOGS), limits)?;
        validate(&manifest_path, &manifest, &logs)?;
        Ok(Bundle {
            dir: dir.to_path_buf(),
            manifest,
            patch_len,
            logs,
            limits: *limits,
        })
    }

    /// `changes.patch`, read as a plain file within the bound.
    pub fn patch(&self) -> Result<Vec<u8>, Refused> {
        read_plain(&self.dir.join(PATCH), self.limits.size, PATCH_HINT)
    }

    /// The bundles named by `dirs`: each a bundle folder, or a folder of bundle folders (as
    /// `actions/download-artifact` leaves several artifacts), sorted by shard. `Err` holds a
    /// [`Refused`] when a bundle is at fault; else the folders cannot be read.
    pub fn find(dirs: &[PathBuf], limits: &Limits) -> anyhow::Result<Vec<Bundle>> {
        use anyhow::Context;
        let mut found = Vec::new();
        for d in dirs {
            if std::fs::symlink_metadata(d.join(MANIFEST)).is_ok() {
                found.push(d.clone());
                continue;
            }
            let rd = std::fs::read_dir(d)
                .with_context(|| format!("failed to read the bundle folder `{}`", d.display()))?;
            let mut subs = Vec::new();
            for e in rd.filter_map(|e| e.ok()) {
                let p = e.path();
                let Ok(ty) = e.file_type() else { continue };
                if ty.is_symlink() && p.join(MANIFEST).exists() {
                    return Err(refused(
                        &p,
                        None,
                        "a symbolic link to a bundle; a bundle is a plain folder",
                    )
                    .into());
                }
                if ty.is_dir() && std::fs::symlink_metadata(p.join(MANIFEST)).is_ok() {
                    subs.push(p);
                }
            }
            if subs.is_empty() {
                anyhow::bail!(
                    "`{}` holds no bundle (no {MANIFEST} in it or in its folders); give the folders `run --shard … --bundle DIR` wrote",
                    d.display()
                );
            }
            subs.sort();
            found.extend(subs);
        }
        // Each is read into memory (its manifest, its list of logs): at most a fan-out's worth.
        if found.len() > MAX_SHARDS {
            return Err(refused(
                &dirs[0],
                None,
                format!(
                    "{} bundles, more than a fan-out has (at most {MAX_SHARDS} shards)",
                    found.len()
                ),
            )
            .into());
        }
        let mut bundles = found
            .iter()
            .map(|d| Bundle::load(d, limits))
            .collect::<Result<Vec<_>, _>>()?;
        bundles.sort_by_key(|b| b.manifest.shard.index);
        Ok(bundles)
    }

    /// A bundle of `manifest` alone, for tests of what is made of bundles.
    #[cfg(test)]
    pub fn of_manifest(dir: PathBuf, manifest: Manifest) -> Bundle {
        Bundle {
            dir,
            manifest,
            patch_len: 0,
            logs: Vec::new(),
            limits: Limits::default(),
        }
    }

    fn manifest_path(&self) -> PathBuf {
        self.dir.join(MANIFEST)
    }

    /// Whether this bundle belongs to `prd` (whose identity is `me`) at commit `head`, and
    /// holds exactly the criteria the split gives its shard: the split is a pure function of
    /// the PRD and the shard count, so it is computed again here rather than read.
    pub fn check(&self, prd: &Prd, me: &PrdId, head: &str) -> Result<(), Refused> {
        let m = &self.manifest;
        let file = self.manifest_path();
        let field = |f: &str| Some(f.to_string());
        if m.prd.path != me.path || m.prd.id != me.id {
            return Err(refused(
                &file,
                field("prd.path"),
                format!(
                    "a bundle of {} ({}), not of {} ({})",
                    shown(&m.prd.path),
                    shown(m.prd.id.as_deref().unwrap_or("no id")),
                    me.path,
                    me.id.as_deref().unwrap_or("no id")
                ),
            ));
        }
        if m.base != head {
            return Err(refused(
                &file,
                field("base"),
                format!(
                    "shard {} ran on commit {}, but this checkout is at {}; merge in a checkout of the commit the shards ran on",
                    m.shard,
                    shown(short(&m.base)),
                    short(head)
                ),
            ));
        }
        if m.prd.hash != me.hash {
            return Err(refused(
                &file,
                field("prd.hash"),
                format!(
                    "{} has changed since shard {} ran; merge into the PRD as the shards found it",
                    me.path, m.shard
                ),
            ));
        }
        // A person's gate is never passed by an artifact.
        for (i, o) in m.outcomes.iter().enumerate() {
            if prd.criterion(&o.id).is_some_and(|c| c.is_custom()) {
                return Err(refused(
                    &file,
                    Some(format!("outcomes[{i}].id")),
                    format!(
                        "{} is a `Verify: Custom` criterion: only a person ticks it, never a bundle",
                        o.id
                    ),
                ));
            }
        }
        let expected = std::collections::HashMap::new();
        let want =
            crate::shard::ids_of(&crate::shard::split(prd, m.shard.count, &expected), m.shard);
        if m.criteria != want {
            let extra: Vec<&str> = m
                .criteria
                .iter()
                .filter(|c| !want.contains(c))
                .map(String::as_str)
                .collect();
            let why = if extra.is_empty() {
                format!(
                    "{} are not shard {}'s criteria of {}: the split gives it {} (as `plan --shards {}` does)",
                    shown(&m.criteria.join(", ")),
                    m.shard,
                    me.path,
                    list(&want),
                    m.shard.count
                )
            } else {
                format!(
                    "{} not shard {}'s: the split of {} gives it {} (as `plan --shards {}` does)",
                    shown(&extra.join(", ")),
                    m.shard,
                    me.path,
                    list(&want),
                    m.shard.count
                )
            };
            return Err(refused(&file, field("criteria"), why));
        }
        Ok(())
    }

    /// Copies the logs into `to`, each file read again as a plain file within the bound.
    pub fn copy_logs(&self, to: &Path) -> anyhow::Result<()> {
        use anyhow::Context;
        let from = self.dir.join(LOGS);
        let mut left = self.limits.size;
        for f in &self.logs {
            let bytes = read_plain(&from.join(&f.rel), left, "")?;
            left -= bytes.len() as u64;
            let dest = to.join(&f.rel);
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("failed to create `{}`", parent.display()))?;
            }
            std::fs::write(&dest, bytes)
                .with_context(|| format!("failed to write `{}`", dest.display()))?;
        }
        Ok(())
    }
}

fn short(c: &str) -> &str {
    let end = c.char_indices().nth(12).map_or(c.len(), |(i, _)| i);
    &c[..end]
}

fn list(ids: &[String]) -> String {
    if ids.is_empty() {
        "no criteria".into()
    } else {
        ids.join(", ")
    }
}

/// What a bundle's patch comes to on the commit the shards ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StagedPatch {
    /// No changes.
    Empty,
    /// The patch applied on the base, as a commit (no working tree touched).
    Commit(String),
    /// The patch does not apply on the base (git's words): nothing of it can be merged.
    DoesNotApply(String),
}

impl Bundle {
    /// The patch applied on `head` in a temporary index, and the files it changes there
    /// compared with the manifest's `files`: a patch that changes a file the manifest does
    /// not name (or the other way round) is refused.
    pub fn stage(
        &self,
        git: &crate::isolation::git::Git,
        head: &str,
        scratch: &Path,
    ) -> Result<StagedPatch, Refused> {
        let patch_path = self.dir.join(PATCH);
        let listed: HashSet<&str> = self.manifest.files.iter().map(String::as_str).collect();
        let patch = self.patch()?;
        let (staged, changed) = if patch.is_empty() {
            (StagedPatch::Empty, Vec::new())
        } else {
            let message = format!("prdloop shard {}", self.manifest.shard);
            match git.commit_patch(head, &patch, scratch, &message) {
                Ok(commit) => {
                    let changed = git.changed(head, &commit, &[]).map_err(|e| {
                        refused(&patch_path, None, format!("cannot be read by git: {e:#}"))
                    })?;
                    (StagedPatch::Commit(commit), changed)
                }
                Err(e) => {
                    return Ok(StagedPatch::DoesNotApply(crate::text::one_line(
                        &format!("{e:#}"),
                        500,
                    )));
                }
            }
        };
        if let Some(f) = changed.iter().find(|f| !listed.contains(f.as_str())) {
            return Err(refused(
                &patch_path,
                None,
                format!(
                    "changes {}, which {MANIFEST}'s `files` does not name",
                    shown(f)
                ),
            ));
        }
        let changed: HashSet<&str> = changed.iter().map(String::as_str).collect();
        if let Some((i, f)) = self
            .manifest
            .files
            .iter()
            .enumerate()
            .find(|(_, f)| !changed.contains(f.as_str()))
        {
            return Err(refused(
                &self.manifest_path(),
                Some(format!("files[{i}]")),
                format!("names {}, which {PATCH} does not change", shown(f)),
            ));
        }
        Ok(staged)
    }
}

/// `--max-bundle-size`: bytes, or a number with K, M or G (KiB, MiB, GiB: `512M`, `2G`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a size: give bytes, or a number with K, M or G (e.g. 512M)");
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().map_err(|_| bad())?;
    let size = n.checked_mul(1 << shift).ok_or_else(bad)?;
    if size == 0 {
        return Err(bad());
    }
    Ok(size)
}

#[cfg(test)]
mod tests;
