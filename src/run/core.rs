//! The run state and its decisions. `Core` owns everything the loop knows (the PRD model, the
//! ledger, the lanes, limits, the PAI state document) and changes only in `handle_event` and
//! the step methods the dispatcher calls between phases; each returns a `Response` saying what
//! to do. No I/O here: time comes in as [`Now`].

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use super::end::{End, Tally};
use super::event::{
    CheckPurpose, Flush, LoopEvent, Response, Row, RowState, RunEvent, Started, Summary,
};
use super::ledger::Ledger;
use super::schedule::Schedule;
use crate::config::RunConfig;
use crate::plan::partition;
use crate::prd::{Prd, Value};
use crate::state::{AgentState, AgentStatus, LoopEntry, PhaseEntry, SessionState, VerifiedBy};
use crate::verify::{self, Check};
use crate::worker::{Cancel, SpawnError};
use crate::{env, state};

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

/// The iteration in progress.
#[derive(Debug)]
pub(super) struct Iteration {
    pub number: u64,
    pub started_ms: u64,
    pub started: Instant,
    pub gained: usize,
    pub attempts: u32,
    pub cost: f64,
    pub usage: crate::backend::Usage,
}

/// What the dispatcher does next between phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Iterate,
    End(End),
}

pub struct Core {
    pub cfg: RunConfig,
    pub session: String,
    pub doc: Prd,
    pub ledger: Ledger,
    /// The PAI state document, saved by the store.
    pub pai: SessionState,
    pub log_dir: PathBuf,
    pub(super) schedule: Schedule,
    pub(super) iter: Option<Iteration>,
    /// Each runnable criterion's Verify command as it was when the run first saw it.
    commands: HashMap<String, String>,
    /// Criteria whose changed Verify command was already warned about.
    warned_changed: HashSet<String>,
    pub(super) interrupts: u8,
    /// A pause or stop asked for by someone else.
    pub(super) request: Option<End>,
    /// Why no more workers start in this run (budget, time, agent failure), with its detail.
    pub(super) stop: Option<(End, String)>,
    pub iterations_run: u64,
    run_started: Instant,
    /// No worker starts before this (a rate or usage limit, overload).
    pub(super) pause_until: Option<Instant>,
    /// Transient agent failures in a row, for the backoff.
    pub(super) backoff_level: u32,
    pub(super) waited: Duration,
    stall: u64,
    /// Criteria unticked by this iteration's regression checks.
    pub(super) regressed: usize,
    /// Set when criteria of the run vanished from the PRD (a worker or an edit removed them).
    pub vanished: Vec<String>,
    /// Set while the PRD on disk does not parse (with the parse error).
    pub broken: Option<String>,
}

impl Core {
    pub fn new(cfg: RunConfig, session: String, doc: Prd, now: Now) -> Core {
        let log_dir = cfg.state_dir.join(format!("{session}.logs"));
        let mut ledger = Ledger::default();
        for c in &doc.criteria {
            ledger.admit(&c.id, c.checked);
        }
        let mut core = Core {
            pai: SessionState::default(),
            session,
            ledger,
            log_dir,
            schedule: Schedule::default(),
            iter: None,
            commands: HashMap::new(),
            warned_changed: HashSet::new(),
            interrupts: 0,
            request: None,
            stop: None,
            iterations_run: 0,
            run_started: now.at,
            pause_until: None,
            backoff_level: 0,
            waited: Duration::ZERO,
            stall: 0,
            regressed: 0,
            vanished: Vec::new(),
            broken: None,
            doc,
            cfg,
        };
        core.pin_commands();
        core.init_pai(now.ms);
        core
    }

    /// Continues an earlier session: its attempts, reasons, cost and history.
    pub fn restore(&mut self, prev: SessionState) -> RunEvent {
        self.ledger.restore(&prev);
        self.pai.algorithm_started_at = prev.algorithm_started_at;
        self.pai.phase_history = prev.phase_history;
        self.pai.loop_history = prev.loop_history;
        self.pai.waited_ms = prev.waited_ms;
        RunEvent::Resumed {
            session: self.session.clone(),
            iterations: self.pai.loop_history.len(),
            attempts: self.ledger.attempts(),
            cost: self.ledger.total_cost,
        }
    }

    pub fn max_iterations(&self) -> u64 {
        self.cfg
            .max_iterations
            .unwrap_or(self.doc.front.max_iterations.max(1))
    }

    pub fn title(&self) -> String {
        self.doc
            .title
            .clone()
            .or_else(|| self.doc.front.id.clone())
            .unwrap_or_else(|| "PRD".into())
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

    pub fn interrupted(&self) -> bool {
        self.interrupts > 0
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
            loop_iteration: self.doc.front.iteration,
            loop_max_iterations: self.max_iterations(),
            loop_prd_id: self.doc.front.id.clone().unwrap_or_default(),
            parallel_agents: self.cfg.agents,
            prdloop_version: state::STATE_VERSION,
            log_dir: self.log_dir.display().to_string(),
            workdir: self.cfg.workdir.display().to_string(),
            attempts_log: self.log_dir.join("attempts.jsonl").display().to_string(),
            pid: Some(std::process::id()),
            ..SessionState::default()
        };
    }

    /// The header of the run.
    pub fn started(&self) -> RunEvent {
        let (passing, total) = self.progress();
        RunEvent::Started(Box::new(Started {
            prd: self.cfg.prd_path.clone(),
            id: self.doc.front.id.clone(),
            title: self.title(),
            passing,
            total,
            agents: self.cfg.agents,
            max_iterations: self.max_iterations(),
            session: self.session.clone(),
            workdir: self.cfg.workdir.clone(),
            log_dir: self.log_dir.clone(),
            state: self.state_path(),
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

    // ---- Verify commands -------------------------------------------------------------------

    /// Pins the Verify command of every runnable criterion the run has not seen yet.
    fn pin_commands(&mut self) {
        for c in &self.doc.criteria {
            if let Some(cmd) = c.command()
                && !c.is_custom()
            {
                self.commands
                    .entry(c.id.clone())
                    .or_insert_with(|| cmd.to_string());
            }
        }
    }

    /// A changed Verify command is warned about once and ignored: the command from when the
    /// run first saw the criterion still decides. New criteria get theirs pinned.
    pub(super) fn check_commands(&mut self, r: &mut Response) {
        let mut new = Vec::new();
        for c in &self.doc.criteria {
            let now = c.command().filter(|_| !c.is_custom());
            let Some(pinned) = self.commands.get(&c.id) else {
                if let Some(cmd) = now {
                    new.push((c.id.clone(), cmd.to_string()));
                }
                continue;
            };
            if now != Some(pinned.as_str()) && !self.warned_changed.contains(&c.id) {
                let show =
                    |v: Option<&str>| v.map_or_else(|| "none".to_string(), |n| format!("`{n}`"));
                r.say(RunEvent::Warning(format!(
                    "{}:{}: the Verify command of {} changed during the run (now {}); the original ({}) still decides",
                    self.cfg.prd_path.display(),
                    c.line,
                    c.id,
                    show(now),
                    show(Some(pinned)),
                )));
                self.warned_changed.insert(c.id.clone());
            }
        }
        self.commands.extend(new);
    }

    /// The pinned command that decides this criterion, when checks are on.
    pub(super) fn command_for(&self, id: &str) -> Option<&str> {
        if !self.cfg.verify {
            return None;
        }
        let c = self.doc.criterion(id)?;
        if c.is_custom() {
            return None;
        }
        self.commands.get(id).map(String::as_str)
    }

    pub(super) fn verify_job(&self, id: &str, log: PathBuf) -> Option<verify::Job> {
        Some(verify::Job {
            id: id.to_string(),
            command: self.command_for(id)?.to_string(),
            settings: verify::Settings {
                workdir: self.cfg.workdir.clone(),
                timeout: self.cfg.verify_timeout,
                kill_grace: self.cfg.kill_grace,
                env: vec![
                    (env::WORKER_SESSION_ID.into(), self.session.clone()),
                    (
                        env::WORKER_PRD.into(),
                        self.cfg.prd_path.display().to_string(),
                    ),
                    (env::WORKER_CRITERION.into(), id.to_string()),
                ],
            },
            log,
        })
    }

    fn check_jobs(&self, purpose: CheckPurpose) -> Vec<verify::Job> {
        let label = match purpose {
            CheckPurpose::Start => "start",
            CheckPurpose::Regression => "regress",
        };
        self.doc
            .criteria
            .iter()
            .filter(|c| purpose == CheckPurpose::Start || self.ledger.passing(&c.id))
            .filter_map(|c| {
                let log = self.log_dir.join(format!("{label}-{}-verify.log", c.id));
                self.verify_job(&c.id, log)
            })
            .collect()
    }

    /// Before the first iteration: every runnable criterion's command, once.
    pub fn start_checks(&self) -> Response {
        let mut r = Response::default();
        if !self.cfg.verify {
            return r;
        }
        let jobs = self.check_jobs(CheckPurpose::Start);
        if !jobs.is_empty() {
            r.say(RunEvent::ChecksStarting { count: jobs.len() });
            r.checks = Some((CheckPurpose::Start, jobs));
        }
        r
    }

    /// At an iteration's end: the commands of every ticked runnable criterion, again.
    pub fn regression_checks(&self) -> Response {
        let mut r = Response::default();
        if !self.cfg.verify || self.interrupted() {
            return r;
        }
        let jobs = self.check_jobs(CheckPurpose::Regression);
        if !jobs.is_empty() {
            r.checks = Some((CheckPurpose::Regression, jobs));
        }
        r
    }

    fn checks_done(
        &mut self,
        purpose: CheckPurpose,
        results: Vec<(String, Result<Check, SpawnError>)>,
    ) -> Response {
        let mut r = Response::default();
        let mut ok: Vec<(String, Check)> = Vec::new();
        for (id, res) in results {
            match res {
                Ok(check) if !check.cancelled() => ok.push((id, check)),
                Ok(_) => {}
                Err(e) => r.say(RunEvent::Warning(format!(
                    "could not run the Verify command of {id}: {e}"
                ))),
            }
        }
        // Reported in document order.
        ok.sort_by_key(|(id, _)| self.doc.criterion(id).map_or(usize::MAX, |c| c.line));
        for (id, check) in ok {
            let was = self.ledger.passing(&id);
            if check.passed() {
                self.ledger.check_passed(&id);
                if !was && purpose == CheckPurpose::Start {
                    r.say(RunEvent::StartCheck {
                        id,
                        passed: true,
                        reason: String::new(),
                    });
                }
                continue;
            }
            match purpose {
                CheckPurpose::Start => {
                    let reason = check.reason();
                    if was {
                        r.say(RunEvent::StartCheck {
                            id: id.clone(),
                            passed: false,
                            reason: reason.clone(),
                        });
                    }
                    self.ledger.check_failed(&id, reason, was);
                }
                CheckPurpose::Regression => {
                    let reason = format!("regression: {}", check.reason());
                    r.say(RunEvent::Regressed {
                        id: id.clone(),
                        reason: reason.clone(),
                    });
                    self.ledger.check_failed(&id, reason, true);
                    if let Some(it) = self.iter.as_mut() {
                        it.gained = it.gained.saturating_sub(1);
                    }
                    self.regressed += 1;
                }
            }
        }
        r.flush(Flush::Now);
        r
    }

    // ---- between iterations ---------------------------------------------------------------

    /// What comes next before an iteration: the run's end, or another iteration.
    pub fn next_step(&mut self) -> Step {
        if let Some(req) = self.request {
            return Step::End(req);
        }
        let failing: Vec<&crate::prd::Criterion> = self
            .doc
            .criteria
            .iter()
            .filter(|c| !self.ledger.passing(&c.id))
            .collect();
        if failing.is_empty() {
            return Step::End(End::Complete);
        }
        if failing.iter().all(|c| c.is_custom()) {
            return Step::End(End::Blocked);
        }
        if let Some((end, reason)) = &self.stop {
            self.pai.stop_reason = Some(reason.clone());
            return Step::End(*end);
        }
        if self.iterations_run >= self.max_iterations() {
            return Step::End(End::MaxIterations);
        }
        Step::Iterate
    }

    /// After an iteration: an interrupt, a request or the stall limit ends the run.
    pub fn after_iteration(&mut self, gained: usize) -> (Option<End>, Response) {
        let mut r = Response::default();
        self.iterations_run += 1;
        if self.interrupted() {
            return (Some(End::Interrupted), r);
        }
        if let Some(req) = self.request {
            return (Some(req), r);
        }
        self.stall = if gained == 0 { self.stall + 1 } else { 0 };
        let (p, t) = self.progress();
        if self.cfg.stall > 0 && self.stall >= self.cfg.stall && p < t {
            r.say(RunEvent::Warning(format!(
                "no criterion newly passed in {} iteration(s) in a row (--stall {}); stopping",
                self.stall, self.cfg.stall
            )));
            return (Some(End::Stalled), r);
        }
        (None, r)
    }

    /// Starts an iteration: every criterion failing now (but Custom ones) gets one attempt.
    pub fn begin_iteration(&mut self, now: Now) -> Response {
        let number = self.doc.front.iteration + 1;
        let (p0, total) = self.progress();
        let lanes = partition(
            self.doc
                .criteria
                .iter()
                .filter(|c| !self.ledger.passing(&c.id) && !c.is_custom())
                .map(|c| (c.id.as_str(), c.domain.as_str())),
            self.cfg.agents,
        );
        let to_try: usize = lanes.iter().map(|l| l.len()).sum();
        self.schedule = Schedule::new(&lanes);
        self.regressed = 0;
        self.iter = Some(Iteration {
            number,
            started_ms: now.ms,
            started: now.at,
            gained: 0,
            attempts: 0,
            cost: 0.0,
            usage: Default::default(),
        });
        let pai = &mut self.pai;
        pai.loop_iteration = number;
        pai.current_phase = "EXECUTE".into();
        pai.phase_started_at = now.ms;
        pai.phase_history.push(PhaseEntry {
            phase: "EXECUTE".into(),
            started_at: now.ms,
            completed_at: None,
            criteria_count: to_try,
            agent_count: lanes.len(),
        });
        pai.agents = lanes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let ids: Vec<String> = l.ids().map(String::from).collect();
                AgentState {
                    name: format!("agent-{}", i + 1),
                    agent_type: "loop-worker".into(),
                    status: AgentStatus::Idle,
                    task: format!("Criteria: {}", ids.join(", ")),
                    criteria_ids: ids,
                    phase: "EXECUTE".into(),
                    ..AgentState::default()
                }
            })
            .collect();
        let mut r = Response::default();
        r.say(RunEvent::IterationStarted {
            iteration: number,
            passing: p0,
            total,
            to_try,
            lanes: lanes.len(),
        });
        r.flush(Flush::Now);
        r
    }

    /// Whether the iteration has nothing left to wait for.
    pub fn iteration_settled(&self) -> bool {
        let can_launch = self.interrupts == 0 && self.request.is_none() && self.stop.is_none();
        !(self.schedule.any_running() || can_launch && self.schedule.work_waits())
    }

    /// Ends an iteration: its front matter, history and report. Returns what it gained.
    pub fn end_iteration(&mut self, now: Now) -> (usize, Response) {
        let mut r = Response::default();
        let Some(it) = self.iter.take() else {
            return (0, r);
        };
        let (p1, total) = self.progress();
        let mut front = vec![
            ("iteration", Value::Int(it.number)),
            (
                "updated",
                Value::Str(jiff::ZonedDateTime::now().date().to_string()),
            ),
            ("last_phase", Value::str("VERIFY")),
            ("failing_criteria", Value::List(self.failing_ids())),
            (
                "verification_summary",
                Value::Quoted(format!("{p1}/{total}")),
            ),
        ];
        if p1 == total {
            front.push(("status", Value::str("COMPLETE")));
        }
        r.front = front;
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
        for a in &mut self.pai.agents {
            a.status = AgentStatus::Complete;
            a.current_criterion = None;
        }
        self.pai.current_phase = "VERIFY".into();
        r.say(RunEvent::IterationEnded {
            iteration: it.number,
            passing: p1,
            total,
            gained: it.gained,
            regressed: self.regressed,
            cost: it.cost,
            workers: it.attempts,
            elapsed: now.at.saturating_duration_since(it.started),
        });
        r.flush(Flush::Now);
        (it.gained, r)
    }

    // ---- events ----------------------------------------------------------------------------

    /// Applies one event to the run state and says what to do about it.
    pub fn handle_event(&mut self, event: LoopEvent, now: Now) -> Response {
        match event {
            LoopEvent::WorkerDone(done) => self.worker_done(*done, now),
            LoopEvent::WorkerLost { lane, id, why } => self.worker_lost(lane, &id, &why),
            LoopEvent::ChecksDone { purpose, results } => self.checks_done(purpose, results),
            LoopEvent::Tick => Response {
                poll: true,
                ..Response::default()
            },
            LoopEvent::Request(end) => self.requested(end),
            LoopEvent::Disk(report) => self.disk_changed(report),
            LoopEvent::PauseOver => self.pause_over(),
            LoopEvent::Signal => self.interrupt(),
        }
    }

    /// Launches what the lanes and limits allow now.
    pub fn fill_lanes(&mut self, now: Now) -> Response {
        super::launch::fill(self, now)
    }

    fn requested(&mut self, end: End) -> Response {
        let mut r = Response::default();
        if self.request.is_some() {
            return r;
        }
        self.request = Some(end);
        if self.iter.is_some() {
            match end {
                End::StoppedByRequest => {
                    r.say(RunEvent::Notice(
                        "stop requested in the PRD: stopping the workers".into(),
                    ));
                    r.cancel = Some(Cancel::Graceful);
                }
                _ => r.say(RunEvent::Notice(
                    "pause requested in the PRD: letting running workers finish".into(),
                )),
            }
        }
        r
    }

    fn disk_changed(&mut self, report: super::prd_writer::SyncReport) -> Response {
        let mut r = Response::default();
        for w in report.warnings {
            r.say(RunEvent::Warning(w));
        }
        if let Some(end) = report.request {
            r.merge(self.requested(end));
        }
        self.check_commands(&mut r);
        r
    }

    fn pause_over(&mut self) -> Response {
        let mut r = Response::default();
        self.pause_until = None;
        self.pai.paused_until = None;
        r.say(RunEvent::Notice("resuming: workers start again".into()));
        r
    }

    fn interrupt(&mut self) -> Response {
        let mut r = Response::default();
        self.interrupts += 1;
        match self.interrupts {
            1 => {
                r.say(RunEvent::Notice(format!(
                    "interrupted: stopping the workers (up to {} grace); press Ctrl-C again to kill them now",
                    crate::report::duration(self.cfg.kill_grace)
                )));
                r.cancel = Some(Cancel::Graceful);
            }
            2 => {
                r.say(RunEvent::Notice("killing the workers now".into()));
                r.cancel = Some(Cancel::Kill);
            }
            _ => {
                r.exit_now = true;
                r.front = vec![("loopStatus", Value::str("paused"))];
                self.pai.active = false;
            }
        }
        r
    }

    /// The front matter and state at the run's end, and the summary.
    pub fn finish(&mut self, end: End, now: Now) -> Response {
        let mut r = Response::default();
        let (p, t) = self.progress();
        let failing = self.failing_ids();
        let mut front = vec![("loopStatus", Value::str(end.loop_status()))];
        if let Some(s) = end.prd_status() {
            front.push(("status", Value::str(s)));
        }
        if self.iterations_run == 0 {
            // Nothing ran: still leave an accurate summary in the front matter.
            front.push(("failing_criteria", Value::List(failing.clone())));
            front.push(("verification_summary", Value::Quoted(format!("{p}/{t}"))));
        }
        r.front = front;
        let pai = &mut self.pai;
        pai.active = false;
        pai.completed_at = Some(now.ms);
        pai.current_phase = end.phase().into();
        for a in &mut pai.agents {
            a.status = AgentStatus::Complete;
            a.current_criterion = None;
        }
        pai.summary = Some(format!(
            "{}: {p}/{t} criteria in {} iterations",
            end.word(),
            pai.loop_history.len()
        ));
        let reason = self.stop.as_ref().map(|(_, r)| r.clone());
        let title = self.title();
        let tally = Tally {
            passing: p,
            total: t,
            iterations: self.iterations_run,
            stall: self.cfg.stall,
            reason: reason.as_deref().unwrap_or(""),
            title: &title,
        };
        let (headline, tone) = end.headline(&tally, &failing);
        let rows = self
            .doc
            .criteria
            .iter()
            .map(|c| {
                let rec = self.ledger.get(&c.id).cloned().unwrap_or_default();
                Row {
                    id: c.id.clone(),
                    state: if rec.passing {
                        RowState::Pass(rec.verified_by.unwrap_or(VerifiedBy::Before))
                    } else if c.is_custom() {
                        RowState::NeedsPerson
                    } else {
                        RowState::Fail
                    },
                    attempts: rec.attempts,
                    cost: rec.cost,
                    regressions: rec.regressions,
                    last_failure: rec.last_failure,
                }
            })
            .collect();
        r.say(RunEvent::Finished(Box::new(Summary {
            end,
            headline,
            tone,
            passing: p,
            total: t,
            failing,
            rows,
            iterations: self.iterations_run,
            elapsed: now.at.saturating_duration_since(self.run_started),
            cost: self.ledger.total_cost,
            usage: self.ledger.usage,
            passed_in_run: self.ledger.passed_in_run(),
            reason,
            log_dir: self.log_dir.clone(),
            state: self.state_path(),
        })));
        r.flush(Flush::Now);
        r
    }

    /// The notification for the run's end.
    pub fn end_notification(&self, end: End) -> String {
        let (p, t) = self.progress();
        let title = self.title();
        let reason = self
            .stop
            .as_ref()
            .map(|(_, r)| r.clone())
            .unwrap_or_default();
        end.notification(&Tally {
            passing: p,
            total: t,
            iterations: self.iterations_run,
            stall: self.cfg.stall,
            reason: &reason,
            title: &title,
        })
    }

    pub(super) fn elapsed(&self, now: Now) -> Duration {
        now.at.saturating_duration_since(self.run_started)
    }
}
