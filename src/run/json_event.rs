//! The `--json` events of a run, one type: each line is one [`JsonEvent`] (its `"event"` is
//! the variant's name), written through the one sink ([`crate::report::json::event`], which
//! adds `"version"`). The reporter builds them from `RunEvent`s; a run that ends before its
//! loop (`commands/run.rs`) and the sub-loops' skipped PRDs and group end (`commands/multi.rs`)
//! build the same [`End`] and [`GroupEnd`]. Field names are camelCase as scripts read them;
//! reasons are the human text (`reason`) with the typed value beside it (`why`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::reason::{FailReason, StopReason};
use crate::backend::{AgentFailure, Usage};
use crate::exit::Exit;
use crate::isolation::Landing;
use crate::state::{CostPerPass, Evidence};

/// One `--json` line.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum JsonEvent {
    Start(Start),
    WorkerStart(WorkerStart),
    WorkerEnd(WorkerEnd),
    Regression(Regression),
    IterationEnd(IterationEnd),
    Question(Question),
    Answered(Answered),
    End(End),
    /// After the sub-loops' own `end` events (`prdloop run A.md B.md`).
    GroupEnd(GroupEnd),
}

impl JsonEvent {
    /// Writes it to stdout, with `"version"`. A closed stream is not the run's failure.
    pub fn emit(&self) {
        let _ = crate::report::json::event(self);
    }
}

/// Which run said it, and when: on every event of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Stamp {
    /// `null` for a run that ended before it had a session.
    pub session: Option<String>,
    /// Epoch milliseconds.
    pub time: u64,
    /// The PRD, for the events of one of several (`prdloop run A.md B.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prd: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Start {
    #[serde(flatten)]
    pub stamp: Stamp,
    /// The PRD's path (the stamp leaves `prd` to this).
    pub prd: String,
    pub id: Option<String>,
    pub passing: usize,
    pub total: usize,
    pub agents: usize,
    pub state: PathBuf,
    pub logs: PathBuf,
    pub sandbox: bool,
}

/// Best-of-N: which sample (`number` from 1).
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub number: u32,
    pub of: u32,
    pub setup: Option<String>,
}

impl From<&super::event::SampleTag> for Sample {
    fn from(t: &super::event::SampleTag) -> Sample {
        Sample {
            number: t.k + 1,
            of: t.n,
            setup: t.setup.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerStart {
    #[serde(flatten)]
    pub stamp: Stamp,
    pub iteration: u64,
    /// From 1.
    pub lane: usize,
    pub criterion: String,
    pub attempt: u32,
    pub pid: Option<u32>,
    pub setup: Option<String>,
    pub sample: Option<Sample>,
}

/// How a worker ended, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerVerdict {
    Pass,
    Fail,
    Stuck,
    AgentFailure,
    NotSelected,
    Sibling,
    Question,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerEnd {
    #[serde(flatten)]
    pub stamp: Stamp,
    pub iteration: u64,
    pub lane: usize,
    pub criterion: String,
    pub verdict: WorkerVerdict,
    /// Why, in words (a question's text for `question`).
    pub reason: Option<String>,
    /// Why, typed: `{"kind": …, …}`.
    pub why: Option<FailReason>,
    pub agent_failure: Option<AgentFailure>,
    pub duration_ms: u64,
    /// `null` for an agent that reports no cost.
    pub cost_usd: Option<f64>,
    pub log: PathBuf,
    pub landing: Option<Landing>,
    pub evidence: Option<Evidence>,
    pub sample: Option<Sample>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Regression {
    #[serde(flatten)]
    pub stamp: Stamp,
    pub criterion: String,
    pub reason: String,
    pub why: FailReason,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationEnd {
    #[serde(flatten)]
    pub stamp: Stamp,
    pub iteration: u64,
    pub passing: usize,
    pub total: usize,
    pub gained: usize,
    pub regressed: usize,
    pub cost_usd: Option<f64>,
    pub workers: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Question {
    #[serde(flatten)]
    pub stamp: Stamp,
    pub criterion: String,
    pub question: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Answered {
    #[serde(flatten)]
    pub stamp: Stamp,
    pub criterion: String,
    pub answer: String,
}

/// A waiting question at the end.
#[derive(Debug, Clone, Serialize)]
pub struct Waiting {
    pub criterion: String,
    pub question: String,
}

/// What only a run that reached its loop's end knows.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ran {
    pub usage: Usage,
    /// How each passing criterion's tick was earned, by id.
    pub evidence: BTreeMap<String, Evidence>,
    pub reviews: u32,
    pub review_cost_usd: f64,
    pub questions: Vec<Waiting>,
    pub cost_per_pass: CostPerPass,
    pub conflicts: u32,
    /// The connections the network policy refused workers and checks, by criterion and host.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused_connections: Vec<crate::state::NetRefusal>,
}

/// Where the criteria stand at the end.
#[derive(Debug, Clone, Serialize)]
pub struct Standing {
    pub passing: usize,
    pub total: usize,
    pub failing: Vec<String>,
}

/// The run's end: of its loop, or of a run that ended before it (`iterations` 0, `state`
/// `null`, no `usage`…; `passing`/`total`/`failing` when the PRD was read).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct End {
    #[serde(flatten)]
    pub stamp: Stamp,
    pub outcome: String,
    pub exit_code: Exit,
    #[serde(flatten)]
    pub standing: Option<Standing>,
    pub iterations: u64,
    pub cost_usd: Option<f64>,
    /// Why it stopped early, or why it ended before its loop, in words.
    pub reason: Option<String>,
    /// Why it stopped early, typed (`null` for other ends).
    pub why: Option<StopReason>,
    pub state: Option<PathBuf>,
    #[serde(flatten)]
    pub ran: Option<Ran>,
}

impl End {
    /// A run that ended before its loop: its outcome word, exit code and message.
    pub fn early(
        prd: Option<String>,
        outcome: &str,
        code: Exit,
        message: &str,
        progress: Option<&(usize, usize, Vec<String>)>,
    ) -> End {
        End {
            stamp: Stamp {
                session: None,
                time: crate::state::now_ms(),
                prd,
            },
            outcome: outcome.to_string(),
            exit_code: code,
            standing: progress.map(|(passing, total, failing)| Standing {
                passing: *passing,
                total: *total,
                failing: failing.clone(),
            }),
            iterations: 0,
            cost_usd: Some(0.0),
            reason: Some(message.to_string()),
            why: None,
            state: None,
            ran: None,
        }
    }
}

/// One PRD's line in `group_end`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupPrd {
    pub prd: String,
    pub label: String,
    pub exit_code: Exit,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passing: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// A PRD that did not reach its loop's end: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupEnd {
    pub time: u64,
    pub exit_code: Exit,
    pub prds: Vec<GroupPrd>,
    pub cost_usd: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_early_end_has_the_loops_end_shape_and_a_prd_when_one_of_several() {
        let e = JsonEvent::End(End::early(
            Some("b/PRD.md".into()),
            "error",
            Exit::Usage,
            "bad flag",
            Some(&(1, 3, vec!["ISC-2".into(), "ISC-3".into()])),
        ));
        let mut v = serde_json::to_value(&e).unwrap();
        assert!(v["time"].as_u64().unwrap() > 0);
        v["time"] = 0.into();
        assert_eq!(
            v,
            json!({
                "event": "end", "session": null, "time": 0, "prd": "b/PRD.md",
                "outcome": "error", "exitCode": 2, "passing": 1, "total": 3,
                "failing": ["ISC-2", "ISC-3"], "iterations": 0, "costUsd": 0.0,
                "reason": "bad flag", "why": null, "state": null,
            })
        );
        let bare = serde_json::to_value(JsonEvent::End(End::early(
            None,
            "error",
            Exit::Failure,
            "x",
            None,
        )))
        .unwrap();
        let keys: Vec<&str> = bare
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "costUsd",
                "event",
                "exitCode",
                "iterations",
                "outcome",
                "reason",
                "session",
                "state",
                "time",
                "why"
            ]
        );
    }

    #[test]
    fn a_worker_end_carries_the_words_and_the_typed_reason() {
        let why = FailReason::AgentTimedOut {
            after_ms: 2000,
            text: "the worker ran past --timeout".into(),
        };
        let e = JsonEvent::WorkerEnd(WorkerEnd {
            stamp: Stamp {
                session: Some("s".into()),
                time: 1,
                prd: None,
            },
            iteration: 1,
            lane: 1,
            criterion: "ISC-1".into(),
            verdict: WorkerVerdict::AgentFailure,
            reason: Some(why.to_string()),
            why: Some(why),
            agent_failure: None,
            duration_ms: 2001,
            cost_usd: None,
            log: "l.log".into(),
            landing: None,
            evidence: None,
            sample: None,
        });
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["event"], "worker_end");
        assert_eq!(v["verdict"], "agent_failure");
        assert_eq!(v["reason"], "timed out: the worker ran past --timeout");
        assert_eq!(
            v["why"],
            json!({"kind": "timed_out", "afterMs": 2000, "text": "the worker ran past --timeout"})
        );
        assert_eq!(v["costUsd"], serde_json::Value::Null);
        assert_eq!(v["durationMs"], 2001);
        assert!(v.get("prd").is_none(), "one PRD: no `prd`");
    }
}
