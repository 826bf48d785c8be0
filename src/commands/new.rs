//! `prdloop new`: a new PRD with PAI's front matter and sections (our own wording).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::prd::lookup::Locations;
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

pub fn new(title: &str, effort: &str, dir: Option<&Path>, loc: &Locations) -> Result<u8> {
    let Some(effort) = EFFORTS
        .iter()
        .find(|e| e.eq_ignore_ascii_case(effort.trim()))
    else {
        report::error(format!(
            "-e/--effort `{effort}` is not one of {}",
            EFFORTS.join(", ")
        ));
        return Ok(exit::USAGE);
    };
    if title.trim().is_empty() {
        report::error("-t/--title is empty");
        return Ok(exit::USAGE);
    }
    let now = jiff::ZonedDateTime::now();
    let slug = slug(title);
    let id = format!("PRD-{}-{slug}", now.strftime("%Y%m%d"));
    let dir: PathBuf = match dir {
        Some(d) => d.to_path_buf(),
        None => loc
            .pai_dir
            .join("MEMORY/WORK")
            .join(format!("{}_{slug}", now.strftime("%Y%m%d-%H%M%S"))),
    };
    let path = dir.join(format!("{id}.md"));
    if path.exists() {
        bail!("`{}` already exists; not overwriting it", path.display());
    }
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("failed to create `{}`", dir.display()))?;
    let text = template(&id, title, effort, &now.date().to_string());
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
    let mut out = String::new();
    outln!(out, "{}", path.display());
    outln!(out);
    outln!(out, "Next: write its criteria, then");
    outln!(out, "  prdloop plan {id}");
    outln!(out, "  prdloop run {id} -a 4");
    report::stdout(&out)?;
    Ok(exit::SUCCESS)
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
