//! The markdown task lists of spec-driven tools. Spec Kit's `tasks.md`: `- [ ] T001 [P]
//! [US1] Description with file path` under `## Phase N: …` headings, done `[x]` or `[X]`,
//! worked phase by phase (`[P]` tasks in parallel, the others one after another). Kiro's
//! `tasks.md`: `- [ ] 1. Title` over `- [ ] 1.1 Sub-task`, with detail bullets and
//! `_Requirements: 1.1, 2.3_` below each, worked in order; a parent passes with its sub-tasks.
//! Either may start with a `---` rule: there is no front matter to read.

use pulldown_cmark::HeadingLevel;

use super::{ListFormat, Parts, criterion};
use crate::prd::body::{Body, TaskItem};
use crate::prd::{LineIndex, OtherBox, Warning};

/// A `tasks.md` outside the folders that name its tool: Spec Kit's when a box starts with
/// `T` and digits, Kiro's when one starts with a number.
pub(super) fn detect(text: &str) -> Option<ListFormat> {
    let body = Body::scan(text, 0);
    let first = |i: &TaskItem| text[i.text.clone()].trim_start_matches('*').to_string();
    if body.items.iter().any(|i| spec_kit_id(&first(i)).is_some()) {
        return Some(ListFormat::SpecKit);
    }
    if body.items.iter().any(|i| kiro_id(&first(i)).is_some()) {
        return Some(ListFormat::Kiro);
    }
    None
}

/// `T001 rest` → (`T001`, `rest`).
fn spec_kit_id(raw: &str) -> Option<(&str, &str)> {
    let (word, rest) = raw.split_once(' ').unwrap_or((raw, ""));
    let word = word.trim_end_matches([':', '*']);
    let digits = word.strip_prefix('T')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some((word, rest))
}

/// `1. Title` / `1.1 Sub-task` / `2.3. Sub` → (`1`, `Title`).
fn kiro_id(raw: &str) -> Option<(&str, &str)> {
    let (word, rest) = raw.split_once(' ')?;
    let id = word.trim_end_matches(['.', '*']);
    let ok = !id.is_empty()
        && id
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    ok.then_some((id, rest.trim_start()))
}

/// Boxes that are no task of the format: not worked on, and open ones keep the list from
/// being complete.
fn other(parts: &mut Parts, line: usize, item: &TaskItem, raw: &str) {
    if !item.checked {
        parts.warnings.push(Warning {
            line,
            message: format!(
                "the open box `{}` is no task (no task id); while it is open the list is not complete",
                crate::prd::claim::one_line_start(raw)
            ),
        });
    }
    parts.other_boxes.push(OtherBox {
        line,
        id: None,
        checked: item.checked,
        tombstone: false,
        deferred: false,
        text: raw.to_string(),
    });
}

/// The item's criterion, once its id is known: line, box, duplicates refused.
fn task(
    parts: &mut Parts,
    lines: &LineIndex,
    item: &TaskItem,
    id: &str,
    description: &str,
) -> Result<crate::prd::Criterion, crate::prd::ParseError> {
    let line = lines.line_of(item.marker);
    if let Some(first) = parts.criteria.iter().find(|c| c.id == id) {
        return Err(crate::prd::ParseError {
            line,
            message: format!(
                "duplicate task id {id}, first defined at line {}",
                first.line
            ),
        });
    }
    let mut c = criterion(id.to_string(), description.trim().to_string(), line);
    c.checked = item.checked;
    c.marker = item.marker..item.marker + 1;
    Ok(c)
}

/// What both readers start from: the body (no front matter: a `---` at the top is a rule;
/// with Kiro's optional `[ ]*` boxes when `optional`), its lines, and the parts with the title.
fn begin(text: &str, optional: bool) -> (Body, LineIndex, Parts) {
    let body = if optional {
        Body::scan_optional(text)
    } else {
        Body::scan(text, 0)
    };
    let parts = Parts {
        title: body.title.clone(),
        ..Parts::default()
    };
    (body, LineIndex::new(text), parts)
}

pub(super) fn read_spec_kit(text: &str) -> Result<Parts, crate::prd::ParseError> {
    let (body, lines, mut parts) = begin(text, false);
    // The phase (its `##` heading) of each task, and the tasks of each phase, in order.
    let mut phases: Vec<(Option<usize>, Vec<String>)> = Vec::new();
    for item in &body.items {
        let raw = &text[item.text.clone()];
        let line = lines.line_of(item.marker);
        let Some((id, mut rest)) = spec_kit_id(raw.trim_start_matches("**")) else {
            other(&mut parts, line, item, raw);
            continue;
        };
        let (mut parallel, mut story) = (false, None);
        while let Some(tag) = rest
            .trim_start()
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .filter(|(t, _)| !t.is_empty() && t.len() <= 12 && !t.contains(' '))
        {
            match tag.0 {
                "P" | "p" => parallel = true,
                t => story = Some(t.to_string()),
            }
            rest = tag.1;
        }
        let phase = phase_of(&body, item);
        if phases.last().is_none_or(|(p, _)| *p != phase) {
            phases.push((phase, Vec::new()));
        }
        let mut c = task(&mut parts, &lines, item, id, rest)?;
        // Each phase waits for the one before (its checkpoint).
        if phases.len() > 1 {
            c.after = phases[phases.len() - 2].1.clone();
        }
        for need in depends_on(rest) {
            if !c.after.contains(&need) {
                c.after.push(need);
            }
        }
        let phase_name = phase.map_or("tasks", |h| body.headings[h].text.as_str());
        c.domain = if parallel {
            id.to_string()
        } else {
            phase_name.to_string()
        };
        if let Some(s) = story {
            c.notes.push(format!("User story: {s}"));
        }
        c.notes.push(format!("Phase: {phase_name}"));
        phases.last_mut().expect("pushed").1.push(c.id.clone());
        parts.criteria.push(c);
    }
    Ok(parts)
}

/// The ids a Spec Kit task names in its text as what it needs, as the template writes them:
/// `… (depends on T012, T013)` (any case; `and` may join the last two).
fn depends_on(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = lower[from..].find("(depends on") {
        let start = from + at + "(depends on".len();
        let Some(len) = text[start..].find(')') else {
            break;
        };
        for word in text[start..start + len].split([',', ' ', ';']) {
            if let Some((id, "")) = spec_kit_id(word.trim()) {
                out.push(id.to_string());
            }
        }
        from = start + len;
    }
    out
}

/// The `##` (or higher) heading a task sits under.
fn phase_of(body: &Body, item: &TaskItem) -> Option<usize> {
    let mut h = item.heading?;
    loop {
        if body.headings[h].level <= HeadingLevel::H2 {
            return Some(h);
        }
        h = h.checked_sub(1)?;
    }
}

pub(super) fn read_kiro(text: &str) -> Result<Parts, crate::prd::ParseError> {
    let (body, lines, mut parts) = begin(text, true);
    let mut previous_top: Option<String> = None;
    // The top-level task that came before the current one: what an optional sub-task, which
    // is no leaf of its parent and so does not wait with it, waits for itself.
    let mut before_parent: Option<String> = None;
    for item in &body.items {
        let raw = &text[item.text.clone()];
        let line = lines.line_of(item.marker);
        let Some((id, rest)) = kiro_id(raw.trim_start_matches("**")) else {
            other(&mut parts, line, item, raw);
            continue;
        };
        let mut c = task(&mut parts, &lines, item, id, rest.trim_end_matches("**"))?;
        let top = id.split('.').next().unwrap_or(id).to_string();
        c.domain = top.clone();
        if !id.contains('.') {
            // Kiro's plan is worked in order: each task after the one before.
            before_parent = previous_top.replace(top);
            c.after.extend(before_parent.clone());
        }
        c.notes = details(text, item);
        if item.optional {
            c.optional = true;
            if id.contains('.') {
                c.after.extend(before_parent.clone());
            }
            c.notes.insert(
                0,
                "Optional (Kiro's `*`): its parent passes without it, the list is complete with it"
                    .into(),
            );
        }
        parts.criteria.push(c);
    }
    Ok(parts)
}

/// The lines below a Kiro task that belong to it (indented deeper, up to the next box):
/// detail bullets and `_Requirements: …_`, without their markup.
fn details(text: &str, item: &TaskItem) -> Vec<String> {
    let start = text[..item.marker].rfind('\n').map_or(0, |i| i + 1);
    let indent = |l: &str| l.len() - l.trim_start().len();
    let own = indent(&text[start..]);
    let after = text[item.text.end..]
        .find('\n')
        .map_or(text.len(), |i| item.text.end + i + 1);
    let mut out = Vec::new();
    for l in text[after..].lines() {
        let t = l.trim();
        if t.is_empty() {
            continue;
        }
        let is_box = ["- [", "* [", "+ ["].iter().any(|b| t.starts_with(b));
        if indent(l) <= own || is_box || t.starts_with('#') {
            break;
        }
        let t = t.trim_start_matches(['-', '*', '+']).trim();
        let t = t
            .strip_prefix('_')
            .and_then(|x| x.strip_suffix('_'))
            .unwrap_or(t);
        out.push(t.to_string());
    }
    out
}
