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
    pub(super) has_criteria_heading: bool,
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
        let body = &text[body_start..];
        let mut items = Vec::new();
        let mut has_criteria_heading = false;
        let mut criteria_heading = None;
        let mut headings: Vec<Heading> = Vec::new();
        let mut title = None;
        let mut context: Option<Range<usize>> = None;
        let mut context_open: Option<usize> = None; // start offset while open
        let mut test_strategy: Option<Range<usize>> = None;
        let mut strategy_open: Option<usize> = None;
        let mut fog: Option<Range<usize>> = None;
        let mut fog_open: Option<usize> = None;
        let mut isa_headings = false;
        let mut criteria_level: Option<HeadingLevel> = None;
        let mut features = false;
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
                    let upper = htext.trim().to_ascii_uppercase();
                    headings.push(Heading {
                        start: range.start,
                        level,
                        text: htext.trim().to_string(),
                    });
                    if criteria_level.is_none() && is_claims_heading(level, &upper) {
                        criteria_heading = criteria_heading.or(Some(headings.len() - 1));
                        criteria_level = Some(level);
                        features = heading_is(&upper, "FEATURES");
                        has_criteria_heading = true;
                    }
                    if level == HeadingLevel::H2
                        && [
                            "CLAIMS",
                            "ANTI-CLAIMS",
                            "TEST STRATEGY",
                            "NOT YET SPECIFIED",
                        ]
                        .iter()
                        .any(|w| heading_is(&upper, w))
                    {
                        isa_headings = true;
                    }
                    if let Some(start) = strategy_open
                        && level <= HeadingLevel::H2
                    {
                        test_strategy = Some(start..range.start);
                        strategy_open = None;
                    }
                    if level == HeadingLevel::H2
                        && heading_is(&upper, "TEST STRATEGY")
                        && test_strategy.is_none()
                    {
                        strategy_open = Some(range.end);
                    }
                    if let Some(start) = fog_open
                        && level <= HeadingLevel::H2
                    {
                        fog = Some(start..range.start);
                        fog_open = None;
                    }
                    if level == HeadingLevel::H2
                        && heading_is(&upper, "NOT YET SPECIFIED")
                        && fog.is_none()
                    {
                        fog_open = Some(range.end);
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
                        in_features: criteria_level.is_some() && features,
                        heading: headings.len().checked_sub(1),
                        optional: false,
                    });
                }
                Event::Start(Tag::Item) if optional => {
                    if let Some((marker, checked, text_range)) = optional_box(text, range.start) {
                        items.push(TaskItem {
                            marker,
                            checked,
                            text: text_range,
                            in_criteria: criteria_level.is_some(),
                            in_features: criteria_level.is_some() && features,
                            heading: headings.len().checked_sub(1),
                            optional: true,
                        });
                    }
                }
                _ => {}
            }
        }
        if let Some(start) = context_open {
            context = Some(start..text.len());
        }
        if let Some(start) = strategy_open {
            test_strategy = Some(start..text.len());
        }
        if let Some(start) = fog_open {
            fog = Some(start..text.len());
        }
        Body {
            items,
            has_criteria_heading,
            criteria_heading,
            headings,
            title,
            context,
            test_strategy,
            fog,
            isa_headings,
        }
    }
}

/// A list item starting at `at` that opens with Kiro's optional box (`- [ ]* text`, `1. [x]*
/// text`): its marker's offset, whether it is ticked, and its first line's text after the `*`.
fn optional_box(text: &str, at: usize) -> Option<(usize, bool, Range<usize>)> {
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
    Some((marker, checked, start..start + trimmed.len()))
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
