//! The dispatcher's side of workers: a permit under the sub-loops' cap, the worktree made
//! ready, the process started and its task spawned (the worker's work taken, its claimed
//! PASS checked); a passing worker's work merged into the checkout; cancels, per worker and
//! for all; the worktrees removed at the end.

use tokio::sync::watch;

use super::Dispatcher;
use crate::evidence::protect;
use crate::evidence::verifier::{Review, ReviewJob};
use crate::isolation::Landing;
use crate::run::core::Now;
use crate::run::event::{LoopEvent, RunEvent, Work, WorkerDone};
use crate::run::judge::Ran as RanWorker;
use crate::run::judge::{Ran, judge_ran};
use crate::verify;
use crate::worker::{self, Cancel};

impl Dispatcher {
    /// Tells every worker (and the checks) to stop, gracefully or at once.
    pub(super) fn send_cancel(&mut self, level: Cancel) {
        // Kept even with no receiver: a worker launched later (one that waited for a permit)
        // starts from it.
        self.cancel_tx.send_replace(level);
        for tx in self.cancels.values() {
            let _ = tx.send(level);
        }
    }

    /// Merges a passing worker's work into the checkout (one at a time).
    pub(super) async fn land(&mut self, job: crate::run::event::LandJob) -> LoopEvent {
        let landing = match self.core.iso.clone() {
            Some(iso) => {
                let w = job.work.clone();
                tokio::task::spawn_blocking(move || {
                    iso.land(&w.base, &w.commit, &w.kept, &job.id, &job.title)
                })
                .await
                .unwrap_or_else(|e| Landing::Error {
                    message: e.to_string(),
                })
            }
            None => Landing::Unchanged,
        };
        LoopEvent::Landed {
            lane: job.lane,
            k: job.k,
            landing,
        }
    }

    /// Starts workers; with isolated workers, first takes the checkout as their base and
    /// makes each one's worktree ready.
    pub(super) async fn launch_all(&mut self, launches: Vec<crate::run::event::Launch>) {
        if launches.is_empty() {
            return;
        }
        let base = match self.core.iso.clone() {
            Some(iso) => Some(blocking(move || iso.base()).await),
            None => None,
        };
        for l in launches {
            self.launch(l, base.as_ref()).await;
        }
    }

    pub(super) async fn launch(
        &mut self,
        l: crate::run::event::Launch,
        base: Option<&Result<String, String>>,
    ) {
        let permit = self.permit().await;
        // The run was stopped while this worker waited for its permit.
        let stopped = *self.cancel_tx.borrow();
        let now = Now::current();
        let k = l.sample.as_ref().map_or(0, |t| t.k);
        // Its own cancel, which also carries every run-wide one.
        let (tx, rx) = watch::channel(*self.cancel_tx.borrow());
        let (lane, id, iteration, slot) = (l.lane, l.id.clone(), l.iteration, l.slot);
        let log = l.spec.log_path.clone();
        // The worktree, made ready: (isolation, the attempt's base).
        let isolated = match (self.core.iso.clone(), base) {
            (Some(iso), Some(Ok(base))) => {
                let (i, b) = (iso.clone(), base.clone());
                blocking(move || i.prepare(slot, &b))
                    .await
                    .map(|p| Some((iso, p.base)))
            }
            (Some(_), Some(Err(e))) => Err(e.clone()),
            _ => Ok(None),
        };
        let (started, unprepared) = match &isolated {
            Ok(_) => (worker::start(l.spec.clone()), None),
            Err(e) => (
                Err(worker::SpawnError {
                    program: l.spec.program.clone(),
                    source: std::io::Error::other(e.clone()),
                }),
                Some(e.clone()),
            ),
        };
        let isolated = isolated.ok().flatten();
        let pid = started.as_ref().ok().map(worker::Running::pid);
        if let Ok(running) = &started {
            self.reporter.watch_worker(lane, k, running.activity());
            self.activity
                .watch(lane, k, &l.id, &l.spec.log_path, running.activity());
        }
        let check = l.check.clone();
        let review = l.review.clone();
        let others = l.others.clone();
        let parallel = self.core.cfg.agents;
        let (attempt_name, sample) = (l.attempt_name.clone(), l.sample.clone());
        if stopped != Cancel::None {
            let _ = tx.send(stopped);
        }
        let handle = self.workers.spawn(async move {
            // Held until the worker (and its checks) are done.
            let _permit = permit;
            let mut landing = None;
            let mut work = None;
            let mut broken = None;
            let ran = match started {
                Ok(running) => {
                    let finished = running.wait(rx.clone()).await;
                    let mut ran = Ran::read(&id, finished, Now::current().secs());
                    // Its work is taken before anything else (its check) touches the worktree.
                    if let Some((iso, base)) = &isolated {
                        let (i, b, c, n) =
                            (iso.clone(), base.clone(), id.clone(), attempt_name.clone());
                        let taken = blocking(move || {
                            let commit = i.take(slot, &b, &c, &n)?;
                            i.reseal(slot, &b)?;
                            let (files, diff_lines) = i.diff_size(&b, &commit)?;
                            Ok(Work {
                                kept: i.attempt_ref(&c, &n),
                                base: b,
                                commit,
                                diff_lines,
                                files,
                            })
                        })
                        .await;
                        match taken {
                            Ok(w) => work = Some(w),
                            Err(message) => landing = Some(Landing::Error { message }),
                        }
                    }
                    if let Some(job) = check.filter(|_| ran.claims_pass()) {
                        // A command whose own files the attempt changed is no evidence of it.
                        ran.protected = match (&work, &isolated) {
                            (Some(w), Some((iso, _))) => {
                                protect::touched_by(&job.command, &w.files, &iso.rel())
                            }
                            _ => Vec::new(),
                        };
                        if ran.protected.is_empty() {
                            ran.check = Some(
                                verify::check(&job.command, &job.settings, &job.log, rx.clone())
                                    .await,
                            );
                        }
                    }
                    let needs_review = ran.claims_pass()
                        && match &ran.check {
                            None => true,
                            Some(Ok(c)) => c.unrunnable(),
                            Some(Err(_)) => false,
                        };
                    if let Some(job) = review.filter(|_| needs_review) {
                        ran.review =
                            Some(review_attempt(&job, &ran, &work, &isolated, slot, &rx).await);
                    }
                    if !others.is_empty() && judge_ran(&ran).passes() {
                        let results = verify::check_many(others, parallel, rx).await;
                        broken = Some(
                            results
                                .iter()
                                .filter(|(_, c)| !matches!(c, Ok(c) if c.passed()))
                                .count(),
                        );
                    }
                    Ok(ran)
                }
                Err(e) => Err(e),
            };
            WorkerDone {
                lane,
                id,
                iteration,
                started_at: now.ms,
                log,
                ran,
                landing,
                unprepared,
                sample,
                work,
                broken,
            }
        });
        self.tasks.insert(handle.id(), (lane, k, l.id.clone()));
        self.cancels.insert((lane, k), tx);
        if let Some(pid) = pid {
            self.pids.insert((lane, k), pid);
            if let Some(g) = &self.group {
                g.track(pid, true);
            }
        }
        let e = crate::run::launch::started(&mut self.core, &l, pid);
        self.say(e);
    }

    /// A permit for one more worker under the group's cap (none without a cap). A signal
    /// meanwhile is handled at once; once the run is being stopped the wait ends without a
    /// permit, and the worker, started anyway, is stopped at once (so a sub-loop whose
    /// workers are stopped never waits on the others' permits).
    pub(super) async fn permit(&mut self) -> crate::run::group::Permit {
        let sem = self.group.as_ref()?.permits()?;
        loop {
            if *self.cancel_tx.borrow() != Cancel::None {
                return sem.try_acquire_owned().ok();
            }
            tokio::select! {
                p = sem.clone().acquire_owned() => return p.ok(),
                _ = self.sigs.recv() => self.signal_now().await,
            }
        }
    }

    /// The run's worktrees, removed (unless `--keep-worktrees`): their work is merged or
    /// pinned under refs/prdloop/ already.
    pub async fn remove_worktrees(&mut self) {
        let Some(iso) = self.core.iso.clone() else {
            return;
        };
        if iso.keep() {
            self.say(RunEvent::Notice(super::super::reason::Notice::LanesKept {
                root: iso.pool_root().to_path_buf(),
            }));
            return;
        }
        let warnings = tokio::task::spawn_blocking(move || iso.finish())
            .await
            .unwrap_or_default();
        for w in warnings {
            self.say(RunEvent::Warning(w));
        }
    }
}

/// The independent verifier on a claimed PASS: the attempt's diff and what the runner found
/// in its prompt; its verdict void when it changed the attempt's files.
async fn review_attempt(
    job: &ReviewJob,
    ran: &RanWorker,
    work: &Option<Work>,
    isolated: &Option<(std::sync::Arc<crate::isolation::Isolation>, String)>,
    slot: usize,
    rx: &watch::Receiver<Cancel>,
) -> Review {
    /// How much of the diff the verifier's prompt holds.
    const DIFF_MAX: usize = 24 * 1024;
    let mut facts = Vec::new();
    if !ran.protected.is_empty() {
        facts.push(format!(
            "The attempt changed {}, which the criterion's Verify command runs, so the runner \
             did not count that command: check the criterion another way.",
            ran.protected.join(", ")
        ));
    }
    if let Some(Ok(c)) = &ran.check
        && c.unrunnable()
    {
        facts.push(format!(
            "The Verify command cannot run here: {}",
            c.reason()
        ));
    }
    let diff = match (work, isolated) {
        (Some(w), Some((iso, _))) => {
            let (i, b, c) = (iso.clone(), w.base.clone(), w.commit.clone());
            blocking(move || i.diff_text(&b, &c, DIFF_MAX)).await.ok()
        }
        _ => None,
    };
    let tree = |iso: &std::sync::Arc<crate::isolation::Isolation>| {
        let i = iso.clone();
        blocking(move || i.lane_tree(slot))
    };
    let before = match isolated {
        Some((iso, _)) => Some(tree(iso).await),
        None => None,
    };
    let review = job.run(diff.as_deref(), &facts, rx.clone()).await;
    if let (Some(before), Some((iso, _))) = (before, isolated) {
        match (before, tree(iso).await) {
            (Ok(a), Ok(b)) if a == b => {}
            (Ok(_), Ok(_)) => {
                return review.void("the verifier changed the attempt's files".into());
            }
            (Err(e), _) | (_, Err(e)) => {
                return review.void(format!("the attempt's files could not be read: {e}"));
            }
        }
    }
    review
}

/// Runs blocking work (git) off the loop's threads; an error as text.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(e) => Err(e.to_string()),
    }
}
