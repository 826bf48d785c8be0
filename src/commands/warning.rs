//! What the commands warn of, typed: each is said on stderr when it happens (its words are its
//! `Display`); `verify` and `merge` keep theirs for the command's report, so `--json` lists it
//! as `warnings`, and `undo` and `audit` give theirs as a `warning` line of their JSON Lines
//! (`{"kind": …, …, "message": …}`, as every `why`).

use std::path::PathBuf;

use serde::Serialize;

use super::plan::Why;
use crate::exit::Exit;

/// `--json` gives its fields, `kind` and its words as `message` (as every warning object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    remote = "Self",
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Warning {
    /// A criterion's command cannot run here: the gate is not green without it.
    CannotRunHere { id: String, why: Why },
    /// Its Verify command could not be started.
    NotRun { id: String, error: String },
    /// A `severity: critical` Test Strategy probe fails.
    CriticalProbeFails { id: String },
    /// `verification_summary` is the author's prose, not a count: kept.
    SummaryKept { prd: PathBuf },
    /// `merge`: no bundle of these shards (`1/3, 3/3`): their criteria stay as they are.
    MissingShards { shards: String },
    /// `merge`: a shard's changes were not applied (`text`: why, in words).
    NotApplied { shard: String, text: String },
    /// `merge`: criteria ticked on their shard's check, whose commands cannot run here
    /// (`criteria`: each id with why).
    NotRechecked { criteria: Vec<String> },
    /// `merge`: the logs of a bundle could not be kept with the merged session.
    LogsNotKept { bundle: PathBuf, error: String },
    /// `merge`: the state file could not be written.
    StateNotWritten { error: String },
    /// A PRD's own warning, as reading it found it (`text`: its words), at its line.
    InPrd {
        prd: PathBuf,
        line: usize,
        text: String,
    },
    /// `run`: a v3 PRD's `verification_summary` is the author's prose: prdloop leaves it be.
    SummaryNotCounted { prd: PathBuf },
    /// `run` with several PRDs: one is given twice; it runs once.
    GivenTwice { prd: PathBuf },
    /// `run --pr`: the run did not end well enough for a pull request (`exit`: its code).
    NotPushed { exit: Exit, branch: String },
    /// `undo`: no undo point in the checkout `top` (of the PRD `prd`, when one is given).
    NothingToUndo { top: PathBuf, prd: Option<PathBuf> },
    /// `undo`: a landing was not put back (`error`: why, in words).
    NotUndone { error: String },
    /// `audit`: ticks, and not one of them has a receipt of its current Verify command.
    NothingVouches { prd: PathBuf, state_dir: PathBuf },
    /// `import`: no open issue of `repo` matches; the PRD `output` is unchanged.
    NoIssueMatches { repo: String, output: PathBuf },
    /// `import --issue`: the number is a pull request's.
    PullRequestSkipped { issue: u64 },
    /// `import --issue`: the issue is closed.
    ClosedSkipped { issue: u64 },
}

impl Serialize for Warning {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::report::json::warning(
            Warning::serialize(self, serde_json::value::Serializer),
            self.to_string(),
            s,
        )
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::CannotRunHere { id, why } => write!(f, "{id} cannot be verified here: {why}"),
            Warning::NotRun { id, error } => {
                write!(f, "could not run the Verify command of {id}: {error}")
            }
            Warning::CriticalProbeFails { id } => write!(
                f,
                "{id}: a `severity: critical` probe fails: the product is down by its own Test Strategy"
            ),
            Warning::SummaryKept { prd } => write!(
                f,
                "{}: `verification_summary` is the author's prose, not a count: kept as it is",
                prd.display()
            ),
            Warning::MissingShards { shards } => write!(
                f,
                "no bundle of shard(s) {shards}: their criteria stay as they are"
            ),
            Warning::NotApplied { text, .. } => f.write_str(text),
            Warning::NotRechecked { criteria } => write!(
                f,
                "not re-checked on the merged tree (their Verify commands cannot run here; install what they need in the merge job): {}",
                criteria.join(", ")
            ),
            Warning::LogsNotKept { bundle, error } => write!(
                f,
                "could not keep the logs of {}: {error}",
                bundle.display()
            ),
            Warning::StateNotWritten { error } => {
                write!(f, "could not write the state file: {error}")
            }
            Warning::InPrd { prd, line, text } => write!(f, "{}:{line}: {text}", prd.display()),
            Warning::SummaryNotCounted { prd } => write!(
                f,
                "{}: `verification_summary` is the author's prose, not an M/N count: prdloop keeps it as it is (the count is in the state file)",
                prd.display()
            ),
            Warning::GivenTwice { prd } => {
                write!(f, "{} is given twice; it runs once", prd.display())
            }
            Warning::NotPushed { exit, branch } => write!(
                f,
                "the run ended with exit {exit}: nothing pushed, no pull request (the branch {branch} keeps what was committed)"
            ),
            Warning::NothingToUndo { top, prd } => {
                write!(f, "nothing to undo: no undo point in {}", top.display())?;
                match prd {
                    Some(p) => write!(f, " for {}", p.display()),
                    None => Ok(()),
                }
            }
            Warning::NotUndone { error } => write!(f, "not undone: {error}"),
            Warning::NothingVouches { prd, state_dir } => write!(
                f,
                "{}: no tick could be checked again (none has a receipt of its current Verify command in {}); nothing vouches for them",
                prd.display(),
                state_dir.display()
            ),
            Warning::NoIssueMatches { repo, output } => write!(
                f,
                "no open issue of {repo} matches; {} is unchanged",
                output.display()
            ),
            Warning::PullRequestSkipped { issue } => {
                write!(f, "#{issue} is a pull request, not an issue: skipped")
            }
            Warning::ClosedSkipped { issue } => write!(f, "#{issue} is closed: skipped"),
        }
    }
}

/// The warnings of one command: each said on stderr when it happens, and kept for its report.
#[derive(Debug, Default)]
pub struct Warnings(Vec<Warning>);

impl Warnings {
    pub fn say(&mut self, w: Warning) {
        crate::report::warn(&w);
        self.0.push(w);
    }

    pub fn into_vec(self) -> Vec<Warning> {
        self.0
    }
}

/// A warning as one line of a command's JSON Lines (`undo`, `audit`): `"event": "warning"`,
/// then the warning's object (its keys in order, as every warning object's), then `"version"`.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename = "warning")]
pub struct WarningLine<'a> {
    #[serde(flatten)]
    warning: &'a Warning,
    version: crate::report::json::Version,
}

impl<'a> WarningLine<'a> {
    pub fn of(warning: &'a Warning) -> Self {
        WarningLine {
            warning,
            version: crate::report::json::Version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words are the ones the commands printed when these were strings.
    #[test]
    fn each_says_what_it_always_said() {
        let said = [
            Warning::InPrd {
                prd: "PRD.md".into(),
                line: 4,
                text: "a note".into(),
            },
            Warning::SummaryNotCounted { prd: "P.md".into() },
            Warning::GivenTwice { prd: "P.md".into() },
            Warning::NotPushed {
                exit: Exit::Failure,
                branch: "prdloop/p".into(),
            },
            Warning::NothingToUndo {
                top: "/w".into(),
                prd: None,
            },
            Warning::NothingToUndo {
                top: "/w".into(),
                prd: Some("/w/P.md".into()),
            },
            Warning::NotUndone {
                error: "changed".into(),
            },
            Warning::NothingVouches {
                prd: "P.md".into(),
                state_dir: ".prdloop".into(),
            },
            Warning::NoIssueMatches {
                repo: "o/r".into(),
                output: "P.md".into(),
            },
            Warning::PullRequestSkipped { issue: 7 },
            Warning::ClosedSkipped { issue: 8 },
        ]
        .map(|w| w.to_string());
        assert_eq!(
            said,
            [
                "PRD.md:4: a note",
                "P.md: `verification_summary` is the author's prose, not an M/N count: prdloop keeps it as it is (the count is in the state file)",
                "P.md is given twice; it runs once",
                "the run ended with exit 1: nothing pushed, no pull request (the branch prdloop/p keeps what was committed)",
                "nothing to undo: no undo point in /w",
                "nothing to undo: no undo point in /w for /w/P.md",
                "not undone: changed",
                "P.md: no tick could be checked again (none has a receipt of its current Verify command in .prdloop); nothing vouches for them",
                "no open issue of o/r matches; P.md is unchanged",
                "#7 is a pull request, not an issue: skipped",
                "#8 is closed: skipped",
            ]
        );
    }

    #[test]
    fn a_warning_line_is_the_event_the_kind_its_fields_and_words() {
        let w = Warning::NothingToUndo {
            top: "/w".into(),
            prd: None,
        };
        let mut out = String::new();
        crate::report::json::push_report_line(&mut out, &WarningLine::of(&w)).unwrap();
        assert_eq!(
            out,
            format!(
                "{{\"event\":\"warning\",\"kind\":\"nothing_to_undo\",\"message\":\"nothing to undo: no undo point in /w\",\"prd\":null,\"top\":\"/w\",\"version\":{}}}\n",
                crate::report::json::VERSION
            )
        );
        let v = serde_json::to_value(Warning::NotPushed {
            exit: Exit::Failure,
            branch: "b".into(),
        })
        .unwrap();
        assert_eq!(v["kind"], "not_pushed");
        assert_eq!(v["exit"], 1);
    }
}
