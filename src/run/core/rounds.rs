//! The rounds as the dispatcher drives them: [`Core::begin_rounds`] (the run as one [`Flow`],
//! with PAI's barrier as its policy under `--rounds barrier`), whether the open round closed
//! ([`Core::round_closed`]), and after its regression checks its end and the next
//! ([`Core::end_round`]); with the barrier, a round's criteria are partitioned over the lanes
//! when it opens ([`Core::plan_round`]). The iterations of the front matter and the state are
//! the flow's rounds (see `flow.rs`); their accounts are kept by `round_book.rs`.

use super::{Core, Now};
use crate::plan::partition_weighted;
use crate::run::end::End;
use crate::run::event::{Effects, Flush, RunEvent};
use crate::run::flow::plan::LanePlan;
use crate::run::flow::{Flow, Work};
use crate::state::{AgentState, AgentStatus, CriteriaIds};

impl Core {
    /// Whether everything `id` needs passes.
    pub(in crate::run) fn needs_pass(&self, id: &str) -> bool {
        self.graph.needs(id).iter().all(|n| self.ledger.passing(n))
    }

    /// Why a failing criterion was not started: what it needs that does not pass.
    pub(in crate::run) fn waiting_for(&self, id: &str) -> Option<String> {
        if let Some(on) = self.schedule.waiting_for(id) {
            return Some(on.to_string());
        }
        let open: Vec<String> = self
            .graph
            .needs(id)
            .iter()
            .filter(|n| !self.ledger.passing(n))
            .map(|n| match self.doc.criterion(n) {
                Some(c) if c.is_custom() => format!("{n} (needs a person)"),
                None if self.doc.is_deferred(n) => format!("{n} (deferred)"),
                _ if !self.in_scope(n) => format!("{n} (outside this shard)"),
                _ => n.clone(),
            })
            .collect();
        (!open.is_empty() && self.ledger.get(id).is_none_or(|r| r.attempts == 0))
            .then(|| open.join(", "))
    }

    /// The iteration before the run's first.
    fn round_base(&self) -> u64 {
        crate::run::front::next_iteration(&self.doc) - 1
    }

    /// The iteration an attempt of `id` starting now belongs to.
    pub(in crate::run) fn iteration_of(&self, id: &str) -> u64 {
        self.rounds.base() + self.schedule.round_of(id)
    }

    /// Starts the flow of the whole run: every criterion of the run that is worked on,
    /// ordered by what it needs, and round 1. With `--rounds barrier`, PAI's barrier is its
    /// policy.
    pub fn begin_rounds(&mut self, now: Now) -> Effects {
        self.rounds.begin(self.round_base());
        let ids: Vec<(&str, &str)> = self
            .doc
            .criteria
            .iter()
            .filter(|c| self.workable(c))
            .map(|c| (c.id.as_str(), c.domain.as_str()))
            .collect();
        let expected = self.ledger.expected_ms(&ids);
        let work: Vec<Work> = self
            .doc
            .criteria
            .iter()
            .filter(|c| self.workable(c))
            .map(|c| Work::of(c, expected.get(&c.id).copied().unwrap_or(1)))
            .collect();
        let count = work.len();
        let lanes = self.cfg.agents.min(count).max(1);
        let limit = self.max_iterations().min(u64::from(u32::MAX)) as u32;
        let order: Vec<&str> = ids.iter().map(|(id, _)| *id).collect();
        let depth = self.graph.depth(&order).max(1) as u64;
        let mut flow = Flow::new(work, &self.graph, lanes, limit, |n| {
            if self.ledger.passing(n) {
                return None;
            }
            Some(match self.doc.criterion(n) {
                Some(c) if c.is_custom() => "needs a person".to_string(),
                None if self.doc.is_deferred(n) => "deferred".to_string(),
                _ if !self.in_scope(n) => "outside this shard".to_string(),
                _ => "not worked on".to_string(),
            })
        });
        if self.cfg.stall > 0 {
            flow.bound_ahead(self.cfg.stall);
        }
        if self.cfg.rounds == crate::config::Rounds::Barrier {
            flow.barrier();
        }
        // What waits for an answer already (a question from an earlier run) does not start.
        for (id, _) in self.open_questions() {
            flow.park(&id);
        }
        // Each criterion has -n attempts; a chain of needs adds a round per link (but for the
        // barrier's, whose last round is the -n-th).
        let last = flow
            .last_round()
            .unwrap_or(self.max_iterations() + depth - 1);
        self.pai.loop_max_iterations = self.rounds.base() + last;
        self.schedule = flow;
        self.pai.agents = (0..lanes)
            .map(|i| AgentState {
                name: format!("agent-{}", i + 1),
                agent_type: "loop-worker".into(),
                status: AgentStatus::Active,
                task: "Criteria: as lanes come free".into(),
                phase: "EXECUTE".into(),
                ..AgentState::default()
            })
            .collect();
        match self.schedule.open_round() {
            Some(round) => self.open_round(self.rounds.base() + round, now),
            None => Effects::default(),
        }
    }

    /// A criterion the run works on (not yet passing, not a person's, in scope).
    fn workable(&self, c: &crate::prd::Criterion) -> bool {
        !self.ledger.passing(&c.id) && !c.is_custom() && !c.is_parent() && self.in_scope(&c.id)
    }

    /// Opens iteration `number` (its attempts that started already are in it).
    fn open_round(&mut self, number: u64, now: Now) -> Effects {
        // Its attempts that ended already (they started while it was ahead).
        let ended = self.rounds.open(number, now).attempts as usize;
        let (passing, total) = self.progress();
        let (to_try, lanes) = if self.schedule.plans_rounds() {
            self.plan_round(number)
        } else {
            // Those still to run or running, and those whose attempt of it ended already.
            let round = number - self.rounds.base();
            (
                self.schedule.round_size(round) + ended,
                self.schedule.lanes(),
            )
        };
        self.open_phase(number, to_try, lanes, now);
        let mut r = Effects::default();
        r.say(RunEvent::IterationStarted {
            iteration: number,
            passing,
            total,
            to_try,
            lanes,
        });
        r.flush(Flush::Soon);
        r
    }

    /// The barrier's round `number` opens: its criteria partitioned over the lanes by PAI's
    /// rule (longest groups first, by what earlier attempts took, else by size), each lane
    /// listed in PAI's state with its criteria. How many criteria, on how many lanes.
    fn plan_round(&mut self, number: u64) -> (usize, usize) {
        let round = number - self.rounds.base();
        let items: Vec<(&str, &str)> = self
            .doc
            .criteria
            .iter()
            .filter(|c| self.schedule.starts_in(&c.id, round))
            .map(|c| (c.id.as_str(), c.domain.as_str()))
            .collect();
        let expected = self.ledger.expected_ms(&items);
        let weight = |id: &str| expected.get(id).copied().unwrap_or(1);
        let lanes = partition_weighted(items.iter().copied(), self.cfg.agents, weight);
        let to_try: usize = lanes.iter().map(|l| l.len()).sum();
        self.pai.agents = lanes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let ids: CriteriaIds = l.ids().map(String::from).collect();
                AgentState {
                    name: format!("agent-{}", i + 1),
                    agent_type: "loop-worker".into(),
                    status: AgentStatus::Active,
                    task: format!("Criteria: {}", ids.ids().join(", ")),
                    criteria_ids: ids,
                    phase: "EXECUTE".into(),
                    ..AgentState::default()
                }
            })
            .collect();
        self.schedule
            .plan(round, LanePlan::weighted(&lanes, weight));
        (to_try, lanes.len())
    }

    /// An attempt of `id` starts in iteration `number`: a round not open yet gets its
    /// accumulator.
    pub(in crate::run) fn attempt_started(&mut self, lane: usize, id: &str, number: u64, now: Now) {
        self.rounds.attempt_started(lane, number, now);
        // A barrier's round listed each lane's criteria when it opened.
        if !self.schedule.plans_rounds()
            && let Some(a) = self.pai.agents.get_mut(lane)
        {
            a.criteria_ids.add(id);
        }
    }

    /// Brings the flow up to date with the ledger: outcomes of the criteria that ended.
    pub(in crate::run) fn settle_flow(&mut self) {
        let ledger = &self.ledger;
        self.schedule.settle(|id| ledger.passing(id));
    }

    /// Whether the open round has closed: no attempt of it (or earlier) runs or can start
    /// (with the barrier, none is ahead of it: it closes with its last attempt).
    pub fn round_closed(&mut self) -> bool {
        self.settle_flow();
        let Some(open) = self.rounds.open_number() else {
            return false;
        };
        let f = &self.schedule;
        // Stopped: what is ready will not start, only what runs counts.
        let lowest = if self.may_launch() {
            f.open_round()
        } else {
            f.running_round()
        };
        lowest.is_none_or(|r| self.rounds.base() + r > open)
    }

    /// Ends the round that closed (after its regression checks): its front matter, history
    /// and report; the stall limit; the next round. Three lists, carried out one after the
    /// other, each with what it leads to (the end's write and what it found come before the
    /// stall's warning and the next round's start).
    pub fn end_round(&mut self, now: Now) -> [Effects; 3] {
        let (gained, ended) = self.end_iteration(now);
        let (end, stall) = self.after_iteration(gained);
        let next = self.next_round(end, now);
        [ended, stall, next]
    }

    /// After a round's end: regressions found by its checks are worked on again; the stall
    /// limit stops new workers; the next round opens when one has work.
    pub(super) fn next_round(&mut self, end: Option<End>, now: Now) -> Effects {
        let mut r = Effects::default();
        self.settle_flow();
        if end == Some(End::Stalled) {
            self.brakes
                .stop_for(crate::run::reason::StopReason::Stalled {
                    iterations: self.rounds.stall(),
                });
        }
        let round = self.pai.loop_iteration.saturating_sub(self.rounds.base());
        let regressed: Vec<Work> = self
            .doc
            .criteria
            .iter()
            .filter(|c| self.workable(c))
            .map(|c| Work::of(c, 1))
            .collect();
        let (ledger, f) = (&self.ledger, &mut self.schedule);
        f.reopen(|id| ledger.passing(id), round);
        for w in regressed {
            f.admit(w, round);
        }
        let f = &self.schedule;
        let next = if self.may_launch() {
            f.open_round()
        } else {
            f.running_round()
        }
        .map(|n| self.rounds.base() + n);
        // A round whose attempts all ended before it opened still gets its end.
        let next = match (next, self.rounds.first_ahead()) {
            (Some(n), Some(a)) => Some(n.min(a)),
            (n, a) => n.or(a),
        };
        if let Some(n) = next {
            r.extend(self.open_round(n, now));
        }
        r
    }

    /// Whether the rounds begun have nothing left to wait for: no worker runs, and none can
    /// start.
    pub fn settled(&self) -> bool {
        !(self.schedule.any_running() || self.may_launch() && self.schedule.work_waits())
    }

    /// Files a finished attempt's work touched: its criterion's footprint from now on.
    pub(in crate::run) fn touched(&mut self, d: &crate::run::event::WorkerDone) {
        let f = &mut self.schedule;
        if let Some(w) = &d.work {
            f.touched(&d.id, &w.files);
        }
        // Each passing attempt once (the core hears of each once; an isolated one comes
        // merged already: only an attempt whose work could not be taken is left out).
        if (d.landing.is_none() || d.work.is_some())
            && let Ok(ran) = &d.ran
            && d.judgement.passes()
        {
            f.observed(&d.id, ran.finished.duration.as_millis() as u64);
        }
    }
}
