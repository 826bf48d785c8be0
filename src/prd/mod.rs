//! The PRD document: its text, the parsed model (front matter, criteria with byte positions),
//! and byte-precise edits. The text is the source of truth: an edit splices the original
//! bytes, it never re-renders markdown, so unchanged input comes back byte for byte.
//! Both of PAI's formats are read: v3 (`id`, `## IDEAL STATE CRITERIA`, grouped ids) and v4
//! (`task`/`slug`, `## Criteria`, flat `ISC-1` ids), and LifeOS's ISA (`phase`/`progress`,
//! `## Claims`, split ids `ISC-N.M`, short ids, `Anti:` prefixes, tombstones, a
//! `## Test Strategy` table of probes); see [`Format`] and [`isa`].

pub mod contract;
pub mod format;
pub mod frontmatter;
pub mod id;
pub mod isa;
pub mod lookup;
pub mod timestamp;
pub mod verify;
pub mod write;

mod body;
mod claim;
mod criterion;
mod error;
mod read;

pub use body::LineIndex;
use body::*;
use claim::*;
pub use criterion::{Criterion, OpenBox, OtherBox};
pub use error::{ParseError, Warning};
pub use format::ListFormat;
pub use frontmatter::marks_complete;

use std::collections::HashMap;
use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

pub use frontmatter::{Format, FrontMatter, Value};
pub use isa::Probe;
pub use timestamp::timestamp_like;
pub use verify::{BadVerifyTypes, DEFAULT_COMMAND_TYPES, HowVerified, Verify, VerifyTypes};

/// A parsed PRD.
#[derive(Debug, Clone)]
pub struct Prd {
    text: String,
    span: Option<frontmatter::Span>,
    pub front: FrontMatter,
    pub criteria: Vec<Criterion>,
    pub warnings: Vec<Warning>,
    /// The first `# ` heading's text.
    pub title: Option<String>,
    /// The text under `## CONTEXT` (any case), up to the next level-2 (or higher) heading;
    /// or what another format says of the whole work (a `description`).
    context: Option<String>,
    /// Which task list the file is.
    list: ListFormat,
    /// Criterion id → index in `criteria`.
    index: HashMap<String, usize>,
    /// Boxes in the criteria sections that are not criteria: tombstones and lines prdloop
    /// cannot read. Neither is worked on or ticked; an open unreadable one keeps the file
    /// from being marked complete.
    pub other_boxes: Vec<OtherBox>,
    /// What the body says the file is (an ISA's headings), for [`Format`].
    isa_body: bool,
    /// Lines of `## Not yet specified` still unresolved (an ISA's fog): LifeOS does not let an
    /// ISA close while there is one.
    pub fog: Vec<usize>,
    /// Why no criterion was read although the file holds some: its criteria heading holds no
    /// boxes while boxes with criterion ids sit under other headings (see [`Prd::misplaced`]).
    misplaced: Option<String>,
}

impl Prd {
    /// Parses a document. Fails only on a broken front matter or a duplicate criterion id.
    pub fn parse(text: impl Into<String>) -> Result<Prd, ParseError> {
        let text = text.into();
        let span = frontmatter::locate(&text).map_err(fm_err)?;
        let (front, warnings) = match &span {
            Some(span) => {
                let read = frontmatter::read(&text, span).map_err(fm_err)?;
                (read.front, read.warnings)
            }
            None => (FrontMatter::defaults(), Vec::new()),
        };
        let body_start = span.as_ref().map_or(0, |s| s.body_start);
        let body = Body::scan(&text, body_start);
        let boxes = read::boxes(&text, &body, warnings)?;
        let mut prd = Prd {
            span,
            front,
            criteria: boxes.criteria,
            warnings: boxes.warnings,
            title: body.title.clone(),
            context: body.context.clone().map(|r| text[r].trim().to_string()),
            list: ListFormat::Markdown,
            index: boxes.index,
            other_boxes: boxes.others,
            isa_body: body.isa_headings,
            fog: Vec::new(),
            misplaced: boxes.misplaced,
            text,
        };
        prd.link_splits();
        if let Some(range) = body.test_strategy.clone() {
            prd.read_probes(range);
        }
        if prd.front.format == Format::V4 && prd.isa_like() {
            prd.front.format = Format::Isa;
        }
        // An ISA's fog (only an ISA has that section, or that close gate).
        if prd.front.format == Format::Isa
            && let Some(range) = body.fog.clone()
        {
            let first = LineIndex::new(&prd.text).line_of(range.start);
            prd.fog = isa::fog_lines(&prd.text[range], first);
        }
        Ok(prd)
    }

    /// Whether the file reads as a LifeOS ISA: `## Claims`/`## Test Strategy`/`## Anti-claims`
    /// headings, split or short ids, or a lifecycle `phase` (`climbing`...).
    fn isa_like(&self) -> bool {
        self.isa_body
            || self.criteria.iter().any(|c| c.id.contains('.'))
            || self
                .front
                .phase
                .as_deref()
                .is_some_and(frontmatter::is_lifecycle_phase)
    }

    /// The Test Strategy's probes, joined to their criteria by id.
    fn read_probes(&mut self, range: Range<usize>) {
        let lines = LineIndex::new(&self.text);
        let first_line = lines.line_of(range.start);
        let ids: Vec<String> = self.criteria.iter().map(|c| c.id.clone()).collect();
        for (id, probe) in isa::read_test_strategy(&self.text[range], first_line, &ids) {
            if let Some(&i) = self.index.get(&id)
                && self.criteria[i].probe.is_none()
            {
                self.criteria[i].probe = Some(probe);
            }
        }
    }

    /// Each criterion with split ids below it (`ISC-2` over `ISC-2.1`, `ISC-2.1.1`) gets its
    /// leaves: the descendants that have none of their own. Optional ones (Kiro's `[ ]*`) are
    /// no leaves: a parent passes with the others.
    fn link_splits(&mut self) {
        let ids: Vec<String> = self
            .criteria
            .iter()
            .filter(|c| !c.optional)
            .map(|c| c.id.clone())
            .collect();
        let has_children: std::collections::HashSet<&str> =
            ids.iter().filter_map(|i| id::parent(i)).collect();
        for c in &mut self.criteria {
            if !has_children.contains(c.id.as_str()) {
                continue;
            }
            let prefix = format!("{}.", c.id);
            c.leaves = ids
                .iter()
                .filter(|i| i.starts_with(&prefix) && !has_children.contains(i.as_str()))
                .cloned()
                .collect();
        }
    }

    /// The open boxes of the criteria sections (tombstones aside): criteria not ticked, and
    /// boxes prdloop cannot read. While there is one, the file is not complete.
    pub fn open_boxes(&self) -> Vec<OpenBox> {
        let mut open: Vec<OpenBox> = self
            .criteria
            .iter()
            .filter(|c| !c.checked)
            .map(|c| OpenBox {
                line: c.line,
                label: c.id.clone(),
            })
            .chain(
                self.other_boxes
                    .iter()
                    .filter(|b| !b.checked && !b.tombstone)
                    .map(|b| OpenBox {
                        line: b.line,
                        label: format!("`{}`", one_line_start(&b.text)),
                    }),
            )
            .collect();
        open.sort_by_key(|b| b.line);
        open
    }

    /// When no criterion was read: that the criteria heading holds no boxes while boxes with
    /// criterion ids sit under other headings, which, and how to fix it.
    pub fn misplaced(&self) -> Option<&str> {
        self.misplaced.as_deref()
    }

    /// Whether `id` is a dropped claim's tombstone here.
    pub fn is_tombstone(&self, id: &str) -> bool {
        self.other_boxes
            .iter()
            .any(|b| b.tombstone && b.id.as_deref() == Some(id))
    }

    /// Whether `id` is a task set aside for later here (Taskmaster's `deferred`): what needs
    /// it waits while it is.
    pub fn is_deferred(&self, id: &str) -> bool {
        self.other_boxes
            .iter()
            .any(|b| b.deferred && b.id.as_deref() == Some(id))
    }

    /// Open boxes prdloop cannot read: they keep a run from claiming completion.
    pub fn unreadable_open(&self) -> impl Iterator<Item = &OtherBox> {
        self.other_boxes
            .iter()
            .filter(|b| !b.checked && !b.tombstone)
    }

    /// Ticks each parent of split ids whose leaves are all ticked (never unticks one: a
    /// parent ticked by its author stays). Returns the ids ticked.
    pub fn tick_parents(&mut self) -> Vec<String> {
        let ready: Vec<String> = self
            .criteria
            .iter()
            .filter(|c| c.is_parent() && !c.checked)
            .filter(|c| {
                c.leaves
                    .iter()
                    .all(|l| self.criterion(l).is_some_and(|x| x.checked))
            })
            .map(|c| c.id.clone())
            .collect();
        for id in &ready {
            self.set_checked(id, true);
        }
        ready
    }

    /// Whether the file has a YAML front matter block.
    pub fn has_front_matter(&self) -> bool {
        self.span.is_some()
    }

    /// The PRD's id: v3 `id`, v4 `slug`.
    pub fn id(&self) -> Option<&str> {
        self.front.id()
    }

    /// The title to show: v4 `task`, else the first `# ` heading, else the id.
    pub fn display_title(&self) -> Option<&str> {
        nonempty(&self.front.task)
            .or_else(|| nonempty(&self.title))
            .or_else(|| self.id())
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The CONTEXT section's text (under `## CONTEXT` or `## Context`, up to the next level-2
    /// heading), or what another format says of the whole work.
    pub fn context(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// Which task list the file is.
    pub fn list_format(&self) -> ListFormat {
        self.list
    }

    /// The format `plan` and the dashboards name: v3, v4 or isa for markdown PRDs, else the
    /// task list's ([`ListFormat::name`]).
    pub fn format_name(&self) -> &'static str {
        match self.list {
            ListFormat::Markdown => self.front.format.name(),
            other => other.name(),
        }
    }

    /// Parses `text` as a task list of the format `list`.
    pub fn parse_as(text: impl Into<String>, list: ListFormat) -> Result<Prd, ParseError> {
        let text = text.into();
        if list == ListFormat::Markdown {
            return Prd::parse(text);
        }
        format::assemble(text, list)
    }

    /// `text` (a newer text of this file) parsed as this file's format.
    pub fn reparse(&self, text: impl Into<String>) -> Result<Prd, ParseError> {
        Prd::parse_as(text, self.list)
    }

    pub fn criterion(&self, id: &str) -> Option<&Criterion> {
        self.index.get(id).map(|&i| &self.criteria[i])
    }

    /// Passing (ticked) and total criteria.
    pub fn progress(&self) -> (usize, usize) {
        let passing = self.criteria.iter().filter(|c| c.checked).count();
        (passing, self.criteria.len())
    }

    /// The criteria that are not ticked, in document order.
    pub fn failing(&self) -> impl Iterator<Item = &Criterion> {
        self.criteria.iter().filter(|c| !c.checked)
    }

    /// Ticks or unticks a criterion by changing its done marker and nothing else: the one
    /// byte inside its `[ ]`, a JSON `passes` value, a Taskmaster `status` string (see
    /// [`ListFormat`]). Returns whether the text changed; `None` when there is no such
    /// criterion.
    pub fn set_checked(&mut self, id: &str, checked: bool) -> Option<bool> {
        let list = self.list;
        let c = &mut self.criteria[*self.index.get(id)?];
        if c.checked == checked {
            return Some(false);
        }
        let new = list.marker(checked);
        let range = c.marker.clone();
        if new.len() == range.len() {
            self.text.replace_range(range, new);
            c.checked = checked;
            return Some(true);
        }
        // The marker's length changed: every later position moves, so the text is read again.
        let mut text = self.text.clone();
        text.replace_range(range, new);
        match self.reparse(text) {
            Ok(doc) => {
                *self = doc;
                Some(true)
            }
            Err(e) => {
                tracing::error!("writing {id}'s done marker broke the file ({e}); not written");
                Some(false)
            }
        }
    }

    /// Sets top-level front matter keys (in place, at every occurrence of a key written more
    /// than once, or added before the closing `---`). A file with no front matter gets none:
    /// the edits are not made (the run keeps its state in the state file). Re-reads the
    /// document.
    ///
    /// The invariant of every front matter write: a file is never marked complete (v3
    /// `status: COMPLETE`, v4/ISA `phase: complete`) while a box of its criteria sections is
    /// open, whatever its id looks like. Such an edit is refused with the first open box's
    /// line, and nothing changes.
    pub fn set_front(&mut self, edits: &[(&str, Value)]) -> Result<(), ParseError> {
        if edits.is_empty() || self.span.is_none() {
            return Ok(());
        }
        if edits.iter().any(|(k, v)| marks_complete(k, v)) {
            if let Some(&line) = self.fog.first() {
                return Err(ParseError {
                    line,
                    message: "refusing to mark the file complete: `## Not yet specified` still holds an open question (LifeOS closes an ISA only when it is empty)".into(),
                });
            }
            let open = self.open_boxes();
            if let Some(first) = open.first() {
                return Err(ParseError {
                    line: first.line,
                    message: format!(
                        "refusing to mark the file complete: {} is open ({} open box{} in the criteria sections)",
                        first.label,
                        open.len(),
                        if open.len() == 1 { "" } else { "es" }
                    ),
                });
            }
        }
        let mut text = std::mem::take(&mut self.text);
        for (key, value) in edits {
            let span = frontmatter::locate(&text)
                .map_err(fm_err)?
                .expect("front matter exists");
            text = frontmatter::set_key(&text, &span, key, value);
        }
        *self = Prd::parse(text)?;
        Ok(())
    }
}

/// Parses the text of the file at `path`, as the task list its path and content say it is.
pub fn parse_file(path: &std::path::Path, text: String) -> anyhow::Result<Prd> {
    let list = ListFormat::detect(path, &text).map_err(anyhow::Error::msg)?;
    Prd::parse_as(text, list).map_err(|e| anyhow::anyhow!(e.at(path)))
}

/// Reads and parses a PRD file (or another task list, see [`ListFormat`]); errors name the
/// file (and line).
pub fn load(path: &std::path::Path) -> anyhow::Result<Prd> {
    use anyhow::Context;
    // The I/O error stays in the chain: an unreadable PRD is an I/O failure (exit 6).
    let bytes = std::fs::read(path)
        .with_context(|| format!("failed to read PRD at `{}`", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = upto.iter().filter(|&&b| b == b'\n').count() + 1;
        anyhow::anyhow!("{}:{line}: the PRD is not valid UTF-8", path.display())
    })?;
    parse_file(path, text)
}

#[cfg(test)]
mod tests;
