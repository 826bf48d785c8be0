//! What `run --pr` writes on GitHub, as pure functions of the PRD, its receipts and its open
//! questions: the pull request's title and body (every criterion, how its tick was earned,
//! its receipt, its issue; `Closes #N` for each issue whose criteria all pass), and the
//! comment asking an issue's parked questions.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::evidence::Evidence;
use crate::evidence::receipt::Receipt;
use crate::prd::{Criterion, Prd};

/// The longest text of one table cell.
const CELL_CHARS: usize = 160;
/// The mark a comment of prdloop's carries, so that a question is asked once.
pub const ASKED_MARK: &str = "<!-- prdloop:question ";

/// The issue a criterion belongs to: an imported id's (`ISC-GH12-3`), else a `(#12)` that ends
/// its description.
pub fn issue_of(c: &Criterion) -> Option<u64> {
    let from_id =
        c.id.strip_prefix("ISC-GH")
            .and_then(|r| r.split_once('-'))
            .and_then(|(n, _)| n.parse().ok());
    from_id.or_else(|| {
        let d = c.description.trim_end();
        let inner = d.strip_suffix(')')?.rsplit_once("(#")?.1;
        inner.parse().ok()
    })
}

/// The issues whose criteria all pass, in order.
pub fn closed_issues(prd: &Prd) -> Vec<u64> {
    let mut all: BTreeMap<u64, bool> = BTreeMap::new();
    for c in &prd.criteria {
        if let Some(n) = issue_of(c) {
            *all.entry(n).or_insert(true) &= c.checked;
        }
    }
    all.into_iter()
        .filter(|&(_, ok)| ok)
        .map(|(n, _)| n)
        .collect()
}

/// The pull request's title.
pub fn title(prd: &Prd) -> String {
    let (passing, total) = prd.progress();
    let name = prd.display_title().unwrap_or("PRD");
    format!(
        "prdloop: {} ({passing}/{total} criteria)",
        one_line(name, 200)
    )
}

/// The pull request's body. `questions`: criterion id → its open question.
pub fn body(
    prd: &Prd,
    receipts: &HashMap<String, Receipt>,
    questions: &HashMap<String, String>,
) -> String {
    let (passing, total) = prd.progress();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "prdloop worked on `{}`: **{passing}/{total} criteria pass**. Each tick's receipt says what earned it: `checked` (prdloop ran the criterion's command), `reviewed` (an independent verifier agreed), `claimed` (only the worker said so). `prdloop audit` re-runs the checked ones.\n",
        prd.id().unwrap_or("the PRD")
    );
    s.push_str("| | Criterion | Tick | Receipt | Issue |\n|---|---|---|---|---|\n");
    for c in &prd.criteria {
        let (mark, tick, receipt) = if c.checked {
            match receipts.get(&c.id) {
                Some(r) => ("✅", r.evidence().word().to_string(), describe(r)),
                None => (
                    "✅",
                    "ticked".into(),
                    "no receipt: ticked by hand or before prdloop ran".into(),
                ),
            }
        } else if let Some(q) = questions.get(&c.id) {
            ("❓", "waiting for an answer".into(), format!("asks: {q}"))
        } else {
            ("⬜", "open".into(), "—".into())
        };
        let issue = issue_of(c).map_or("—".to_string(), |n| format!("#{n}"));
        let _ = writeln!(
            s,
            "| {mark} | {} {} | {} | {} | {issue} |",
            c.id,
            cell(&c.description),
            cell(&tick),
            cell(&receipt)
        );
    }
    let closes = closed_issues(prd);
    if !closes.is_empty() {
        s.push('\n');
        for n in closes {
            let _ = writeln!(s, "Closes #{n}");
        }
    }
    s
}

/// What a receipt says, in a few words.
fn describe(r: &Receipt) -> String {
    match (r.evidence(), &r.check, &r.review) {
        (Evidence::Checked, Some(c), _) => {
            let sha = c
                .output_sha256
                .as_deref()
                .map(|h| format!(", output sha256 {}", &h[..h.len().min(12)]))
                .unwrap_or_default();
            format!("`{}` exited {}{sha}", c.command, c.exit)
        }
        (Evidence::Reviewed, _, Some(v)) => {
            format!("verifier {}: {} ({})", v.setup, v.verdict, v.evidence)
        }
        (Evidence::Claimed, _, _) => format!(
            "the worker's word{}",
            r.agent
                .as_deref()
                .map(|a| format!(" ({a})"))
                .unwrap_or_default()
        ),
        (e, _, _) => e.word().to_string(),
    }
}

/// The comment asking an issue's open questions, or `None` when it has none; it carries a
/// mark per question, so that a later run does not ask again. `answer_to`: the PRD path
/// `prdloop answer` takes (the one the run worked on).
pub fn question_comment(
    prd: &Prd,
    issue: u64,
    questions: &HashMap<String, String>,
    answer_to: &str,
) -> Option<String> {
    let asked: Vec<(&Criterion, &String)> = prd
        .criteria
        .iter()
        .filter(|c| issue_of(c) == Some(issue))
        .filter_map(|c| questions.get(&c.id).map(|q| (c, q)))
        .collect();
    if asked.is_empty() {
        return None;
    }
    let mut s = String::from("prdloop's workers are waiting for an answer:\n\n");
    for (c, q) in &asked {
        let _ = writeln!(
            s,
            "- **{}** ({}): {}",
            c.id,
            one_line(&c.description, 300),
            one_line(q, 2000)
        );
    }
    let _ = writeln!(
        s,
        "\nAnswer with `prdloop answer {answer_to} <ID> \"<answer>\"`, then run again."
    );
    for (c, q) in &asked {
        let _ = writeln!(s, "{ASKED_MARK}{} {} -->", c.id, mark_of(q));
    }
    Some(s)
}

/// Whether a comment already asks this question.
pub fn already_asked(comments: &[String], id: &str, question: &str) -> bool {
    let mark = format!("{ASKED_MARK}{id} {} -->", mark_of(question));
    comments.iter().any(|c| c.contains(&mark))
}

/// A question's short fingerprint for its mark.
fn mark_of(question: &str) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(question.as_bytes());
    h.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

fn one_line(s: &str, max: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > max {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    } else {
        s
    }
}

/// A table cell: one line, `|` escaped, cut short.
fn cell(s: &str) -> String {
    one_line(s, CELL_CHARS).replace('|', "\\|")
}

#[cfg(test)]
mod tests;
