//! The front matter the loop writes, in the PRD's own format. A v3 PRD (PAI's `algorithm`
//! loop format) gets `loopStatus`, `iteration`, `updated`, `last_phase`, `failing_criteria`,
//! `verification_summary` and `status`; a v4 PRD gets only v4's keys: `phase` (`execute`
//! while running, `verify` after an iteration, `complete` when all pass), `progress: M/N`,
//! `updated` in the shape the file already uses, and `iteration` by v4's rule (absent on the
//! first run, 2 on the first continuation, then counted up). An ISA (LifeOS) gets its
//! lifecycle: `phase: climbing` while the loop works (`learn` when the run reopens a complete
//! ISA, with `iteration` counted up and `resumed_at`/`resumed_from_phase` stamped, as
//! LifeOS's reopen does), `complete` only when every claim is closed, `progress: M/N` and
//! `updated`; never v3's keys, and no loop `iteration` (an ISA's counts reopens).
//! A file with no front matter gets no edits: its boxes are the run's only mark on it.
//!
//! "Done" is decided here by [`closed`], the same predicate `Prd::set_front` checks before
//! every write: no open box in the criteria sections, whatever its id looks like.

use super::end::End;
use crate::prd::frontmatter::Format;
use crate::prd::{Prd, Value, timestamp_like};

pub type Edits = Vec<(&'static str, Value)>;

fn updated(doc: &Prd) -> Value {
    let now = jiff::ZonedDateTime::now();
    match (doc.front.updated.as_deref(), doc.front.format) {
        // A v3 PRD without the key gets PAI's plain date; otherwise the shape the file uses.
        (None, Format::V3) => Value::Str(now.date().to_string()),
        (existing, _) => Value::Str(timestamp_like(existing, &now)),
    }
}

fn v4(doc: &Prd) -> bool {
    doc.front.format == Format::V4
}

fn isa(doc: &Prd) -> bool {
    doc.front.format == Format::Isa
}

/// Whether the file may be marked complete: all criteria pass (`passing == total`), no
/// other open box (an unreadable criterion-like line) is left in its criteria sections, and
/// an ISA's `## Not yet specified` is empty (LifeOS's close gate).
pub fn closed(doc: &Prd, (passing, total): (usize, usize)) -> bool {
    passing == total && doc.unreadable_open().next().is_none() && doc.fog.is_empty()
}

/// A v3 `verification_summary` prdloop may replace: absent, or in the `M/N` shape it writes.
/// An author's prose summary is kept.
pub fn summary_is_ours(doc: &Prd) -> bool {
    doc.front
        .verification_summary
        .as_deref()
        .is_none_or(is_count)
}

fn is_count(s: &str) -> bool {
    s.trim().split_once('/').is_some_and(|(a, b)| {
        [a, b]
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn summary(doc: &Prd, passing: usize, total: usize) -> Edits {
    if summary_is_ours(doc) {
        vec![(
            "verification_summary",
            Value::Quoted(format!("{passing}/{total}")),
        )]
    } else {
        Vec::new()
    }
}

/// The number of the iteration that starts now, on the PRD's own count.
pub fn next_iteration(doc: &Prd) -> u64 {
    if v4(doc) {
        doc.front.iteration.max(1) + 1
    } else {
        doc.front.iteration + 1
    }
}

/// `loopStatus` (v3 only: v4 and ISAs have no such key).
pub fn loop_status(doc: &Prd, status: &str) -> Edits {
    if doc.front.format == Format::V3 && doc.has_front_matter() {
        vec![("loopStatus", Value::str(status))]
    } else {
        Vec::new()
    }
}

/// When the run starts.
pub fn at_start(doc: &Prd) -> Edits {
    if !doc.has_front_matter() {
        return Vec::new();
    }
    if isa(doc) {
        if doc.front.is_complete() && doc.open_boxes().is_empty() {
            // A forced run with nothing to do: nothing is reopened.
            return Vec::new();
        }
        if doc.front.is_complete() {
            // The run reopens a complete ISA with a claim open (`--force`).
            return reopen(doc);
        }
        let phase = doc.front.phase.as_deref().unwrap_or("");
        if phase.trim().eq_ignore_ascii_case("learn") {
            return vec![("updated", updated(doc))];
        }
        return vec![("phase", Value::str("climbing")), ("updated", updated(doc))];
    }
    if v4(doc) {
        vec![("phase", Value::str("execute")), ("updated", updated(doc))]
    } else {
        loop_status(doc, "running")
    }
}

/// A file marked complete (v3 `status: COMPLETE` or `COMPLETED`, v4/ISA `phase: complete`) whose boxes no
/// longer all pass, reopened as the loop leaves an open file: v3 `status: VERIFYING` (PAI's
/// status while criteria are checked), v4 `phase: verify` (as after an iteration), an ISA by
/// LifeOS's reopen (`phase: learn`, `iteration` counted up, `resumed_at`,
/// `resumed_from_phase`, `updated`). No edits for a file not so marked (an author's
/// `ARCHIVED` stays) or one still [`closed`].
pub fn reopened(doc: &Prd) -> Edits {
    let (passing, total) = doc.progress();
    let marked = match doc.front.format {
        Format::V3 => ["COMPLETE", "COMPLETED"]
            .iter()
            .any(|s| doc.front.status.trim().eq_ignore_ascii_case(s)),
        Format::V4 | Format::Isa => doc
            .front
            .phase
            .as_deref()
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("complete")),
    };
    if !doc.has_front_matter() || !marked || closed(doc, (passing, total)) {
        return Vec::new();
    }
    match doc.front.format {
        Format::V3 => vec![("status", Value::str("VERIFYING"))],
        Format::V4 => vec![("phase", Value::str("verify"))],
        Format::Isa => reopen(doc),
    }
}

/// LifeOS's reopen of a complete ISA.
fn reopen(doc: &Prd) -> Edits {
    let now = Value::Str(timestamp_like(
        doc.front.updated.as_deref(),
        &jiff::ZonedDateTime::now(),
    ));
    vec![
        ("phase", Value::str("learn")),
        ("iteration", Value::Int(doc.front.iteration.max(1) + 1)),
        ("resumed_at", now),
        (
            "resumed_from_phase",
            Value::str(doc.front.phase.as_deref().unwrap_or("complete")),
        ),
        ("updated", updated(doc)),
    ]
}

/// v4's and ISAs' `progress`, kept current as criteria pass and regress.
pub fn progress(doc: &Prd, passing: usize, total: usize) -> Edits {
    if (v4(doc) || isa(doc)) && doc.has_front_matter() {
        vec![("progress", Value::str(format!("{passing}/{total}")))]
    } else {
        Vec::new()
    }
}

/// When an iteration ends.
pub fn at_iteration_end(
    doc: &Prd,
    iteration: u64,
    (passing, total): (usize, usize),
    failing: Vec<String>,
) -> Edits {
    if !doc.has_front_matter() {
        return Vec::new();
    }
    let done = closed(doc, (passing, total));
    if isa(doc) {
        let mut e = vec![("updated", updated(doc))];
        if done {
            e.push(("phase", Value::str("complete")));
        }
        e.extend(progress(doc, passing, total));
        return e;
    }
    if v4(doc) {
        let mut e = vec![
            ("iteration", Value::Int(iteration)),
            ("updated", updated(doc)),
            (
                "phase",
                Value::str(if done { "complete" } else { "verify" }),
            ),
        ];
        e.extend(progress(doc, passing, total));
        return e;
    }
    let mut e = vec![
        ("iteration", Value::Int(iteration)),
        ("updated", updated(doc)),
        ("last_phase", Value::str("VERIFY")),
        ("failing_criteria", Value::List(failing)),
    ];
    e.extend(summary(doc, passing, total));
    if done {
        e.push(("status", Value::str("COMPLETE")));
    }
    e
}

/// When the run ends. `ran` says whether any iteration ran (else the summary keys are set
/// here, so that the front matter is accurate even then).
pub fn at_end(
    doc: &Prd,
    end: End,
    ran: bool,
    (passing, total): (usize, usize),
    failing: Vec<String>,
) -> Edits {
    if !doc.has_front_matter() {
        return Vec::new();
    }
    let done = end == End::Complete && closed(doc, (passing, total));
    if isa(doc) {
        let mut e = progress(doc, passing, total);
        if done {
            e.push(("phase", Value::str("complete")));
            // LifeOS stamps `updated` on every write.
            e.push(("updated", updated(doc)));
        }
        return e;
    }
    if v4(doc) {
        let mut e = progress(doc, passing, total);
        if done {
            e.push(("phase", Value::str("complete")));
        } else if !ran {
            e.push(("phase", Value::str("verify")));
        }
        return e;
    }
    let mut e = loop_status(doc, end.loop_status());
    if let Some(s) = end.prd_status()
        && (s != "COMPLETE" || done)
    {
        e.push(("status", Value::str(s)));
    }
    if !ran {
        e.push(("failing_criteria", Value::List(failing)));
        e.extend(summary(doc, passing, total));
    }
    e
}
