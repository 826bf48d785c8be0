//! The run state and its decisions. `Core` owns everything the loop knows (the PRD model, the
//! ledger, the lanes, the brakes, PAI's own record) and changes only in `handle_event` and the
//! step methods the dispatcher calls between phases; each returns the [`Effects`] it decided,
//! in the order they are to be carried out (what the user sees comes in the order it is
//! emitted: a pass's lines before its workers start, an attempt's line before its record,
//! its record before its question is filed). Its fields are private to this module and
//! `core/` (its own files, one concern each; what belongs together has an owner of its own:
//! the brakes, the rounds, the samples, the questions, the PRD's damage, the counts); the rest
//! of the loop reads them through the accessors below. No I/O here, and no clock: time comes
//! in as [`Now`] to every decision that needs it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

mod adapt;
pub(super) mod apply;
mod asked;
mod brakes;
mod build;
mod checks;
pub(super) mod credit;
#[cfg(test)]
mod decisions_tests;
mod document;
mod group;
mod iteration;
mod launch;
mod model;
mod record;
mod round_book;
mod rounds;
mod samples;

use super::end::End;
use super::event::{Effect, Effects, LoopEvent, PrdBroken, RunEvent, Slot, Started};
use super::flow::Flow;
use super::ledger::Ledger;
use super::reason::Notice;
use crate::config::{OwnPaths, RunConfig};
use crate::prd::Prd;
use crate::state;
use crate::state::{Evidence, SessionState};
use crate::worker::Cancel;

/// The time, both ways the loop needs it.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub at: Instant,
    /// Epoch milliseconds.
    pub ms: u64,
}

impl Now {
    pub fn current() -> Now {
        Now {
            at: Instant::now(),
            ms: state::now_ms(),
        }
    }

    pub fn secs(&self) -> i64 {
        (self.ms / 1000) as i64
    }
}

/// What the dispatcher does next between phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Iterate,
    End(End),
}

pub struct Core {
    cfg: RunConfig,
    session: String,
    doc: Prd,
    ledger: Ledger,
    /// What PAI's state document itself records (phases, history, lanes as agents, the
    /// run's end); the document saved is built from the whole run state (`state_document`).
    pai: SessionState,
    /// prdloop's own paths of the run.
    own: OwnPaths,
    /// The session's logs (`own.logs(session)`).
    log_dir: PathBuf,
    /// The one scheduler of the run's attempts (with `--rounds barrier`, PAI's barrier as
    /// its policy).
    schedule: Flow,
    /// The run's rounds: the open one, those ahead, the stall count.
    rounds: round_book::RoundBook,
    /// What each criterion needs first (checked when the run starts).
    graph: crate::graph::Graph,
    /// Passing work that collided with another lane's; the connections the network policy
    /// refused.
    counts: record::Counts,
    /// Each runnable criterion's Verify command as the run first saw it, and those that
    /// cannot run here.
    pins: checks::Pins,
    /// What keeps new workers from starting (Ctrl-C, requests, the stop, limits).
    brakes: brakes::Brakes,
    run_started: Instant,
    /// What became of the PRD on disk during the run (it broke, criteria vanished).
    damage: model::Damage,
    /// Isolated workers (a git worktree each), when on.
    iso: Option<std::sync::Arc<crate::isolation::Isolation>>,
    /// Best-of-N: each lane's samples of its current attempt, and the winners being merged.
    sampling: samples::Sampling,
    /// The PRD's questions, as the run knows them, and where their book is.
    questions: asked::Questions,
    /// `--escalate`: where each criterion stands on the set-ups.
    ladder: super::adapt::Ladder,
    /// The set-up (its label) each running worker was started on, by (lane, sample).
    slot_setup: HashMap<Slot, String>,
}

impl Core {
    // ---- what the rest of the loop reads -------------------------------------------------
    // The fields are Core's own: outside `run/core/` they are read through these, and the run
    // changes only through `handle_event` and the step methods.

    pub fn cfg(&self) -> &RunConfig {
        &self.cfg
    }

    /// The PRD as the run knows it.
    pub fn doc(&self) -> &Prd {
        &self.doc
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn log_dir(&self) -> &std::path::Path {
        &self.log_dir
    }

    /// prdloop's own paths of the run.
    pub fn own(&self) -> &OwnPaths {
        &self.own
    }

    /// Where the PRD's question book is.
    pub fn book_path(&self) -> &std::path::Path {
        self.questions.path()
    }

    /// Isolated workers (a repository of its own each), when on.
    pub fn iso(&self) -> Option<&std::sync::Arc<crate::isolation::Isolation>> {
        self.iso.as_ref()
    }

    /// No worker starts before this (a rate or usage limit, overload).
    pub fn pause_until(&self) -> Option<Instant> {
        self.brakes.pause_until()
    }

    /// A pause or stop someone asked for.
    pub fn request(&self) -> Option<End> {
        self.brakes.request()
    }

    /// Why the PRD on disk cannot be written (it does not parse, cannot be read).
    pub fn broken(&self) -> Option<&PrdBroken> {
        self.damage.broken()
    }

    /// Criteria of the run missing from the PRD on disk.
    pub fn vanished(&self) -> &[String] {
        self.damage.vanished()
    }

    /// Whether the checkout can be read by the runner's checks now: no worker writes it (each
    /// works in a repository of its own, or none runs).
    pub fn checkout_quiet(&self) -> bool {
        self.iso.is_some() || !self.schedule.any_running()
    }

    /// Before the run starts: the isolated workers' repositories, and the graph of what each
    /// criterion needs first (checked already).
    pub fn set_up(
        &mut self,
        iso: Option<std::sync::Arc<crate::isolation::Isolation>>,
        graph: crate::graph::Graph,
    ) {
        self.iso = iso;
        self.graph = graph;
    }

    /// The folder a lane's worker works (and its claimed PASS is checked) in.
    pub fn worker_dir(&self, lane: usize) -> PathBuf {
        match &self.iso {
            Some(iso) => iso.lane_dir(lane),
            None => self.cfg.workdir.clone(),
        }
    }

    /// The top of what a lane's worker may write when sandboxed: its own copy of the
    /// repository, or the run's folder without isolation.
    pub fn lane_top(&self, lane: usize) -> PathBuf {
        match &self.iso {
            Some(iso) => iso.lane_top(lane),
            None => self.cfg.workdir.clone(),
        }
    }

    /// A core whose own paths are those of its settings' PRD and state folder.
    #[cfg(test)]
    pub fn new(cfg: RunConfig, session: String, doc: Prd, now: Now) -> Core {
        let own = OwnPaths::new(&cfg.prd_path, cfg.state_dir.clone());
        Core::with_own(cfg, own, session, doc, now)
    }

    /// The core of a run on `doc` with its settings and own paths.
    pub fn with_own(cfg: RunConfig, own: OwnPaths, session: String, doc: Prd, now: Now) -> Core {
        let log_dir = own.logs(&session);
        let mut ledger = Ledger::default();
        for c in &doc.criteria {
            ledger.admit(&c.id, c.checked);
        }
        let mut core = Core {
            pai: SessionState::default(),
            session,
            ledger,
            log_dir,
            schedule: Flow::default(),
            rounds: Default::default(),
            graph: Default::default(),
            counts: Default::default(),
            pins: Default::default(),
            brakes: Default::default(),
            run_started: now.at,
            damage: Default::default(),
            iso: None,
            sampling: Default::default(),
            questions: asked::Questions::at(own.book.clone()),
            ladder: super::adapt::Ladder::new(
                cfg.samples
                    .escalate
                    .setups
                    .iter()
                    .map(|s| s.label.clone())
                    .collect(),
                cfg.samples.escalate.after,
                cfg.samples.escalate.fallback,
            ),
            slot_setup: HashMap::new(),
            own,
            doc,
            cfg,
        };
        core.pin_commands();
        core.init_pai(now.ms);
        core.pai.rounds = Some(
            match core.cfg.rounds {
                crate::config::Rounds::Continuous => "continuous",
                crate::config::Rounds::Barrier => "barrier",
            }
            .into(),
        );
        if core.cfg.samples.n > 1 {
            core.pai.best_of = Some(crate::state::BestOf {
                samples: core.cfg.samples.n,
                select: match core.cfg.samples.select {
                    crate::config::Select::First => "first".into(),
                    crate::config::Select::Best => "best".into(),
                },
                mix: core
                    .cfg
                    .samples
                    .mix
                    .iter()
                    .map(|s| s.label.clone())
                    .collect(),
                auto: core.cfg.samples.auto.then(|| crate::state::AutoSamples {
                    max: core.cfg.samples.n,
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        core
    }

    /// A fresh run of a PRD that ran before: its last session's attempts' durations, so that
    /// the longest work starts first (nothing else of it counts here).
    pub fn learn_from(&mut self, earlier: &SessionState) {
        self.ledger.learn_durations(earlier);
    }

    /// Continues an earlier session: its attempts, reasons, cost and history.
    pub fn restore(&mut self, prev: SessionState) -> Vec<RunEvent> {
        self.ledger.restore(&prev);
        if let Some(e) = &prev.escalation {
            self.ladder.restore(e);
        }
        // Passes the earlier session recorded that never reached the PRD (its folder turned
        // read-only, the runner was killed between the pass and the write) are applied now.
        let mut said = Vec::new();
        // Only while the PRD is exactly what that session last wrote: a box unticked since
        // then is someone's edit, which stands.
        let untouched =
            prev.prd_text_hash.as_deref() == Some(&crate::state::text_hash(self.doc.text()));
        for c in prev.criteria.iter().filter(|_| untouched) {
            let passed = c.status == crate::state::CriterionStatus::Completed
                && matches!(
                    c.verified_by,
                    Some(Evidence::Checked | Evidence::Reviewed | Evidence::Claimed)
                );
            if passed && self.doc.criterion(&c.id).is_some_and(|now| !now.checked) {
                self.ledger
                    .recorded_pass(&c.id, c.verified_by.unwrap_or(Evidence::Claimed));
                said.push(RunEvent::Notice(Notice::TickedFromEarlier {
                    id: c.id.clone(),
                }));
            }
        }
        self.pai.algorithm_started_at = prev.algorithm_started_at;
        self.pai.phase_history = prev.phase_history;
        self.pai.loop_history = prev.loop_history;
        self.brakes
            .waited_earlier(Duration::from_millis(prev.waited_ms));
        said.insert(
            0,
            RunEvent::Resumed {
                session: self.session.clone(),
                iterations: self.pai.loop_history.len(),
                attempts: self.ledger.attempts(),
                cost: self.ledger.total_cost,
                kept: self.cfg.given.from_session.clone(),
            },
        );
        said
    }

    /// Whether the run may work (and check) a criterion: with `--shard`, only its shard's;
    /// the others are left as they are, neither tried nor failed.
    pub(super) fn in_scope(&self, id: &str) -> bool {
        self.cfg.scope.as_ref().is_none_or(|s| s.contains(id))
    }

    pub fn max_iterations(&self) -> u64 {
        self.cfg
            .max_iterations
            .unwrap_or(self.doc.front.max_iterations.max(1))
    }

    pub fn title(&self) -> String {
        self.doc.display_title().unwrap_or("PRD").to_string()
    }

    /// Passing and total criteria (walks the criteria: for phase boundaries and saves).
    pub fn progress(&self) -> (usize, usize) {
        let passing = self
            .doc
            .criteria
            .iter()
            .filter(|c| self.ledger.passing(&c.id))
            .count();
        (passing, self.doc.criteria.len())
    }

    pub fn failing_ids(&self) -> Vec<String> {
        self.doc
            .criteria
            .iter()
            .filter(|c| !self.ledger.passing(&c.id))
            .map(|c| c.id.clone())
            .collect()
    }

    /// Whether new workers may start: no interrupt, request, stop, or damaged PRD.
    pub(super) fn may_launch(&self) -> bool {
        self.brakes.released() && self.damage.none()
    }

    /// Why this run's agent cannot work, when that stopped it (for the other sub-loops).
    pub(super) fn fatal_stop(&self) -> Option<&super::reason::StopReason> {
        self.brakes
            .stop()
            .filter(|why| why.end() == End::AgentFatal)
    }

    pub fn interrupted(&self) -> bool {
        self.brakes.interrupted()
    }

    pub fn state_path(&self) -> PathBuf {
        SessionState::path(&self.cfg.state_dir, &self.session)
    }

    fn init_pai(&mut self, now: u64) {
        let prd_path = self.cfg.prd_path.display().to_string();
        let effort = self.doc.front.effort_level.clone();
        self.pai = SessionState {
            active: true,
            session_id: self.session.clone(),
            task_description: format!("Loop: {}", self.title()),
            current_phase: "EXECUTE".into(),
            phase_started_at: now,
            algorithm_started_at: now,
            sla: effort.clone(),
            effort_level: effort,
            capabilities: ["Task Tool", "SDK", "Loop Runner"]
                .map(String::from)
                .to_vec(),
            prd_path: prd_path.clone(),
            loop_prd_path: prd_path,
            loop_mode: true,
            mode: "loop".into(),
            loop_iteration: super::front::next_iteration(&self.doc) - 1,
            // The iteration at which this run stops, on the same count as loopIteration.
            loop_max_iterations: super::front::next_iteration(&self.doc) - 1
                + self.max_iterations(),
            loop_prd_id: self.doc.id().unwrap_or_default().to_string(),
            parallel_agents: self.cfg.agents,
            prdloop_version: state::STATE_VERSION,
            log_dir: self.log_dir.display().to_string(),
            workdir: self.cfg.workdir.display().to_string(),
            attempts_log: self.log_dir.join("attempts.jsonl").display().to_string(),
            pid: Some(std::process::id()),
            worker_agent: Some(self.cfg.agent.agent),
            run_settings: Some(self.cfg.given.recorded()),
            max_cost_usd: self.cfg.max_cost,
            ..SessionState::default()
        };
    }

    /// The header of the run.
    pub fn started(&self) -> RunEvent {
        let (passing, total) = self.progress();
        RunEvent::Started(Box::new(Started {
            prd: self.cfg.prd_path.clone(),
            id: self.doc.id().map(String::from),
            title: self.title(),
            passing,
            total,
            agents: self.cfg.agents,
            max_iterations: self.max_iterations(),
            session: self.session.clone(),
            workdir: self.cfg.workdir.clone(),
            log_dir: self.log_dir.clone(),
            state: self.state_path(),
            sandbox: self.cfg.sandbox.on,
        }))
    }

    /// The session's display name now.
    pub fn session_name(&self, end: Option<End>) -> String {
        match end {
            Some(e) => format!("Loop: {} [{}]", self.title(), e.word_upper()),
            None => {
                let (p, t) = self.progress();
                format!(
                    "Loop: {} [{p}/{t} iter {}] ({} agents)",
                    self.title(),
                    self.pai.loop_iteration,
                    self.cfg.agents
                )
            }
        }
    }

    // ---- events ----------------------------------------------------------------------------

    /// Applies one event to the run state and says what to do about it.
    pub fn handle_event(&mut self, event: LoopEvent, now: Now) -> Effects {
        let round = match &event {
            LoopEvent::WorkerDone(d) => Some(d.iteration),
            LoopEvent::WorkerLost { slot, .. } | LoopEvent::Landed { slot, .. } => {
                self.rounds.lane_round(slot.lane)
            }
            _ => None,
        };
        self.rounds.applying(round);
        match event {
            LoopEvent::WorkerStarted {
                lane,
                id,
                iteration,
                attempt,
                sample,
                pid,
            } => launch::started(self, lane, id, (iteration, attempt), sample, pid),
            LoopEvent::WorkerDone(done) => self.worker_done(*done, now),
            LoopEvent::WorkerLost { slot, id, why } => self.worker_lost(slot, &id, &why, now),
            LoopEvent::ChecksDone { purpose, results } => self.checks_done(purpose, results, now),
            LoopEvent::Tick => Effect::Poll.into(),
            LoopEvent::Request(end) => self.requested(end),
            LoopEvent::Disk(report) => self.disk_changed(*report),
            LoopEvent::PauseOver => self.pause_over(),
            LoopEvent::Signal => self.interrupt(),
            LoopEvent::SubLoopNews(news) => self.group_news(&news, now),
            LoopEvent::Landed { slot, landing } => self.landed(slot, landing, now),
            LoopEvent::Questions(book) => self.questions_read(book),
        }
    }

    /// Launches what the lanes and limits allow now.
    pub fn fill_lanes(&mut self, now: Now) -> Effects {
        launch::fill(self, now)
    }

    fn requested(&mut self, end: End) -> Effects {
        let mut r = Effects::default();
        if !self.brakes.requested(end) {
            return r;
        }
        if self.rounds.is_open() {
            match end {
                End::StoppedByRequest => {
                    r.say(RunEvent::Notice(Notice::StopRequested));
                    r.cancel(Cancel::Graceful);
                }
                _ => r.say(RunEvent::Notice(Notice::PauseRequested)),
            }
        }
        r
    }

    /// What a sync of the PRD found and did: the PRD as it is now, whether it is broken or
    /// lost criteria, and what someone else asked in it.
    fn disk_changed(&mut self, report: super::event::SyncReport) -> Effects {
        let mut r = Effects::default();
        self.take_sync(report.doc, &report.admitted, report.broken, report.vanished);
        for w in report.warnings {
            r.say(RunEvent::Warning(w));
        }
        if let Some(end) = report.request {
            r.extend(self.requested(end));
        }
        if report.changed_on_disk {
            self.check_commands(&mut r);
        }
        r
    }

    fn pause_over(&mut self) -> Effects {
        let mut r = Effects::default();
        self.brakes.pause_over();
        r.say(RunEvent::Notice(Notice::Resuming));
        r
    }

    fn interrupt(&mut self) -> Effects {
        let mut r = Effects::default();
        match self.brakes.interrupt() {
            1 => {
                r.say(RunEvent::Notice(Notice::Interrupted {
                    grace: self.cfg.kill_grace,
                }));
                r.cancel(Cancel::Graceful);
            }
            2 => {
                r.say(RunEvent::Notice(Notice::KillingNow));
                r.cancel(Cancel::Kill);
            }
            _ => {
                // The PRD says paused in the write the exit makes.
                r.edit(super::front::loop_status(&self.doc, "paused"));
                r.push(Effect::ExitNow);
                self.pai.active = false;
            }
        }
        r
    }

    pub(super) fn elapsed(&self, now: Now) -> Duration {
        now.at.saturating_duration_since(self.run_started)
    }
}

#[cfg(test)]
mod tests;
