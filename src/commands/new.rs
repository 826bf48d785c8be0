//! `prdloop new`: a new PRD with PAI's front matter and sections (our own wording).

use std::path::Path;

use anyhow::{Context, Result};

use crate::config::{NewSettings, PrdFormat};
use crate::exit::Exit;
use crate::{exit, outln, report};

pub const EFFORTS: [&str; 7] = [
    "Instant",
    "Fast",
    "Standard",
    "Extended",
    "Advanced",
    "Deep",
    "Comprehensive",
];

/// PAI's slug: lower case, runs of anything but `[a-z0-9]` become one `-`, no leading or
/// trailing `-`, at most 40 characters; `task` when nothing is left.
pub fn slug(title: &str) -> String {
    let mut s = String::new();
    for c in title.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    let s = s.trim_matches('-');
    let mut s: String = s.chars().take(40).collect();
    while s.ends_with('-') {
        s.pop();
    }
    if s.is_empty() { "task".into() } else { s }
}

/// The text of a new PRD.
pub fn template(id: &str, title: &str, effort: &str, date: &str) -> String {
    let title_line = title.trim().replace(['\n', '\r'], " ");
    format!(
        "---
prd: true
id: {id}
status: DRAFT
mode: interactive
effort_level: {effort}
created: {date}
updated: {date}
iteration: 0
maxIterations: 128
loopStatus: null
last_phase: null
failing_criteria: []
verification_summary: \"0/0\"
parent: null
children: []
---

# {title_line}

> _One sentence: what this delivers and why it matters._

## STATUS

| What | State |
|------|-------|
| Progress | 0/0 criteria passing |
| Phase | DRAFT |
| Next action | write the criteria |
| Blocked by | nothing |

## CONTEXT

### Problem Space
_What is wrong or missing today, and for whom._

### Key Files
_The files and folders the work touches._

### Constraints
_What must not change; limits on time, tools, dependencies._

### Decisions Made
_None yet._

## PLAN

_The approach, in a few steps._

## IDEAL STATE CRITERIA (Verification Criteria)

_One checkbox per criterion: `- [ ] ISC-C1: <a state that can be checked> | Verify: <Type>: <method>`._
_Put a command in backticks to have prdloop run it: `| Verify: Test: \\`cargo test login\\``._
_Group larger sets under `### <DOMAIN>` headings with ids like `ISC-AUTH-1`._

## DECISIONS

_Non-obvious technical decisions, with dates._

## LOG

_What each session or iteration did._
"
    )
}

/// The text of a new v4 PRD.
pub fn template_v4(slug: &str, title: &str, effort: &str, now: &str) -> String {
    let task: String = title
        .trim()
        .replace(['\n', '\r'], " ")
        .chars()
        .take(60)
        .collect();
    format!(
        "---
task: {task}
slug: {slug}
effort: {effort}
phase: observe
progress: 0/0
mode: interactive
started: {now}
updated: {now}
---

# {task}

## Context

_What is wrong or missing today, for whom, and the files the work touches._

## Criteria

- [ ] ISC-1: <a state that can be checked> | Verify: Test: `<command>`

## Decisions

## Verification
",
        task = crate::prd::Value::str(task.clone()).render(),
    )
}

pub fn new(s: &NewSettings) -> Result<Exit> {
    let (title, effort, dir, format) = (
        s.title.as_str(),
        s.effort.as_str(),
        s.dir.as_deref(),
        s.format,
    );
    let Some(effort) = EFFORTS
        .iter()
        .find(|e| e.eq_ignore_ascii_case(effort.trim()))
    else {
        report::error(format!(
            "-e/--effort `{effort}` is not one of {}",
            EFFORTS.join(", ")
        ));
        return Ok(exit::Exit::Usage);
    };
    if title.trim().is_empty() {
        report::error("-t/--title is empty: give the PRD a title");
        return Ok(exit::Exit::Usage);
    }
    let now = jiff::ZonedDateTime::now();
    let slug = slug(title);
    // Two PRDs with one title on one day (or, for v4, in one second) get `-2`, `-3`, …
    let (path, text) = (1..1000)
        .map(|n| {
            let suffix = if n == 1 {
                String::new()
            } else {
                format!("-{n}")
            };
            match format {
                PrdFormat::V3 => {
                    let id = format!("PRD-{}-{slug}{suffix}", now.strftime("%Y%m%d"));
                    let folder = dir.map_or_else(
                        || {
                            s.work
                                .join(format!("{}_{slug}{suffix}", now.strftime("%Y%m%d-%H%M%S")))
                        },
                        Path::to_path_buf,
                    );
                    let text = template(&id, title, effort, &now.date().to_string());
                    (folder.join(format!("{id}.md")), text)
                }
                PrdFormat::V4 => {
                    let v4_slug = format!("{}_{slug}{suffix}", now.strftime("%Y%m%d-%H%M%S"));
                    let folder = dir.map_or_else(|| s.work.join(&v4_slug), Path::to_path_buf);
                    let stamp = crate::prd::timestamp_like(Some("2000-01-01T00:00:00Z"), &now);
                    let text = template_v4(&v4_slug, title, &effort.to_lowercase(), &stamp);
                    let name = if dir.is_some() && n > 1 {
                        format!("PRD{suffix}.md")
                    } else {
                        "PRD.md".into()
                    };
                    (folder.join(name), text)
                }
            }
        })
        .find(|(p, _)| !p.exists())
        .expect("a free name among a thousand");
    let folder = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)
        .with_context(|| format!("failed to create `{}`", folder.display()))?;
    // create_new: never replace a file that appeared meanwhile.
    use std::io::Write;
    let mut f = std::fs::File::options()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("failed to create `{}`", path.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .with_context(|| format!("failed to write `{}`", path.display()))?;
    let shown = crate::backend::claude::shell_quote(&path.display().to_string());
    let mut out = String::new();
    outln!(out, "{}", path.display());
    outln!(out);
    outln!(out, "Next: write its criteria, then");
    outln!(out, "  prdloop plan {shown}");
    outln!(out, "  prdloop run {shown} -a 4");
    report::stdout(&out)?;
    Ok(exit::Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_pai() {
        assert_eq!(slug("Build Auth: System!! v2"), "build-auth-system-v2");
        assert_eq!(slug("!!!"), "task");
        assert_eq!(slug("Ünïcode Title"), "n-code-title");
        assert_eq!(slug(&"a very long title ".repeat(5)).len(), 40);
        assert!(!slug(&"abcdefghij ".repeat(8)).ends_with('-'));
    }

    #[test]
    fn the_template_parses_and_round_trips() {
        let t = template("PRD-20261130-x", "X: y", "Extended", "2026-11-30");
        let p = crate::prd::Prd::parse(t.clone()).unwrap();
        assert_eq!(p.text(), t);
        assert_eq!(p.front.id.as_deref(), Some("PRD-20261130-x"));
        assert_eq!(p.front.effort_level, "Extended");
        assert_eq!(p.front.mode.as_deref(), Some("interactive"));
        assert!(p.criteria.is_empty());
        assert_eq!(p.title.as_deref(), Some("X: y"));
    }
}

#[cfg(test)]
mod v4_tests {
    use super::*;

    #[test]
    fn the_v4_template_is_a_v4_prd() {
        let t = template_v4(
            "20261130-120000_x",
            "Fix: the thing",
            "standard",
            "2026-11-30T12:00:00Z",
        );
        let p = crate::prd::Prd::parse(t.clone()).unwrap();
        assert_eq!(p.text(), t);
        assert_eq!(p.front.format, crate::prd::Format::V4);
        assert_eq!(p.id(), Some("20261130-120000_x"));
        assert_eq!(p.display_title(), Some("Fix: the thing"));
        assert_eq!(p.criteria.len(), 1);
    }
}
