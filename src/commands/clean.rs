//! `prdloop clean`: removes the worktrees prdloop left in a repository (runs that crashed,
//! `--keep-worktrees`), after pinning what was in them; with `--all`, also the refs under
//! `refs/prdloop/` of sessions that are not running.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};

use crate::isolation::git::Git;
use crate::isolation::pool;
use crate::{outln, report};

pub fn clean(dir: &Path, all: bool, json: bool) -> Result<u8> {
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
    let listed = pool::list(&repo)?;
    // Running: a live worktree's session, or any live loop's (one may have no worktree yet).
    let mut running: BTreeSet<String> = listed
        .iter()
        .filter(|l| l.alive())
        .map(|l| l.session.clone())
        .collect();
    running.extend(crate::state::live_sessions());
    let scratch = tempfile::tempdir().context("could not make a temporary folder")?;
    let swept = pool::sweep(&repo, &common, scratch.path(), None);
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
    let kept = listed.iter().filter(|l| l.alive()).count();
    if json {
        let v = serde_json::json!({
            "repository": top,
            "removedWorktrees": swept.removed,
            "freedBytes": swept.bytes,
            "pinned": swept.pinned,
            "keptRunning": kept,
            "deletedRefs": deleted,
            "warnings": swept.warnings,
        });
        report::stdout(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
    } else {
        for w in &swept.warnings {
            report::warn(w);
        }
        let mut out = String::new();
        outln!(
            out,
            "removed {} worktree(s) from {top}, freed {}",
            swept.removed,
            size(swept.bytes)
        );
        for p in &swept.pinned {
            outln!(out, "  what one held is kept as {p}");
        }
        if kept > 0 {
            outln!(out, "kept {kept} worktree(s) of running sessions");
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
        crate::exit::SUCCESS
    } else {
        crate::exit::IO
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
