//! The iteration's frame: whether another one starts, what starts it (the lanes, the PAI
//! phase and agents), what ends it (the front matter, the history), and the run's end (the
//! last front matter and state, and the summary).

use super::{Core, Now, Step};
use crate::run::end::{End, Tally};
use crate::run::event::{Effects, Flush, Row, RowState, RunEvent, Summary};
use crate::run::warning::Warning;
use crate::state::{AgentStatus, Evidence, LoopEntry, PhaseEntry};

impl Core {
    /// What comes next before an iteration: the run's end, or another iteration.
    pub fn next_step(&mut self) -> Step {
        if let Some(req) = self.brakes.request() {
            return Step::End(req);
        }
        self.settle_parents();
        // Parents of split ids are not work: they pass with their leaves.
        let failing: Vec<&crate::prd::Criterion> = self
            .doc
            .criteria
            .iter()
            .filter(|c| !self.ledger.passing(&c.id) && self.in_scope(&c.id) && !c.is_parent())
            .collect();
        // Parked criteria wait for a person's answer: no worker starts for them.
        let parked = failing.iter().filter(|c| self.parked(&c.id)).count();
        let failing: Vec<&crate::prd::Criterion> = failing
            .into_iter()
            .filter(|c| !self.parked(&c.id))
            .collect();
        if parked > 0 && failing.iter().all(|c| c.is_custom()) {
            return Step::End(End::Questions);
        }
        if failing.is_empty() {
            // An open box prdloop cannot read keeps the run from claiming completion.
            // So does an ISA's fog (`## Not yet specified`), as in LifeOS.
            if (self.doc.unreadable_open().next().is_some() || !self.doc.fog.is_empty())
                && self.cfg.scope.is_none()
            {
                return Step::End(End::Blocked);
            }
            return Step::End(End::Complete);
        }
        if failing.iter().all(|c| c.is_custom()) {
            return Step::End(End::Blocked);
        }
        if let Some(reason) = self.brakes.stop() {
            return Step::End(reason.end());
        }
        // Nothing can start, now or later in this run: what is left waits for a person (or
        // for criteria outside this shard).
        let startable = failing
            .iter()
            .any(|c| !c.is_custom() && self.needs_pass(&c.id));
        if !startable {
            return Step::End(End::Blocked);
        }
        // The flow runs until nothing is left to start: once it has run, the rest is out of
        // attempts (or waits for what is).
        if self.rounds.begun() {
            return Step::End(End::MaxIterations);
        }
        Step::Iterate
    }

    /// After an iteration: an interrupt, a request or the stall limit ends the run.
    pub(super) fn after_iteration(&mut self, gained: usize) -> (Option<End>, Effects) {
        let mut r = Effects::default();
        let stall = self.rounds.ended(gained);
        if self.interrupted() {
            return (Some(End::Interrupted), r);
        }
        if let Some(req) = self.brakes.request() {
            return (Some(req), r);
        }
        let (p, t) = self.progress();
        // Once stopped (for this or another reason), the rounds that still close as their
        // running workers end do not declare it again.
        let stopped = self.brakes.stop().is_some();
        if self.cfg.stall > 0 && stall >= self.cfg.stall && p < t && !stopped {
            r.say(RunEvent::Warning(Warning::Stalled {
                stall,
                limit: self.cfg.stall,
            }));
            return (Some(End::Stalled), r);
        }
        (None, r)
    }

    /// Ends an iteration: its front matter, history and report. Returns what it gained.
    pub(super) fn end_iteration(&mut self, now: Now) -> (usize, Effects) {
        let mut r = Effects::default();
        let Some(it) = self.rounds.close() else {
            return (0, r);
        };
        let (p1, total) = self.progress();
        r.edit(crate::run::front::at_iteration_end(
            &self.doc,
            it.number,
            (p1, total),
            self.failing_ids(),
        ));
        if let Some(ph) = self.pai.phase_history.last_mut() {
            ph.completed_at = Some(now.ms);
        }
        self.pai.loop_history.push(LoopEntry {
            iteration: it.number,
            started_at: it.started_ms,
            completed_at: now.ms,
            criteria_passing: p1,
            criteria_total: total,
            cost_usd: it.cost,
            usage: it.usage,
            attempts: it.attempts,
        });
        // (Lanes go on working into the next round without a barrier.)
        if !self.schedule.any_running() {
            for a in &mut self.pai.agents {
                a.status = AgentStatus::Completed;
                a.current_criterion = None;
            }
        }
        self.pai.current_phase = "VERIFY".into();
        r.say(RunEvent::IterationEnded {
            iteration: it.number,
            passing: p1,
            total,
            gained: it.gained,
            regressed: self.rounds.regressions(),
            cost: it.cost,
            workers: it.attempts,
            elapsed: now.at.saturating_duration_since(it.started),
        });
        // Interrupted, the run's end writes next: one write, not two, for a quick exit.
        r.flush(if self.interrupted() {
            Flush::Soon
        } else {
            Flush::Now
        });
        (it.gained, r)
    }

    /// The front matter and state at the run's end, written at once.
    pub fn finish(&mut self, end: End, now: Now) -> Effects {
        let mut r = Effects::default();
        let (p, t) = self.progress();
        // A shard's end speaks for its criteria only: the PRD is complete (or blocked) only
        // when all of it is.
        let whole = if self.cfg.scope.is_some() && p < t {
            End::MaxIterations.min_status(end)
        } else {
            end
        };
        r.edit(crate::run::front::at_end(
            &self.doc,
            whole,
            self.rounds.count() > 0,
            (p, t),
            self.failing_ids(),
        ));
        let pai = &mut self.pai;
        pai.active = false;
        pai.completed_at = Some(now.ms);
        pai.current_phase = end.phase().into();
        for a in &mut pai.agents {
            a.status = AgentStatus::Completed;
            a.current_criterion = None;
        }
        pai.summary = Some(format!(
            "{}: {p}/{t} criteria in {} iterations",
            end.word(),
            pai.loop_history.len()
        ));
        r.flush(Flush::Now);
        r
    }

    /// The run's summary as it stands (for the end's report, said once the PRD and the
    /// state say so).
    pub fn summary(&self, end: End, now: Now) -> Summary {
        let (p, t) = self.progress();
        let failing = self.failing_ids();
        let mut reason = self.brakes.stop().cloned();
        if end == End::Blocked && reason.is_none() {
            // Blocked by open boxes prdloop cannot read: name them.
            let path = self.cfg.prd_path.display();
            let unread: Vec<String> = self
                .doc
                .unreadable_open()
                .map(|b| format!("{path}:{}", b.line))
                .collect();
            let fog: Vec<String> = self.doc.fog.iter().map(|l| format!("{path}:{l}")).collect();
            reason = (!unread.is_empty() || !fog.is_empty()).then_some(
                crate::run::reason::StopReason::Unfinished {
                    unreadable: unread,
                    unspecified: fog,
                },
            );
        }
        let title = self.title();
        // A shard's run speaks of its shard's criteria.
        let (hp, ht, hf) = match &self.cfg.scope {
            Some(s) => {
                let f: Vec<String> = failing
                    .iter()
                    .filter(|id| s.contains(*id))
                    .cloned()
                    .collect();
                (s.len() - f.len(), s.len(), f)
            }
            None => (p, t, failing.clone()),
        };
        let reason_text = reason.as_ref().map(ToString::to_string).unwrap_or_default();
        let tally = Tally {
            passing: hp,
            total: ht,
            iterations: self.rounds.count(),
            stall: self.cfg.stall,
            reason: &reason_text,
            title: &title,
        };
        let (mut headline, tone) = end.headline(&tally, &hf);
        if self.cfg.scope.is_some() {
            headline.push_str(&format!(" (this shard's; {p}/{t} in the PRD)"));
        }
        Summary {
            prd_id: self.doc.id().map(String::from),
            title,
            end,
            headline,
            tone,
            passing: p,
            total: t,
            failing,
            rows: self.rows(),
            iterations: self.rounds.count(),
            elapsed: now.at.saturating_duration_since(self.run_started),
            cost: self.ledger.total_cost,
            usage: self.ledger.usage,
            passed_in_run: self.ledger.passed_in_run(),
            reason,
            log_dir: self.log_dir.clone(),
            state: self.state_path(),
            setup_wins: self.setup_wins(),
            cost_per_pass: self.ledger.spend.per_pass(),
            reviews: self.ledger.reviews,
            review_cost: self.ledger.review_cost,
            questions: self.open_questions(),
            prd: self.cfg.prd_path.clone(),
            conflicts: self.counts.conflicts(),
            refused_connections: self.counts.refused().to_vec(),
        }
    }

    /// Each criterion's line in the summary.
    fn rows(&self) -> Vec<Row> {
        self.doc
            .criteria
            .iter()
            .map(|c| {
                let rec = self.ledger.get(&c.id).cloned().unwrap_or_default();
                Row {
                    id: c.id.clone(),
                    state: if rec.passing {
                        RowState::Pass(rec.verified_by.unwrap_or(Evidence::Before))
                    } else if self.parked(&c.id) {
                        RowState::Parked
                    } else if c.is_custom() {
                        RowState::NeedsPerson
                    } else if let Some(on) = self.waiting_for(&c.id) {
                        RowState::Waiting(on)
                    } else {
                        RowState::Fail
                    },
                    attempts: rec.attempts,
                    cost: rec.cost,
                    regressions: rec.regressions,
                    last_failure: rec.last_failure,
                    line: c.line,
                    domain: c.domain.clone(),
                    anti: c.anti,
                    time: rec.time,
                    usage: rec.usage,
                    failures: rec.failures,
                    last_log: rec.last_log,
                    landing: rec.landing,
                    won_by: rec.won_by,
                    question: self.questions.open(&c.id).map(|q| q.question.clone()),
                }
            })
            .collect()
    }

    /// The notification for the run's end.
    pub fn end_notification(&self, end: End) -> String {
        let (p, t) = self.progress();
        let title = self.title();
        let reason = self
            .brakes
            .stop()
            .map(ToString::to_string)
            .unwrap_or_default();
        end.notification(&Tally {
            passing: p,
            total: t,
            iterations: self.rounds.count(),
            stall: self.cfg.stall,
            reason: &reason,
            title: &title,
        })
    }

    /// PAI's record of an iteration's start: its number, the EXECUTE phase, and how many
    /// criteria it tries on how many lanes.
    pub(in crate::run) fn open_phase(
        &mut self,
        number: u64,
        to_try: usize,
        lanes: usize,
        now: Now,
    ) {
        let pai = &mut self.pai;
        pai.loop_iteration = number;
        pai.current_phase = "EXECUTE".into();
        pai.phase_started_at = now.ms;
        pai.phase_history.push(PhaseEntry {
            phase: "EXECUTE".into(),
            started_at: now.ms,
            completed_at: None,
            criteria_count: to_try,
            agent_count: lanes,
        });
    }
}
