//! The front matter the loop writes, in the PRD's own format. A v3 PRD (PAI's `algorithm`
//! loop format) gets `loopStatus`, `iteration`, `updated`, `last_phase`, `failing_criteria`,
//! `verification_summary` and `status`; a v4 PRD gets only v4's keys: `phase` (`execute`
//! while running, `verify` after an iteration, `complete` when all pass), `progress: M/N`,
//! `updated` in the shape the file already uses, and `iteration` by v4's rule (absent on the
//! first run, 2 on the first continuation, then counted up).

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

/// The number of the iteration that starts now, on the PRD's own count.
pub fn next_iteration(doc: &Prd) -> u64 {
    if v4(doc) {
        doc.front.iteration.max(1) + 1
    } else {
        doc.front.iteration + 1
    }
}

/// `loopStatus` (v3 only: v4 has no such key).
pub fn loop_status(doc: &Prd, status: &str) -> Edits {
    if v4(doc) {
        Vec::new()
    } else {
        vec![("loopStatus", Value::str(status))]
    }
}

/// When the run starts.
pub fn at_start(doc: &Prd) -> Edits {
    if v4(doc) {
        vec![("phase", Value::str("execute")), ("updated", updated(doc))]
    } else {
        loop_status(doc, "running")
    }
}

/// v4's `progress`, kept current as criteria pass and regress.
pub fn progress(doc: &Prd, passing: usize, total: usize) -> Edits {
    if v4(doc) {
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
    let done = passing == total;
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
        (
            "verification_summary",
            Value::Quoted(format!("{passing}/{total}")),
        ),
    ];
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
    if v4(doc) {
        let mut e = progress(doc, passing, total);
        if end == End::Complete {
            e.push(("phase", Value::str("complete")));
        } else if !ran {
            e.push(("phase", Value::str("verify")));
        }
        return e;
    }
    let mut e = loop_status(doc, end.loop_status());
    if let Some(s) = end.prd_status() {
        e.push(("status", Value::str(s)));
    }
    if !ran {
        e.push(("failing_criteria", Value::List(failing)));
        e.push((
            "verification_summary",
            Value::Quoted(format!("{passing}/{total}")),
        ));
    }
    e
}
