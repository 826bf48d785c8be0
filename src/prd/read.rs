//! Reading the boxes of a PRD's criteria sections: each is a criterion, a dropped claim's
//! tombstone or a box prdloop cannot read; with the warnings they give and, when no
//! criterion is read, why.

use super::*;

/// What the boxes of a body read as.
pub(super) struct Boxes {
    pub(super) criteria: Vec<Criterion>,
    /// Criterion id → index in `criteria`.
    pub(super) index: HashMap<String, usize>,
    /// The boxes that are not criteria (tombstones, lines not read), by line.
    pub(super) others: Vec<OtherBox>,
    /// The warnings given before the boxes were read, then theirs.
    pub(super) warnings: Vec<Warning>,
    /// Why no criterion was read although the file holds some (see [`Prd::misplaced`]).
    pub(super) misplaced: Option<String>,
}

/// Reads the boxes of `body`: in its criteria sections, or all of them in a file with none.
/// `warnings` are those given so far. Fails on a duplicate criterion id.
pub(super) fn boxes(text: &str, body: &Body, warnings: Vec<Warning>) -> Result<Boxes, ParseError> {
    let sections = body.has_criteria_heading();
    let (inside, outside): (Vec<&TaskItem>, Vec<&TaskItem>) =
        body.items.iter().partition(|i| i.in_criteria || !sections);
    let lines = LineIndex::new(text);
    let mut reader = Reader {
        text,
        lines: &lines,
        sections,
        ids: IdRule::of(text, &inside),
        boxes: Boxes {
            criteria: Vec::new(),
            index: HashMap::new(),
            others: Vec::new(),
            warnings,
            misplaced: None,
        },
    };
    for item in inside {
        reader.item(item)?;
    }
    let stray = reader.stray(&outside);
    let mut boxes = reader.boxes;
    boxes.others.extend(stray);
    boxes.others.sort_by_key(|b| b.line);
    boxes.warn_open();
    if boxes.criteria.is_empty() {
        boxes.misplaced = misplaced(text, body, &lines);
    }
    boxes.mark_anti();
    Ok(boxes)
}

/// Which ids the file's criteria have: `ISC-…` ids when any box has one, else the legacy
/// ones (`C1`, `EQ-12`).
#[derive(Debug, Clone, Copy)]
enum IdRule {
    Isc,
    Legacy,
}

impl IdRule {
    fn of(text: &str, items: &[&TaskItem]) -> IdRule {
        let isc = items
            .iter()
            .any(|i| isc_id(&text[i.text.clone()]).is_some());
        if isc { IdRule::Isc } else { IdRule::Legacy }
    }

    fn accepts(self, id: &str) -> bool {
        match self {
            IdRule::Isc => id::is_isc_id(id),
            IdRule::Legacy => id::is_legacy_id(id),
        }
    }
}

/// A line's `ISC-…` id (after any kind prefix) and what follows it.
fn isc_id(raw: &str) -> Option<(&str, &str)> {
    split_id(strip_kind(raw).1).filter(|(id, _)| id::is_isc_id(id))
}

/// One pass over the boxes of the criteria sections.
struct Reader<'t> {
    text: &'t str,
    lines: &'t LineIndex,
    /// Whether the file has criteria sections: outside them (a file with none) only a line
    /// that reads like a criterion counts as one prdloop could not read.
    sections: bool,
    ids: IdRule,
    boxes: Boxes,
}

/// A box as the reader sees it: its item, its line and its text.
struct BoxLine<'t> {
    item: &'t TaskItem,
    line: usize,
    raw: &'t str,
}

impl BoxLine<'_> {
    /// This box as one that is not a criterion.
    fn other(&self, id: Option<&str>, tombstone: bool) -> OtherBox {
        OtherBox {
            line: self.line,
            id: id.map(str::to_string),
            checked: self.item.checked,
            tombstone,
            deferred: false,
            text: self.raw.to_string(),
        }
    }
}

impl<'t> Reader<'t> {
    fn box_line(&self, item: &'t TaskItem) -> BoxLine<'t> {
        BoxLine {
            item,
            line: self.lines.line_of(item.marker),
            raw: &self.text[item.text.clone()],
        }
    }

    /// A box of a criteria section: a criterion, a tombstone or a box not read.
    fn item(&mut self, item: &'t TaskItem) -> Result<(), ParseError> {
        let at = self.box_line(item);
        match claim(at.raw, self.ids) {
            Err(warning) => {
                if let Some(message) = warning {
                    let line = at.line;
                    self.boxes.warnings.push(Warning { line, message });
                }
                if (self.sections && !item.in_features) || criterion_like(at.raw) {
                    self.boxes.others.push(at.other(None, false));
                }
            }
            Ok(claim) => {
                self.boxes.unique(claim.id, at.line)?;
                if claim.tombstone {
                    self.boxes.others.push(at.other(Some(claim.id), true));
                } else {
                    self.boxes.add(criterion(&claim, &at));
                }
            }
        }
        Ok(())
    }

    /// Boxes with a criterion's id outside the criteria sections (a `## Phase 2` after
    /// `## Criteria`): not read, as LifeOS does not read them, but an open one keeps the
    /// file from being marked complete.
    fn stray(&self, outside: &[&'t TaskItem]) -> Vec<OtherBox> {
        outside
            .iter()
            .map(|&item| self.box_line(item))
            .filter_map(|at| {
                let (id, rest) = isc_id(at.raw)?;
                Some(at.other(Some(id), isa::is_tombstone(rest)))
            })
            .collect()
    }
}

/// A box's line read as a claim: `[Anti: ]ID: rest`.
struct Claim<'t> {
    id: &'t str,
    /// What follows the id: the description, with its Verify method and segments.
    rest: &'t str,
    /// The kind its prefix gives, before the id or after it.
    kind: Option<Kind>,
    /// A dropped claim's tombstone (`ISC-N: [DROPPED — see Decisions]`).
    tombstone: bool,
}

/// The claim of a box's line, or why it has none: the message of a warning when it looks
/// like a criterion all the same.
fn claim(raw: &str, ids: IdRule) -> Result<Claim<'_>, Option<String>> {
    let (kind_before, after_kind) = strip_kind(raw);
    let Some((id, rest)) = split_id(after_kind) else {
        return Err(looks_like_isc(after_kind).then(|| {
            format!(
                "`{}` looks like a criterion but has no valid id (ISC- then ASCII letters, digits and dashes, optionally `.N` splits, then `:`); it is not read",
                first_word(after_kind)
            )
        }));
    };
    if !ids.accepts(id) {
        return Err(looks_like_isc(id).then(|| {
            format!(
                "`{id}` looks like a criterion id but is not one (ISC- then ASCII letters, digits and dashes, optionally `.N` splits); the item is not read"
            )
        }));
    }
    let (kind_after, text) = strip_kind(rest.trim_start());
    Ok(Claim {
        id,
        rest,
        kind: kind_before.or(kind_after),
        tombstone: isa::is_tombstone(text),
    })
}

/// The criterion a claim's box says.
fn criterion(claim: &Claim, at: &BoxLine) -> Criterion {
    let (description, _) = verify::split_verify(claim.rest);
    // ` | After: ISC-…` segments are dependencies; the text keeps them as written, but they
    // are no part of a Verify method.
    let (segments, after_segment) = isa::after_segments(claim.rest);
    let mut after = isa::after_ids(&description);
    for id in after_segment {
        if !after.contains(&id) {
            after.push(id);
        }
    }
    let marker = at.item.marker;
    Criterion {
        id: claim.id.to_string(),
        inline_probe: isa::inline_probe(&description),
        after,
        verify: verify_without(claim.rest, &segments),
        description,
        checked: at.item.checked,
        line: at.line,
        domain: id::domain(claim.id).to_string(),
        anti: claim.kind == Some(Kind::Anti),
        antecedent: claim.kind == Some(Kind::Antecedent),
        leaves: Vec::new(),
        probe: None,
        notes: Vec::new(),
        optional: false,
        marker: marker..marker + 1,
    }
}

/// The Verify method of `rest` read with its `segments` left out.
fn verify_without(rest: &str, segments: &[Range<usize>]) -> Option<Verify> {
    let mut rest = rest.to_string();
    for r in segments.iter().rev() {
        rest.replace_range(r.clone(), "");
    }
    verify::split_verify(&rest).1
}

impl Boxes {
    fn unique(&self, id: &str, line: usize) -> Result<(), ParseError> {
        match self.index.get(id) {
            Some(&first) => Err(ParseError {
                line,
                message: format!(
                    "duplicate criterion id {id}, first defined at line {}",
                    self.criteria[first].line
                ),
            }),
            None => Ok(()),
        }
    }

    fn add(&mut self, c: Criterion) {
        self.index.insert(c.id.clone(), self.criteria.len());
        self.criteria.push(c);
    }

    /// A warning for each open box that is not read (it keeps the file from being marked
    /// complete), unless its line was warned about already (a malformed id).
    fn warn_open(&mut self) {
        for b in self.others.iter().filter(|b| !b.checked && !b.tombstone) {
            if self.warnings.iter().any(|w| w.line == b.line) {
                continue;
            }
            self.warnings.push(Warning {
                line: b.line,
                message: format!(
                    "the open box `{}` is not read as a criterion; while it is open the file is not marked complete",
                    one_line_start(&b.text)
                ),
            });
        }
    }

    /// Anti criteria: those with an `Anti:` prefix (marked when read), and those with an anti
    /// id by the file's convention (see [`id::is_anti_in`]).
    fn mark_anti(&mut self) {
        let phase_letters = id::uses_phase_letters(self.criteria.iter().map(|c| c.id.as_str()));
        for c in &mut self.criteria {
            c.anti = c.anti || id::is_anti_in(&c.id, phase_letters);
        }
    }
}
