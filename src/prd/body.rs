//! One pass of pulldown-cmark over a PRD's body: its task items, headings and sections, and
//! line numbers from byte offsets.

use super::*;

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

pub(super) struct TaskItem {
    /// Byte offset of the marker character.
    pub(super) marker: usize,
    pub(super) checked: bool,
    /// The item's first line after `[ ]`, trimmed.
    pub(super) text: Range<usize>,
    pub(super) in_criteria: bool,
    /// Under `## Features`, whose lists may hold plain to-dos next to claims: only a line
    /// that reads like a criterion counts as an unreadable one.
    pub(super) in_features: bool,
    /// The heading it sits under (an index into [`Body::headings`]).
    pub(super) heading: Option<usize>,
    /// Kiro's optional task, `- [ ]* 2.3 …` (read only by [`Body::scan_optional`]).
    pub(super) optional: bool,
}

/// A heading of the body: its start offset, level and text.
pub(super) struct Heading {
    pub(super) start: usize,
    pub(super) level: HeadingLevel,
    pub(super) text: String,
}

/// What one pass of pulldown-cmark over the body finds.
pub(super) struct Body {
    pub(super) items: Vec<TaskItem>,
    /// The first heading whose section holds criteria (an index into `headings`).
    pub(super) criteria_heading: Option<usize>,
    pub(super) headings: Vec<Heading>,
    pub(super) title: Option<String>,
    pub(super) context: Option<Range<usize>>,
    /// The text under `## Test Strategy`.
    pub(super) test_strategy: Option<Range<usize>>,
    /// The text under `## Not yet specified` (an ISA's fog).
    pub(super) fog: Option<Range<usize>>,
    /// A heading only an ISA has (`## Claims`, `## Test Strategy`...).
    pub(super) isa_headings: bool,
}

/// Whether `upper` (a heading's text, upper case) is `word`, or starts with it followed by
/// something other than a letter or digit.
pub(super) fn heading_is(upper: &str, word: &str) -> bool {
    upper
        .strip_prefix(word)
        .is_some_and(|r| !r.starts_with(|c: char| c.is_ascii_alphanumeric()))
}

/// A heading whose section holds criteria: any with CRITERIA in it (v3, v4, LifeOS legacy,
/// `## Bridge Criteria`), and LifeOS's `## Claims`, `## Anti-claims` and `## Features`
/// (whose `### F<n> · name` blocks hold claims).
pub(super) fn is_claims_heading(level: HeadingLevel, upper: &str) -> bool {
    upper.contains("CRITERIA")
        || (level == HeadingLevel::H2
            && ["CLAIMS", "ANTI-CLAIMS", "FEATURES"]
                .iter()
                .any(|w| heading_is(upper, w)))
}

impl Body {
    pub(super) fn scan(text: &str, body_start: usize) -> Body {
        Body::scan_with(text, body_start, false)
    }

    /// [`Body::scan`] of a whole text that also reads Kiro's optional tasks: `- [ ]* text`
    /// and `- [x]* text`, which CommonMark sees as no task box.
    pub(super) fn scan_optional(text: &str) -> Body {
        Body::scan_with(text, 0, true)
    }

    fn scan_with(text: &str, body_start: usize, optional: bool) -> Body {
        let mut scan = Scan::new(text, optional);
        let parser = Parser::new_ext(&text[body_start..], Options::ENABLE_TASKLISTS);
        for (event, range) in parser.into_offset_iter() {
            scan.event(event, range.start + body_start..range.end + body_start);
        }
        scan.finish()
    }

    /// Whether the body has a heading whose section holds criteria.
    pub(super) fn has_criteria_heading(&self) -> bool {
        self.criteria_heading.is_some()
    }
}

/// The level-2 headings only an ISA has.
const ISA_HEADINGS: [&str; 4] = [
    "CLAIMS",
    "ANTI-CLAIMS",
    "TEST STRATEGY",
    "NOT YET SPECIFIED",
];

/// The state of one pass over the body's events: what is found so far, and the heading and
/// sections it is in.
struct Scan<'t> {
    text: &'t str,
    /// Whether Kiro's optional tasks are read too.
    optional: bool,
    items: Vec<TaskItem>,
    headings: Vec<Heading>,
    title: Option<String>,
    criteria_heading: Option<usize>,
    isa_headings: bool,
    /// The heading whose text is being read.
    heading: Option<OpenHeading>,
    /// The criteria section the pass is in.
    criteria: Option<CriteriaSection>,
    context: Section,
    test_strategy: Section,
    fog: Section,
}

/// A heading between its start and end events: its level, its bytes and its text so far.
struct OpenHeading {
    level: HeadingLevel,
    range: Range<usize>,
    text: String,
}

/// A criteria section the pass is in: its heading's level (a heading of that level or higher
/// ends it), and whether it is `## Features`.
#[derive(Clone, Copy)]
struct CriteriaSection {
    level: HeadingLevel,
    features: bool,
}

/// A level-2 section of which only the first counts: its text runs from its heading's end to
/// the next heading of level 2 or higher, or to the end of the file.
#[derive(Default)]
struct Section {
    /// Where its text starts, while the pass is in it.
    open: Option<usize>,
    found: Option<Range<usize>>,
}

impl Section {
    /// At the end of `heading`: it ends an open section, and opens this one when it `opens`
    /// it (is its level-2 heading) and none was found before.
    fn at_heading(&mut self, heading: &OpenHeading, opens: bool) {
        if heading.level <= HeadingLevel::H2
            && let Some(start) = self.open.take()
        {
            self.found = Some(start..heading.range.start);
        }
        if opens && self.found.is_none() {
            self.open = Some(heading.range.end);
        }
    }

    /// The section's text, once the pass reached `end`.
    fn finish(self, end: usize) -> Option<Range<usize>> {
        match self.open {
            Some(start) => Some(start..end),
            None => self.found,
        }
    }
}

/// A task box as the text has it: its marker's offset, whether it is ticked, and its first
/// line's text after the box, trimmed.
struct TaskBox {
    marker: usize,
    checked: bool,
    text: Range<usize>,
}

impl<'t> Scan<'t> {
    fn new(text: &'t str, optional: bool) -> Scan<'t> {
        Scan {
            text,
            optional,
            items: Vec::new(),
            headings: Vec::new(),
            title: None,
            criteria_heading: None,
            isa_headings: false,
            heading: None,
            criteria: None,
            context: Section::default(),
            test_strategy: Section::default(),
            fog: Section::default(),
        }
    }

    fn event(&mut self, event: Event, range: Range<usize>) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                let text = String::new();
                self.heading = Some(OpenHeading { level, range, text });
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(heading) = self.heading.as_mut() {
                    heading.text.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(heading) = self.heading.take() {
                    self.heading_end(&heading);
                }
            }
            Event::TaskListMarker(checked) => {
                if let Some(task) = task_box(self.text, range, checked) {
                    self.item(task, false);
                }
            }
            Event::Start(Tag::Item) if self.optional => {
                if let Some(task) = optional_box(self.text, range.start) {
                    self.item(task, true);
                }
            }
            _ => {}
        }
    }

    /// A heading read whole: it may end the criteria section and open one, name the file an
    /// ISA, end and open the sections the body keeps, and be the title.
    fn heading_end(&mut self, heading: &OpenHeading) {
        let level = heading.level;
        let name = heading.text.trim();
        let upper = name.to_ascii_uppercase();
        if self.criteria.is_some_and(|c| level <= c.level) {
            self.criteria = None;
        }
        self.headings.push(Heading {
            start: heading.range.start,
            level,
            text: name.to_string(),
        });
        if self.criteria.is_none() && is_claims_heading(level, &upper) {
            self.criteria_heading = self.criteria_heading.or(Some(self.headings.len() - 1));
            let features = heading_is(&upper, "FEATURES");
            self.criteria = Some(CriteriaSection { level, features });
        }
        let h2 = level == HeadingLevel::H2;
        if h2 && ISA_HEADINGS.iter().any(|w| heading_is(&upper, w)) {
            self.isa_headings = true;
        }
        let strategy = h2 && heading_is(&upper, "TEST STRATEGY");
        self.test_strategy.at_heading(heading, strategy);
        let fog = h2 && heading_is(&upper, "NOT YET SPECIFIED");
        self.fog.at_heading(heading, fog);
        let context = h2 && name.eq_ignore_ascii_case("CONTEXT");
        self.context.at_heading(heading, context);
        if level == HeadingLevel::H1 && self.title.is_none() {
            self.title = Some(name.to_string());
        }
    }

    /// A task box, placed in the section and under the heading the pass is at.
    fn item(&mut self, task: TaskBox, optional: bool) {
        self.items.push(TaskItem {
            marker: task.marker,
            checked: task.checked,
            text: task.text,
            in_criteria: self.criteria.is_some(),
            in_features: self.criteria.is_some_and(|c| c.features),
            heading: self.headings.len().checked_sub(1),
            optional,
        });
    }

    fn finish(self) -> Body {
        let end = self.text.len();
        Body {
            items: self.items,
            criteria_heading: self.criteria_heading,
            headings: self.headings,
            title: self.title,
            context: self.context.finish(end),
            test_strategy: self.test_strategy.finish(end),
            fog: self.fog.finish(end),
            isa_headings: self.isa_headings,
        }
    }
}

/// The box of a task list marker whose item spans `item`: CommonMark's `[ ]`, `[x]`.
fn task_box(text: &str, item: Range<usize>, checked: bool) -> Option<TaskBox> {
    let open = text[item.clone()].find('[')?;
    let marker = item.start + open + 1;
    let after = marker + 2; // past the marker char and `]`
    let line_end = text[after..].find('\n').map_or(text.len(), |i| after + i);
    let raw = &text[after..line_end];
    let start = after + (raw.len() - raw.trim_start().len());
    let text = start..start + raw.trim().len();
    Some(TaskBox {
        marker,
        checked,
        text,
    })
}

/// A list item starting at `at` that opens with Kiro's optional box (`- [ ]* text`, `1. [x]*
/// text`), with its first line's text after the `*`.
fn optional_box(text: &str, at: usize) -> Option<TaskBox> {
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line = &text[at..line_end];
    let after_bullet = match line.as_bytes().first()? {
        b'-' | b'*' | b'+' => &line[1..],
        b'0'..=b'9' => {
            let digits = line.bytes().take_while(u8::is_ascii_digit).count();
            line[digits..].strip_prefix(['.', ')'])?
        }
        _ => return None,
    };
    let rest = after_bullet.trim_start_matches([' ', '\t']);
    if rest.len() == after_bullet.len() {
        return None;
    }
    let checked = match rest.get(..4)? {
        "[ ]*" => false,
        "[x]*" | "[X]*" => true,
        _ => return None,
    };
    let marker = line_end - line.len() + (line.len() - rest.len()) + 1;
    let after = &rest[4..];
    if !after.starts_with([' ', '\t']) {
        return None;
    }
    let trimmed = after.trim();
    let start = line_end - after.len() + (after.len() - after.trim_start().len());
    Some(TaskBox {
        marker,
        checked,
        text: start..start + trimmed.len(),
    })
}

/// The message of [`Prd::misplaced`] for a body whose criteria heading holds no box, if its
/// boxes with criterion ids sit under other headings.
pub(super) fn misplaced(text: &str, body: &Body, lines: &LineIndex) -> Option<String> {
    let criteria = &body.headings[body.criteria_heading?];
    if body.items.iter().any(|i| i.in_criteria) {
        return None;
    }
    let mut under: Vec<usize> = Vec::new();
    let mut count = 0;
    for item in body
        .items
        .iter()
        .filter(|i| criterion_like(&text[i.text.clone()]))
    {
        count += 1;
        if let Some(h) = item.heading
            && !under.contains(&h)
        {
            under.push(h);
        }
    }
    if count == 0 {
        return None;
    }
    let line_of = |h: &Heading| {
        let start = h.start;
        let end = text[start..].find('\n').map_or(text.len(), |e| start + e);
        (text[start..end].trim().to_string(), lines.line_of(start))
    };
    let (heading, line) = line_of(criteria);
    let places: Vec<String> = under
        .iter()
        .map(|&h| {
            let (t, l) = line_of(&body.headings[h]);
            format!("`{t}` (line {l})")
        })
        .collect();
    let places = if places.is_empty() {
        "before any heading".to_string()
    } else {
        format!("under {}", places.join(", "))
    };
    Some(format!(
        "its criteria heading `{heading}` (line {line}) holds no boxes, while {count} box{} with criterion ids sit{} {places}: move them under `{heading}`, or put that heading above them",
        if count == 1 { "" } else { "es" },
        if count == 1 { "s" } else { "" },
    ))
}
