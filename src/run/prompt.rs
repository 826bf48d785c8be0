//! The worker prompt: one criterion, the PRD's context, the rules, the exact result line.

use std::fmt::{Display, Write};
use std::path::Path;

use crate::prd::{Criterion, Prd};
use crate::questions::Question;

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
    answers: &[&Question],
) -> String {
    let mut p = Prompt::default();
    p.head(prd, prd_path, workdir);
    p.criterion(c, runner_checks);
    if let Some(previous) = previous_failure {
        p.previous(previous);
    }
    p.answers(&c.id, answers);
    p.context(prd);
    p.background(&crate::prd::format::background(prd, prd_path, c));
    p.rules(&c.id, isolated);
    p.answer(&c.id);
    p.text
}

/// The prompt's text, written a section at a time.
#[derive(Default)]
struct Prompt {
    text: String,
}

impl Prompt {
    fn line(&mut self, line: impl Display) {
        // Writing into a String does not fail.
        let _ = writeln!(self.text, "{line}");
    }

    fn blank(&mut self) {
        self.text.push('\n');
    }

    /// A section's heading, after a blank line and before one.
    fn section(&mut self, heading: &str) {
        self.blank();
        self.line(format_args!("## {heading}"));
        self.blank();
    }

    /// Who the worker is, and where.
    fn head(&mut self, prd: &Prd, prd_path: &Path, workdir: &Path) {
        let title = prd.title.as_deref().unwrap_or("(untitled)");
        self.line(
            "You are one worker in an automated loop (prdloop) that makes the criteria of a PRD \
             (product requirements document) pass. You have exactly one criterion.",
        );
        self.blank();
        self.line(format_args!("PRD: {title}"));
        self.line(format_args!(
            "PRD file: {} (read it for background only)",
            prd_path.display()
        ));
        self.line(format_args!("Working directory: {}", workdir.display()));
    }

    /// The criterion, how it is verified, and the runner's check of it.
    fn criterion(&mut self, c: &Criterion, runner_checks: Option<&str>) {
        self.section("Your criterion");
        let kind = if c.anti {
            "anti-criterion: something that must NOT happen"
        } else if c.antecedent {
            "antecedent: something that must be true for the experience"
        } else {
            "criterion"
        };
        self.line(format_args!("{}: {} ({kind})", c.id, c.description));
        match (&c.verify, &c.probe) {
            (Some(v), _) => self.line(format_args!("Verify: {}: {}", v.kind, v.method)),
            (None, Some(probe)) => self.line(format_args!(
                "Verify (the PRD's Test Strategy, line {}): {}",
                probe.line,
                probe.describe()
            )),
            (None, None) if c.inline_probe.is_some() => {}
            (None, None) => {
                self.line("Verify: no method given; check it in the way that fits best.")
            }
        }
        if let Some(probe) = &c.inline_probe {
            self.line(format_args!("Probe (from the criterion's text): {probe}"));
        }
        if let Some(cmd) = runner_checks {
            self.line(format_args!(
                "prdloop runs `{cmd}` in the working directory after you answer: a PASS counts only \
                 if that command exits 0."
            ));
        }
    }

    /// Why the last attempt failed.
    fn previous(&mut self, previous: &Previous) {
        self.section("The previous attempt failed");
        self.line(previous.text.trim());
        if previous.stuck {
            self.line(
                "Those calls gave nothing new: do not repeat them; find another way, or end \
                 with a FAIL line saying what blocks you.",
            );
        }
    }

    /// The questions a person answered, if any.
    fn answers(&mut self, id: &str, answers: &[&Question]) {
        if answers.is_empty() {
            return;
        }
        self.section("A person answered your questions");
        self.line(format_args!(
            "A worker on {id} asked, and a person answered. Follow the answer."
        ));
        for q in answers {
            self.blank();
            self.line(format_args!("Question: {}", q.question.trim()));
            self.line(format_args!(
                "Answer: {}",
                q.answer.as_deref().unwrap_or("").trim()
            ));
        }
    }

    /// The PRD's CONTEXT, if it has one.
    fn context(&mut self, prd: &Prd) {
        if let Some(ctx) = prd.context().filter(|c| !c.is_empty()) {
            self.section("Context from the PRD");
            self.line(ctx);
        }
    }

    /// What the task list writes beside the criterion, if anything.
    fn background(&mut self, background: &str) {
        if !background.is_empty() {
            self.section("What the task list says of it");
            self.text.push_str(background);
        }
    }

    fn rules(&mut self, id: &str, isolated: bool) {
        self.section("Rules");
        self.line(format_args!(
            "- Work only on {id}. Other criteria belong to other workers, some running at the same \
             time: do not work on them and do not undo their changes."
        ));
        if isolated {
            self.line(
                "- The working directory is your own copy of the repository (a git repository \
                 of its own: its branches, stash and config are yours alone). prdloop merges your \
                 changes into the user's checkout when your criterion passes; you need not commit \
                 them. Do not push.",
            );
        }
        self.line(
            "- Do not edit the PRD file. prdloop ticks its boxes and updates its front matter.",
        );
        self.line(
            "- Check your work with the Verify method before you answer; do not claim what you \
             have not checked.",
        );
    }

    /// The lines the worker ends with: a result, or a question for a person.
    fn answer(&mut self, id: &str) {
        self.section("Your answer");
        self.line(
            "End your final message with exactly one of these lines, and no other RESULT line:",
        );
        self.blank();
        self.line(format_args!("RESULT: {id} PASS"));
        self.line(format_args!("RESULT: {id} FAIL: <one-line reason>"));
        self.blank();
        self.line(
            "If you cannot go on without a decision only a person can make (not one you can \
             find out or choose sensibly yourself), end instead with this line, and no RESULT \
             line; your criterion waits for the answer, which the next worker gets:",
        );
        self.blank();
        self.line(format_args!("QUESTION: {id} <the question, on one line>"));
    }
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
