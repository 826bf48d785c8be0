//! The independent verifier: for a criterion no command of the runner's can check, a fresh
//! agent run (not the worker's) gets the criterion, its Verify method, the PRD's context and
//! the attempt's diff, looks at the attempt's tree, and must answer
//! `VERDICT: <id> PASS|FAIL` with the evidence it used. Its PASS makes the tick `reviewed`;
//! its FAIL sends the attempt back with its reasons; no verdict, or a verifier that changed
//! files, counts as a FAIL of the attempt (a claim is not evidence).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backend::{AgentOptions, Usage};
use crate::prd::{Criterion, Prd};
use crate::worker::{Cancel, Finished, Spec};

/// `--verifier`: who reviews claimed passes.
#[derive(Debug, Clone, Default)]
pub enum Verifier {
    /// The worker's own agent and model (each sample's own with `--mix`).
    #[default]
    Same,
    /// Another agent set-up (`agent[:model]`).
    Setup {
        label: String,
        agent: Box<AgentOptions>,
    },
    /// `--verifier none`: trust workers as PAI does (ticks are `claimed`).
    None,
}

impl Verifier {
    /// Who reviews a worker of `worker` (its options and set-up label): `None` when no one
    /// independent can. A fresh session of a real agent is independent of the worker that
    /// ran; a `command` agent's program is the worker itself (it would review its own claim),
    /// so only a `--verifier` the user named reviews it, and its ticks are `claimed` without.
    /// `named`: whether the user named the verifier.
    pub fn for_worker(
        &self,
        worker: (&AgentOptions, &str),
    ) -> Option<(AgentOptions, String, bool)> {
        match self {
            Verifier::None => None,
            Verifier::Same if worker.0.agent == crate::backend::Agent::Command => None,
            Verifier::Same => Some((worker.0.clone(), worker.1.to_string(), false)),
            Verifier::Setup { label, agent } => Some(((**agent).clone(), label.clone(), true)),
        }
    }
}

/// A review to run once the worker has claimed PASS and its work is taken.
#[derive(Debug, Clone)]
pub struct ReviewJob {
    pub id: String,
    pub agent: AgentOptions,
    /// The set-up, for the receipt and the lines (`claude`, `claude:opus`).
    pub setup: String,
    /// The user named it (`--verifier SETUP`); else it is a fresh session of the worker's own
    /// agent, never the worker's own `command` program ([`Verifier::for_worker`]).
    pub named: bool,
    /// The prompt up to the attempt's diff ([`prompt`]).
    pub prompt: Prompt,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub env_remove: Vec<String>,
    pub log_path: PathBuf,
    pub timeout: Duration,
    pub kill_grace: Duration,
    /// The kernel sandbox: nothing of the lane writable (`None`: not sandboxed).
    pub sandbox: Option<crate::worker::sandbox::Rules>,
}

/// The verifier's prompt, in its two parts: what is known at launch, and the attempt's
/// diff with any fact the runner learnt (a protected file changed), added once the work is
/// taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub head: String,
    pub id: String,
}

impl Prompt {
    /// The whole prompt: the head, the facts, the diff, the rules and the answer's form.
    pub fn finish(&self, diff: Option<&str>, facts: &[String]) -> String {
        let mut p = self.head.clone();
        if !facts.is_empty() {
            let _ = writeln!(p, "\n## What the runner found");
            let _ = writeln!(p);
            for f in facts {
                let _ = writeln!(p, "- {f}");
            }
        }
        let _ = writeln!(p, "\n## What the attempt changed");
        let _ = writeln!(p);
        match diff {
            Some(d) if !d.trim().is_empty() => {
                let _ = writeln!(p, "```diff\n{}\n```", d.trim_end());
            }
            Some(_) => {
                let _ = writeln!(p, "Nothing: the attempt changed no file.");
            }
            None => {
                let _ = writeln!(
                    p,
                    "Not known (the worker worked in the folder itself): look at the files."
                );
            }
        }
        let _ = writeln!(p, "\n## Rules");
        let _ = writeln!(p);
        let _ = writeln!(
            p,
            "- Do not change, create or delete any file. Read, search, and run commands that \
             only look (tests and builds are fine). Whatever you change is thrown away, and \
             the verdict of a verifier that changed files does not count."
        );
        let _ = writeln!(
            p,
            "- Judge the criterion by what you saw yourself (file:line, a command's output), \
             never by what the worker or a comment in the code says."
        );
        let _ = writeln!(p, "\n## Your answer");
        let _ = writeln!(p);
        let _ = writeln!(
            p,
            "Give the evidence you used, then end your final message with exactly one of \
             these lines:"
        );
        let _ = writeln!(p);
        let _ = writeln!(p, "VERDICT: {} PASS", self.id);
        let _ = writeln!(p, "VERDICT: {} FAIL: <what is missing or wrong>", self.id);
        p
    }
}

/// The head of the verifier's prompt for criterion `c`.
pub fn prompt(prd: &Prd, prd_path: &Path, workdir: &Path, c: &Criterion) -> Prompt {
    let mut p = String::new();
    let title = prd.title.as_deref().unwrap_or("(untitled)");
    let _ = writeln!(
        p,
        "You are the independent verifier of an automated loop (prdloop). A worker says it \
         made one criterion of a PRD pass. Find out whether that is true. You did not do the \
         work: do not take the worker's word for anything."
    );
    let _ = writeln!(p);
    let _ = writeln!(p, "PRD: {title}");
    let _ = writeln!(p, "PRD file: {} (for background)", prd_path.display());
    let _ = writeln!(
        p,
        "Working directory: {} (the attempt as the worker left it)",
        workdir.display()
    );
    let _ = writeln!(p, "\n## The criterion");
    let _ = writeln!(p);
    let _ = writeln!(p, "{}: {}", c.id, c.description);
    match &c.verify {
        Some(v) => {
            let _ = writeln!(p, "Verify: {}: {}", v.kind, v.method);
        }
        None => {
            let _ = writeln!(
                p,
                "Verify: no method given; judge it by the criterion's own words."
            );
        }
    }
    if let Some(ctx) = prd.context().filter(|c| !c.is_empty()) {
        let _ = writeln!(p, "\n## Context from the PRD");
        let _ = writeln!(p);
        let _ = writeln!(p, "{}", ctx.trim_end());
    }
    let background = crate::prd::format::background(prd, prd_path, c);
    if !background.is_empty() {
        let _ = writeln!(p, "\n## What the task list says of it");
        let _ = writeln!(p);
        let _ = write!(p, "{background}");
    }
    Prompt {
        head: p,
        id: c.id.clone(),
    }
}

impl ReviewJob {
    /// The verifier's process, with the whole prompt.
    pub fn spec(&self, diff: Option<&str>, facts: &[String]) -> Spec {
        let text = self.prompt.finish(diff, facts);
        let run = self.agent.command(&text);
        Spec {
            program: run.program,
            args: run.args,
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            env_remove: self.env_remove.clone(),
            stdin: run.stdin,
            log_path: self.log_path.clone(),
            timeout: self.timeout,
            kill_grace: self.kill_grace,
            format: self.agent.format(),
            sandbox: self.sandbox.clone(),
            // The verifier reads and runs checks; --stuck-after is for the workers.
            stuck: crate::backend::stuck::StuckAfter::OFF,
        }
    }

    /// Runs the review to its end (or the run's cancel).
    pub async fn run(
        &self,
        diff: Option<&str>,
        facts: &[String],
        cancel: tokio::sync::watch::Receiver<Cancel>,
    ) -> Review {
        let spec = self.spec(diff, facts);
        let finished = match crate::worker::start(spec) {
            Ok(running) => running.wait(cancel).await,
            Err(e) => {
                return Review {
                    outcome: ReviewOutcome::NoVerdict(format!("the verifier could not start: {e}")),
                    setup: self.setup.clone(),
                    named: self.named,
                    log: self.log_path.clone(),
                    cost: 0.0,
                    usage: Usage::default(),
                    duration: Duration::ZERO,
                };
            }
        };
        self.read(&finished)
    }

    /// What a finished verifier said.
    pub fn read(&self, f: &Finished) -> Review {
        Review {
            outcome: outcome(&self.id, f),
            setup: self.setup.clone(),
            named: self.named,
            log: self.log_path.clone(),
            cost: f.outcome.cost_usd.unwrap_or(0.0),
            usage: f.outcome.usage,
            duration: f.duration,
        }
    }
}

/// What a review came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Review {
    pub outcome: ReviewOutcome,
    pub setup: String,
    /// The user named the verifier (`--verifier`).
    pub named: bool,
    pub log: PathBuf,
    pub cost: f64,
    pub usage: Usage,
    pub duration: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewOutcome {
    /// PASS, with the evidence it gave.
    Agreed { evidence: String },
    /// FAIL, with its reasons (and evidence).
    Disagreed { reasons: String },
    /// No verdict could be had (the verifier failed, gave no VERDICT line, or changed files).
    NoVerdict(String),
}

impl Review {
    /// The verifier changed the attempt's files: its verdict does not count.
    pub fn void(mut self, why: String) -> Review {
        self.outcome = ReviewOutcome::NoVerdict(why);
        self
    }
}

/// The evidence a verifier gives, as much as a reason or a receipt keeps.
const EVIDENCE_MAX: usize = 2000;

fn outcome(id: &str, f: &Finished) -> ReviewOutcome {
    use crate::backend::verdict::{Exit, tagged_lines};
    let text = f.outcome.final_text.as_deref().unwrap_or("");
    match &f.exit {
        Exit::Code { code: 0 } if !f.outcome.is_error => {}
        Exit::Cancelled => return ReviewOutcome::NoVerdict("the verifier was cancelled".into()),
        Exit::TimedOut { after_secs } => {
            return ReviewOutcome::NoVerdict(format!(
                "the verifier timed out after {}",
                humantime::format_duration(Duration::from_secs(*after_secs))
            ));
        }
        other => {
            let detail = f
                .outcome
                .errors
                .first()
                .cloned()
                .or_else(|| crate::text::last_line(&f.stderr_tail).map(String::from))
                .unwrap_or_default();
            return ReviewOutcome::NoVerdict(format!(
                "the verifier's agent failed ({}){}",
                match other {
                    Exit::Code { code } => format!("status {code}"),
                    Exit::Signal { signal } => format!("signal {signal}"),
                    _ => "an error".into(),
                },
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", crate::text::one_line(&detail, 200))
                }
            ));
        }
    }
    let Some(line) = tagged_lines(text, "VERDICT:")
        .into_iter()
        .rfind(|l| l.id == id)
    else {
        return ReviewOutcome::NoVerdict(format!(
            "the verifier gave no `VERDICT: {id} PASS|FAIL` line"
        ));
    };
    let evidence: String = text
        .lines()
        .filter(|l| !l.contains("VERDICT:"))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .chars()
        .take(EVIDENCE_MAX)
        .collect();
    if line.pass {
        ReviewOutcome::Agreed { evidence }
    } else {
        let mut reasons = line.reason.unwrap_or_else(|| "it said FAIL".into());
        if !evidence.is_empty() {
            reasons.push_str(&format!("\nIts evidence:\n{evidence}"));
        }
        ReviewOutcome::Disagreed { reasons }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::verdict::Exit;

    fn finished(text: &str) -> Finished {
        Finished {
            exit: Exit::Code { code: 0 },
            outcome: crate::backend::Outcome {
                final_text: Some(text.into()),
                ..Default::default()
            },
            stderr_tail: String::new(),
            duration: Duration::from_secs(1),
            pid: 1,
            output_bytes: 0,
            refusals: Default::default(),
        }
    }

    #[test]
    fn a_verdict_is_read_with_its_evidence() {
        let f =
            finished("src/a.rs:3 has the handler.\n`cargo test a` passed.\nVERDICT: ISC-1 PASS");
        assert_eq!(
            outcome("ISC-1", &f),
            ReviewOutcome::Agreed {
                evidence: "src/a.rs:3 has the handler.\n`cargo test a` passed.".into()
            }
        );
        let f = finished("No file docs/x.md.\n**VERDICT: ISC-1 FAIL: docs/x.md is missing**");
        match outcome("ISC-1", &f) {
            ReviewOutcome::Disagreed { reasons } => {
                assert!(reasons.starts_with("docs/x.md is missing"), "{reasons}");
                assert!(reasons.contains("No file docs/x.md."), "{reasons}");
            }
            o => panic!("{o:?}"),
        }
        // Another criterion's verdict, or none, is no verdict.
        assert!(matches!(
            outcome("ISC-1", &finished("VERDICT: ISC-2 PASS")),
            ReviewOutcome::NoVerdict(_)
        ));
        assert!(matches!(
            outcome("ISC-1", &finished("RESULT: ISC-1 PASS")),
            ReviewOutcome::NoVerdict(_)
        ));
        let mut f = finished("VERDICT: ISC-1 PASS");
        f.exit = Exit::Code { code: 1 };
        assert!(matches!(outcome("ISC-1", &f), ReviewOutcome::NoVerdict(_)));
    }

    /// A Kiro task's verifier is told the EARS criteria its `_Requirements:_` name, resolved
    /// in the requirements.md beside it, as what to check.
    #[test]
    fn a_kiro_tasks_verifier_is_given_the_ears_criteria_it_names() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/prds/formats/kiro/.kiro/specs/user-auth/tasks.md");
        let prd = crate::prd::load(&path).unwrap();
        let text = |id: &str| {
            prompt(
                &prd,
                &path,
                Path::new("/lanes/s/lane-1"),
                prd.criterion(id).unwrap(),
            )
            .finish(None, &[])
        };
        let p = text("2.2");
        let want = "## What to check: the acceptance criteria its Requirements name (requirements.md)\n\n- 1.2: IF the password is wrong THEN the system SHALL answer 401\n";
        assert!(p.contains(want), "{p}");
        let p = text("2.1");
        assert!(
            p.contains("- 2.1: not in requirements.md\n- 3.3: not in requirements.md\n- 1.2: IF the password is wrong"),
            "{p}"
        );
    }

    #[test]
    fn the_verifiers_prompt_is_exactly_this() {
        let prd = Prd::parse(
            "---\nid: PRD-1\n---\n\n# Notes\n\n## CONTEXT\n\nThe design is in docs/.\n\n## CRITERIA\n\n\
             - [ ] ISC-DOC-1: docs/design.md explains the cache | Verify: Review: read it\n",
        )
        .unwrap();
        let c = prd.criterion("ISC-DOC-1").unwrap();
        let p = prompt(
            &prd,
            Path::new("/lanes/s/lane-1/PRD.md"),
            Path::new("/lanes/s/lane-1"),
            c,
        );
        let text = p.finish(
            Some("diff --git a/docs/design.md b/docs/design.md\n+The cache keeps 100 entries."),
            &["The attempt changed check.sh, which the criterion's Verify command runs.".into()],
        );
        insta::assert_snapshot!(text);
    }
}
