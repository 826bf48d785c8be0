//! `prdloop clean`: finishes a landing a crash interrupted, removes the lanes prdloop left in
//! a repository (runs that crashed, `--keep-worktrees`) after pinning what was in them, and
//! undo points older than 14 days; with `--all`, also the refs under `refs/prdloop/` of
//! sessions that are not running (and with `--all --force`, every undo point).

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::exit::Exit;
use crate::isolation::git::Git;
use crate::isolation::{pool, undo};
use crate::report::json::Version;
use crate::{outln, report};

pub fn clean(s: &crate::config::CleanSettings) -> Result<Exit> {
    let (dir, all, force, json) = (s.dir.as_path(), s.all, s.force, s.json);
    let repo = Git::new(dir);
    let top = repo
        .text(&["rev-parse", "--show-toplevel"])
        .with_context(|| format!("{} is not in a git repository", dir.display()))?;
    let repo = Git::new(&top);
    let common = std::path::PathBuf::from(repo.text(&[
        "rev-parse",
        "--path-format=absolute",
        "--git-common-dir",
    ])?);
    let listed = pool::list(&common);
    // Running: a live run's session, or any live loop's (one may have no lane yet).
    let mut running: BTreeSet<String> = listed
        .iter()
        .filter(|l| l.alive())
        .map(|l| l.session.clone())
        .collect();
    running.extend(crate::state::live_sessions());
    let scratch = tempfile::tempdir().context("could not make a temporary folder")?;
    let swept = crate::isolation::recover_and_sweep(&repo, &common, scratch.path());
    let expired = undo::expire(&repo, all && force)?;
    let mut deleted = Vec::new();
    if all {
        let refs = repo.text(&["for-each-ref", "--format=%(refname)", "refs/prdloop/"])?;
        for r in refs.lines() {
            let session = r
                .strip_prefix("refs/prdloop/")
                .and_then(|rest| rest.split('/').next())
                .unwrap_or_default();
            if running.contains(session) {
                continue;
            }
            repo.cmd().args(&["update-ref", "-d", r]).run()?;
            deleted.push(r.to_string());
        }
    }
    let kept: usize = listed
        .iter()
        .filter(|l| l.alive())
        .map(|l| l.lanes().len())
        .sum();
    // Without `--all`, what is left under refs/prdloop/ (the text says how to delete it; not
    // in `--json`, so nothing there can fail once the cleaning is done).
    let refs_left = if all || json {
        0
    } else {
        repo.text(&["for-each-ref", "--format=%(refname)", "refs/prdloop/"])?
            .lines()
            .count()
    };
    let report = Cleaned {
        repository: top,
        removed_lanes: swept.removed,
        freed_bytes: swept.bytes,
        pinned: swept.pinned,
        kept_running: kept,
        deleted_refs: deleted,
        recovered: swept.recovered,
        expired_undo_points: expired,
        warnings: swept.warnings,
        version: Version,
        all,
        force,
        refs_left,
    };
    let mut out = String::new();
    if json {
        report::json::push_report(&mut out, &report)?;
    } else {
        for w in &report.warnings {
            report::warn(w);
        }
        report.text(&mut out);
    }
    report::stdout(&out)?;
    Ok(if report.warnings.is_empty() {
        crate::exit::Exit::Success
    } else {
        crate::exit::Exit::Io
    })
}

/// What `clean` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Cleaned {
    repository: String,
    removed_lanes: usize,
    freed_bytes: u64,
    /// The refs what the removed lanes held is kept under.
    pinned: Vec<String>,
    /// Lanes of running sessions, kept.
    kept_running: usize,
    /// With `--all`: the refs under `refs/prdloop/` deleted.
    deleted_refs: Vec<String>,
    /// What was done about a landing a crash interrupted.
    recovered: Option<String>,
    expired_undo_points: usize,
    warnings: Vec<crate::isolation::Warning>,
    version: Version,
    /// For the text: the flags, and the refs left under `refs/prdloop/` without `--all`.
    #[serde(skip)]
    all: bool,
    #[serde(skip)]
    force: bool,
    #[serde(skip)]
    refs_left: usize,
}

impl Cleaned {
    fn text(&self, out: &mut String) {
        if let Some(r) = &self.recovered {
            outln!(out, "{r}");
        }
        outln!(
            out,
            "removed {} lane(s) of {}, freed {}",
            self.removed_lanes,
            self.repository,
            size(self.freed_bytes)
        );
        for p in &self.pinned {
            outln!(out, "  what one held is kept as {p}");
        }
        if self.kept_running > 0 {
            outln!(
                out,
                "kept {} lane(s) of running sessions",
                self.kept_running
            );
        }
        if self.expired_undo_points > 0 {
            outln!(
                out,
                "deleted {} undo point(s){}",
                self.expired_undo_points,
                if self.all && self.force {
                    String::new()
                } else {
                    format!(" older than {} days", undo::KEEP_DAYS)
                }
            );
        }
        if self.all {
            outln!(
                out,
                "deleted {} ref(s) under refs/prdloop/ (`git gc` reclaims what only they held)",
                self.deleted_refs.len()
            );
        } else if self.refs_left > 0 {
            outln!(
                out,
                "{} ref(s) under refs/prdloop/ keep past attempts; `prdloop clean --all` deletes those of sessions not running",
                self.refs_left
            );
        }
    }
}

fn size(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / MIB)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}
