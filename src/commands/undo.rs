//! `prdloop undo`: puts back the files of the newest landings (or lists the undo points),
//! refusing where the user has changed those files since.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::warning::{Warning, WarningLine};
use crate::config::{Landings as Count, UndoSettings as Settings};
use crate::exit::Exit;
use crate::isolation::git::Git;
use crate::isolation::pool::RepoLock;
use crate::isolation::repo_path::RepoPath;
use crate::isolation::transaction;
use crate::isolation::undo::{self, Point, UndoError};
use crate::report::json::Version;
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
        let nothing = Warning::NothingToUndo {
            top: PathBuf::from(&top),
            prd,
        };
        report::warn(&nothing);
        UndoReport::warned(nothing).print(s.json)?;
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
    let warnings: Vec<Warning> = refused
        .iter()
        .map(|(_, e)| Warning::NotUndone {
            error: e.to_string(),
        })
        .collect();
    warnings.iter().for_each(report::warn);
    let report = UndoReport {
        undone: done.iter().map(|p| Undone::of(p)).collect(),
        refused: refused.as_ref().map(|(p, e)| Refused::of(p, e)),
        warnings,
    };
    report.print(s.json)?;
    Ok(match &refused {
        Some((_, UndoError::Failed(_))) => crate::exit::Exit::Io,
        Some(_) => crate::exit::Exit::Failure,
        None => crate::exit::Exit::Success,
    })
}

/// What `undo` did: the landings it put back, newest first, and the one it refused (it
/// stops there), and what it warned of. `--json` writes one line per landing, `undone` then
/// `refused`, then one `warning` line per warning.
struct UndoReport<'a> {
    undone: Vec<Undone<'a>>,
    refused: Option<Refused<'a>>,
    warnings: Vec<Warning>,
}

/// A landing put back.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename = "undone", rename_all = "camelCase")]
struct Undone<'a> {
    label: &'a str,
    files: &'a [RepoPath],
    #[serde(rename = "ref")]
    name: &'a str,
    prd: Option<&'a str>,
    commit: Option<&'a str>,
    version: Version,
}

/// The landing that could not be put back, and why.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename = "refused", rename_all = "camelCase")]
struct Refused<'a> {
    label: &'a str,
    #[serde(rename = "ref")]
    name: &'a str,
    /// Why, typed: `{"kind": …, …, "text": …}`.
    why: UndoWhy<'a>,
    /// The files changed since it landed.
    files: &'a [String],
    version: Version,
}

impl<'a> Undone<'a> {
    fn of(p: &'a Point) -> Undone<'a> {
        Undone {
            label: &p.label,
            files: &p.files,
            name: &p.name,
            prd: p.prd.as_deref(),
            commit: p.commit.as_deref(),
            version: Version,
        }
    }
}

impl<'a> Refused<'a> {
    fn of(p: &'a Point, e: &'a UndoError) -> Refused<'a> {
        Refused {
            label: &p.label,
            name: &p.name,
            why: UndoWhy(e),
            files: match e {
                UndoError::ChangedSince { files, .. } => files,
                _ => &[],
            },
            version: Version,
        }
    }
}

/// Why a landing could not be put back, as the run events' `why` are written: its `kind`
/// (`changed_since`, `head_moved`, `failed`), its fields, and its words (`text`).
#[derive(Debug)]
struct UndoWhy<'a>(&'a UndoError);

impl Serialize for UndoWhy<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self.0 {
            UndoError::ChangedSince { label, files } => {
                m.serialize_entry("kind", "changed_since")?;
                m.serialize_entry("label", label)?;
                m.serialize_entry("files", files)?;
            }
            UndoError::HeadMoved { label, commit } => {
                m.serialize_entry("kind", "head_moved")?;
                m.serialize_entry("label", label)?;
                m.serialize_entry("commit", commit)?;
            }
            UndoError::Failed(_) => m.serialize_entry("kind", "failed")?,
        }
        m.serialize_entry("text", &self.0.to_string())?;
        m.end()
    }
}

impl UndoReport<'_> {
    /// Nothing done, one warning.
    fn warned(warning: Warning) -> Self {
        UndoReport {
            undone: Vec::new(),
            refused: None,
            warnings: vec![warning],
        }
    }

    fn print(&self, json: bool) -> Result<()> {
        let mut out = String::new();
        if json {
            self.json(&mut out)?;
        } else {
            self.text(&mut out);
        }
        report::stdout(&out)?;
        Ok(())
    }

    fn json(&self, out: &mut String) -> serde_json::Result<()> {
        for u in &self.undone {
            report::json::push_report_line(out, u)?;
        }
        if let Some(r) = &self.refused {
            report::json::push_report_line(out, r)?;
        }
        for w in &self.warnings {
            report::json::push_report_line(out, &WarningLine::of(w))?;
        }
        Ok(())
    }

    fn text(&self, out: &mut String) {
        for u in &self.undone {
            outln!(
                out,
                "undid {}'s landing: {} put back as they were{}",
                u.label,
                list_files(u.files),
                u.commit
                    .map(|c| format!("; HEAD back from {}", &c[..c.len().min(10)]))
                    .unwrap_or_default()
            );
        }
        if !self.undone.is_empty() {
            let ids: Vec<&str> = self.undone.iter().map(|u| u.label).collect();
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
    }
}

/// One undo point of `undo --list` (`n` from 1, newest first).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed<'a> {
    n: usize,
    #[serde(rename = "ref")]
    name: &'a str,
    label: &'a str,
    prd: Option<&'a str>,
    at_ms: u64,
    files: &'a [RepoPath],
    commit: Option<&'a str>,
    version: Version,
}

fn list(top: &str, points: &[Point], json: bool) -> Result<Exit> {
    let listed: Vec<Listed> = points
        .iter()
        .enumerate()
        .map(|(i, p)| Listed {
            n: i + 1,
            name: &p.name,
            label: &p.label,
            prd: p.prd.as_deref(),
            at_ms: p.at_ms,
            files: &p.files,
            commit: p.commit.as_deref(),
            version: Version,
        })
        .collect();
    let mut out = String::new();
    if json {
        for l in &listed {
            report::json::push_report_line(&mut out, l)?;
        }
    } else if listed.is_empty() {
        outln!(out, "no undo points in {top}");
    } else {
        for l in &listed {
            let at = jiff::Timestamp::from_millisecond(l.at_ms as i64)
                .map(|t| t.strftime("%Y-%m-%d %H:%M:%S").to_string())
                .unwrap_or_default();
            outln!(
                out,
                "{:>3}  {at}  {}  {}",
                l.n,
                l.label,
                list_files(l.files)
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

fn list_files(files: &[RepoPath]) -> String {
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
