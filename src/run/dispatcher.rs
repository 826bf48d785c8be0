//! The dispatcher: the loop's one owner of the run state. It runs the phases (start checks,
//! iterations, regression checks, the end), turns what happens (a worker's end, a tick, a
//! signal, a pause running out) into a `LoopEvent` for `Core::handle_event`, and carries out
//! the `Effects` it returns, in their order: workers started or stopped, files written
//! (coalesced), lines reported; what they lead to comes back as events, handled in turn.

use crate::run::warning::Warning;
use std::collections::HashMap;
use std::time::Duration;

use anyhow::Result;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::core::{Core, Now, Step};
use super::end::End;
use super::event::{
    CheckPurpose, Effect, Effects, Flush, LoopEvent, RunEvent, Slot, SyncReport, WorkerDone,
};
use super::prd_writer::{PrdWriter, Settled};
use super::reporter::Reporter;
use super::store::SessionStore;
use crate::notify::{self, Kind, Note, Notifier};
use crate::platform::{self, Signals};
use crate::prd::Value;
use crate::worker::Cancel;
use crate::{exit, state, verify};

/// How long changes may wait before the PRD and the state file are written: many workers
/// ending close together cost one write.
const COALESCE: Duration = Duration::from_millis(100);
/// A write costs time in proportion to the PRD's size: the wait before the next one is at
/// least this many times the last one's duration, so that writing stays a small share of the
/// runner's time whatever the size. The duration is the wall time, the syncs included, so a
/// slow disk lengthens the wait for a small PRD too: a write of 30 criteria took about 2 ms
/// on an idle machine, the sync most of it. A larger share (50) was tried for very large
/// PRDs and dropped: it lengthened the wait for every PRD on a loaded machine.
const FLUSH_SHARE: u32 = 20;
/// The state file is rewritten at least this often (PAI's hook marks stale files inactive).
const STATE_HEARTBEAT: Duration = Duration::from_secs(30);

mod disk;
mod ending;
mod workers;

/// A running worker, as the dispatcher holds it.
struct Handle {
    /// Its criterion (named if its task panics).
    criterion: String,
    /// Its process group, for the third Ctrl-C.
    pid: Option<u32>,
    /// Its own cancel (best-of-N ends a lane's samples when one wins).
    cancel: watch::Sender<Cancel>,
}

pub struct Dispatcher {
    pub core: Core,
    pub writer: PrdWriter,
    store: SessionStore,
    reporter: Reporter,
    /// What each running worker's agent is doing, on disk for the dashboard.
    activity: crate::serve::publish::Publisher,
    notifier: Notifier,
    sigs: Signals,
    cancel_tx: watch::Sender<Cancel>,
    workers: JoinSet<WorkerDone>,
    /// Each running worker's handle, by its slot.
    handles: HashMap<Slot, Handle>,
    /// Each running worker's task, to name a worker whose task panicked.
    tasks: HashMap<tokio::task::Id, Slot>,
    /// Front matter edits waiting for the next PRD write.
    front: Vec<(&'static str, Value)>,
    flush_at: Option<Instant>,
    /// The PRD's lock, released when the dispatcher is done (also on the third Ctrl-C).
    pub lock: Option<crate::state::PrdLock>,
    /// The run state changed since the state file was last written.
    dirty: bool,
    /// The coalescing window: `COALESCE`, or longer after a slow write.
    flush_gap: Duration,
    last_save: Instant,
    /// The other sub-loops of this process (`prdloop run A.md B.md`), or a worker cap.
    group: Option<super::group::Link>,
    /// The question book's modification time when it was last read: it is read again when
    /// that changes (an answer came).
    book_seen: Option<(std::time::SystemTime, u64)>,
}

impl Dispatcher {
    pub fn new(core: Core, writer: PrdWriter, sigs: Signals) -> Dispatcher {
        let (cancel_tx, _) = watch::channel(Cancel::None);
        Dispatcher {
            store: SessionStore::new(&core),
            reporter: Reporter::new(core.cfg().json, core.session().to_string())
                .with_ci(core.cfg().ci.clone())
                .for_agent(core.cfg().agent.agent)
                .with_progress(core.cfg().progress),
            activity: crate::serve::publish::Publisher::new(core.log_dir().to_path_buf()),
            notifier: Notifier::new(
                core.cfg().notify.clone(),
                notify::Context {
                    prd: core.cfg().prd_path.display().to_string(),
                    title: core.title(),
                    session: core.session().to_string(),
                },
            ),
            sigs,
            cancel_tx,
            workers: JoinSet::new(),
            handles: HashMap::new(),
            tasks: HashMap::new(),
            front: Vec::new(),
            flush_at: None,
            lock: None,
            dirty: true,
            flush_gap: COALESCE,
            last_save: Instant::now(),
            group: None,
            book_seen: None,
            writer,
            core,
        }
    }

    /// Runs as a sub-loop of a group: its lines get its label, workers take permits.
    pub fn join(&mut self, link: super::group::Link) {
        self.reporter
            .set_label(link.label.clone(), &self.core.cfg().prd_path);
        self.group = Some(link);
    }

    pub fn say(&mut self, e: RunEvent) {
        self.reporter.report(&e);
    }

    /// Announces the run, marks the PRD running, and saves the first state.
    pub async fn start(&mut self) -> Result<()> {
        // Questions asked before (by earlier runs) park their criteria; answers given since
        // go into their prompts.
        if let Some(book) = self.read_book() {
            self.handle(LoopEvent::Questions(book)).await?;
        }
        self.save_state();
        self.front.extend(super::front::at_start(self.core.doc()));
        if let Some(e) = self.flush().await? {
            self.handle(e).await?;
        }
        let started = self.core.started();
        self.say(started);
        let (p, t) = self.core.progress();
        self.notifier.send(Note::new(
            Kind::Start,
            format!(
                "Starting loop on {}. {t} criteria, {p} already passing. {} parallel agents.",
                self.core.title(),
                self.core.cfg().agents
            ),
            (p, t),
        ));
        self.set_name(None);
        Ok(())
    }

    /// Runs the loop to its end.
    pub async fn run(&mut self) -> Result<End> {
        let r = self.core.start_checks();
        self.execute(r).await?;
        if self.core.interrupted() {
            return Ok(End::Interrupted);
        }
        loop {
            for e in self.poll().await? {
                self.handle(e).await?;
            }
            self.refuse_damaged_prd()?;
            match self.core.next_step() {
                Step::End(end) => return Ok(end),
                Step::Iterate => {}
            }
            self.rounds().await?;
            if self.core.interrupted() {
                return Ok(End::Interrupted);
            }
            if let Some(req) = self.core.request() {
                return Ok(req);
            }
            // The flow ran the whole run (in either policy): the next step reads the end from
            // what it left.
        }
    }

    /// Stops the run when the PRD broke or lost criteria during it.
    fn refuse_damaged_prd(&self) -> Result<()> {
        let state = self.core.state_path();
        let prd = self.core.cfg().prd_path.display();
        if let Some(msg) = &self.core.broken() {
            anyhow::bail!(
                "{msg}. The run stopped; results so far are in {}. Restore or fix the PRD (an edit into a broken state is never overwritten), then `prdloop resume {prd}` continues",
                state.display()
            );
        }
        if !self.core.vanished().is_empty() {
            anyhow::bail!(
                "{prd}: {} disappeared from the PRD during the run (a worker or an edit removed it); the run stops rather than count it as done. Results so far are in {}; if the removal was meant, `prdloop resume {prd}` continues without it",
                self.core.vanished().join(", "),
                state.display()
            );
        }
        Ok(())
    }

    /// Waits for what happens next (a worker's end, a pause's end, a signal, the tick, a
    /// due write) and hands it to the core.
    async fn next_event(&mut self, tick: &mut tokio::time::Interval) -> Result<()> {
        let pause_end = self.core.pause_until().unwrap_or_else(Instant::now);
        let paused = self.core.pause_until().is_some();
        let flush_at = self.flush_at.unwrap_or_else(Instant::now);
        let flushing = self.flush_at.is_some();
        let event = tokio::select! {
            Some(joined) = self.workers.join_next_with_id() => self.joined(joined),
            _ = tokio::time::sleep_until(pause_end), if paused => Some(LoopEvent::PauseOver),
            _ = self.sigs.recv() => Some(LoopEvent::Signal),
            _ = tick.tick() => Some(LoopEvent::Tick),
            _ = tokio::time::sleep_until(flush_at), if flushing => None,
        };
        let event = match event {
            Some(LoopEvent::WorkerDone(mut d)) => {
                self.land_if_due(&mut d).await;
                Some(LoopEvent::WorkerDone(d))
            }
            Some(e) => Some(e),
            None => self.flush().await?,
        };
        if let Some(e) = event {
            self.handle(e).await?;
        }
        Ok(())
    }

    /// A cheap look (one `stat`) before workers start: the PRD must still be a file.
    async fn check_prd_present(&mut self) -> Result<()> {
        if let Some(e) = self
            .writer
            .check_present(&self.core)
            .and_then(|r| self.synced(r))
        {
            self.handle(e).await?;
        }
        Ok(())
    }

    /// The run's rounds as the scheduler hands them out, each one's end (the front matter,
    /// the history, regression checks) as soon as it closes (with the barrier, with its last
    /// attempt).
    async fn rounds(&mut self) -> Result<()> {
        let r = self.core.begin_rounds(Now::current());
        self.execute(r).await?;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            self.check_prd_present().await?;
            self.close_rounds().await?;
            let r = self.core.fill_lanes(Now::current());
            self.execute(r).await?;
            if self.core.settled() && self.workers.is_empty() {
                break;
            }
            self.next_event(&mut tick).await?;
        }
        self.close_rounds().await?;
        Ok(())
    }

    /// Ends each round that closed: its regression checks (while no worker could be
    /// writing the folder they read), front matter, history and report; opens the next.
    async fn close_rounds(&mut self) -> Result<()> {
        while self.core.round_closed() {
            if self.core.checkout_quiet() {
                let r = self.core.regression_checks();
                self.execute(r).await?;
            }
            for r in self.core.end_round(Now::current()) {
                self.execute(r).await?;
            }
            self.set_name(None);
        }
        Ok(())
    }

    /// A worker's task came back: its result, or the panic that ended it.
    fn joined(
        &mut self,
        joined: Result<(tokio::task::Id, WorkerDone), tokio::task::JoinError>,
    ) -> Option<LoopEvent> {
        match joined {
            Ok((task, done)) => {
                self.tasks.remove(&task);
                self.release(Slot::of(&done));
                Some(LoopEvent::WorkerDone(Box::new(done)))
            }
            Err(e) => {
                let slot = self.tasks.remove(&e.id())?;
                let handle = self.release(slot)?;
                Some(super::core::apply::lost(
                    slot,
                    handle.criterion,
                    e.to_string(),
                ))
            }
        }
    }

    /// A worker's task is over: its handle (its process group no longer counts under the
    /// sub-loops' cap).
    fn release(&mut self, slot: Slot) -> Option<Handle> {
        let handle = self.handles.remove(&slot)?;
        if let (Some(pid), Some(g)) = (handle.pid, &self.group) {
            g.track(pid, false);
        }
        Some(handle)
    }

    async fn handle(&mut self, event: LoopEvent) -> Result<()> {
        if matches!(event, LoopEvent::PauseOver) {
            self.notifier.send(
                Note::new(Kind::Resumed, "Workers start again.", self.core.progress())
                    .cost(self.core.ledger().total_cost),
            );
        }
        let r = self.core.handle_event(event, Now::current());
        self.execute(r).await
    }

    /// Carries out a list of effects, then the lists of what it led to (checks' results, a
    /// landing, what a write or reading the PRD and the request file found), in turn.
    async fn execute(&mut self, effects: Effects) -> Result<()> {
        let mut queue = std::collections::VecDeque::from([effects]);
        while let Some(effects) = queue.pop_front() {
            for e in self.carry_out(effects).await? {
                queue.push_back(self.core.handle_event(e, Now::current()));
            }
        }
        if let Some(g) = &self.group {
            g.publish(self.core.fatal_stop(), self.core.pause_until());
        }
        Ok(())
    }

    /// Carries out one list in its order (see [`Effect`] for what each means, and how a
    /// list's flushes make one write); returns the events it led to.
    async fn carry_out(&mut self, effects: Effects) -> Result<Vec<LoopEvent>> {
        let mut list = ListState::default();
        let mut next = Vec::new();
        let mut effects = effects.into_iter().peekable();
        while let Some(effect) = effects.next() {
            if effect.needs_files() && list.flush == Some(Flush::Now) {
                list.flush = None;
                next.extend(self.flush().await?);
            }
            match effect {
                Effect::Say(e) => self.tell(e),
                Effect::Record(rec) => self.record(&rec, &mut list),
                Effect::Ask(q) => self.file_question(q),
                Effect::Cancel(level) if list.cancel < Some(level) => {
                    list.cancel = Some(level);
                    self.send_cancel(level);
                }
                Effect::Cancel(_) => {}
                Effect::CancelLane(lane) => self.cancel_lane(lane),
                Effect::ExitNow => self.exit_now().await,
                Effect::Launch(first) => {
                    let mut launches = vec![*first];
                    while let Some(Effect::Launch(_)) = effects.peek() {
                        if let Some(Effect::Launch(l)) = effects.next() {
                            launches.push(*l);
                        }
                    }
                    self.launch_all(launches).await;
                }
                Effect::Edit(key, value) => self.front.push((key, value)),
                Effect::Flush(f) => {
                    self.dirty = true;
                    list.flush = list.flush.max(Some(f));
                }
                Effect::Land(job) => next.push(self.land(job).await),
                Effect::RunChecks(purpose, jobs) => next.push(self.run_checks(purpose, jobs).await),
                Effect::Poll => next.extend(self.poll().await?),
            }
        }
        match list.flush {
            Some(Flush::Now) => next.extend(self.flush().await?),
            Some(Flush::Soon) if self.flush_at.is_none() => {
                self.flush_at = Some(Instant::now() + self.flush_gap)
            }
            _ => {}
        }
        Ok(next)
    }

    /// Carries out, where the dispatcher waits on something else (checks, a worker permit, a
    /// worker's start), effects that lead to nothing further: a signal's (`Core::interrupt`:
    /// lines, a cancel, the exit's front matter and the exit) and a worker start's line. No
    /// list is being carried out here to queue more on.
    async fn at_once(&mut self, effects: Effects) {
        for effect in effects {
            match effect {
                Effect::Say(e) => self.tell(e),
                Effect::Cancel(level) => self.send_cancel(level),
                Effect::Edit(key, value) => self.front.push((key, value)),
                Effect::ExitNow => self.exit_now().await,
                other => debug_assert!(false, "not an effect to carry out at once: {other:?}"),
            }
        }
    }

    /// A line for the user (and a notification, for those that get one).
    fn tell(&mut self, e: RunEvent) {
        self.notify_about(&e);
        self.say(e);
    }

    /// An attempt into the attempts log, unless an append of this list failed already.
    fn record(&mut self, rec: &state::AttemptRecord, list: &mut ListState) {
        if list.log_failed {
            return;
        }
        if let Some(w) = self.store.append(std::slice::from_ref(rec)) {
            list.log_failed = true;
            self.say(w);
        }
    }

    /// A worker's question into the PRD's question book.
    fn file_question(&mut self, q: crate::questions::Question) {
        let (path, prd) = (self.core.book_path(), &self.core.cfg().prd_path);
        if let Err(e) = crate::questions::update(path, prd, |b| b.ask(q)) {
            self.say(RunEvent::Warning(Warning::QuestionNotKept {
                path: path.to_path_buf(),
                error: format!("{e:#}"),
            }));
        }
    }

    /// Runs Verify commands (at most `-a` at once); a signal meanwhile is handled at once.
    /// With isolation they run in a fresh copy of the checkout (its state now, landings
    /// included), never in the checkout itself: a check runs the workers' code, and may
    /// write only in the copy (and its own TMPDIR) under a worker's rules.
    async fn run_checks(&mut self, purpose: CheckPurpose, mut jobs: Vec<verify::Job>) -> LoopEvent {
        let mut _copy = None;
        if self.core.iso().is_some() {
            let workdir = self.core.cfg().workdir.clone();
            let made = tokio::task::spawn_blocking(move || {
                verify::copy::Copy::of(&workdir, "checks").map_err(|e| format!("{e:#}"))
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
            match made {
                Ok(copy) => {
                    let rules = self.core.cfg().sandbox.check_rules(copy.top());
                    for j in &mut jobs {
                        j.settings.workdir = copy.workdir.clone();
                        j.settings.sandbox = rules.clone();
                    }
                    _copy = Some(copy);
                }
                Err(e) => {
                    let results = jobs
                        .into_iter()
                        .map(|j| {
                            let why = format!("no copy of the checkout to run it in: {e}");
                            let err = crate::worker::SpawnError {
                                program: "git".into(),
                                source: std::io::Error::other(why),
                            };
                            (j.id, Err(err))
                        })
                        .collect();
                    return LoopEvent::ChecksDone { purpose, results };
                }
            }
        }
        let fut = verify::check_many(jobs, self.core.cfg().agents, self.cancel_tx.subscribe());
        tokio::pin!(fut);
        let results = loop {
            tokio::select! {
                r = &mut fut => break r,
                _ = self.sigs.recv() => self.signal_now().await,
            }
        };
        LoopEvent::ChecksDone { purpose, results }
    }

    /// A signal while the dispatcher waits on something else (checks, a worker permit),
    /// handled at once.
    async fn signal_now(&mut self) {
        let effects = self.core.handle_event(LoopEvent::Signal, Now::current());
        self.at_once(effects).await;
    }

    fn notify_about(&self, e: &RunEvent) {
        match e {
            RunEvent::IterationEnded {
                iteration,
                passing,
                total,
                gained,
                cost,
                ..
            } => self.notifier.send(
                Note::new(
                    Kind::Iteration,
                    format!(
                        "Iteration {iteration} complete. {passing} of {total} passing. Gained {gained}."
                    ),
                    (*passing, *total),
                )
                .cost(*cost),
            ),
            RunEvent::Asked { id, question, .. } => self.notifier.send(
                Note::new(
                    Kind::NeedsPerson,
                    format!(
                        "{id} asks: {} (prdloop answer {} {id} \"…\")",
                        crate::text::one_line(question, 500),
                        self.core.cfg().prd_path.display()
                    ),
                    self.core.progress(),
                )
                .cost(self.core.ledger().total_cost),
            ),
            RunEvent::Paused { label, delay, .. } => self.notifier.send(
                Note::new(
                    Kind::Limit,
                    format!(
                        "{label}: every lane waits {}.",
                        humantime::format_duration(Duration::from_secs(delay.as_secs()))
                    ),
                    self.core.progress(),
                )
                .cost(self.core.ledger().total_cost),
            ),
            _ => {}
        }
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        if let Some(l) = self.lock.take() {
            l.release();
        }
    }
}

/// What carrying out one list keeps track of.
#[derive(Debug, Default)]
struct ListState {
    /// The strongest flush asked for since the last write.
    flush: Option<Flush>,
    /// The strongest cancel sent.
    cancel: Option<Cancel>,
    /// An append to the attempts log failed (said once).
    log_failed: bool,
}

fn request_of(text: &str) -> Option<End> {
    match text.trim() {
        "pause" => Some(End::PausedByRequest),
        "stop" => Some(End::StoppedByRequest),
        _ => None,
    }
}
