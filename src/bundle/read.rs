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

const PATCH_HINT: &str = "; --max-bundle-size raises it";

fn too_big(path: &Path, len: u64, max: u64, hint: &str) -> Refused {
    refused(
        path,
        None,
        format!("{len} bytes or more, above the limit of {max}{hint}"),
    )
}

/// The size of `path`, which must be a plain file of at most `max` bytes (`hint`: how to
/// raise the bound, for the message).
fn plain_size(path: &Path, max: u64, hint: &str) -> Result<u64, Refused> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| refused(path, None, format!("cannot be read: {e}")))?;
    plain_file(path, &meta)?;
    if meta.len() > max {
        return Err(too_big(path, meta.len(), max, hint));
    }
    Ok(meta.len())
}

/// The bytes of `path`, which must be a plain file of at most `max` bytes.
pub(super) fn read_plain(path: &Path, max: u64, hint: &str) -> Result<Vec<u8>, Refused> {
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

fn plain_file(path: &Path, meta: &std::fs::Metadata) -> Result<(), Refused> {
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
fn link_count(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.nlink()
}

#[cfg(not(unix))]
fn link_count(_: &std::fs::Metadata) -> u64 {
    1
}

fn kind(ty: &std::fs::FileType) -> &'static str {
    if ty.is_symlink() {
        "a symbolic link"
    } else if ty.is_dir() {
        "a folder"
    } else {
        "a device, FIFO or socket"
    }
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // No following a link in the last component, and no blocking on a FIFO.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.len() == b.len()
}

/// The files under `root` (`logs/`): plain files and folders only, at most
/// [`LOG_FILES_MAX`] files, [`LOG_DEPTH_MAX`] deep and `limits.size` bytes together. No
/// `logs/` at all is no logs.
fn walk_logs(root: &Path, limits: &Limits) -> Result<Vec<LogFile>, Refused> {
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

/// The manifest's own consistency, without the PRD: its format, its shard, its criteria and
/// outcomes, its paths and numbers.
fn validate(file: &Path, m: &Manifest, logs: &[LogFile]) -> Result<(), Refused> {
    let bad = |field: String, why: String| Err(refused(file, Some(field), why));
    if m.version > VERSION {
        return bad(
            "version".into(),
            format!(
                "written by a newer prdloop (bundle format {}); upgrade prdloop",
                m.version
            ),
        );
    }
    if m.version == 0 {
        return bad("version".into(), "0 is no bundle format".into());
    }
    let Shard { index, count } = m.shard;
    if count == 0 || count > MAX_SHARDS {
        return bad(
            "shard.count".into(),
            format!("{count} is not a shard count (1 to {MAX_SHARDS})"),
        );
    }
    if index == 0 || index > count {
        return bad(
            "shard.index".into(),
            format!("{index} is not a shard of {count} (1 to {count})"),
        );
    }
    let mut ids = HashSet::new();
    for (i, id) in m.criteria.iter().enumerate() {
        if let Err(why) = check_id(id) {
            return bad(format!("criteria[{i}]"), why);
        }
        if !ids.insert(id.as_str()) {
            return bad(format!("criteria[{i}]"), format!("{id} is listed twice"));
        }
    }
    let mut seen = HashSet::new();
    let log_paths: HashSet<&Path> = logs.iter().map(|l| l.rel.as_path()).collect();
    for (i, o) in m.outcomes.iter().enumerate() {
        if !ids.contains(o.id.as_str()) {
            return bad(
                format!("outcomes[{i}].id"),
                format!(
                    "{} is not one of the bundle's criteria ({}): a bundle speaks only of its own",
                    shown(&o.id),
                    list(&m.criteria)
                ),
            );
        }
        if !seen.insert(o.id.as_str()) {
            return bad(
                format!("outcomes[{i}].id"),
                format!("a second outcome of {}", o.id),
            );
        }
        if let Some(log) = &o.state.last_log {
            let inside = Path::new(log)
                .strip_prefix(LOGS)
                .ok()
                .filter(|rel| rel.components().all(|c| matches!(c, Component::Normal(_))));
            if !inside.is_some_and(|rel| log_paths.contains(rel)) {
                return bad(
                    format!("outcomes[{i}].state.lastLog"),
                    format!("{} is not one of the files under {LOGS}/", shown(log)),
                );
            }
        }
        let s = &o.state;
        let at = |f: &str| Some(format!("outcomes[{i}].state.{f}"));
        count_in_range(file, at("attempts"), s.attempts.into())?;
        count_in_range(file, at("regressions"), s.regressions.into())?;
        count_in_range(file, at("agentFailures"), s.agent_failures.into())?;
        count_in_range(file, at("turns"), s.turns)?;
        cost_in_range(file, at("costUsd"), s.cost_usd)?;
        usage_in_range(file, at("usage"), &s.usage)?;
    }
    let mut files = HashSet::new();
    for (i, f) in m.files.iter().enumerate() {
        if f.is_empty() || !files.insert(f.as_str()) {
            return bad(format!("files[{i}]"), "empty or listed twice".into());
        }
    }
    for (i, e) in m.iterations.iter().enumerate() {
        let at = |f: &str| Some(format!("iterations[{i}].{f}"));
        count_in_range(file, at("attempts"), e.attempts.into())?;
        count_in_range(file, at("criteriaTotal"), e.criteria_total as u64)?;
        if e.criteria_passing > e.criteria_total {
            return Err(refused(
                file,
                at("criteriaPassing"),
                format!(
                    "{} is more than criteriaTotal ({})",
                    e.criteria_passing, e.criteria_total
                ),
            ));
        }
        cost_in_range(file, at("costUsd"), e.cost_usd)?;
        usage_in_range(file, at("usage"), &e.usage)?;
    }
    cost_in_range(file, Some("costUsd".into()), m.cost_usd)?;
    usage_in_range(file, Some("usage".into()), &m.usage)?;
    Ok(())
}

/// An id as a PRD's parser makes them: not empty, short, without control characters.
fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.chars().count() > ID_MAX || id.chars().any(char::is_control) {
        return Err(format!("`{}` is not a criterion id", shown(id)));
    }
    Ok(())
}

fn count_in_range(file: &Path, field: Option<String>, n: u64) -> Result<(), Refused> {
    if n > COUNT_MAX {
        return Err(refused(
            file,
            field,
            format!("{n} is out of range (at most {COUNT_MAX})"),
        ));
    }
    Ok(())
}

fn cost_in_range(file: &Path, field: Option<String>, usd: f64) -> Result<(), Refused> {
    if !(0.0..=COST_MAX).contains(&usd) {
        return Err(refused(
            file,
            field,
            format!("{usd} is not a cost in USD (0 to {COST_MAX})"),
        ));
    }
    Ok(())
}

fn usage_in_range(
    file: &Path,
    field: Option<String>,
    u: &crate::backend::Usage,
) -> Result<(), Refused> {
    let most = [
        u.input_tokens,
        u.output_tokens,
        u.cache_creation_input_tokens,
        u.cache_read_input_tokens,
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    if most > TOKENS_MAX {
        return Err(refused(
            file,
            field,
            format!("{most} tokens is out of range (at most {TOKENS_MAX})"),
        ));
    }
    Ok(())
}

/// What a bundle's patch comes to on the commit the shards ran on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staged {
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
    ) -> Result<Staged, Refused> {
        let patch_path = self.dir.join(PATCH);
        let listed: HashSet<&str> = self.manifest.files.iter().map(String::as_str).collect();
        let patch = self.patch()?;
        let (staged, changed) = if patch.is_empty() {
            (Staged::Empty, Vec::new())
        } else {
            let message = format!("prdloop shard {}", self.manifest.shard);
            match git.commit_patch(head, &patch, scratch, &message) {
                Ok(commit) => {
                    let changed = git.changed(head, &commit, &[]).map_err(|e| {
                        refused(&patch_path, None, format!("cannot be read by git: {e:#}"))
                    })?;
                    (Staged::Commit(commit), changed)
                }
                Err(e) => {
                    return Ok(Staged::DoesNotApply(crate::text::one_line(
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
