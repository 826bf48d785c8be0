//! The loop. One owner (the `Runner`) holds the run state; workers run as tasks and report
//! back through their join handles; only the owner writes the PRD and the state file.

pub mod prompt;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::backend::Kind as backend_kind;
use crate::backend::verdict::{Exit, Verdict, verdict};
use crate::backend::{AgentFailure, Usage, classify};
use crate::config::RunConfig;
use crate::fsutil::write_atomic;
use crate::notify::Notifier;
use crate::plan::{Group, partition};
use crate::prd::{Prd, Value};
use crate::report::{self, bold, dim, green, red, yellow};
use crate::state::{
    self, AgentState, AttemptRecord, CriterionState, LoopEntry, PhaseEntry, SessionState, now_ms,
};
use crate::verify::{self, Check};
use crate::worker::{self, Cancel, Finished, SpawnError, Spec};
use crate::{env, exit};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Complete,
    Blocked,
    MaxIterations,
    Stalled,
    /// `loopStatus: paused` set by someone else.
    PausedByRequest,
    /// `loopStatus: stopped` set by someone else.
    StoppedByRequest,
    Interrupted,
    /// The agent cannot work (authentication or billing).
    AgentFatal,
    /// `--max-cost` reached.
    Budget,
    /// `--max-time` reached.
    TimeLimit,
    /// `--max-wait` spent waiting out limits.
    MaxWait,
}

impl End {
    fn code(self) -> u8 {
        match self {
            End::Complete => exit::SUCCESS,
            End::Blocked => exit::BLOCKED,
            End::Interrupted => exit::INTERRUPTED,
            End::AgentFatal => exit::AGENT_FATAL,
            _ => exit::FAILURE,
        }
    }

    fn loop_status(self) -> &'static str {
        match self {
            End::Complete | End::Blocked => "completed",
            End::MaxIterations | End::Stalled => "failed",
            End::PausedByRequest
            | End::Interrupted
            | End::AgentFatal
            | End::Budget
            | End::TimeLimit
            | End::MaxWait => "paused",
            End::StoppedByRequest => "stopped",
        }
    }

    /// The word in PAI's `summary` and the session name: the loop status, but `blocked`
    /// where the loop completed with only Custom criteria left.
    fn word(self) -> &'static str {
        match self {
            End::Blocked => "blocked",
            other => other.loop_status(),
        }
    }
}

/// What the runner knows of one criterion across the run.
#[derive(Debug, Clone, Default)]
struct Record {
    attempts: u32,
    last_failure: Option<String>,
    last_log: Option<PathBuf>,
    cost: f64,
    usage: Usage,
    turns: u64,
    /// Passed in this run (by a worker).
    passed_in_run: bool,
    /// How the current tick was established.
    verified_by: Option<&'static str>,
    regressions: u32,
    last_agent_failure: Option<String>,
    agent_failures: u32,
}

/// What a lane is working on.
#[derive(Debug, Default)]
struct LaneState {
    /// Groups not started yet, in order.
    queue: VecDeque<Group>,
    /// The group being worked through, with the ids left.
    current: Option<(String, VecDeque<String>)>,
    running: Option<String>,
}

impl LaneState {
    fn work_left(&self) -> usize {
        self.queue.iter().map(|g| g.ids.len()).sum::<usize>()
            + self.current.as_ref().map_or(0, |(_, ids)| ids.len())
    }
}

type WorkerResult = (
    usize,
    String,
    u64,
    std::result::Result<Finished, SpawnError>,
    Option<std::result::Result<Check, SpawnError>>,
);

struct Runner {
    cfg: RunConfig,
    session: String,
    doc: Prd,
    /// The PRD text as prdloop last wrote or read it.
    last_written: String,
    /// The boxes prdloop manages, as prdloop knows them.
    truth: HashMap<String, bool>,
    records: HashMap<String, Record>,
    state: SessionState,
    log_dir: PathBuf,
    cancel_tx: watch::Sender<Cancel>,
    interrupts: u8,
    /// `loopStatus` set to paused/stopped by someone else.
    request: Option<End>,
    iterations_run: u64,
    run_started: Instant,
    running_pids: HashMap<usize, u32>,
    last_state_save: Instant,
    /// Each runnable criterion's Verify command as it was when the run first saw it.
    commands: HashMap<String, String>,
    /// Criteria whose changed Verify command was already warned about.
    warned_changed: std::collections::HashSet<String>,
    /// No worker starts before this (a rate or usage limit, overload).
    pause_until: Option<tokio::time::Instant>,
    /// Transient agent failures in a row, for the backoff.
    backoff_level: u32,
    waited: Duration,
    /// Why no more workers start in this run (budget, time, agent failure), with its detail.
    stop: Option<(End, String)>,
    /// Finished workers (for estimating the next one's cost and duration).
    workers_done: u32,
    worker_time: Duration,
    notifier: Notifier,
    /// Set while the PRD on disk does not parse (with the parse error).
    prd_broken: Option<String>,
}

/// What one finished worker did to the run.
struct Applied {
    passed: bool,
    counted: bool,
    cost: f64,
    usage: Usage,
    agent_failure: Option<AgentFailure>,
}

/// The longest wait after a transient agent failure without a reset time.
const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);

/// Runs the loop; returns the exit code. The PRD must exist and the agent program be found.
/// `resume` continues an earlier session: its id, state file and attempt history.
pub async fn execute(cfg: RunConfig, resume: Option<SessionState>) -> Result<u8> {
    let session = resume.as_ref().map_or_else(
        || uuid::Uuid::new_v4().to_string(),
        |s| s.session_id.clone(),
    );
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let info = state::LockInfo {
        pid: std::process::id(),
        host: host.clone(),
        session_id: session.clone(),
        prd: cfg.prd_path.display().to_string(),
    };
    let lock = match state::PrdLock::acquire(&cfg.state_dir, &cfg.prd_path, &info)? {
        state::LockOutcome::Busy(holder) => {
            let who = state::LockInfo::describe(holder.as_ref());
            report::error(format!(
                "{} is already being run by {who}; stop it first (`prdloop stop`), or wait",
                cfg.prd_path.display()
            ));
            return Ok(exit::LOCKED);
        }
        state::LockOutcome::Acquired { lock, stale } => {
            if let Some(s) = stale.filter(|s| !s.session_id.is_empty()) {
                report::warn(format!(
                    "taking over {} from session {} (pid {} on {}), which ended without releasing it",
                    cfg.prd_path.display(),
                    s.session_id,
                    s.pid,
                    s.host
                ));
                mark_crashed(&cfg.state_dir, &s.session_id);
            }
            lock
        }
    };
    let result = run_locked(cfg, session, resume).await;
    lock.release();
    result
}

/// The signals that interrupt a run: Ctrl-C (SIGINT), SIGTERM (CI cancelling a job), and
/// SIGHUP (the terminal went away). Each is handled the same way.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> Result<Signals> {
        let on = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("failed to listen for {name}"))
        };
        Ok(Signals {
            int: on(SignalKind::interrupt(), "SIGINT")?,
            term: on(SignalKind::terminate(), "SIGTERM")?,
            hup: on(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
            _ = self.hup.recv() => {}
        }
    }
}

/// Marks a crashed session's state file inactive and ends the workers it left running
/// (those whose environment still names that session, so a reused pid is never hit).
fn mark_crashed(dir: &std::path::Path, session: &str) {
    let path = SessionState::path(dir, session);
    let Ok(mut s) = SessionState::load(&path) else {
        return;
    };
    for pid in s.agents.iter().filter_map(|a| a.pid) {
        if worker::unix::has_env(pid, env::WORKER_SESSION_ID, session) {
            report::warn(format!(
                "ending worker process group {pid} left by session {session}"
            ));
            worker::unix::kill_group(pid);
        }
    }
    if s.active {
        s.active = false;
        s.summary.get_or_insert_with(|| {
            "failed: the runner ended without saving (crash or SIGKILL)".into()
        });
        let _ = s.save(dir);
    }
}

async fn run_locked(cfg: RunConfig, session: String, resume: Option<SessionState>) -> Result<u8> {
    // First of all, so that a Ctrl-C from here on leaves everything in order.
    let mut sigs = Signals::listen()?;
    // A pause or stop request left from before this run is void.
    let _ = std::fs::remove_file(state::request_path(&cfg.state_dir, &cfg.prd_path));
    let text = std::fs::read_to_string(&cfg.prd_path)
        .with_context(|| format!("failed to read PRD at `{}`", cfg.prd_path.display()))?;
    let doc = Prd::parse(text.clone()).map_err(|e| anyhow::anyhow!(e.at(&cfg.prd_path)))?;
    if doc.front.loop_status.as_deref() == Some("running") {
        report::warn(format!(
            "{} says `loopStatus: running` but no live loop holds it (a crash?); taking over",
            cfg.prd_path.display()
        ));
    }
    let truth = doc
        .criteria
        .iter()
        .map(|c| (c.id.clone(), c.checked))
        .collect();
    let log_dir = cfg.state_dir.join(format!("{session}.logs"));
    let (cancel_tx, _) = watch::channel(Cancel::None);
    let mut r = Runner {
        state: SessionState::default(),
        session,
        doc,
        last_written: text,
        truth,
        records: HashMap::new(),
        log_dir,
        cancel_tx,
        interrupts: 0,
        request: None,
        iterations_run: 0,
        run_started: Instant::now(),
        running_pids: HashMap::new(),
        last_state_save: Instant::now(),
        commands: HashMap::new(),
        warned_changed: Default::default(),
        pause_until: None,
        backoff_level: 0,
        waited: Duration::ZERO,
        stop: None,
        workers_done: 0,
        worker_time: Duration::ZERO,
        notifier: Notifier::new(cfg.notify_url.clone(), cfg.voice_id.clone()),
        prd_broken: None,
        cfg,
    };
    r.pin_commands();
    r.init_state();
    if let Some(prev) = resume {
        r.restore(prev);
    }
    r.save_state();
    r.sync_prd(&[("loopStatus", Value::str("running"))])?;
    r.announce();
    let end = match r.main_loop(&mut sigs).await {
        Ok(end) => end,
        Err(e) => {
            // Leave the PRD and the state saying what happened, then report the error.
            let _ = r.sync_prd(&[("loopStatus", Value::str("failed"))]);
            r.state.active = false;
            r.state.summary = Some(format!("failed: {e:#}"));
            r.save_state();
            return Err(e);
        }
    };
    r.finish(end)?;
    if let Some(msg) = r.prd_broken.take() {
        anyhow::bail!(
            "{msg}: the PRD was edited into a broken state during the run and its results could not be written; fix it, then `prdloop resume` (results are in the state file)"
        );
    }
    Ok(end.code())
}

impl Runner {
    /// Takes over an earlier session's history: attempts, failure reasons, cost, iterations.
    fn restore(&mut self, prev: SessionState) {
        for c in &prev.criteria {
            let verified_by = match c.verified_by.as_deref() {
                Some("command") => Some("command"),
                Some("agent") => Some("agent"),
                _ => None,
            };
            self.records.insert(
                c.id.clone(),
                Record {
                    attempts: c.attempts,
                    last_failure: c.last_failure.clone(),
                    last_log: c.last_log.as_ref().map(PathBuf::from),
                    cost: c.cost_usd,
                    usage: c.usage,
                    turns: c.turns,
                    passed_in_run: false,
                    verified_by,
                    regressions: c.regressions,
                    last_agent_failure: c.last_agent_failure.clone(),
                    agent_failures: c.agent_failures,
                },
            );
        }
        self.state.algorithm_started_at = prev.algorithm_started_at;
        self.state.phase_history = prev.phase_history;
        self.state.loop_history = prev.loop_history;
        self.state.total_cost_usd = prev.total_cost_usd;
        self.state.usage = prev.usage;
        self.state.waited_ms = prev.waited_ms;
        self.refresh_criteria_state(&HashMap::new());
        let attempts: u32 = self.records.values().map(|r| r.attempts).sum();
        eprintln!(
            "{} session {}: {} earlier iteration(s), {attempts} attempt(s), ${:.4} spent",
            bold("resuming"),
            self.session,
            self.state.loop_history.len(),
            self.state.total_cost_usd
        );
    }

    /// One JSON event on stdout, when `--json` is on.
    fn emit(&self, event: &str, mut fields: serde_json::Value) {
        if !self.cfg.json {
            return;
        }
        if let Some(map) = fields.as_object_mut() {
            map.insert("event".into(), event.into());
            map.insert("session".into(), self.session.clone().into());
            map.insert("time".into(), now_ms().into());
        }
        let _ = report::stdout(&format!("{fields}\n"));
    }

    /// Reads a pause or stop request left by `prdloop pause|stop`.
    fn poll_request_file(&mut self) {
        let path = state::request_path(&self.cfg.state_dir, &self.cfg.prd_path);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return;
        };
        let _ = std::fs::remove_file(&path);
        if self.request.is_none() {
            self.request = match crate::commands::control::Ask::parse(&text) {
                Some(crate::commands::control::Ask::Pause) => Some(End::PausedByRequest),
                Some(crate::commands::control::Ask::Stop) => Some(End::StoppedByRequest),
                None => None,
            };
        }
    }

    fn max_iterations(&self) -> u64 {
        self.cfg
            .max_iterations
            .unwrap_or(self.doc.front.max_iterations.max(1))
    }

    fn title(&self) -> String {
        self.doc
            .title
            .clone()
            .or_else(|| self.doc.front.id.clone())
            .unwrap_or_else(|| "PRD".into())
    }

    fn progress(&self) -> (usize, usize) {
        let total = self.doc.criteria.len();
        let passing = self
            .doc
            .criteria
            .iter()
            .filter(|c| self.truth.get(&c.id).copied().unwrap_or(c.checked))
            .count();
        (passing, total)
    }

    fn init_state(&mut self) {
        let now = now_ms();
        let prd_path = self.cfg.prd_path.display().to_string();
        self.state = SessionState {
            active: true,
            session_id: self.session.clone(),
            task_description: format!("Loop: {}", self.title()),
            current_phase: "EXECUTE".into(),
            phase_started_at: now,
            algorithm_started_at: now,
            completed_at: None,
            sla: self.doc.front.effort_level.clone(),
            effort_level: self.doc.front.effort_level.clone(),
            criteria: Vec::new(),
            agents: Vec::new(),
            capabilities: ["Task Tool", "SDK", "Loop Runner"]
                .map(String::from)
                .to_vec(),
            prd_path: prd_path.clone(),
            loop_prd_path: prd_path,
            phase_history: Vec::new(),
            loop_mode: true,
            mode: "loop".into(),
            loop_iteration: self.doc.front.iteration,
            loop_max_iterations: self.max_iterations(),
            loop_prd_id: self.doc.front.id.clone().unwrap_or_default(),
            loop_history: Vec::new(),
            parallel_agents: self.cfg.agents,
            summary: None,
            prdloop_version: state::STATE_VERSION,
            total_cost_usd: 0.0,
            usage: Usage::default(),
            log_dir: self.log_dir.display().to_string(),
            workdir: self.cfg.workdir.display().to_string(),
            attempts_log: self.log_dir.join("attempts.jsonl").display().to_string(),
            pid: Some(std::process::id()),
            paused_until: None,
            waited_ms: 0,
            stop_reason: None,
        };
        self.refresh_criteria_state(&HashMap::new());
    }

    /// Rebuilds `state.criteria` from the document, the truth and the records.
    fn refresh_criteria_state(&mut self, in_progress: &HashMap<String, ()>) {
        self.state.criteria = self
            .doc
            .criteria
            .iter()
            .map(|c| {
                let rec = self.records.get(&c.id).cloned().unwrap_or_default();
                let passing = self.truth.get(&c.id).copied().unwrap_or(c.checked);
                let status = if in_progress.contains_key(&c.id) {
                    "in_progress"
                } else if passing {
                    "completed"
                } else if rec.attempts > 0 {
                    "failed"
                } else {
                    "pending"
                };
                CriterionState {
                    id: c.id.clone(),
                    description: c.description.clone(),
                    kind: if c.anti {
                        "anti-criterion"
                    } else {
                        "criterion"
                    }
                    .into(),
                    status: status.into(),
                    created_in_phase: "OBSERVE".into(),
                    attempts: rec.attempts,
                    last_failure: rec.last_failure.clone(),
                    last_log: rec.last_log.as_ref().map(|p| p.display().to_string()),
                    cost_usd: rec.cost,
                    usage: rec.usage,
                    turns: rec.turns,
                    verified_by: passing.then(|| rec.verified_by.unwrap_or("before").to_string()),
                    regressions: rec.regressions,
                    last_agent_failure: rec.last_agent_failure.clone(),
                    agent_failures: rec.agent_failures,
                }
            })
            .collect();
    }

    fn running_set(&self) -> HashMap<String, ()> {
        self.state
            .agents
            .iter()
            .filter_map(|a| a.current_criterion.clone())
            .map(|id| (id, ()))
            .collect()
    }

    fn save_state(&mut self) {
        let running = self.running_set();
        self.refresh_criteria_state(&running);
        let (p, t) = self.progress();
        self.state.task_description = format!(
            "Loop: {} [{p}/{t} iter {}]",
            self.doc.front.id.clone().unwrap_or_else(|| self.title()),
            self.state.loop_iteration
        );
        if let Err(e) = self.state.save(&self.cfg.state_dir) {
            report::warn(format!("could not write the state file: {e:#}"));
        }
        self.last_state_save = Instant::now();
    }

    fn set_session_name(&self, name: &str) {
        if let Err(e) = state::set_session_name(&self.cfg.session_names, &self.session, name) {
            tracing::warn!("could not update session names: {e:#}");
        }
    }

    fn announce(&self) {
        let (p, t) = self.progress();
        eprintln!(
            "{} {} {}",
            bold("prdloop"),
            self.doc.front.id.as_deref().unwrap_or(""),
            self.title()
        );
        eprintln!(
            "  {p}/{t} passing · up to {} agents · at most {} iterations · session {}",
            self.cfg.agents,
            self.max_iterations(),
            self.session
        );
        eprintln!(
            "  workdir {} · logs {}",
            self.cfg.workdir.display(),
            self.log_dir.display()
        );
        self.emit(
            "start",
            serde_json::json!({
                "prd": self.cfg.prd_path,
                "id": self.doc.front.id,
                "passing": p,
                "total": t,
                "agents": self.cfg.agents,
                "state": SessionState::path(&self.cfg.state_dir, &self.session),
                "logs": self.log_dir,
            }),
        );
        self.notifier.send(format!(
            "Starting loop on {}. {t} criteria, {p} already passing. {} parallel agents.",
            self.title(),
            self.cfg.agents
        ));
        self.set_session_name(&format!(
            "Loop: {} [{p}/{t} iter {}] ({} agents)",
            self.title(),
            self.doc.front.iteration,
            self.cfg.agents
        ));
    }

    /// Brings the PRD on disk up to date: merges outside edits (by criterion id), restores
    /// boxes of managed criteria changed by someone else, applies front matter edits, and
    /// writes atomically when anything changed.
    fn sync_prd(&mut self, edits: &[(&str, Value)]) -> Result<()> {
        let path = self.cfg.prd_path.clone();
        let disk = match read_settled(&path, &self.last_written) {
            Ok(t) => t,
            Err(e) => {
                report::warn(format!(
                    "cannot read {}: {e}; not writing it",
                    path.display()
                ));
                return Ok(());
            }
        };
        let mut doc = if disk == self.last_written {
            self.doc.clone()
        } else {
            match Prd::parse(disk.clone()) {
                Ok(d) => {
                    tracing::info!("{} changed on disk; merging", path.display());
                    self.note_outside_edits(&d);
                    d
                }
                Err(e) => {
                    let msg = e.at(&path);
                    if self.prd_broken.as_ref() != Some(&msg) {
                        report::warn(format!(
                            "{msg} — the PRD was edited into a broken state; prdloop will not write it until it parses"
                        ));
                    }
                    self.prd_broken = Some(msg);
                    return Ok(());
                }
            }
        };
        // New criteria (added by the user) become managed with their state on disk.
        for c in &doc.criteria {
            self.truth.entry(c.id.clone()).or_insert(c.checked);
        }
        self.doc_commands_check(&doc);
        let ids: Vec<(String, bool)> = doc
            .criteria
            .iter()
            .map(|c| (c.id.clone(), self.truth[&c.id]))
            .collect();
        for (id, checked) in ids {
            doc.set_checked(&id, checked);
        }
        doc.set_front(edits).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}: {} (after an edit; nothing written)",
                path.display(),
                e.line,
                e.message
            )
        })?;
        if doc.text() != disk {
            write_atomic(&path, doc.text().as_bytes())?;
        }
        self.last_written = doc.text().to_string();
        self.doc = doc;
        self.prd_broken = None;
        Ok(())
    }

    /// Pins the Verify command of every runnable criterion the run has not seen yet.
    fn pin_commands(&mut self) {
        for c in &self.doc.criteria {
            if let Some(cmd) = c.command(&crate::prd::VerifyTypes::default())
                && !c.is_custom()
            {
                self.commands
                    .entry(c.id.clone())
                    .or_insert_with(|| cmd.to_string());
            }
        }
    }

    /// New criteria get their command pinned; a changed command is warned about once and
    /// ignored: the command from when the run started still decides.
    fn doc_commands_check(&mut self, doc: &Prd) {
        for c in &doc.criteria {
            let now = c.command(&crate::prd::VerifyTypes::default());
            if !self.doc_has(&c.id) {
                // A criterion new to the run: its command as first seen decides.
                if let Some(cmd) = now {
                    self.commands
                        .entry(c.id.clone())
                        .or_insert_with(|| cmd.to_string());
                }
                continue;
            }
            let pinned = self.commands.get(&c.id).map(String::as_str);
            if now != pinned && !self.warned_changed.contains(&c.id) {
                let show =
                    |v: Option<&str>| v.map_or_else(|| "none".to_string(), |n| format!("`{n}`"));
                report::warn(format!(
                    "{}:{}: the Verify command of {} changed during the run (now {}); the original ({}) still decides",
                    self.cfg.prd_path.display(),
                    c.line,
                    c.id,
                    show(now),
                    show(pinned),
                ));
                self.warned_changed.insert(c.id.clone());
            }
        }
    }

    fn doc_has(&self, id: &str) -> bool {
        self.doc.criterion(id).is_some()
    }

    /// The pinned command that decides this criterion, when checks are on.
    fn command_for(&self, id: &str) -> Option<String> {
        if !self.cfg.verify {
            return None;
        }
        let c = self.doc.criterion(id)?;
        if c.is_custom() {
            return None;
        }
        self.commands.get(id).cloned()
    }

    fn verify_settings(&self, id: &str) -> verify::Settings {
        verify::Settings {
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
        }
    }

    /// Runs the Verify commands of `ids` in parallel (at most `-a` at once). Cancelled checks
    /// are left out of the result.
    async fn check_all(
        &mut self,
        ids: Vec<String>,
        label: &str,
        sigs: &mut Signals,
    ) -> Vec<(String, Check)> {
        let jobs: Vec<verify::Job> = ids
            .into_iter()
            .filter_map(|id| {
                let command = self.command_for(&id)?;
                Some(verify::Job {
                    settings: self.verify_settings(&id),
                    log: self.log_dir.join(format!("{label}-{id}-verify.log")),
                    command,
                    id,
                })
            })
            .collect();
        let fut = verify::check_many(jobs, self.cfg.agents, self.cancel_tx.subscribe());
        tokio::pin!(fut);
        let results = loop {
            tokio::select! {
                r = &mut fut => break r,
                _ = sigs.recv() => self.interrupt(),
            }
        };
        let mut out = Vec::new();
        for (id, r) in results {
            match r {
                Ok(check) if !check.cancelled() => out.push((id, check)),
                Ok(_) => {}
                Err(e) => report::warn(format!("could not run the Verify command of {id}: {e}")),
            }
        }
        // Report in document order.
        out.sort_by_key(|(id, _)| self.doc.criterion(id).map_or(usize::MAX, |c| c.line));
        out
    }

    /// At the start: every runnable criterion is checked once. A ticked one whose command
    /// fails is unticked; an unticked one whose command passes is ticked without an agent.
    async fn initial_checks(&mut self, sigs: &mut Signals) -> Result<()> {
        let ids: Vec<String> = self
            .doc
            .criteria
            .iter()
            .filter(|c| self.command_for(&c.id).is_some())
            .map(|c| c.id.clone())
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        eprintln!(
            "{}",
            dim(&format!("checking {} Verify command(s)…", ids.len()))
        );
        let results = self.check_all(ids, "start", sigs).await;
        for (id, check) in results {
            let was = self.truth[&id];
            let rec = self.records.entry(id.clone()).or_default();
            if check.passed() {
                rec.verified_by = Some("command");
                if !was {
                    eprintln!(
                        "  {id} {} its Verify command already passes: ticked without an agent",
                        green("PASS")
                    );
                }
                self.truth.insert(id, true);
            } else {
                let reason = check.reason();
                if was {
                    eprintln!(
                        "  {id} {} ticked, but its Verify command fails: unticked — {}",
                        red("FAIL"),
                        one_line(&reason, 200)
                    );
                    rec.regressions += 1;
                }
                rec.last_failure = Some(reason);
                rec.verified_by = None;
                self.truth.insert(id, false);
            }
        }
        self.sync_prd(&[])?;
        self.save_state();
        Ok(())
    }

    /// At the end of an iteration: the commands of all ticked runnable criteria run again; one
    /// that fails now is unticked (a regression). Returns how many regressed.
    async fn regression_checks(&mut self, sigs: &mut Signals) -> usize {
        let ids: Vec<String> = self
            .doc
            .criteria
            .iter()
            .filter(|c| self.truth[&c.id] && self.command_for(&c.id).is_some())
            .map(|c| c.id.clone())
            .collect();
        if ids.is_empty() || self.interrupts > 0 {
            return 0;
        }
        let mut regressed = 0;
        for (id, check) in self.check_all(ids, "regress", sigs).await {
            if check.passed() {
                continue;
            }
            regressed += 1;
            let reason = format!("regression: {}", check.reason());
            eprintln!(
                "  {id} {} its Verify command fails again: unticked — {}",
                red("REGRESSED"),
                one_line(&reason, 200)
            );
            self.emit(
                "regression",
                serde_json::json!({"criterion": id, "reason": reason}),
            );
            let rec = self.records.entry(id.clone()).or_default();
            rec.regressions += 1;
            rec.last_failure = Some(reason);
            rec.verified_by = None;
            self.truth.insert(id, false);
        }
        regressed
    }

    /// Warns about boxes changed by someone else and notes pause/stop requests.
    fn note_outside_edits(&mut self, disk: &Prd) {
        for c in &disk.criteria {
            if let Some(&known) = self.truth.get(&c.id)
                && known != c.checked
            {
                report::warn(format!(
                    "{}:{}: the box of {} was {} outside prdloop during the run; restored (prdloop alone ticks the boxes it manages)",
                    self.cfg.prd_path.display(),
                    c.line,
                    c.id,
                    if c.checked { "ticked" } else { "unticked" }
                ));
            }
        }
        let ours = self.doc.front.loop_status.as_deref();
        let theirs = disk.front.loop_status.as_deref();
        if theirs != ours && self.request.is_none() {
            match theirs {
                Some("paused") => self.request = Some(End::PausedByRequest),
                Some("stopped") => self.request = Some(End::StoppedByRequest),
                _ => {}
            }
        }
    }

    async fn main_loop(&mut self, sigs: &mut Signals) -> Result<End> {
        let mut stall = 0u64;
        if self.cfg.verify {
            self.initial_checks(sigs).await?;
            if self.interrupts > 0 {
                return Ok(End::Interrupted);
            }
        }
        loop {
            self.poll_request_file();
            self.sync_prd(&[])?;
            if let Some(msg) = &self.prd_broken {
                // No agent time is spent on a PRD whose results cannot be written.
                anyhow::bail!(
                    "{msg}: the PRD was edited into a broken state during the run; fix it, then `prdloop resume` continues (results so far are in the state file)"
                );
            }
            if let Some(req) = self.request {
                return Ok(req);
            }
            let failing: Vec<&crate::prd::Criterion> = self
                .doc
                .criteria
                .iter()
                .filter(|c| !self.truth[&c.id])
                .collect();
            if failing.is_empty() {
                return Ok(End::Complete);
            }
            if failing.iter().all(|c| c.is_custom()) {
                return Ok(End::Blocked);
            }
            if let Some((end, reason)) = &self.stop {
                self.state.stop_reason = Some(reason.clone());
                return Ok(*end);
            }
            if self.iterations_run >= self.max_iterations() {
                return Ok(End::MaxIterations);
            }
            let gained = self.iteration(sigs).await?;
            self.iterations_run += 1;
            if self.interrupts > 0 {
                return Ok(End::Interrupted);
            }

            if let Some(req) = self.request {
                return Ok(req);
            }
            stall = if gained == 0 { stall + 1 } else { 0 };
            if self.cfg.stall > 0
                && stall >= self.cfg.stall
                && self.progress().0 < self.progress().1
            {
                report::warn(format!(
                    "no criterion newly passed in {stall} iteration(s) in a row (--stall {}); stopping",
                    self.cfg.stall
                ));
                return Ok(End::Stalled);
            }
        }
    }

    /// One iteration: every criterion failing at its start gets one attempt. Returns how many
    /// criteria newly passed.
    async fn iteration(&mut self, sigs: &mut Signals) -> Result<usize> {
        let iter_no = self.doc.front.iteration + 1;
        let started = now_ms();
        let t0 = Instant::now();
        let (p0, total) = self.progress();
        let lanes = partition(
            self.doc
                .criteria
                .iter()
                .filter(|c| !self.truth[&c.id] && !c.is_custom())
                .map(|c| (c.id.as_str(), c.domain.as_str())),
            self.cfg.agents,
        );
        let to_try: usize = lanes.iter().map(|l| l.len()).sum();
        let mut lane_states: Vec<LaneState> = lanes
            .iter()
            .map(|l| LaneState {
                queue: l.groups.iter().cloned().collect(),
                ..Default::default()
            })
            .collect();
        self.state.loop_iteration = iter_no;
        self.state.current_phase = "EXECUTE".into();
        self.state.phase_started_at = started;
        self.state.phase_history.push(PhaseEntry {
            phase: "EXECUTE".into(),
            started_at: started,
            completed_at: None,
            criteria_count: to_try,
            agent_count: lanes.len(),
        });
        self.state.agents = lanes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let ids: Vec<String> = l.ids().map(String::from).collect();
                AgentState {
                    name: format!("agent-{}", i + 1),
                    agent_type: "loop-worker".into(),
                    status: "idle".into(),
                    task: format!("Criteria: {}", ids.join(", ")),
                    criteria_ids: ids,
                    phase: "EXECUTE".into(),
                    ..Default::default()
                }
            })
            .collect();
        self.save_state();
        eprintln!();
        eprintln!(
            "{} · {p0}/{total} passing · {to_try} to try in {} lane(s)",
            bold(&format!("── iteration {iter_no}")),
            lanes.len()
        );

        let mut set: JoinSet<WorkerResult> = JoinSet::new();
        let mut gained = 0usize;
        let mut attempts_this_iter = 0u32;
        let mut cost_this_iter = 0.0f64;
        let mut usage_this_iter = Usage::default();
        let mut launching = true;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;

        loop {
            let can_launch =
                launching && self.interrupts == 0 && self.request.is_none() && self.stop.is_none();
            let paused = self
                .pause_until
                .is_some_and(|t| t > tokio::time::Instant::now());
            if can_launch && !paused {
                for lane in 0..lane_states.len() {
                    if lane_states[lane].running.is_some() {
                        continue;
                    }
                    let Some(id) = next_for_lane(&mut lane_states, lane) else {
                        continue;
                    };
                    if self.limit_reached() {
                        let domain = self.doc.criterion(&id).map(|c| c.domain.clone());
                        requeue(&mut lane_states[lane], &id, domain);
                        break;
                    }
                    if self.launch(&mut set, lane, &id, iter_no) {
                        lane_states[lane].running = Some(id);
                    }
                }
            }
            let work_waits = lane_states.iter().any(|l| l.work_left() > 0);
            let can_launch = can_launch && self.stop.is_none();
            if set.is_empty() && !(can_launch && work_waits) {
                break;
            }
            let pause_end = self.pause_until.unwrap_or_else(tokio::time::Instant::now);
            tokio::select! {
                Some(joined) = set.join_next() => {
                    let Ok((lane, id, started_at, result, check)) = joined else { continue };
                    lane_states[lane].running = None;
                    self.running_pids.remove(&lane);
                    let a = self.finish_worker(lane, &id, iter_no, started_at, result, check)?;
                    if a.passed { gained += 1; }
                    if a.counted { attempts_this_iter += 1; }
                    cost_this_iter += a.cost;
                    usage_this_iter.add(&a.usage);
                    if let Some(failure) = a.agent_failure {
                        self.on_agent_failure(&failure);
                        if failure.kind.is_transient() {
                            requeue(&mut lane_states[lane], &id, self.doc.criterion(&id).map(|c| c.domain.clone()));
                        }
                    } else if a.counted {
                        self.backoff_level = 0;
                    }
                }
                _ = tokio::time::sleep_until(pause_end), if paused => {
                    self.pause_until = None;
                    self.state.paused_until = None;
                    eprintln!("{}", dim("resuming: workers start again"));
                }
                _ = sigs.recv() => self.interrupt(),
                _ = tick.tick() => {
                    // Notice outside edits and pause/stop requests while workers run.
                    let before = self.request;
                    self.poll_request_file();
                    self.sync_prd(&[])?;
                    if before.is_none() {
                        match self.request {
                            Some(End::StoppedByRequest) => {
                                eprintln!("{}", yellow("stop requested in the PRD: stopping the workers"));
                                let _ = self.cancel_tx.send(Cancel::Graceful);
                            }
                            Some(End::PausedByRequest) => {
                                eprintln!("{}", yellow("pause requested in the PRD: letting running workers finish"));
                            }
                            _ => {}
                        }
                    }
                    if self.last_state_save.elapsed() >= Duration::from_secs(30) {
                        self.save_state();
                    }
                }
            }
            if self.interrupts > 0 {
                launching = false;
            }
        }

        let regressed = if self.cfg.verify {
            self.regression_checks(sigs).await
        } else {
            0
        };
        let gained = gained.saturating_sub(regressed);

        // The iteration's front matter.
        let (p1, total) = self.progress();
        let failing: Vec<String> = self
            .doc
            .criteria
            .iter()
            .filter(|c| !self.truth[&c.id])
            .map(|c| c.id.clone())
            .collect();
        let today = jiff::ZonedDateTime::now().date().to_string();
        let mut edits = vec![
            ("iteration", Value::Int(iter_no)),
            ("updated", Value::Str(today)),
            ("last_phase", Value::str("VERIFY")),
            ("failing_criteria", Value::List(failing)),
            (
                "verification_summary",
                Value::Quoted(format!("{p1}/{total}")),
            ),
        ];
        if p1 == total {
            edits.push(("status", Value::str("COMPLETE")));
        }
        self.sync_prd(&edits)?;
        let now = now_ms();
        if let Some(ph) = self.state.phase_history.last_mut() {
            ph.completed_at = Some(now);
        }
        self.state.loop_history.push(LoopEntry {
            iteration: iter_no,
            started_at: started,
            completed_at: now,
            criteria_passing: p1,
            criteria_total: total,
            cost_usd: cost_this_iter,
            usage: usage_this_iter,
            attempts: attempts_this_iter,
        });
        for a in &mut self.state.agents {
            a.status = "complete".into();
            a.current_criterion = None;
        }
        self.state.current_phase = "VERIFY".into();
        self.save_state();
        self.set_session_name(&format!(
            "Loop: {} [{p1}/{total} iter {iter_no}] ({} agents)",
            self.title(),
            self.cfg.agents
        ));
        self.emit(
            "iteration_end",
            serde_json::json!({
                "iteration": iter_no,
                "passing": p1,
                "total": total,
                "gained": gained,
                "regressed": regressed,
                "costUsd": cost_this_iter,
                "workers": attempts_this_iter,
            }),
        );
        self.notifier.send(format!(
            "Iteration {iter_no} complete. {p1} of {total} passing. Gained {gained}."
        ));
        eprintln!(
            "{} {p1}/{total} passing (+{gained}) in {} · ${cost_this_iter:.4} · {attempts_this_iter} worker(s)",
            bold(&format!("── iteration {iter_no} done:")),
            report::duration(t0.elapsed())
        );
        Ok(gained)
    }

    fn interrupt(&mut self) {
        self.interrupts += 1;
        match self.interrupts {
            1 => {
                eprintln!(
                    "{}",
                    yellow(&format!(
                        "interrupted: stopping the workers (up to {} grace); press Ctrl-C again to kill them now",
                        report::duration(self.cfg.kill_grace)
                    ))
                );
                let _ = self.cancel_tx.send(Cancel::Graceful);
            }
            2 => {
                eprintln!("{}", yellow("killing the workers now"));
                let _ = self.cancel_tx.send(Cancel::Kill);
            }
            _ => {
                for pid in self.running_pids.values() {
                    worker::unix::kill_group(*pid);
                }
                let _ = self.sync_prd(&[("loopStatus", Value::str("paused"))]);
                self.state.active = false;
                self.save_state();
                std::process::exit(i32::from(exit::INTERRUPTED));
            }
        }
    }

    /// Starts a worker for `id`; false when the criterion is gone from the PRD (removed by
    /// someone during the iteration).
    fn launch(
        &mut self,
        set: &mut JoinSet<WorkerResult>,
        lane: usize,
        id: &str,
        iter_no: u64,
    ) -> bool {
        let Some(c) = self.doc.criterion(id).cloned() else {
            report::warn(format!("{id} is no longer in the PRD; skipped"));
            return false;
        };
        let rec = self.records.entry(id.to_string()).or_default();
        let attempt = rec.attempts + 1;
        let prev = rec.last_failure.clone();
        let command = self.command_for(id);
        let prompt = prompt::build(
            &self.doc,
            &self.cfg.prd_path,
            &self.cfg.workdir,
            &c,
            prev.as_deref(),
            command.as_deref(),
        );
        let log_path = self
            .log_dir
            .join(format!("iter{iter_no}-{id}-attempt{attempt}.log"));
        let spec = Spec {
            program: self.cfg.claude.bin.clone(),
            args: self.cfg.claude.args(),
            cwd: self.cfg.workdir.clone(),
            env: vec![
                (env::WORKER_SESSION_ID.into(), self.session.clone()),
                (
                    env::WORKER_PRD.into(),
                    self.cfg.prd_path.display().to_string(),
                ),
                (env::WORKER_ITERATION.into(), iter_no.to_string()),
                (env::WORKER_AGENT.into(), (lane + 1).to_string()),
                (env::WORKER_CRITERION.into(), id.to_string()),
                (env::WORKER_ATTEMPT.into(), attempt.to_string()),
            ],
            env_remove: vec![env::CLAUDECODE.into()],
            stdin: prompt.into_bytes(),
            log_path,
            timeout: self.cfg.timeout,
            kill_grace: self.cfg.kill_grace,
            format: self.cfg.claude.output_format(),
        };
        let rx = self.cancel_tx.subscribe();
        let started_at = now_ms();
        let id_owned = id.to_string();
        let settings = self.verify_settings(id);
        let verify_log = self
            .log_dir
            .join(format!("iter{iter_no}-{id}-attempt{attempt}-verify.log"));
        let pid = match worker::start(spec) {
            Ok(running) => {
                let pid = running.pid();
                set.spawn(async move {
                    let f = running.wait(rx.clone()).await;
                    // A claimed PASS on a runnable criterion is checked before it counts.
                    let check = match command {
                        Some(cmd) if verdict(&id_owned, &f.exit, &f.outcome).0.is_pass() => {
                            Some(verify::check(&cmd, &settings, &verify_log, rx).await)
                        }
                        _ => None,
                    };
                    (lane, id_owned, started_at, Ok(f), check)
                });
                Some(pid)
            }
            Err(e) => {
                set.spawn(async move { (lane, id_owned, started_at, Err(e), None) });
                None
            }
        };
        if let Some(pid) = pid {
            self.running_pids.insert(lane, pid);
        }
        if let Some(a) = self.state.agents.get_mut(lane) {
            a.status = "working".into();
            a.current_criterion = Some(id.to_string());
            a.started_at = Some(started_at);
            a.finished_at = None;
            // Recorded so that a run taking over after a crash can end this worker.
            a.pid = pid;
        }
        self.save_state();
        self.emit(
            "worker_start",
            serde_json::json!({"iteration": iter_no, "lane": lane + 1, "criterion": id, "attempt": attempt, "pid": pid}),
        );
        eprintln!(
            "  {} {} {}{}",
            dim(&format!("[lane {}]", lane + 1)),
            id,
            dim("started"),
            if attempt > 1 {
                dim(&format!(" (attempt {attempt})"))
            } else {
                String::new()
            }
        );
        true
    }

    /// Applies one worker's result. Returns (newly passed, counted as an attempt, cost, usage).
    fn finish_worker(
        &mut self,
        lane: usize,
        id: &str,
        iter_no: u64,
        started_at: u64,
        result: std::result::Result<Finished, SpawnError>,
        check: Option<std::result::Result<Check, SpawnError>>,
    ) -> Result<Applied> {
        let finished_at = now_ms();
        if let Some(a) = self.state.agents.get_mut(lane) {
            a.status = "idle".into();
            a.current_criterion = None;
            a.finished_at = Some(finished_at);
            a.pid = None;
        }
        let lane_tag = dim(&format!("[lane {}]", lane + 1));
        let f = match result {
            Ok(f) => f,
            Err(e) => {
                let reason = format!("{e}");
                let rec = self.records.entry(id.to_string()).or_default();
                rec.attempts += 1;
                rec.last_failure = Some(reason.clone());
                eprintln!("  {lane_tag} {id} {} {reason}", red("FAIL"));
                self.save_state();
                return Ok(Applied {
                    passed: false,
                    counted: true,
                    cost: 0.0,
                    usage: Usage::default(),
                    agent_failure: None,
                });
            }
        };
        if f.exit == Exit::Cancelled {
            eprintln!(
                "  {lane_tag} {id} {} after {}",
                yellow("cancelled"),
                report::duration(f.duration)
            );
            self.save_state();
            return Ok(Applied {
                passed: false,
                counted: false,
                cost: 0.0,
                usage: Usage::default(),
                agent_failure: None,
            });
        }
        if matches!(&check, Some(Ok(c)) if c.cancelled()) {
            eprintln!(
                "  {lane_tag} {id} {} while its Verify command ran",
                yellow("cancelled")
            );
            // The worker itself finished: what it cost counts.
            let cost = f.outcome.cost_usd.unwrap_or(0.0);
            self.state.total_cost_usd += cost;
            self.state.usage.add(&f.outcome.usage);
            self.save_state();
            return Ok(Applied {
                passed: false,
                counted: false,
                cost,
                usage: f.outcome.usage,
                agent_failure: None,
            });
        }
        self.workers_done += 1;
        self.worker_time += f.duration;
        let now_s = (now_ms() / 1000) as i64;
        if let Some(failure) = classify(&f.exit, &f.outcome, &f.stderr_tail, now_s) {
            return Ok(self.apply_agent_failure(lane, id, iter_no, started_at, &f, failure));
        }
        let (v, warnings) = verdict(id, &f.exit, &f.outcome);
        for w in warnings {
            report::warn(w);
        }
        if !f.outcome.permission_denials.is_empty() {
            report::warn(format!(
                "the worker for {id} was refused tools ({}); check --permission-mode and --allowed-tools",
                f.outcome.permission_denials.join(", ")
            ));
        }
        let mut verified_by = "agent";
        let v = match (v, check) {
            (Verdict::Fail(reason), _) => Verdict::Fail(with_stderr_hint(reason, &f)),
            (Verdict::Pass, Some(Ok(c))) if c.passed() => {
                verified_by = "command";
                Verdict::Pass
            }
            (Verdict::Pass, Some(Ok(c))) => Verdict::Fail(format!(
                "the agent said PASS, but its Verify command {}",
                c.reason()
            )),
            (Verdict::Pass, Some(Err(e))) => {
                Verdict::Fail(format!("the Verify command could not be run: {e}"))
            }
            (Verdict::Pass, None) => Verdict::Pass,
        };
        let cost = f.outcome.cost_usd.unwrap_or(0.0);
        let usage = f.outcome.usage;
        let log_path = self.log_dir.join(format!(
            "iter{iter_no}-{id}-attempt{}.log",
            self.records.get(id).map_or(1, |r| r.attempts + 1)
        ));
        let rec = self.records.entry(id.to_string()).or_default();
        rec.attempts += 1;
        rec.cost += cost;
        rec.usage.add(&usage);
        rec.turns += f.outcome.num_turns.unwrap_or(0);
        rec.last_log = Some(log_path.clone());
        let passed = v.is_pass();
        match &v {
            Verdict::Pass => {
                rec.last_failure = None;
                rec.passed_in_run = true;
                rec.verified_by = Some(verified_by);
            }
            Verdict::Fail(reason) => rec.last_failure = Some(reason.clone()),
        }
        self.state.total_cost_usd += cost;
        self.state.usage.add(&usage);
        self.record_attempt(
            (lane, id, iter_no, started_at),
            &f,
            if passed { "pass" } else { "fail" },
            match &v {
                Verdict::Fail(r) => Some(r.clone()),
                Verdict::Pass => None,
            },
            None,
            &log_path,
        );
        if passed {
            self.truth.insert(id.to_string(), true);
        }
        self.sync_prd(&[])?;
        self.save_state();
        let cost_s = f
            .outcome
            .cost_usd
            .filter(|c| *c > 0.0)
            .map(|c| format!(" ${c:.4}"))
            .unwrap_or_default();
        match v {
            Verdict::Pass => eprintln!(
                "  {lane_tag} {id} {} {}{cost_s}",
                green("PASS"),
                report::duration(f.duration)
            ),
            Verdict::Fail(reason) => eprintln!(
                "  {lane_tag} {id} {} {}{cost_s}: {}",
                red("FAIL"),
                report::duration(f.duration),
                one_line(&reason, 200)
            ),
        }
        Ok(Applied {
            passed,
            counted: true,
            cost,
            usage,
            agent_failure: None,
        })
    }

    /// A worker whose agent failed (not the criterion): the attempt does not count and the box
    /// is untouched; the cost still counts.
    fn apply_agent_failure(
        &mut self,
        lane: usize,
        id: &str,
        iter_no: u64,
        started_at: u64,
        f: &Finished,
        failure: AgentFailure,
    ) -> Applied {
        let cost = f.outcome.cost_usd.unwrap_or(0.0);
        let usage = f.outcome.usage;
        let attempt = self.records.get(id).map_or(1, |r| r.attempts + 1);
        let log_path = self
            .log_dir
            .join(format!("iter{iter_no}-{id}-attempt{attempt}.log"));
        let text = format!("{}: {}", failure.kind.label(), one_line(&failure.text, 300));
        let rec = self.records.entry(id.to_string()).or_default();
        rec.cost += cost;
        rec.usage.add(&usage);
        rec.agent_failures += 1;
        rec.last_agent_failure = Some(text.clone());
        rec.last_log = Some(log_path.clone());
        if !failure.kind.is_transient() {
            // Why the last try came to nothing helps the next prompt.
            rec.last_failure = Some(text.clone());
        }
        self.state.total_cost_usd += cost;
        self.state.usage.add(&usage);
        self.record_attempt(
            (lane, id, iter_no, started_at),
            f,
            "agent_failure",
            Some(text.clone()),
            Some(failure.clone()),
            &log_path,
        );
        self.save_state();
        eprintln!(
            "  {} {id} {} {} (not counted as an attempt): {}",
            dim(&format!("[lane {}]", lane + 1)),
            yellow("AGENT"),
            report::duration(f.duration),
            one_line(&text, 200)
        );
        Applied {
            passed: false,
            counted: false,
            cost,
            usage,
            agent_failure: Some(failure),
        }
    }

    /// Appends one worker run to the attempts log.
    fn record_attempt(
        &self,
        (lane, id, iter_no, started_at): (usize, &str, u64, u64),
        f: &Finished,
        verdict: &str,
        reason: Option<String>,
        agent_failure: Option<AgentFailure>,
        log_path: &std::path::Path,
    ) {
        let record = AttemptRecord {
            iteration: iter_no,
            criterion: id.to_string(),
            agent: lane + 1,
            started_at,
            finished_at: now_ms(),
            verdict: verdict.into(),
            reason,
            agent_failure,
            exit: serde_json::to_value(&f.exit).unwrap_or_default(),
            cost_usd: f.outcome.cost_usd.unwrap_or(0.0),
            usage: f.outcome.usage,
            turns: f.outcome.num_turns.unwrap_or(0),
            permission_denials: f.outcome.permission_denials.clone(),
            log: log_path.display().to_string(),
        };
        if let Err(e) =
            state::append_attempt(std::path::Path::new(&self.state.attempts_log), &record)
        {
            report::warn(format!("could not record the attempt: {e:#}"));
        }
        self.emit(
            "worker_end",
            serde_json::json!({
                "iteration": iter_no,
                "lane": lane + 1,
                "criterion": id,
                "verdict": record.verdict,
                "reason": record.reason,
                "agentFailure": record.agent_failure,
                "durationMs": f.duration.as_millis() as u64,
                "costUsd": record.cost_usd,
                "log": record.log,
            }),
        );
    }

    /// Acts on an agent failure: fatal ones stop the run; transient ones pause every lane.
    fn on_agent_failure(&mut self, failure: &AgentFailure) {
        let kind = failure.kind;
        if kind.is_fatal() {
            let advice = match kind {
                backend_kind::Auth => {
                    "log in (`claude /login`) or set a valid ANTHROPIC_API_KEY, then run again"
                }
                _ => "add credits to the account, then run again",
            };
            if self.stop.is_none() {
                report::error(format!(
                    "{}: {} — the agent cannot work, retrying cannot help; {advice}",
                    kind.label(),
                    one_line(&failure.text, 300)
                ));
                self.stop = Some((
                    End::AgentFatal,
                    format!("{}: {}", kind.label(), one_line(&failure.text, 300)),
                ));
                let _ = self.cancel_tx.send(Cancel::Graceful);
            }
            return;
        }
        if !kind.is_transient() {
            return;
        }
        let now_s = (now_ms() / 1000) as i64;
        let delay = match failure.resets_at {
            // One second past the reset, so the limit is really over.
            Some(at) if at > now_s => Duration::from_secs((at - now_s) as u64 + 1),
            Some(_) => Duration::from_secs(1),
            None => backoff(self.cfg.retry_backoff, self.backoff_level),
        };
        self.backoff_level += 1;
        let until = tokio::time::Instant::now() + delay;
        let extension = match self.pause_until {
            Some(current) if current >= until => return,
            Some(current) if current > tokio::time::Instant::now() => until - current,
            _ => delay,
        };
        if self.waited + extension > self.cfg.max_wait {
            if self.stop.is_none() {
                let msg = format!(
                    "{} again; waiting {} more would pass --max-wait {} (already waited {})",
                    kind.label(),
                    report::duration(extension),
                    report::duration(self.cfg.max_wait),
                    report::duration(self.waited)
                );
                report::warn(format!("{msg}; stopping with the state saved for resume"));
                self.stop = Some((End::MaxWait, msg));
            }
            return;
        }
        self.waited += extension;
        self.pause_until = Some(until);
        let until_ms = now_ms() + delay.as_millis() as u64;
        self.state.paused_until = Some(until_ms);
        self.state.waited_ms = self.waited.as_millis() as u64;
        let clock = jiff::Timestamp::from_millisecond(until_ms as i64)
            .map(|t| {
                t.to_zoned_datetime(jiff::tz::TimeZone::system())
                    .strftime("%H:%M:%S")
                    .to_string()
            })
            .unwrap_or_default();
        eprintln!(
            "{}",
            yellow(&format!(
                "{}: no worker starts until {clock} (in {}); the attempt is retried then",
                kind.label(),
                report::duration(delay)
            ))
        );
        self.save_state();
    }

    /// Whether the budget or the time limit forbids starting another worker; records why.
    fn limit_reached(&mut self) -> bool {
        if self.stop.is_some() {
            return true;
        }
        let done = f64::from(self.workers_done.max(1));
        if let Some(max) = self.cfg.max_cost {
            let spent = self.state.total_cost_usd;
            let next = if self.workers_done == 0 {
                0.0
            } else {
                spent / done
            };
            if spent + next > max {
                let msg = format!(
                    "spent ${spent:.4} of --max-cost ${max:.2}; the next worker could pass it (about ${next:.4} each)"
                );
                eprintln!("{}", yellow(&format!("budget: {msg}; no new workers")));
                self.stop = Some((End::Budget, msg));
                return true;
            }
        }
        if let Some(max) = self.cfg.max_time {
            let elapsed = self.run_started.elapsed();
            let next = if self.workers_done == 0 {
                Duration::ZERO
            } else {
                self.worker_time.div_f64(done)
            };
            if elapsed + next > max {
                let msg = format!(
                    "ran {} of --max-time {}; the next worker could pass it (about {} each)",
                    report::duration(elapsed),
                    report::duration(max),
                    report::duration(next)
                );
                eprintln!("{}", yellow(&format!("time: {msg}; no new workers")));
                self.stop = Some((End::TimeLimit, msg));
                return true;
            }
        }
        false
    }

    fn finish(&mut self, end: End) -> Result<()> {
        let (p, t) = self.progress();
        let mut edits = vec![("loopStatus", Value::str(end.loop_status()))];
        match end {
            End::Complete => edits.push(("status", Value::str("COMPLETE"))),
            End::Blocked => edits.push(("status", Value::str("BLOCKED"))),
            _ => {}
        }
        let failing: Vec<String> = self
            .doc
            .criteria
            .iter()
            .filter(|c| !self.truth[&c.id])
            .map(|c| c.id.clone())
            .collect();
        if self.iterations_run == 0 {
            // Nothing ran: still leave an accurate summary in the front matter.
            edits.push(("failing_criteria", Value::List(failing.clone())));
            edits.push(("verification_summary", Value::Quoted(format!("{p}/{t}"))));
        }
        self.sync_prd(&edits)?;
        let now = now_ms();
        self.state.active = false;
        self.state.completed_at = Some(now);
        self.state.current_phase = match end {
            End::Complete => "COMPLETE",
            End::PausedByRequest
            | End::Interrupted
            | End::AgentFatal
            | End::Budget
            | End::TimeLimit
            | End::MaxWait => "PLAN",
            _ => "VERIFY",
        }
        .into();
        for a in &mut self.state.agents {
            a.status = "complete".into();
            a.current_criterion = None;
        }
        let iters = self.state.loop_history.len();
        self.state.summary = Some(format!(
            "{}: {p}/{t} criteria in {iters} iterations",
            end.word()
        ));
        self.save_state();
        self.set_session_name(&format!("Loop: {} [{}]", self.title(), end.word_upper()));
        self.print_summary(end, &failing);
        self.emit(
            "end",
            serde_json::json!({
                "outcome": end.word(),
                "exitCode": end.code(),
                "passing": p,
                "total": t,
                "failing": failing,
                "iterations": self.iterations_run,
                "costUsd": self.state.total_cost_usd,
                "usage": self.state.usage,
                "reason": self.stop.as_ref().map(|(_, r)| r.clone()),
                "state": SessionState::path(&self.cfg.state_dir, &self.session),
            }),
        );
        let title = self.title();
        let reason = self
            .stop
            .as_ref()
            .map(|(_, r)| r.clone())
            .unwrap_or_default();
        self.notifier.send(match end {
            End::Complete => format!("Loop complete on {title}. All {t} criteria passing."),
            End::Blocked => {
                format!("Loop blocked on {title}. {p} of {t} passing; the rest need a person.")
            }
            End::MaxIterations => {
                format!("Loop reached its iteration limit on {title}. {p} of {t} passing.")
            }
            End::Stalled => format!(
                "Loop stalled on {title}. {p} of {t} passing, no progress in {} iterations.",
                self.cfg.stall
            ),
            End::PausedByRequest | End::Interrupted => {
                format!("Loop paused on {title}. {p} of {t} passing.")
            }
            End::StoppedByRequest => format!("Loop stopped on {title}. {p} of {t} passing."),
            End::AgentFatal => format!("Loop stopped on {title}: the agent cannot work. {reason}."),
            End::Budget | End::TimeLimit | End::MaxWait => {
                format!("Loop paused on {title}: {reason}. {p} of {t} passing.")
            }
        });
        // Fire and forget, but give the last message a moment to leave (less when the user
        // is waiting on Ctrl-C).
        let bound = if end == End::Interrupted { 300 } else { 1000 };
        self.notifier.finish(Duration::from_millis(bound));
        Ok(())
    }

    fn print_summary(&self, end: End, failing: &[String]) {
        let (p, t) = self.progress();
        eprintln!();
        let headline = match end {
            End::Complete => green(&format!("complete: all {t} criteria pass")),
            End::Blocked => yellow(&format!(
                "blocked: {p}/{t} pass; the rest need a person (Verify: Custom): {}",
                failing.join(", ")
            )),
            End::MaxIterations => red(&format!(
                "not complete: {p}/{t} pass after {} iteration(s) (the -n limit)",
                self.iterations_run
            )),
            End::Stalled => red(&format!(
                "stalled: {p}/{t} pass; no progress in {} iteration(s)",
                self.cfg.stall
            )),
            End::PausedByRequest => yellow(&format!("paused by request: {p}/{t} pass")),
            End::StoppedByRequest => yellow(&format!("stopped by request: {p}/{t} pass")),
            End::Interrupted => yellow(&format!("interrupted: {p}/{t} pass; the PRD is paused")),
            End::AgentFatal | End::Budget | End::TimeLimit | End::MaxWait => red(&format!(
                "stopped: {}; {p}/{t} pass; the PRD is paused",
                self.stop.as_ref().map_or("", |(_, r)| r.as_str())
            )),
        };
        eprintln!("{}", bold(&headline));
        for c in &self.doc.criteria {
            let rec = self.records.get(&c.id).cloned().unwrap_or_default();
            let passing = self.truth[&c.id];
            let state = if passing {
                green(match rec.verified_by {
                    Some("command") => "pass (checked)",
                    Some(_) => "pass (agent-verified)",
                    None => "pass (ticked before the run)",
                })
            } else if c.is_custom() {
                yellow("needs a person")
            } else {
                red("fail")
            };
            let mut line = format!("  {:<16} {}", c.id, state);
            if rec.attempts > 0 {
                line.push_str(&format!(
                    " · {} attempt(s){}",
                    rec.attempts,
                    if rec.cost > 0.0 {
                        format!(", ${:.4}", rec.cost)
                    } else {
                        String::new()
                    }
                ));
            }
            if rec.regressions > 0 {
                line.push_str(&format!(", {} regression(s)", rec.regressions));
            }
            if !passing && let Some(r) = &rec.last_failure {
                line.push_str(&format!(" — {}", one_line(r, 160)));
            }
            eprintln!("{line}");
        }
        let u = &self.state.usage;
        let passed_in_run = self.records.values().filter(|r| r.passed_in_run).count();
        let per_pass = if passed_in_run > 0 && self.state.total_cost_usd > 0.0 {
            format!(
                " (${:.4} per passed criterion)",
                self.state.total_cost_usd / passed_in_run as f64
            )
        } else {
            String::new()
        };
        eprintln!(
            "  cost ${:.4}{per_pass} · tokens {} in, {} out, {} cache read · {} in {}",
            self.state.total_cost_usd,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            plural(self.iterations_run, "iteration"),
            report::duration(self.run_started.elapsed())
        );
        eprintln!("  logs  {}", self.log_dir.display());
        eprintln!(
            "  state {}",
            SessionState::path(&self.cfg.state_dir, &self.session).display()
        );
    }
}

impl End {
    fn word_upper(self) -> String {
        match self {
            End::Complete => "COMPLETE".into(),
            other => other.word().to_ascii_uppercase(),
        }
    }
}

/// Reads the PRD. When it differs from what prdloop last wrote, someone else is writing it,
/// maybe not atomically: read again until two reads a moment apart agree, so that a half-written
/// file is never taken as the user's text (and written back).
fn read_settled(path: &std::path::Path, last_written: &str) -> std::io::Result<String> {
    let mut text = std::fs::read_to_string(path)?;
    if text == last_written {
        return Ok(text);
    }
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(25));
        let again = std::fs::read_to_string(path)?;
        if again == text {
            return Ok(text);
        }
        text = again;
    }
    Ok(text)
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// A failure with no detail of its own gets the last line the agent wrote on stderr.
fn with_stderr_hint(reason: String, f: &Finished) -> String {
    let generic =
        reason.starts_with("the agent exited with status") || reason.starts_with("no `RESULT");
    match f.stderr_tail.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(last) if generic => format!("{reason} (stderr: {})", one_line(last, 200)),
        _ => reason,
    }
}

/// Puts an attempt that the agent could not make back at the front of its lane.
fn requeue(lane: &mut LaneState, id: &str, domain: Option<String>) {
    match lane.current.as_mut() {
        Some((_, ids)) => ids.push_front(id.to_string()),
        None => lane.current = Some((domain.unwrap_or_default(), VecDeque::from([id.to_string()]))),
    }
}

/// Exponential backoff from `start`, doubling per failure in a row, capped at 15 minutes,
/// with ±20% jitter so that many runners do not retry in step.
fn backoff(start: Duration, level: u32) -> Duration {
    let base = start.saturating_mul(1u32 << level.min(16)).min(MAX_BACKOFF);
    let r = (uuid::Uuid::new_v4().as_u128() % 1000) as f64 / 1000.0; // 0..1
    base.mul_f64(0.8 + 0.4 * r).min(MAX_BACKOFF)
}

/// The next criterion for a lane: the rest of its current group, then its next group, then a
/// whole unstarted group taken from the lane with the most work left.
fn next_for_lane(lanes: &mut [LaneState], lane: usize) -> Option<String> {
    loop {
        if let Some((_, ids)) = lanes[lane].current.as_mut() {
            if let Some(id) = ids.pop_front() {
                return Some(id);
            }
            lanes[lane].current = None;
        }
        if let Some(g) = lanes[lane].queue.pop_front() {
            lanes[lane].current = Some((g.domain, g.ids.into()));
            continue;
        }
        let donor = (0..lanes.len())
            .filter(|&i| i != lane && !lanes[i].queue.is_empty())
            .max_by_key(|&i| (lanes[i].work_left(), std::cmp::Reverse(i)))?;
        let g = lanes[donor]
            .queue
            .pop_back()
            .expect("donor has a queued group");
        tracing::debug!(
            "lane {} takes domain {} from lane {}",
            lane + 1,
            g.domain,
            donor + 1
        );
        lanes[lane].current = Some((g.domain, g.ids.into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(groups: &[(&str, usize)]) -> LaneState {
        LaneState {
            queue: groups
                .iter()
                .map(|(d, n)| Group {
                    domain: d.to_string(),
                    ids: (0..*n).map(|i| format!("ISC-{d}-{i}")).collect(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn idle_lane_steals_a_whole_unstarted_group() {
        let mut lanes = vec![lane(&[("A", 3), ("B", 1), ("C", 1)]), lane(&[("D", 1)])];
        assert_eq!(next_for_lane(&mut lanes, 0).as_deref(), Some("ISC-A-0"));
        assert_eq!(next_for_lane(&mut lanes, 1).as_deref(), Some("ISC-D-0"));
        // Lane 2 is out of work: it takes C (lane 1's last unstarted group), never part of A.
        assert_eq!(next_for_lane(&mut lanes, 1).as_deref(), Some("ISC-C-0"));
        assert_eq!(next_for_lane(&mut lanes, 1).as_deref(), Some("ISC-B-0"));
        assert_eq!(next_for_lane(&mut lanes, 1), None);
        assert_eq!(next_for_lane(&mut lanes, 0).as_deref(), Some("ISC-A-1"));
        assert_eq!(next_for_lane(&mut lanes, 0).as_deref(), Some("ISC-A-2"));
        assert_eq!(next_for_lane(&mut lanes, 0), None);
    }
}
