//! The PRD document: its text, the parsed model (front matter, criteria with byte positions),
//! and byte-precise edits. The text is the source of truth: an edit splices the original
//! bytes, it never re-renders markdown, so unchanged input comes back byte for byte.
//! Both of PAI's formats are read: v3 (`id`, `## IDEAL STATE CRITERIA`, grouped ids) and v4
//! (`task`/`slug`, `## Criteria`, flat `ISC-1` ids); see [`Format`].

pub mod frontmatter;
pub mod id;
pub mod lookup;
pub mod timestamp;
pub mod verify;

use std::collections::HashMap;
use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

pub use frontmatter::{Format, FrontMatter, Value};
pub use timestamp::timestamp_like;
pub use verify::{BadVerifyTypes, DEFAULT_COMMAND_TYPES, HowVerified, Verify, VerifyTypes};

/// One criterion: a task-list item whose text starts with an id and a colon (`ISC-C1: text`,
/// or in bold, `**ISC-C1:** text` or `**ISC-C1**: text`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Criterion {
    pub id: String,
    pub description: String,
    pub verify: Option<Verify>,
    pub checked: bool,
    /// 1-based line number.
    pub line: usize,
    pub domain: String,
    pub anti: bool,
    /// Byte offset of the character inside `[ ]` (space, `x` or `X`).
    #[serde(skip)]
    pub marker: usize,
}

impl Criterion {
    /// Who decides whether this criterion passes: the runner (a command), the agent, or a
    /// person. `types` are the Verify types whose single-code-span method is a command.
    pub fn how_verified(&self, types: &VerifyTypes) -> HowVerified<'_> {
        match &self.verify {
            Some(v) => v.how(types),
            None => HowVerified::Agent {
                why: "no Verify method".into(),
            },
        }
    }

    /// The command the runner runs for this criterion, if it runs one.
    pub fn command(&self, types: &VerifyTypes) -> Option<&str> {
        self.how_verified(types).command()
    }

    pub fn is_custom(&self) -> bool {
        self.verify.as_ref().is_some_and(Verify::is_custom)
    }
}

/// A warning about the document: something that looks meant but is not read, or is read
/// differently from how it may look (a front matter key set twice).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    pub line: usize,
    pub message: String,
}

/// An error that makes the document unusable, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl ParseError {
    /// `path:line: message`, the form every message about a PRD takes.
    pub fn at(&self, path: &std::path::Path) -> String {
        format!("{}:{}: {}", path.display(), self.line, self.message)
    }
}

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
    /// Byte range of the text under `## CONTEXT` (any case), up to the next level-2 (or
    /// higher) heading.
    context: Option<Range<usize>>,
    /// Criterion id → index in `criteria`.
    index: HashMap<String, usize>,
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
        let mut prd = Prd {
            span,
            front,
            criteria: Vec::new(),
            warnings,
            title: body.title.clone(),
            context: body.context.clone(),
            index: HashMap::new(),
            text,
        };
        prd.read_criteria(&body)?;
        Ok(prd)
    }

    fn read_criteria(&mut self, body: &Body) -> Result<(), ParseError> {
        let lines = LineIndex::new(&self.text);
        let text = &self.text;
        let items: Vec<&TaskItem> = if body.has_criteria_heading {
            body.items.iter().filter(|i| i.in_criteria).collect()
        } else {
            body.items.iter().collect()
        };
        let any_isc = items
            .iter()
            .any(|i| split_id(&text[i.text.clone()]).is_some_and(|(id, _)| id::is_isc_id(id)));
        for item in items {
            let raw = &text[item.text.clone()];
            let line = lines.line_of(item.marker);
            let Some((cand, rest)) = split_id(raw) else {
                if looks_like_isc(raw) {
                    self.warnings.push(Warning {
                        line,
                        message: format!(
                            "`{}` looks like a criterion but has no valid id (ISC- then ASCII letters, digits and dashes, then `:`); it is not read",
                            first_word(raw)
                        ),
                    });
                }
                continue;
            };
            let valid = if any_isc {
                id::is_isc_id(cand)
            } else {
                id::is_legacy_id(cand)
            };
            if !valid {
                if looks_like_isc(cand) {
                    self.warnings.push(Warning {
                        line,
                        message: format!(
                            "`{cand}` looks like a criterion id but is not one (ISC- then ASCII letters, digits and dashes); the item is not read"
                        ),
                    });
                }
                continue;
            }
            if let Some(&prev) = self.index.get(cand) {
                return Err(ParseError {
                    line,
                    message: format!(
                        "duplicate criterion id {cand}, first defined at line {}",
                        self.criteria[prev].line
                    ),
                });
            }
            self.index.insert(cand.to_string(), self.criteria.len());
            let (description, verify) = verify::split_verify(rest);
            self.criteria.push(Criterion {
                id: cand.to_string(),
                description,
                verify,
                checked: item.checked,
                line,
                domain: id::domain(cand).to_string(),
                anti: id::is_anti(cand),
                marker: item.marker,
            });
        }
        Ok(())
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

    pub fn into_text(self) -> String {
        self.text
    }

    /// The CONTEXT section's text (under `## CONTEXT` or `## Context`, up to the next level-2
    /// heading).
    pub fn context(&self) -> Option<&str> {
        self.context.as_ref().map(|r| self.text[r.clone()].trim())
    }

    /// The line ending the file uses (from its first line).
    pub fn eol(&self) -> &'static str {
        match self.text.find('\n') {
            Some(i) if i > 0 && self.text.as_bytes()[i - 1] == b'\r' => "\r\n",
            _ => "\n",
        }
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

    /// Ticks or unticks a criterion by changing the one byte inside its `[ ]`.
    /// Returns whether the text changed; `None` when there is no such criterion.
    pub fn set_checked(&mut self, id: &str, checked: bool) -> Option<bool> {
        let c = &mut self.criteria[*self.index.get(id)?];
        if c.checked == checked {
            return Some(false);
        }
        let byte = if checked { "x" } else { " " };
        self.text.replace_range(c.marker..c.marker + 1, byte);
        c.checked = checked;
        Some(true)
    }

    /// Sets top-level front matter keys (in place, at every occurrence of a key written more
    /// than once, or added before the closing `---`; a front matter block is created when the
    /// file has none). Re-reads the document.
    pub fn set_front(&mut self, edits: &[(&str, Value)]) -> Result<(), ParseError> {
        if edits.is_empty() {
            return Ok(());
        }
        let mut text = std::mem::take(&mut self.text);
        if self.span.is_none() {
            let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
            text.insert_str(0, &format!("---{eol}---{eol}"));
        }
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

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|t| !t.trim().is_empty())
}

fn fm_err(e: frontmatter::FmError) -> ParseError {
    ParseError {
        line: e.line,
        message: e.message,
    }
}

fn first_word(s: &str) -> &str {
    s.split([':', ' ']).next().unwrap_or(s)
}

fn looks_like_isc(s: &str) -> bool {
    s.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("ISC"))
}

/// `ID: rest` → (`ID`, `rest`), where ID has no spaces. A bold id, `**ID:** rest` or
/// `**ID**: rest`, gives the same pair: some authors bold their ids.
fn split_id(raw: &str) -> Option<(&str, &str)> {
    if let Some(inner) = raw.strip_prefix("**") {
        let colon = inner.find(':')?;
        let (cand, after) = (&inner[..colon], &inner[colon + 1..]);
        let (cand, rest) = match after.strip_prefix("**") {
            Some(rest) => (cand, rest),
            None => (cand.strip_suffix("**")?, after),
        };
        return plain_id(cand).then_some((cand, rest));
    }
    let colon = raw.find(':')?;
    let cand = &raw[..colon];
    plain_id(cand).then_some((cand, &raw[colon + 1..]))
}

fn plain_id(cand: &str) -> bool {
    !cand.is_empty() && !cand.contains(char::is_whitespace) && !cand.contains('*')
}

/// 1-based line numbers from byte offsets.
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    pub fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

struct TaskItem {
    /// Byte offset of the marker character.
    marker: usize,
    checked: bool,
    /// The item's first line after `[ ]`, trimmed.
    text: Range<usize>,
    in_criteria: bool,
}

/// What one pass of pulldown-cmark over the body finds.
struct Body {
    items: Vec<TaskItem>,
    has_criteria_heading: bool,
    title: Option<String>,
    context: Option<Range<usize>>,
}

impl Body {
    fn scan(text: &str, body_start: usize) -> Body {
        let body = &text[body_start..];
        let mut items = Vec::new();
        let mut has_criteria_heading = false;
        let mut title = None;
        let mut context: Option<Range<usize>> = None;
        let mut context_open: Option<usize> = None; // start offset while open
        let mut criteria_level: Option<HeadingLevel> = None;
        let mut heading: Option<(HeadingLevel, Range<usize>, String)> = None;

        let parser = Parser::new_ext(body, Options::ENABLE_TASKLISTS);
        for (event, range) in parser.into_offset_iter() {
            let range = range.start + body_start..range.end + body_start;
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    heading = Some((level, range, String::new()));
                }
                Event::Text(t) | Event::Code(t) if heading.is_some() => {
                    if let Some((_, _, s)) = heading.as_mut() {
                        s.push_str(&t);
                    }
                }
                Event::End(TagEnd::Heading(_)) => {
                    let Some((level, range, htext)) = heading.take() else {
                        continue;
                    };
                    if let Some(l) = criteria_level
                        && level <= l
                    {
                        criteria_level = None;
                    }
                    if criteria_level.is_none() && htext.to_ascii_uppercase().contains("CRITERIA") {
                        criteria_level = Some(level);
                        has_criteria_heading = true;
                    }
                    if let Some(start) = context_open
                        && level <= HeadingLevel::H2
                    {
                        context = Some(start..range.start);
                        context_open = None;
                    }
                    if level == HeadingLevel::H2
                        && htext.trim().eq_ignore_ascii_case("CONTEXT")
                        && context.is_none()
                    {
                        context_open = Some(range.end);
                    }
                    if level == HeadingLevel::H1 && title.is_none() {
                        title = Some(htext.trim().to_string());
                    }
                }
                Event::TaskListMarker(checked) => {
                    let Some(open) = text[range.clone()].find('[') else {
                        continue;
                    };
                    let marker = range.start + open + 1;
                    let after = marker + 2; // past the marker char and `]`
                    let line_end = text[after..].find('\n').map_or(text.len(), |i| after + i);
                    let raw = &text[after..line_end];
                    let lead = raw.len() - raw.trim_start().len();
                    let trimmed = raw.trim();
                    let start = after + lead;
                    items.push(TaskItem {
                        marker,
                        checked,
                        text: start..start + trimmed.len(),
                        in_criteria: criteria_level.is_some(),
                    });
                }
                _ => {}
            }
        }
        if let Some(start) = context_open {
            context = Some(start..text.len());
        }
        Body {
            items,
            has_criteria_heading,
            title,
            context,
        }
    }
}

/// Reads and parses a PRD file; errors name the file (and line).
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
    Prd::parse(text).map_err(|e| anyhow::anyhow!(e.at(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_one_byte() {
        let t = "# T\n\n- [ ] ISC-A-1: a\n- [X] ISC-B-1: b\n";
        let mut p = Prd::parse(t).unwrap();
        assert_eq!(p.set_checked("ISC-A-1", true), Some(true));
        assert_eq!(p.set_checked("ISC-B-1", false), Some(true));
        assert_eq!(p.set_checked("ISC-B-1", false), Some(false));
        assert_eq!(p.set_checked("ISC-Z-1", false), None);
        assert_eq!(p.text(), "# T\n\n- [x] ISC-A-1: a\n- [ ] ISC-B-1: b\n");
    }

    #[test]
    fn bold_ids() {
        assert_eq!(split_id("**ISC-C1:** text"), Some(("ISC-C1", " text")));
        assert_eq!(split_id("**ISC-C1**: text"), Some(("ISC-C1", " text")));
        assert_eq!(split_id("ISC-C1: text"), Some(("ISC-C1", " text")));
        assert_eq!(split_id("**ISC-C1** text: more"), None);
        assert_eq!(split_id("**ISC C1:** text"), None);
        assert_eq!(split_id("**:** text"), None);
    }

    #[test]
    fn duplicate_ids_name_both_lines() {
        let t = "- [ ] ISC-A-1: a\n\n- [ ] ISC-A-1: again\n";
        let e = Prd::parse(t).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(
            e.message.contains("first defined at line 1"),
            "{}",
            e.message
        );
    }

    #[test]
    fn legacy_ids_only_without_isc() {
        let p = Prd::parse("- [ ] C1: a\n- [ ] A1: b\n").unwrap();
        assert_eq!(p.criteria.len(), 2);
        assert!(p.criteria[1].anti);
        let p = Prd::parse("- [ ] C1: a\n- [ ] ISC-X-1: b\n").unwrap();
        assert_eq!(p.criteria.len(), 1);
    }

    #[test]
    fn front_matter_created_when_missing() {
        let mut p = Prd::parse("# T\r\n- [ ] ISC-C1: a\r\n").unwrap();
        p.set_front(&[("loopStatus", Value::str("running"))])
            .unwrap();
        assert_eq!(
            p.text(),
            "---\r\nloopStatus: running\r\n---\r\n# T\r\n- [ ] ISC-C1: a\r\n"
        );
        assert_eq!(p.front.loop_status.as_deref(), Some("running"));
        assert_eq!(p.criteria[0].line, 5);
    }
}
