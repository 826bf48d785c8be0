//! `prdloop clean`: finishes a landing a crash interrupted, removes the lanes prdloop left in
//! a repository (runs that crashed, `--keep-worktrees`) after pinning what was in them, and
//! undo points older than 14 days; with `--all`, also the refs under `refs/prdloop/` of
//! sessions that are not running (and with `--all --force`, every undo point).

use std::collections::BTreeSet;

use anyhow::{Context, Result};

use crate::exit::Exit;
use crate::isolation::git::Git;
use crate::isolation::{pool, undo};
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
    if json {
        let v = serde_json::json!({
            "repository": top,
            "removedLanes": swept.removed,
            "freedBytes": swept.bytes,
            "pinned": swept.pinned,
            "keptRunning": kept,
            "deletedRefs": deleted,
            "recovered": swept.recovered,
            "expiredUndoPoints": expired,
            "warnings": swept.warnings,
        });
        let mut out = String::new();
        report::json::push_document(&mut out, v)?;
        report::stdout(&out)?;
    } else {
        for w in &swept.warnings {
            report::warn(w);
        }
        let mut out = String::new();
        if let Some(r) = &swept.recovered {
            outln!(out, "{r}");
        }
        outln!(
            out,
            "removed {} lane(s) of {top}, freed {}",
            swept.removed,
            size(swept.bytes)
        );
        for p in &swept.pinned {
            outln!(out, "  what one held is kept as {p}");
        }
        if kept > 0 {
            outln!(out, "kept {kept} lane(s) of running sessions");
        }
        if expired > 0 {
            outln!(
                out,
                "deleted {expired} undo point(s){}",
                if all && force {
                    String::new()
                } else {
                    format!(" older than {} days", undo::KEEP_DAYS)
                }
            );
        }
        if all {
            outln!(
                out,
                "deleted {} ref(s) under refs/prdloop/ (`git gc` reclaims what only they held)",
                deleted.len()
            );
        } else {
            let refs = repo.text(&["for-each-ref", "--format=%(refname)", "refs/prdloop/"])?;
            let n = refs.lines().count();
            if n > 0 {
                outln!(
                    out,
                    "{n} ref(s) under refs/prdloop/ keep past attempts; `prdloop clean --all` deletes those of sessions not running"
                );
            }
        }
        report::stdout(&out)?;
    }
    Ok(if swept.warnings.is_empty() {
        crate::exit::Exit::Success
    } else {
        crate::exit::Exit::Io
    })
}

fn size(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / MIB)
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}
