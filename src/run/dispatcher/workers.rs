//! The dispatcher's side of workers: a permit under the sub-loops' cap, the worktree made
//! ready, the process started and its task spawned (the worker's work taken, its claimed
//! PASS checked); a passing worker's work merged into the checkout; cancels, per worker and
//! for all; the worktrees removed at the end.

use tokio::sync::watch;

use super::Dispatcher;
use crate::isolation::Landing;
use crate::run::attempt::{self, blocking};
use crate::run::core::Now;
use crate::run::event::{LoopEvent, RunEvent, Slot, WorkerDone};
use crate::worker::{self, Cancel};

impl Dispatcher {
    /// Tells every worker (and the checks) to stop, gracefully or at once.
    pub(super) fn send_cancel(&mut self, level: Cancel) {
        // Kept even with no receiver: a worker launched later (one that waited for a permit)
        // starts from it.
        self.cancel_tx.send_replace(level);
        for h in self.handles.values() {
            let _ = h.cancel.send(level);
        }
    }

    /// Ends a lane's running samples, gracefully (a sibling won).
    pub(super) fn cancel_lane(&mut self, lane: usize) {
        for (slot, h) in &self.handles {
            if slot.lane == lane {
                let _ = h.cancel.send(Cancel::Graceful);
            }
        }
    }

    /// A single attempt that passed: its work is merged into the checkout before the core
    /// hears of it ([`attempt::lands`]).
    pub(super) async fn land_if_due(&mut self, d: &mut WorkerDone) {
        let Some(work) = d
            .work
            .clone()
            .filter(|_| attempt::lands(d, self.core.iso().is_some()))
        else {
            return;
        };
        let job = crate::run::event::LandJob {
            slot: Slot::new(d.lane, 0),
            work,
            title: self.core.landing_title(&d.id),
            id: d.id.clone(),
            credit: self.core.credit_of(d, Now::current()),
        };
        if let LoopEvent::Landed { landing, .. } = self.land(job).await {
            d.landing = Some(landing);
        }
    }

    /// Merges a passing worker's work into the checkout (one at a time).
    pub(super) async fn land(&mut self, job: crate::run::event::LandJob) -> LoopEvent {
        let landing = match self.core.iso().cloned() {
            Some(iso) => {
                let to_land = crate::isolation::ToLand {
                    base: job.work.base.clone(),
                    attempt: job.work.commit.clone(),
                    kept: job.work.kept.clone(),
                    id: job.id.clone(),
                    message: job.title.clone(),
                    record: job.credit.clone(),
                };
                tokio::task::spawn_blocking(move || iso.land(&to_land))
                    .await
                    .unwrap_or_else(|e| Landing::Error {
                        message: e.to_string(),
                    })
            }
            None => Landing::Unchanged,
        };
        LoopEvent::Landed {
            slot: job.slot,
            landing,
        }
    }

    /// Starts workers; with isolated workers, first takes the checkout as their base and
    /// makes each one's worktree ready.
    pub(super) async fn launch_all(&mut self, launches: Vec<crate::run::event::Launch>) {
        if launches.is_empty() {
            return;
        }
        let base = match self.core.iso().cloned() {
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
        let slot = Slot::at(l.lane, l.sample.as_ref());
        // Its own cancel, which also carries every run-wide one.
        let (tx, rx) = watch::channel(*self.cancel_tx.borrow());
        let begun =
            attempt::begin(&l, self.core.iso().cloned(), base, self.core.cfg().agents).await;
        let pid = begun.running().map(worker::Running::pid);
        if let Some(running) = begun.running() {
            self.reporter.watch_worker(slot, running.activity());
            self.activity.watch(
                l.lane,
                slot.sample,
                &l.id,
                &l.spec.log_path,
                running.activity(),
            );
        }
        if stopped != Cancel::None {
            let _ = tx.send(stopped);
        }
        let handle = self.workers.spawn(async move {
            // Held until the worker (and its checks) are done.
            let _permit = permit;
            begun.finish(rx).await
        });
        self.tasks.insert(handle.id(), slot);
        self.handles.insert(
            slot,
            super::Handle {
                criterion: l.id.clone(),
                pid,
                cancel: tx,
            },
        );
        if let (Some(pid), Some(g)) = (pid, &self.group) {
            g.track(pid, true);
        }
        let started = LoopEvent::WorkerStarted {
            lane: l.lane,
            id: l.id,
            iteration: l.iteration,
            attempt: l.attempt,
            sample: l.sample,
            pid,
        };
        // Said at once, before the next worker starts: its effect is its start's line only
        // (`handle` is not called here, as `launch` runs inside `execute`).
        let effects = self.core.handle_event(started, Now::current());
        self.at_once(effects).await;
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
        let Some(iso) = self.core.iso().cloned() else {
            return;
        };
        if iso.keep() {
            self.say(RunEvent::Notice(crate::run::reason::Notice::LanesKept {
                root: iso.pool_root().to_path_buf(),
            }));
            return;
        }
        let warnings = tokio::task::spawn_blocking(move || iso.finish())
            .await
            .unwrap_or_default();
        for w in warnings {
            self.say(RunEvent::Warning(w.into()));
        }
    }
}
