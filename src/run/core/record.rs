//! What an attempt leaves behind: the receipt of a pass (what earned it) and its record in the
//! attempts log.

use super::{Core, Now};
use crate::backend::verdict::Exit;
use crate::evidence::receipt::{CheckReceipt, Receipt, ReviewReceipt};
use crate::run::event::{Ending, WorkerDone};
use crate::run::ledger::Spent;
use crate::state::{AttemptRecord, AttemptVerdict, Evidence, NetRefusal, SampleRecord};
use crate::worker::network::NetRefusals;

/// What the run counts for the state and the summary beside the ledger: passing work that
/// collided with another lane's, and the connections the network policy refused.
#[derive(Debug, Default)]
pub(in crate::run) struct Counts {
    conflicts: u32,
    /// By criterion and host.
    refused: Vec<NetRefusal>,
}

impl Counts {
    /// Passing work that could not be merged: its changes collided with another lane's.
    pub fn conflicts(&self) -> u32 {
        self.conflicts
    }

    pub fn refused(&self) -> &[NetRefusal] {
        &self.refused
    }

    pub(super) fn conflict(&mut self) {
        self.conflicts += 1;
    }

    /// The connections the network policy refused a worker of criterion `id`, or a check
    /// of it.
    pub(super) fn refusals(&mut self, id: &str, refused: &NetRefusals) {
        for (host, n) in &refused.hosts {
            match self
                .refused
                .iter_mut()
                .find(|r| r.criterion == id && r.host == *host)
            {
                Some(r) => r.count += n,
                None => self.refused.push(NetRefusal {
                    criterion: id.to_string(),
                    host: host.clone(),
                    count: *n,
                }),
            }
        }
    }
}

impl Core {
    /// What earned a pass: the check the runner ran (with a digest of its output), or the
    /// verifier's review, on which tree, by which agent, at what cost.
    pub(in crate::run) fn receipt(
        &self,
        d: &WorkerDone,
        by: Evidence,
        spent: &Spent,
        now: Now,
    ) -> Receipt {
        let ran = d.ran.as_ref().ok();
        let check = ran
            .and_then(|r| r.check.as_ref())
            .and_then(|c| c.as_ref().ok())
            .filter(|c| by == Evidence::Checked && c.passed())
            .map(CheckReceipt::of);
        let review = ran
            .and_then(|r| r.review.as_ref())
            .filter(|_| by == Evidence::Reviewed)
            .map(ReviewReceipt::of);
        let setup = self.options_of(&self.setup_ran(d));
        let (worker_cost, worker_tokens) = match spent.review {
            Some((c, u)) => (
                spent.cost - c,
                (spent.usage.input_tokens + spent.usage.output_tokens)
                    .saturating_sub(u.input_tokens + u.output_tokens),
            ),
            None => (
                spent.cost,
                spent.usage.input_tokens + spent.usage.output_tokens,
            ),
        };
        Receipt {
            evidence: by,
            check,
            review,
            commit: d.work.as_ref().map(|w| w.commit.clone()),
            base: d.work.as_ref().map(|w| w.base.clone()),
            agent: Some(setup.agent.name().to_string()),
            model: setup.model.clone(),
            tokens: worker_tokens,
            cost_usd: worker_cost,
            at_ms: now.ms,
        }
    }

    /// The attempts log's record of a worker that ran.
    pub(in crate::run) fn record(
        &self,
        d: &WorkerDone,
        ending: &Ending,
        spent: &Spent,
        f: &crate::worker::Finished,
        now: Now,
    ) -> AttemptRecord {
        let setup = self.setup_ran(d);
        let agent = self.options_of(&setup).agent;
        AttemptRecord {
            iteration: d.iteration,
            criterion: d.id.clone(),
            agent: d.lane + 1,
            started_at: d.started_at,
            finished_at: now.ms,
            verdict: match ending {
                Ending::Pass(_) | Ending::NotSelected => AttemptVerdict::Pass,
                Ending::Agent(..) => AttemptVerdict::AgentFailure,
                Ending::Sibling => AttemptVerdict::Sibling,
                Ending::Question(_) => AttemptVerdict::Question,
                Ending::Stuck(_) => AttemptVerdict::Stuck,
                _ => AttemptVerdict::Fail,
            },
            stuck: match &f.exit {
                Exit::Stuck(s) => Some(s.clone()),
                _ => None,
            },
            question: match ending {
                Ending::Question(q) => Some(q.clone()),
                _ => None,
            },
            reason: match ending {
                Ending::Fail(r) | Ending::Stuck(r) | Ending::Agent(r, _) => Some(r.to_string()),
                _ => None,
            },
            why: match ending {
                Ending::Fail(r) | Ending::Stuck(r) | Ending::Agent(r, _) => {
                    serde_json::to_value(r).ok()
                }
                _ => None,
            },
            agent_failure: match ending {
                Ending::Agent(_, f) => Some(f.clone()),
                _ => None,
            },
            exit: serde_json::to_value(&f.exit).unwrap_or_default(),
            cost_usd: spent.cost,
            usage: spent.usage,
            turns: spent.turns,
            permission_denials: f.outcome.permission_denials.clone(),
            log: d.log.display().to_string(),
            agent_name: Some(agent),
            setup: self.ladder.is_on().then_some(setup),
            not_reported: not_reported(&f.outcome),
            landing: d.landing.clone(),
            review: d
                .ran
                .as_ref()
                .ok()
                .and_then(|r| r.review.as_ref())
                .map(ReviewReceipt::of),
            receipt: match ending {
                Ending::Pass(by) => Some(self.receipt(d, *by, spent, now)),
                _ => None,
            },
            sample: d.sample.as_ref().map(|t| SampleRecord {
                number: t.k + 1,
                of: t.n,
                setup: t.setup.clone(),
                selected: matches!(ending, Ending::Pass(_)),
                ended_as_sibling: matches!(ending, Ending::Sibling),
                diff_lines: d.work.as_ref().map(|w| w.diff_lines),
                broken: d.broken,
            }),
            refused_writes: (f.refusals.lines > 0).then(|| crate::state::RefusedWrites {
                lines: f.refusals.lines,
                paths: f.refusals.paths.clone(),
            }),
            refused_connections: refused_in(d, f)
                .hosts
                .iter()
                .map(|(host, count)| crate::state::RefusedConnection {
                    host: host.clone(),
                    count: *count,
                })
                .collect(),
            footprint: d.work.as_ref().map(|w| w.files.clone()).unwrap_or_default(),
        }
    }
}

/// What an agent's output left out: `cost`, `tokens` (recorded as 0, which they are not).
fn not_reported(o: &crate::backend::Outcome) -> Vec<String> {
    let mut v = Vec::new();
    if o.cost_usd.is_none() {
        v.push("cost".to_string());
    }
    if !o.tokens_reported {
        v.push("tokens".to_string());
    }
    v
}

/// The connections the network policy refused an attempt: its worker's and its Verify
/// command's.
pub(in crate::run) fn refused_in(d: &WorkerDone, f: &crate::worker::Finished) -> NetRefusals {
    let check = d
        .ran
        .as_ref()
        .ok()
        .and_then(|r| r.check.as_ref())
        .and_then(|c| c.as_ref().ok());
    match check {
        Some(c) => f.refusals.net.merged(&c.refused),
        None => f.refusals.net.clone(),
    }
}
