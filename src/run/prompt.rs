//! The worker prompt: one criterion, the PRD's context, the rules, the exact result line.

use std::fmt::Write;
use std::path::Path;

use crate::prd::{Criterion, Prd};

/// Why the last attempt at the criterion failed, for its next prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Previous {
    pub text: String,
    /// A worker of it was ended by `--stuck-after`.
    pub stuck: bool,
}

/// Builds the prompt for one attempt at one criterion. `previous_failure` is why the last
/// attempt at this criterion failed, if it did; `answers`, the questions its workers asked
/// that a person answered.
#[allow(clippy::too_many_arguments)]
pub fn build(
    prd: &Prd,
    prd_path: &Path,
    workdir: &Path,
    c: &Criterion,
    previous_failure: Option<&Previous>,
    runner_checks: Option<&str>,
    isolated: bool,
    answers: &[&crate::questions::Question],
) -> String {
    let mut p = String::new();
    let title = prd.title.as_deref().unwrap_or("(untitled)");
    let _ = writeln!(
        p,
        "You are one worker in an automated loop (prdloop) that makes the criteria of a PRD \
         (product requirements document) pass. You have exactly one criterion."
    );
    let _ = writeln!(p);
    let _ = writeln!(p, "PRD: {title}");
    let _ = writeln!(
        p,
        "PRD file: {} (read it for background only)",
        prd_path.display()
    );
    let _ = writeln!(p, "Working directory: {}", workdir.display());
    let _ = writeln!(p);
    let _ = writeln!(p, "## Your criterion");
    let _ = writeln!(p);
    let kind = if c.anti {
        "anti-criterion: something that must NOT happen"
    } else if c.antecedent {
        "antecedent: something that must be true for the experience"
    } else {
        "criterion"
    };
    let _ = writeln!(p, "{}: {} ({kind})", c.id, c.description);
    match (&c.verify, &c.probe) {
        (Some(v), _) => {
            let _ = writeln!(p, "Verify: {}: {}", v.kind, v.method);
        }
        (None, Some(probe)) => {
            let _ = writeln!(
                p,
                "Verify (the PRD's Test Strategy, line {}): {}",
                probe.line,
                probe.describe()
            );
        }
        (None, None) if c.inline_probe.is_some() => {}
        (None, None) => {
            let _ = writeln!(
                p,
                "Verify: no method given; check it in the way that fits best."
            );
        }
    }
    if let Some(probe) = &c.inline_probe {
        let _ = writeln!(p, "Probe (from the criterion's text): {probe}");
    }
    if let Some(cmd) = runner_checks {
        let _ = writeln!(
            p,
            "prdloop runs `{cmd}` in the working directory after you answer: a PASS counts only \
             if that command exits 0."
        );
    }
    if let Some(previous) = previous_failure {
        let _ = writeln!(p);
        let _ = writeln!(p, "## The previous attempt failed");
        let _ = writeln!(p);
        let _ = writeln!(p, "{}", previous.text.trim());
        if previous.stuck {
            let _ = writeln!(
                p,
                "Those calls gave nothing new: do not repeat them; find another way, or end \
                 with a FAIL line saying what blocks you."
            );
        }
    }
    if !answers.is_empty() {
        let _ = writeln!(p);
        let _ = writeln!(p, "## A person answered your questions");
        let _ = writeln!(p);
        let _ = writeln!(
            p,
            "A worker on {} asked, and a person answered. Follow the answer.",
            c.id
        );
        for q in answers {
            let _ = writeln!(p);
            let _ = writeln!(p, "Question: {}", q.question.trim());
            let _ = writeln!(p, "Answer: {}", q.answer.as_deref().unwrap_or("").trim());
        }
    }
    if let Some(ctx) = prd.context().filter(|c| !c.is_empty()) {
        let _ = writeln!(p);
        let _ = writeln!(p, "## Context from the PRD");
        let _ = writeln!(p);
        let _ = writeln!(p, "{ctx}");
    }
    let background = crate::prd::format::background(prd, prd_path, c);
    if !background.is_empty() {
        let _ = writeln!(p);
        let _ = writeln!(p, "## What the task list says of it");
        let _ = writeln!(p);
        let _ = write!(p, "{background}");
    }
    let _ = writeln!(p);
    let _ = writeln!(p, "## Rules");
    let _ = writeln!(p);
    let _ = writeln!(
        p,
        "- Work only on {}. Other criteria belong to other workers, some running at the same \
         time: do not work on them and do not undo their changes.",
        c.id
    );
    if isolated {
        let _ = writeln!(
            p,
            "- The working directory is your own copy of the repository (a git repository \
             of its own: its branches, stash and config are yours alone). prdloop merges your \
             changes into the user's checkout when your criterion passes; you need not commit \
             them. Do not push."
        );
    }
    let _ = writeln!(
        p,
        "- Do not edit the PRD file. prdloop ticks its boxes and updates its front matter."
    );
    let _ = writeln!(
        p,
        "- Check your work with the Verify method before you answer; do not claim what you \
         have not checked."
    );
    let _ = writeln!(p);
    let _ = writeln!(p, "## Your answer");
    let _ = writeln!(p);
    let _ = writeln!(
        p,
        "End your final message with exactly one of these lines, and no other RESULT line:"
    );
    let _ = writeln!(p);
    let _ = writeln!(p, "RESULT: {} PASS", c.id);
    let _ = writeln!(p, "RESULT: {} FAIL: <one-line reason>", c.id);
    let _ = writeln!(p);
    let _ = writeln!(
        p,
        "If you cannot go on without a decision only a person can make (not one you can \
         find out or choose sensibly yourself), end instead with this line, and no RESULT \
         line; your criterion waits for the answer, which the next worker gets:"
    );
    let _ = writeln!(p);
    let _ = writeln!(p, "QUESTION: {} <the question, on one line>", c.id);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_criterion_context_and_result_line() {
        let prd = Prd::parse(
            "# T\n\n## CONTEXT\n\nUse integer cents.\n\n## CRITERIA\n\n- [ ] ISC-API-2: Export CSV | Verify: Test: `cargo test export`\n",
        )
        .unwrap();
        let c = prd.criterion("ISC-API-2").unwrap();
        let p = build(
            &prd,
            Path::new("/w/PRD.md"),
            Path::new("/w"),
            c,
            Some(&Previous {
                // A failure's text that looks like a stuck worker's is not one.
                text: "stuck: tests red".into(),
                stuck: false,
            }),
            Some("cargo test export"),
            false,
            &[],
        );
        assert!(p.contains("ISC-API-2: Export CSV"));
        assert!(p.contains("Verify: Test: `cargo test export`"));
        assert!(p.contains("Use integer cents."));
        assert!(p.contains("stuck: tests red"));
        assert!(!p.contains("do not repeat them"));
        assert!(p.contains("prdloop runs `cargo test export`"));
        assert!(p.contains("\nRESULT: ISC-API-2 PASS\n"));
        assert!(p.contains("Do not edit the PRD file"));
        assert!(p.contains("\nQUESTION: ISC-API-2 <the question, on one line>\n"));
        assert!(!p.contains("A person answered"));
        let answered = crate::questions::Question {
            criterion: "ISC-API-2".into(),
            question: "Cents or euros?".into(),
            asked_at: 1,
            session: "s".into(),
            answer: Some("Cents, always.".into()),
            answered_at: Some(2),
        };
        let p = build(
            &prd,
            Path::new("/w/PRD.md"),
            Path::new("/w"),
            c,
            Some(&Previous {
                text: "stuck: 40 tool calls in 3s repeated earlier ones".into(),
                stuck: true,
            }),
            None,
            false,
            &[&answered],
        );
        assert!(p.contains("## A person answered your questions"));
        assert!(p.contains("Question: Cents or euros?\nAnswer: Cents, always.\n"));
        assert!(p.contains("do not repeat them"));
    }
}
