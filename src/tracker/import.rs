//! The PRD `prdloop import` writes, as pure functions: an issue's criteria (one per task-list
//! item, or its title when it has no list), their ids (`ISC-GH<issue>-<k>`, so that each
//! issue is a domain of its own), and their place in a PRD's text. An import into an existing
//! PRD adds only what is not there yet (an item is there when a criterion of its issue has its
//! text), splicing new lines in: every other byte, every tick and everything the user wrote
//! stay as they were.

use std::collections::BTreeMap;

use super::{Issue, Repo};
use crate::prd::{Format, ListFormat, Prd, Value};

/// One criterion to be: an issue's task-list item (or its title).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub issue: u64,
    /// One line, as the criterion's description (without the ` (#N)` the PRD adds).
    pub text: String,
    /// Ticked in the issue: the new criterion comes in ticked.
    pub done: bool,
}

/// What an import did to a PRD's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub text: String,
    /// The ids of the criteria it added, in document order of their issues' items.
    pub added: Vec<String>,
    /// How many items were there already.
    pub present: usize,
}

/// The items of a Markdown text's task lists (`- [ ] text`, `* [x] text`, at any depth, not
/// inside code fences), in order: whether ticked, and the text.
pub fn task_items(body: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut fence: Option<&str> = None;
    for line in body.lines() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if t.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        let Some(rest) = ["- [", "* [", "+ ["].iter().find_map(|p| t.strip_prefix(p)) else {
            continue;
        };
        let done = match rest.as_bytes().first() {
            Some(b' ') => false,
            Some(b'x' | b'X') => true,
            _ => continue,
        };
        let Some(text) = rest[1..].strip_prefix("] ") else {
            continue;
        };
        let text = one_line(text);
        if !text.is_empty() {
            out.push((done, text));
        }
    }
    out
}

/// The criteria of the issues: one per task-list item of each, or its title for one without
/// a list.
pub fn items_of(issues: &[Issue]) -> Vec<Item> {
    let mut out = Vec::new();
    for issue in issues {
        let list = task_items(&issue.body);
        if list.is_empty() {
            out.push(Item {
                issue: issue.number,
                text: one_line(&issue.title),
                done: false,
            });
        }
        out.extend(list.into_iter().map(|(done, text)| Item {
            issue: issue.number,
            text,
            done,
        }));
    }
    out
}

/// A criterion's text on one line, whitespace runs made one space; an issue's text never
/// becomes a Verify method (` | Verify:` is written ` ¦ Verify:`): a command the PRD runs is
/// the PRD's author's to write.
fn one_line(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.replace("| Verify:", "¦ Verify:")
}

/// The id prefix of an issue's criteria.
fn prefix(issue: u64) -> String {
    format!("ISC-GH{issue}-")
}

/// The line of a new criterion.
fn line_of(id: &str, item: &Item) -> String {
    let mark = if item.done { 'x' } else { ' ' };
    format!("- [{mark}] {id}: {} (#{})", item.text, item.issue)
}

/// A criterion's description without the ` (#N)` an import wrote after it.
fn bare(description: &str, issue: u64) -> &str {
    let d = description.trim();
    d.strip_suffix(&format!("(#{issue})"))
        .unwrap_or(d)
        .trim_end()
}

/// Adds the items that are not in `prd` yet and records the tracker in its front matter.
/// Fails, changing nothing, when the PRD records another tracker, is not a Markdown PRD, or
/// the new lines would not read back as its criteria.
pub fn merge(prd: &Prd, repo: &Repo, items: &[Item]) -> Result<Imported, String> {
    if prd.list_format() != ListFormat::Markdown {
        return Err(format!(
            "import writes Markdown PRDs; this is a {} task list",
            prd.format_name()
        ));
    }
    if let Some(t) = &prd.front.tracker
        && t.trim() != repo.tracker()
    {
        return Err(format!(
            "its front matter's `tracker: {t}` is another repository's: import {t} into it, or write {} into another file",
            repo.tracker()
        ));
    }
    let text = prd.text();
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    // Per insertion point (a byte offset), the lines to put there.
    let mut inserts: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut added = Vec::new();
    let mut present = 0;
    // The items this import adds, so that an issue listing one twice gets one criterion.
    let mut this_import = std::collections::HashSet::new();
    // Per issue: its criteria's highest number so far, and the offset after its last one.
    let mut next: BTreeMap<u64, (u64, Option<usize>)> = BTreeMap::new();
    let last_of_all = prd
        .criteria
        .iter()
        .max_by_key(|c| c.line)
        .map(|c| end_of_item(text, c.line));
    let fallback = last_of_all.unwrap_or_else(|| section_end(text));
    for item in items {
        let p = prefix(item.issue);
        let ours: Vec<_> = prd
            .criteria
            .iter()
            .filter(|c| c.id.starts_with(&p))
            .collect();
        let seen = ours
            .iter()
            .any(|c| same(bare(&c.description, item.issue), &item.text));
        if seen || !this_import.insert((item.issue, item.text.clone())) {
            present += 1;
            continue;
        }
        let slot = next.entry(item.issue).or_insert_with(|| {
            let top = ours
                .iter()
                .filter_map(|c| c.id[p.len()..].parse::<u64>().ok())
                .max()
                .unwrap_or(0);
            let at = ours
                .iter()
                .max_by_key(|c| c.line)
                .map(|c| end_of_item(text, c.line));
            (top, at)
        });
        slot.0 += 1;
        let id = format!("{p}{}", slot.0);
        let at = slot.1.unwrap_or(fallback);
        inserts.entry(at).or_default().push(line_of(&id, item));
        added.push(id);
    }
    let heading = match prd.front.format {
        Format::V3 => "## IDEAL STATE CRITERIA (Verification Criteria)",
        Format::V4 | Format::Isa => "## Criteria",
    };
    let mut out = text.to_string();
    for (&at, lines) in inserts.iter().rev() {
        let mut block = String::new();
        if last_of_all.is_some() {
            // After a criterion: on the next line.
            if !out[..at].is_empty() && !out[..at].ends_with('\n') {
                block.push_str(nl);
            }
        } else {
            // A list of its own: a blank line before it (and after it, before a heading).
            block.push_str(&blank_line_after(&out[..at], nl));
            if section_heading(text).is_none() {
                block.push_str(heading);
                block.push_str(nl);
                block.push_str(nl);
            }
        }
        for l in lines {
            block.push_str(l);
            block.push_str(nl);
        }
        if last_of_all.is_none() && at < out.len() {
            block.push_str(nl);
        }
        out.insert_str(at, &block);
    }
    let mut doc = prd.reparse(out).map_err(|e| e.message)?;
    if let Some(missing) = added.iter().find(|id| doc.criterion(id).is_none()) {
        return Err(format!(
            "the new criterion {missing} would not read back as a criterion where it goes: add a criteria section (`## IDEAL STATE CRITERIA`) and import again"
        ));
    }
    if prd.front.tracker.is_none() {
        doc.set_front(&[("tracker", Value::str(repo.tracker()))])
            .map_err(|e| e.message)?;
    }
    Ok(Imported {
        text: doc.text().to_string(),
        added,
        present,
    })
}

/// What makes `before` end with a blank line (nothing for an empty text).
fn blank_line_after(before: &str, nl: &str) -> String {
    if before.is_empty() || before.ends_with("\n\n") || before.ends_with("\n\r\n") {
        String::new()
    } else if before.ends_with('\n') {
        nl.to_string()
    } else {
        format!("{nl}{nl}")
    }
}

/// Two descriptions are the same item when they are equal but for whitespace.
fn same(a: &str, b: &str) -> bool {
    a.split_whitespace().eq(b.split_whitespace())
}

/// The byte offset just past the list item that starts on 1-based `line`: past its first line
/// and the indented lines that continue it.
fn end_of_item(text: &str, line: usize) -> usize {
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n').enumerate();
    for (i, l) in lines.by_ref() {
        offset += l.len();
        if i + 1 == line {
            break;
        }
    }
    for (_, l) in lines {
        let continues = l.starts_with([' ', '\t']) && !l.trim().is_empty();
        if !continues {
            break;
        }
        offset += l.len();
    }
    offset
}

/// The level-2 heading of the criteria section (`## IDEAL STATE CRITERIA …`, `## Criteria`):
/// the byte offset past its line.
fn section_heading(text: &str) -> Option<usize> {
    let mut offset = 0;
    let mut fence = false;
    for l in text.split_inclusive('\n') {
        let t = l.trim_end();
        if t.trim_start().starts_with("```") {
            fence = !fence;
        }
        offset += l.len();
        if !fence && let Some(h) = t.strip_prefix("## ") {
            let h = h.trim().to_ascii_uppercase();
            if h.starts_with("IDEAL STATE CRITERIA") || h == "CRITERIA" || h == "CLAIMS" {
                return Some(offset);
            }
        }
    }
    None
}

/// Where criteria go in a PRD with none: at the end of its criteria section (before the next
/// heading of level 1 or 2), else at the end of the text.
fn section_end(text: &str) -> usize {
    let Some(start) = section_heading(text) else {
        return text.len();
    };
    let mut offset = start;
    for l in text[start..].split_inclusive('\n') {
        if l.starts_with("# ") || l.starts_with("## ") {
            return offset;
        }
        offset += l.len();
    }
    text.len()
}

#[cfg(test)]
mod tests;
