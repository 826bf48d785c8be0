//! `--best-of auto` and `--escalate` applied to the run: how many samples an attempt runs and
//! on which set-up, from the model in `run::adapt`.

use std::collections::BTreeMap;

use super::{Core, Now};
use crate::backend::{AgentFailure, AgentOptions, Kind};
use crate::config::Setup;
use crate::run::adapt::{Climb, pass_at_1, samples};
use crate::run::event::{Effects, RunEvent, Slot, WorkerDone};
use crate::run::ledger::Spent;
use crate::run::reason::Notice;
use crate::run::spend::Judged;
use crate::state::{AutoEstimate, SessionState};

impl Core {
    /// A criterion's domain (its id when it is no longer in the PRD).
    pub(in crate::run) fn domain_of(&self, id: &str) -> String {
        self.doc
            .criterion(id)
            .map_or_else(|| id.to_string(), |c| c.domain.clone())
    }

    /// The set-up sample `k` of `id`'s next attempt runs: its `--escalate` rung (or, with
    /// `--fallback`, the set-up standing in for it), its `--mix` set-up, or `None` (the run's
    /// own agent).
    pub(in crate::run) fn setup_for(&self, id: &str, k: u32, now: Now) -> Option<&Setup> {
        if self.ladder.is_on() {
            return self
                .cfg
                .samples
                .escalate
                .setups
                .get(self.ladder.setup_for(id, now.ms));
        }
        self.cfg.samples.setup(k)
    }

    /// A set-up's label; the run's own agent as `claude` or `claude:MODEL`.
    pub(in crate::run) fn label_of(&self, s: Option<&Setup>) -> String {
        match s {
            Some(s) => s.label.clone(),
            None => match &self.cfg.agent.model {
                Some(m) => format!("{}:{m}", self.cfg.agent.agent.name()),
                None => self.cfg.agent.agent.name().to_string(),
            },
        }
    }

    /// The set-up the worker of (lane, sample) was started on.
    pub(in crate::run) fn setup_ran(&self, d: &WorkerDone) -> String {
        self.slot_setup
            .get(&Slot::of(d))
            .cloned()
            .unwrap_or_else(|| self.label_of(None))
    }

    /// The agent options of the set-up labelled `label`.
    pub(in crate::run) fn options_of(&self, label: &str) -> &AgentOptions {
        let s = &self.cfg.samples;
        s.escalate
            .setups
            .iter()
            .chain(&s.mix)
            .find(|s| s.label == label)
            .map_or(&self.cfg.agent, |s| &s.agent)
    }

    /// The set-ups whose record the estimate for `id`'s next attempt reads: its rung's,
    /// the `--mix` ones (pooled), or the run's own agent.
    fn estimate_setups(&self, id: &str, now: Now) -> Vec<String> {
        if !self.ladder.is_on() && !self.cfg.samples.mix.is_empty() {
            return self
                .cfg
                .samples
                .mix
                .iter()
                .map(|s| s.label.clone())
                .collect();
        }
        vec![self.label_of(self.setup_for(id, 0, now))]
    }

    /// The estimate of pass@1 for `id`'s next attempt, and the samples it runs: `--best-of
    /// N`'s N, or under `auto` the [`samples`] for its domain and set-up.
    pub(in crate::run) fn samples_for(&self, id: &str, now: Now) -> (Option<f64>, u32) {
        let n = self.cfg.samples.n;
        if !self.cfg.samples.auto {
            return (None, n);
        }
        let setups = self.estimate_setups(id, now);
        let names: Vec<&str> = setups.iter().map(String::as_str).collect();
        let (passed, failed) = self.ledger.spend.seen(&self.domain_of(id), &names);
        let p = pass_at_1(passed, failed);
        let left = self.max_iterations().saturating_sub(self.rounds.count());
        (Some(p), samples(p, n, left))
    }

    /// A worker ran: into the accounts of its domain and set-up.
    pub(in crate::run) fn tally(&mut self, d: &WorkerDone, spent: &Spent, judged: Judged) {
        let (domain, setup) = (self.domain_of(&d.id), self.setup_ran(d));
        self.ledger.spend.ran(&domain, &setup, spent, judged);
    }

    /// A worker's pass counted: its criterion is its domain's and set-up's.
    pub(in crate::run) fn tally_pass(&mut self, d: &WorkerDone) {
        let (domain, setup) = (self.domain_of(&d.id), self.setup_ran(d));
        self.ledger.spend.passed(&domain, &setup);
    }

    /// A counted attempt at `id` failed on `setup`: with `--escalate`, it may move up.
    pub(in crate::run) fn climb(&mut self, id: &str, setup: &str) -> Option<RunEvent> {
        let i = self.ladder.index(setup)?;
        match self.ladder.failed(id, i) {
            Climb::Stays => None,
            Climb::Moves(from, to, failed) => Some(RunEvent::Notice(Notice::Escalated {
                id: id.to_string(),
                failed,
                from,
                to,
                after: self.cfg.samples.escalate.after,
            })),
        }
    }

    /// An agent failure of a worker on `setup`: with `--fallback`, a usage limit hands that
    /// set-up's work to the next one instead of pausing every lane; otherwise as always.
    pub(in crate::run) fn agent_failed_on(
        &mut self,
        failure: &AgentFailure,
        setup: &str,
        now: Now,
    ) -> Effects {
        if failure.kind == Kind::UsageLimit
            && let Some(i) = self.ladder.index(setup)
        {
            // Without a reset time: an hour, then it is tried again.
            let until_ms = failure
                .resets_at
                .filter(|&s| s > now.secs())
                .map_or(now.ms + 3_600_000, |s| s as u64 * 1000);
            if let Some(to) = self.ladder.limited(i, until_ms, now.ms) {
                let mut r = Effects::default();
                r.say(RunEvent::Notice(Notice::FallsBack {
                    setup: setup.to_string(),
                    to: self.ladder.label(to).to_string(),
                }));
                return r;
            }
        }
        self.on_agent_failure(failure, now)
    }

    /// The accounts, the estimate and the ladder into the state document.
    pub(in crate::run) fn spend_into(&self, doc: &mut SessionState, now: Now) {
        doc.spend = self.ledger.spend.rows();
        doc.cost_per_pass = (!self.ledger.spend.is_empty()).then(|| self.ledger.spend.per_pass());
        doc.escalation = self.ladder.is_on().then(|| self.ladder.state());
        if !self.cfg.samples.auto {
            return;
        }
        let mut next = BTreeMap::new();
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.doc.criteria {
            if self.ledger.passing(&c.id) || c.is_parent() || c.is_custom() {
                continue;
            }
            let setup = self.estimate_setups(&c.id, now).join("+");
            if seen.insert((c.domain.clone(), setup.clone()))
                && let (Some(p), n) = self.samples_for(&c.id, now)
            {
                next.insert(
                    format!("{} · {setup}", c.domain),
                    AutoEstimate {
                        pass_at_1: (p * 1000.0).round() / 1000.0,
                        samples: n,
                    },
                );
            }
        }
        if let Some(b) = doc.best_of.as_mut()
            && let Some(a) = b.auto.as_mut()
        {
            a.next = next;
        }
    }
}
