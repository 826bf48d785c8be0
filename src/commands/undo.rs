//! `prdloop undo`: puts back the files of the newest landings (or lists the undo points),
//! refusing where the user has changed those files since.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::config::{Landings as Count, UndoSettings as Settings};
use crate::exit::Exit;
use crate::isolation::git::Git;
use crate::isolation::pool::RepoLock;
use crate::isolation::transaction;
use crate::isolation::undo::{self, Point, UndoError};
use crate::{outln, report};

pub fn undo(dir: &Path, s: &Settings) -> Result<Exit> {
    let start = match &s.prd {
        Some(p) => p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| dir.to_path_buf(), Path::to_path_buf),
        None => dir.to_path_buf(),
    };
    let top = Git::new(&start)
        .text(&["rev-parse", "--show-toplevel"])
        .with_context(|| format!("{} is not in a git repository", start.display()))?;
    let repo = Git::new(&top);
    let common =
        PathBuf::from(repo.text(&["rev-parse", "--path-format=absolute", "--git-common-dir"])?);
    let prd = s
        .prd
        .as_ref()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
    let points: Vec<Point> = undo::list(&repo)?
        .into_iter()
        .filter(|p| match &prd {
            Some(want) => p
                .prd
                .as_ref()
                .is_some_and(|have| std::fs::canonicalize(have).ok().as_ref() == Some(want)),
            None => true,
        })
        .collect();
    if s.list {
        return list(&top, &points, s.json);
    }
    let n = match s.count {
        Count::Newest(n) => n.min(points.len()),
        Count::All => points.len(),
    };
    if points.is_empty() {
        report::warn(format!(
            "nothing to undo: no undo point in {top}{}",
            prd.as_ref()
                .map(|p| format!(" for {}", p.display()))
                .unwrap_or_default()
        ));
        return Ok(crate::exit::Exit::Failure);
    }
    let _lock = RepoLock::take(&common)?;
    let scratch = tempfile::tempdir().context("could not make a temporary folder")?;
    let journal = transaction::journal_path(&common);
    let mut done = Vec::new();
    let mut refused = None;
    // Newest first: each one finds the checkout as the one after it left it.
    for p in &points[..n] {
        match undo::restore(&repo, &journal, scratch.path(), p) {
            Ok(()) => done.push(p),
            Err(e) => {
                refused = Some((p, e));
                break;
            }
        }
    }
    let mut out = String::new();
    let mut events = Vec::new();
    for p in &done {
        outln!(
            out,
            "undid {}'s landing: {} put back as they were{}",
            p.label,
            list_files(&p.files),
            p.commit
                .as_ref()
                .map(|c| format!("; HEAD back from {}", &c[..c.len().min(10)]))
                .unwrap_or_default()
        );
        events.push(serde_json::json!({
            "event": "undone", "label": p.label, "files": p.files, "ref": p.name,
            "prd": p.prd, "commit": p.commit,
        }));
    }
    if !done.is_empty() {
        let ids: Vec<&str> = done.iter().map(|p| p.label.as_str()).collect();
        outln!(
            out,
            "{} still ticked in the PRD: untick {} for prdloop to work on {} again",
            ids.join(", "),
            if ids.len() == 1 {
                "its box"
            } else {
                "their boxes"
            },
            if ids.len() == 1 { "it" } else { "them" }
        );
    }
    let code = match &refused {
        Some((p, e)) => {
            report::warn(format!("not undone: {e}"));
            events.push(serde_json::json!({
                "event": "refused", "label": p.label, "ref": p.name, "why": e.to_string(),
                "files": match e { UndoError::ChangedSince { files, .. } => files.clone(), _ => Vec::new() },
            }));
            match e {
                UndoError::Failed(_) => crate::exit::Exit::Io,
                _ => crate::exit::Exit::Failure,
            }
        }
        None => crate::exit::Exit::Success,
    };
    if s.json {
        let mut text = String::new();
        for e in events {
            report::json::push_line(&mut text, e);
        }
        report::stdout(&text)?;
    } else {
        report::stdout(&out)?;
    }
    Ok(code)
}

fn list(top: &str, points: &[Point], json: bool) -> Result<Exit> {
    let mut out = String::new();
    if json {
        for (i, p) in points.iter().enumerate() {
            let v = serde_json::json!({
                "n": i + 1, "ref": p.name, "label": p.label, "prd": p.prd, "atMs": p.at_ms,
                "files": p.files, "commit": p.commit,
            });
            crate::report::json::push_line(&mut out, v);
        }
    } else if points.is_empty() {
        outln!(out, "no undo points in {top}");
    } else {
        for (i, p) in points.iter().enumerate() {
            let at = jiff::Timestamp::from_millisecond(p.at_ms as i64)
                .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
                .unwrap_or_default();
            outln!(
                out,
                "{:>3}  {at}  {}  {}",
                i + 1,
                p.label,
                list_files(&p.files)
            );
        }
        outln!(
            out,
            "`prdloop undo` undoes #1; `--to N` undoes #1 to #N; `--all` every one listed"
        );
    }
    report::stdout(&out)?;
    Ok(crate::exit::Exit::Success)
}

fn list_files(files: &[crate::isolation::repo_path::RepoPath]) -> String {
    let mut s = files
        .iter()
        .take(4)
        .map(|f| f.lossy())
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > 4 {
        s.push_str(&format!(" and {} more", files.len() - 4));
    }
    s
}
