//! The loop: [`claim`] takes the PRD's lock (before the PRD is read), [`execute_in`] hands
//! the run [`Prepared`] under it to the dispatcher. How a run flows through the parts:
//!
//! ```text
//! dispatcher ──LoopEvent──▶ core.handle_event ──Effects───▶ dispatcher carries them out in order:
//!   (select! over workers,       (core/: ledger, flow,       attempts (attempt.rs), landings,
//!    ticks, signals, pauses)      brakes, apply, …)          prd_writer, store, reporter
//! ```
//!
//! A worker's attempt lives in `attempt.rs` (ready, start, wait, read, take, check, judge);
//! a single attempt's work lands before the core hears of it, a best-of-N sample's after the
//! core picks it. The PRD writer reports what it found (`SyncReport`); the core takes it.
//!
//! Glossary (one name, one meaning):
//! - **lane**: one of the `-a N` places a worker runs in (a repository of its own when
//!   isolated); `PRDLOOP_LANE` tells a worker its number.
//! - **attempt**: one try at one criterion, counted against `-n`; with best-of-N it runs
//!   several **samples** (a [`samples::SampleSet`]), of which one may win and land.
//! - **round** / **iteration**: PAI's unit, kept by the one scheduler, the **flow**
//!   ([`flow::Flow`]): by default it only counts them (an attempt more than one round ahead of
//!   the oldest open one starts only when nothing nearer can); with `--rounds barrier`, its
//!   barrier policy starts none ahead, so a round closes with its last attempt.
//! - **domain group** ([`crate::plan::DomainGroup`]): one domain's criteria, PAI's unit of
//!   partition; **sub-loops** ([`SubLoops`]): several PRDs run by one process.
//! - **verdict** (backend): what a worker's output says; **judgement** ([`judge`]): what the
//!   runner makes of it, once, with its own check; **ending** (`event::Ending`): how the
//!   reporter tells of a worker's end; **landing**: what merging its work came to.
//! - **evidence**: how a tick was earned (`checked`, `reviewed`, `claimed`, `before`).
//! - **parked**: waiting for a person's answer to a worker's question; **stuck**: ended for
//!   repeating itself (`--stuck-after`).

mod adapt;
mod attempt;
mod core;
mod dispatcher;
pub mod end;
mod event;
/// Public for the scheduling benchmarks' simulator (`benches/family_bench.rs`).
#[doc(hidden)]
pub mod flow;
pub mod front;
mod github;
mod group;
pub mod json_event;
mod judge;
mod junit;
mod ledger;
mod limits;
mod live;
pub mod log_name;
mod prd_writer;
pub mod prompt;
pub mod reason;
mod reporter;
mod samples;
/// Public for the scheduling benchmarks' simulator (`benches/family_bench.rs`).
#[doc(hidden)]
mod spend;
mod store;
mod warning;

use anyhow::Result;

use self::core::{Core, Now};
use self::dispatcher::Dispatcher;
use self::event::RunEvent;
pub use self::group::{Ended, Link, SubLoops};
use self::prd_writer::PrdWriter;
use self::store::{Locked, lock};
use crate::config::{OwnPaths, RunConfig};
use crate::exit::Exit;
use crate::graph::Graph;
use crate::isolation::Isolation;
use crate::platform::Signals;
use crate::prd::Prd;
use crate::state::{self, SessionState};
use crate::{exit, report};

/// A run ready for its loop, made once before it: the PRD's document (read and parsed under
/// the run's [`Claim`]) with its checked graph, the final settings and prdloop's own paths.
/// The loop reads the PRD from disk again only to write it.
pub struct Prepared {
    pub cfg: RunConfig,
    pub own: OwnPaths,
    pub doc: Prd,
    pub graph: Graph,
}

/// A run's try at its PRD's lock, for its session: held, or busy (another live loop holds
/// it). Taken before the PRD is read, so that no run reads a PRD another is still writing.
/// A run that ends before its loop lets it go when the claim is dropped.
pub struct Claim {
    session: String,
    /// `None` once the loop took it.
    taken: Option<Locked>,
}

/// Tries to take the lock of the PRD in `own` for a new session, or for `resume`'s. A lock
/// left by a crashed run is taken over at once (its session marked ended, its workers
/// ended).
pub fn claim(own: &OwnPaths, resume: Option<&SessionState>) -> Result<Claim> {
    let session = resume.map_or_else(
        || uuid::Uuid::new_v4().to_string(),
        |s| s.session_id.clone(),
    );
    let taken = lock(&own.state_dir, &own.prd, &session)?;
    Ok(Claim {
        session,
        taken: Some(taken),
    })
}

impl Drop for Claim {
    /// A run that ended before its loop: the lock is released, and what taking it over did is
    /// said (the loop would have said it).
    fn drop(&mut self) {
        if let Some(Locked::Held(lock, said)) = self.taken.take() {
            for e in said {
                if let RunEvent::Warning(w) = e {
                    report::warn(w);
                }
            }
            lock.release();
        }
    }
}

/// Runs the loop; returns the exit code. The agent program must have been found. `claim`:
/// the PRD's lock as [`claim`] tried it (busy: the run ends here, [`Exit::Locked`]). `resume`
/// continues an earlier session: its id, state file and attempt history. `link`: one of
/// several sub-loops of a [`SubLoops`] (or alone under a worker cap), its side of what they
/// share.
pub async fn execute_in(
    run: Prepared,
    mut claim: Claim,
    resume: Option<SessionState>,
    link: Option<Link>,
) -> Result<Exit> {
    let (lock, said) = match claim.taken.take() {
        Some(Locked::Held(lock, said)) => (lock, said),
        Some(Locked::Busy(msg)) => {
            report::error(msg);
            return Ok(exit::Exit::Locked);
        }
        None => anyhow::bail!("the PRD's lock was taken twice (this is a bug)"),
    };
    let session = std::mem::take(&mut claim.session);
    let mut lock = Some(lock);
    let result = run_locked(run, session, resume, said, &mut lock, link).await;
    // Held by the dispatcher (which releases it when it is done) unless the run failed
    // before there was one.
    if let Some(l) = lock {
        l.release();
    }
    result
}

/// What [`isolation`] found: the isolation, what to tell the user (the fall-back to one
/// folder, worktrees a dead run left), and the passes whose work a crash left landed but
/// not credited.
type Isolated = (
    Option<std::sync::Arc<Isolation>>,
    Vec<RunEvent>,
    Vec<crate::isolation::owed::Recovered>,
);

/// Isolated workers, when the run asks for them or the folder is a git repository.
fn isolation(cfg: &RunConfig, own: &OwnPaths, session: &str) -> Result<Isolated> {
    let mut said = Vec::new();
    let (repo, notice) = crate::isolation::decide(cfg.isolation.mode, &cfg.workdir)?;
    said.extend(notice.map(|n| RunEvent::Notice(reason::Notice::Said(n))));
    let Some(repo) = repo else {
        if cfg.samples.n > 1 {
            anyhow::bail!(
                "--best-of {}{} needs isolated workers: run it in a git repository with a commit (and without --isolation none)",
                if cfg.samples.auto { "auto:" } else { "" },
                cfg.samples.n
            );
        }
        // Without lanes the workers write the run's folder: prdloop's state is not in it.
        if let Err(msg) = cfg
            .sandbox
            .check_own(&cfg.state_dir, std::slice::from_ref(&cfg.workdir))
        {
            anyhow::bail!("{msg}");
        }
        return Ok((None, said, Vec::new()));
    };
    let own = own.unwritable();
    let own: Vec<&std::path::Path> = own.iter().map(std::path::PathBuf::as_path).collect();
    let iso = Isolation::new(repo, cfg.isolation.clone(), session, &cfg.state_dir, &own)?;
    said.push(RunEvent::Notice(reason::Notice::Isolation {
        root: iso.pool_root().to_path_buf(),
        top: iso.top().to_path_buf(),
        commit: cfg.isolation.commit,
    }));
    let swept = iso.sweep()?;
    let owed = iso.owed_from_before()?;
    if swept.removed > 0 {
        said.push(RunEvent::Notice(reason::Notice::Swept {
            removed: swept.removed,
            pinned: swept.pinned.clone(),
        }));
    }
    said.extend(
        swept
            .recovered
            .map(|r| RunEvent::Notice(reason::Notice::Said(r))),
    );
    said.extend(
        swept
            .warnings
            .iter()
            .map(|w| RunEvent::Warning(w.clone().into())),
    );
    Ok((Some(std::sync::Arc::new(iso)), said, owed))
}

async fn run_locked(
    run: Prepared,
    session: String,
    resume: Option<SessionState>,
    said: Vec<RunEvent>,
    lock: &mut Option<crate::state::PrdLock>,
    link: Option<Link>,
) -> Result<Exit> {
    // First of all, so that a Ctrl-C from here on leaves everything in order.
    let sigs = Signals::listen()?;
    let Prepared {
        cfg,
        own,
        doc,
        graph,
    } = run;
    let swept = store::sweep_logs(&cfg.state_dir);
    if swept > 0 {
        tracing::info!("removed {swept} log folder(s) of sessions whose state file is gone");
    }
    // A pause or stop request left from before this run is void.
    let _ = std::fs::remove_file(&own.request);
    let writer = PrdWriter::new(own.prd.clone(), doc.text().to_string());
    let running_before = doc.front.loop_status.as_deref() == Some("running");
    let prd_path = own.prd.clone();
    let (state_dir, session_id) = (own.state_dir.clone(), session.clone());
    let (iso, mut notices, owed) = isolation(&cfg, &own, &session)?;
    notices.extend(
        cfg.sandbox
            .notice
            .clone()
            .map(|n| RunEvent::Notice(reason::Notice::Said(n))),
    );
    let mut core = Core::with_own(cfg, own, session, doc, Now::current());
    // The session's logs, one file for them all, open while the run lasts.
    let _logs = crate::worker::output_log::Book::of(core.log_dir());
    core.set_up(iso, graph);
    let resumed = match resume {
        Some(prev) => Some(core.restore(prev)),
        None => {
            if let Some(earlier) =
                SessionState::latest_before(&state_dir, &prd_path, Some(&session_id))
            {
                core.learn_from(&earlier);
            }
            None
        }
    };
    // After the earlier session is restored: a pass it recorded is not counted again.
    for r in owed {
        let credited = core.credit_recovered(r);
        notices.extend(credited.said);
        if let Some((log, attempt)) = credited.append
            && let Err(e) = state::append_attempt(&log, &attempt)
        {
            notices.push(store::Warning::attempt_not_recorded(&e).said());
        }
    }
    let mut d = Dispatcher::new(core, writer, sigs);
    if let Some(link) = link {
        d.join(link);
    }
    for e in said {
        d.say(e);
    }
    if running_before {
        d.say(store::Warning::RunningUnheld { prd: prd_path }.said());
    }
    for e in resumed.into_iter().flatten() {
        d.say(e);
    }
    d.lock = lock.take();
    if let Err(e) = d.start().await {
        d.fail(&e).await;
        return Err(e);
    }
    // After the header, which they qualify.
    for e in notices {
        d.say(e);
    }
    let end = match d.run().await {
        Ok(end) => end,
        Err(e) => {
            // Leave the PRD and the state saying what happened, then report the error.
            d.fail(&e).await;
            return Err(e);
        }
    };
    if let Err(e) = d.finish(end).await {
        d.fail(&e).await;
        return Err(e);
    }
    d.remove_worktrees().await;
    let (state, prd) = (d.core.state_path(), d.core.cfg().prd_path.clone());
    if let Some(msg) = d.core.broken().map(ToString::to_string) {
        anyhow::bail!(
            "{msg}. Its last results could not be written to it; they are in {}. Fix the PRD, then `prdloop resume {}`",
            state.display(),
            prd.display()
        );
    }
    if !d.core.vanished().is_empty() {
        anyhow::bail!(
            "{}: {} disappeared from the PRD during the run, so its results were not written to it; they are in {}. If the removal was meant, `prdloop resume {}` continues without it",
            prd.display(),
            d.core.vanished().join(", "),
            state.display(),
            prd.display()
        );
    }
    Ok(end.exit())
}
