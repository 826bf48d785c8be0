//! The reporter: the only place that writes to the terminal during a run. It turns each
//! `RunEvent` into the human lines on stderr and, with `--json`, one JSON object per line on
//! stdout. Writes never fail the run: a closed or full stream is ignored. On GitHub Actions
//! it wraps each iteration in a group; at the end it has the CI reports written (JUnit,
//! annotations, the job summary: `junit.rs`, `github.rs`). `--progress` chooses how much of
//! it shows: the lines, the live view (`live.rs`) with the lines scrolling above it, or only
//! the summary, warnings and errors.

use std::collections::BTreeMap;

use tokio::sync::watch;

use super::end::Tone;
use super::event::{Ending, RowState, RunEvent, SampleTag, Slot, Summary, WorkerEnded};
use super::json_event::{self, JsonEvent, Stamp};
use super::judge::one_line;
use super::live::Live;
use super::warning::Warning;
use super::{github, junit};
use crate::backend::Activity;
use crate::backend::Agent;
use crate::config::{CiConfig, Progress};
use crate::isolation::Landing;
use crate::report::{self, bold, dim, eline, green, red, yellow};
use crate::state::{Evidence, now_ms};

mod human;

pub use human::human_for;

pub struct Reporter {
    json: bool,
    session: String,
    ci: CiConfig,
    /// A GitHub Actions group is open (an iteration's lines).
    in_group: bool,
    agent: Agent,
    progress: Progress,
    /// The live view, while it is on screen.
    live: Option<Live>,
    /// A sub-loop's label, before each line (`prdloop run A.md B.md`), and its PRD's path
    /// for the JSON events.
    label: Option<(String, String)>,
    /// The `--json` stream's `end` event is written: the run's last line, once.
    ended: bool,
}

impl Reporter {
    pub fn new(json: bool, session: String) -> Reporter {
        Reporter {
            json,
            session,
            ci: CiConfig::default(),
            in_group: false,
            agent: Agent::Claude,
            progress: Progress::Lines,
            live: None,
            label: None,
            ended: false,
        }
    }

    /// Lines of a sub-loop: each starts with `[label]`; JSON events get `"prd"`.
    pub fn set_label(&mut self, label: Option<String>, prd: &std::path::Path) {
        self.label = label.map(|l| (l, prd.display().to_string()));
    }

    /// How the run shows itself on stderr. The live view starts drawing here.
    pub fn with_progress(mut self, progress: Progress) -> Reporter {
        self.progress = progress;
        if progress == Progress::Live {
            self.live = Some(Live::new(self.agent.reports_cost()));
        }
        self
    }

    /// What the agent of the worker about to start on `lane` is doing (for the live view).
    pub fn watch_worker(&mut self, slot: Slot, activity: watch::Receiver<Activity>) {
        if let Some(live) = &self.live {
            live.watch(slot, activity);
        }
    }

    /// Lines for stderr: above the live view when it shows.
    fn print(&self, lines: &[String]) {
        let labelled: Vec<String>;
        let lines = match &self.label {
            Some((label, _)) => {
                labelled = lines
                    .iter()
                    .filter(|l| !l.is_empty())
                    .map(|l| format!("{} {l}", dim(&format!("[{label}]"))))
                    .collect();
                &labelled[..]
            }
            None => lines,
        };
        match &self.live {
            Some(live) => live.print(lines),
            None => lines.iter().for_each(|l| eline(l)),
        }
    }

    /// Whether `e`'s human lines are printed, given `--progress`.
    fn shows(&self, e: &RunEvent) -> bool {
        match self.progress {
            Progress::Lines => true,
            // The view shows running workers itself.
            Progress::Live => !matches!(e, RunEvent::WorkerStarted { .. }),
            Progress::Summary => matches!(
                e,
                RunEvent::Warning(_) | RunEvent::Error(_) | RunEvent::Finished(_)
            ),
        }
    }

    /// The third Ctrl-C: the run exits now, without its summary. The live view goes, the
    /// JUnit file is still written and the `--json` stream still ends with its `end` event
    /// (from what the run knows at this moment).
    pub fn exit_now(&mut self, s: &Summary) {
        if let Some(live) = self.live.take() {
            live.clear();
        }
        self.emit(&RunEvent::Finished(Box::new(s.clone())));
        if let Some(path) = &self.ci.junit
            && let Err(e) = junit::write(path, s, &self.ci.prd_file)
        {
            self.warn(Warning::JunitNotWritten {
                error: format!("{e:#}"),
            });
        }
    }

    /// A warning of the reporter's own, as the run's warnings show.
    fn warn(&mut self, w: Warning) {
        self.print(&human_for(&RunEvent::Warning(w), self.agent));
    }

    /// The agent the workers run: what it does not report is said so, not shown as 0.
    pub fn for_agent(mut self, agent: Agent) -> Reporter {
        self.agent = agent;
        self
    }

    /// The CI views too: GitHub Actions groups and annotations, the job summary, JUnit.
    pub fn with_ci(mut self, ci: CiConfig) -> Reporter {
        self.ci = ci;
        self
    }

    pub fn report(&mut self, e: &RunEvent) {
        let github = self.ci.github.is_some() && self.progress != Progress::Summary;
        if let Some(live) = &self.live {
            live.update(e);
        }
        if let RunEvent::Finished(_) = e
            && let Some(live) = self.live.take()
        {
            // Off the screen before the summary, so nothing is drawn into it.
            live.clear();
        }
        match e {
            RunEvent::IterationStarted {
                iteration,
                passing,
                total,
                ..
            } if github => {
                self.end_group();
                self.print(&[github::group(*iteration, *passing, *total)]);
                self.in_group = true;
            }
            RunEvent::Finished(_) => self.end_group(),
            _ => {}
        }
        if self.shows(e) {
            self.print(&human_for(e, self.agent));
        }
        match e {
            RunEvent::IterationEnded { .. } => self.end_group(),
            RunEvent::Finished(s) => self.ci_reports(s),
            _ => {}
        }
        self.emit(e);
    }

    /// `e`'s `--json` event, when there is one and the stream has not ended.
    fn emit(&mut self, e: &RunEvent) {
        if !self.json || self.ended {
            return;
        }
        let stamp = Stamp {
            session: Some(self.session.clone()),
            time: now_ms(),
            prd: self.label.as_ref().map(|(_, prd)| prd.clone()),
        };
        // An agent that reports no cost gets `null`, not a made-up 0.
        let reports = self.agent.reports_cost();
        if let Some(event) = machine(e, stamp, |c| (reports || c != 0.0).then_some(c)) {
            self.ended = matches!(event, JsonEvent::End(_));
            event.emit();
        }
    }

    fn end_group(&mut self) {
        if std::mem::take(&mut self.in_group) {
            self.print(&[github::END_GROUP.to_string()]);
        }
    }

    /// At the run's end: the JUnit file, GitHub's annotations and job summary. A report that
    /// cannot be written is a warning; the run's outcome stands.
    fn ci_reports(&mut self, s: &Summary) {
        let prd_file = self.ci.prd_file.clone();
        let mut warnings = Vec::new();
        if let Some(path) = &self.ci.junit
            && let Err(e) = junit::write(path, s, &prd_file)
        {
            warnings.push(Warning::JunitNotWritten {
                error: format!("{e:#}"),
            });
        }
        if let Some(gh) = &self.ci.github {
            self.print(&github::annotations(s, &prd_file));
            if let Some(path) = &gh.step_summary
                && let Err(e) = append(path, &github::step_summary(s, &prd_file))
            {
                warnings.push(Warning::SummaryNotAppended {
                    path: path.clone(),
                    error: e.to_string(),
                });
            }
        }
        for w in warnings {
            self.warn(w);
        }
    }
}

fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// How each passing criterion's tick was earned, by id (`checked`, `reviewed`, `claimed`,
/// `before`).
fn evidence_of(s: &Summary) -> BTreeMap<String, Evidence> {
    s.rows
        .iter()
        .filter_map(|r| match r.state {
            RowState::Pass(e) => Some((r.id.clone(), e)),
            _ => None,
        })
        .collect()
}

/// The JSON event for scripts and CI, when there is one. `stamp`: the run's session, the time
/// and, for one PRD of several, its path; `cost`: what a cost of 0 becomes (`null` for an
/// agent that reports no cost).
fn machine(e: &RunEvent, stamp: Stamp, cost: impl Fn(f64) -> Option<f64>) -> Option<JsonEvent> {
    Some(match e {
        RunEvent::Started(s) => JsonEvent::Start(json_event::Start {
            prd: stamp
                .prd
                .clone()
                .unwrap_or_else(|| s.prd.display().to_string()),
            stamp: Stamp { prd: None, ..stamp },
            id: s.id.clone(),
            passing: s.passing,
            total: s.total,
            agents: s.agents,
            state: s.state.clone(),
            logs: s.log_dir.clone(),
            sandbox: s.sandbox,
        }),
        RunEvent::WorkerStarted {
            iteration,
            lane,
            id,
            attempt,
            pid,
            sample,
            setup,
        } => JsonEvent::WorkerStart(json_event::WorkerStart {
            stamp,
            iteration: *iteration,
            lane: lane + 1,
            criterion: id.clone(),
            attempt: *attempt,
            pid: *pid,
            setup: setup.clone(),
            sample: sample.as_ref().map(Into::into),
        }),
        RunEvent::WorkerEnded(w) => {
            use json_event::WorkerVerdict as V;
            let (verdict, why, failure) = match &w.ending {
                Ending::Pass(_) => (V::Pass, None, None),
                Ending::Fail(r) => (V::Fail, Some(r), None),
                Ending::Stuck(r) => (V::Stuck, Some(r), None),
                Ending::Agent(r, f) => (V::AgentFailure, Some(r), Some(f.clone())),
                // Best-of-N: a sample that passed but lost, or was ended because one won.
                Ending::NotSelected => (V::NotSelected, None, None),
                Ending::Sibling => (V::Sibling, None, None),
                Ending::Question(_) => (V::Question, None, None),
                _ => return None,
            };
            let reason = match &w.ending {
                Ending::Question(q) => Some(q.clone()),
                _ => why.map(ToString::to_string),
            };
            JsonEvent::WorkerEnd(json_event::WorkerEnd {
                stamp,
                iteration: w.iteration,
                lane: w.lane + 1,
                criterion: w.id.clone(),
                verdict,
                reason,
                why: why.cloned(),
                agent_failure: failure,
                duration_ms: w.duration.as_millis() as u64,
                cost_usd: cost(w.cost.unwrap_or(0.0)),
                log: w.log.clone(),
                landing: w.landing.clone(),
                evidence: match &w.ending {
                    Ending::Pass(e) => Some(*e),
                    _ => None,
                },
                sample: w.sample.as_ref().map(Into::into),
            })
        }
        RunEvent::Regressed { id, reason } => JsonEvent::Regression(json_event::Regression {
            stamp,
            criterion: id.clone(),
            reason: reason.to_string(),
            why: reason.clone(),
        }),
        RunEvent::IterationEnded {
            iteration,
            passing,
            total,
            gained,
            regressed,
            cost: spent,
            workers,
            ..
        } => JsonEvent::IterationEnd(json_event::IterationEnd {
            stamp,
            iteration: *iteration,
            passing: *passing,
            total: *total,
            gained: *gained,
            regressed: *regressed,
            cost_usd: cost(*spent),
            workers: *workers,
        }),
        RunEvent::Asked { id, question, .. } => JsonEvent::Question(json_event::Question {
            stamp,
            criterion: id.clone(),
            question: question.clone(),
        }),
        RunEvent::Answered { id, answer } => JsonEvent::Answered(json_event::Answered {
            stamp,
            criterion: id.clone(),
            answer: answer.clone(),
        }),
        RunEvent::Finished(s) => JsonEvent::End(json_event::End {
            stamp,
            outcome: s.end.word().to_string(),
            exit_code: s.end.exit(),
            standing: Some(json_event::Standing {
                passing: s.passing,
                total: s.total,
                failing: s.failing.clone(),
            }),
            iterations: s.iterations,
            cost_usd: cost(s.cost),
            reason: s.reason.as_ref().map(ToString::to_string),
            why: s.reason.clone(),
            state: Some(s.state.clone()),
            ran: Some(json_event::Ran {
                usage: s.usage,
                evidence: evidence_of(s),
                reviews: s.reviews,
                review_cost_usd: s.review_cost,
                questions: s
                    .questions
                    .iter()
                    .map(|(id, q)| json_event::Waiting {
                        criterion: id.clone(),
                        question: q.clone(),
                    })
                    .collect(),
                cost_per_pass: s.cost_per_pass.clone(),
                conflicts: s.conflicts,
                refused_connections: s.refused_connections.clone(),
            }),
        }),
        _ => return None,
    })
}
