//! One attempt's life, in one place: its worktree made ready and its process started
//! ([`begin`]); then, in the worker's task ([`Begun::finish`]), the process waited for, its
//! output read, its work taken as a commit before anything else touches the worktree, a
//! claimed PASS checked by the runner (its Verify command, unless the attempt changed that
//! command's own files; else the independent verifier), with `--select best` the other
//! criteria's commands run in its worktree, and the whole judged once. What comes back is one
//! [`WorkerDone`] carrying its [`Judgement`].
//!
//! The landing (merging passing work into the user's checkout) is the one step the
//! dispatcher takes itself ([`lands`] says when): the checkout is shared, so landings run one
//! at a time, between the other things that read it (taking a base for new workers,
//! regression checks). A single attempt lands before the core hears of it, so the core
//! applies it in one call; best-of-N samples go to the core first, which picks the winner
//! that lands.

use std::sync::Arc;

use tokio::sync::watch;

use crate::backend::verdict::Exit;
use crate::clock::now_ms;
use crate::evidence::protect;
use crate::evidence::verifier::{Review, ReviewJob};
use crate::isolation::{Isolation, Landing};
use crate::run::event::{Launch, Work, WorkerDone};
use crate::run::judge::{Ran, judge, judge_ran};
use crate::verify::{self, Job};
use crate::worker::{self, Cancel, Running, SpawnError, Spec};

/// An attempt whose process was started (or could not be).
pub struct Begun {
    lane: usize,
    id: String,
    iteration: u64,
    slot: usize,
    started_at: u64,
    log: std::path::PathBuf,
    attempt_name: String,
    sample: Option<crate::run::event::SampleTag>,
    check: Option<Job>,
    guard: protect::Guard,
    /// Without a worktree: the check's own files as they were before the worker started.
    before: Option<protect::Before>,
    /// Without a worktree: the PRD (its path and text) as it was before the worker started.
    prd_before: Option<(std::path::PathBuf, String)>,
    review: Option<ReviewJob>,
    others: Vec<Job>,
    /// How many Verify commands run at once (`--select best`'s others).
    parallel: usize,
    started: Result<Running, SpawnError>,
    /// Its worktree, made ready: the isolation and the attempt's base.
    isolated: Option<(Arc<Isolation>, String)>,
    /// Why its worktree could not be made ready (then it did not start).
    unprepared: Option<String>,
}

/// Makes the attempt's worktree ready (with isolated workers: on `base`, the checkout taken
/// as the base of this batch of workers) and starts its process.
pub async fn begin(
    l: &Launch,
    iso: Option<Arc<Isolation>>,
    base: Option<&Result<String, String>>,
    parallel: usize,
) -> Begun {
    let started_at = now_ms();
    let slot = l.slot;
    let isolated = match (iso, base) {
        (Some(iso), Some(Ok(base))) => {
            let (i, b) = (iso.clone(), base.clone());
            match blocking(move || i.prepare(slot, &b)).await {
                // A lane made anew: `--setup` in it, before the worker.
                Ok(p) => match (&l.setup, p.fresh) {
                    (Some(spec), true) => set_up(spec).await.map(|()| Some((iso, p.base))),
                    _ => Ok(Some((iso, p.base))),
                },
                Err(e) => Err(e),
            }
        }
        (Some(_), Some(Err(e))) => Err(e.clone()),
        _ => Ok(None),
    };
    // Without a worktree there is no base to diff: the check's own files are taken now.
    let before = match (&isolated, &l.check) {
        (Ok(None), Some(job)) => {
            let (c, d, g) = (
                job.command.clone(),
                job.settings.workdir.clone(),
                l.guard.clone(),
            );
            blocking(move || Ok(protect::Before::take(&c, &d, &g)))
                .await
                .ok()
        }
        _ => None,
    };
    // Without a worktree the worker can write the PRD: its text now, to compare after.
    let prd_before = match (&isolated, &l.shared_prd) {
        (Ok(None), Some(p)) => std::fs::read_to_string(p).ok().map(|t| (p.clone(), t)),
        _ => None,
    };
    let (started, unprepared) = match &isolated {
        Ok(_) => (worker::start(l.spec.clone()), None),
        Err(e) => (
            Err(SpawnError {
                program: l.spec.program.clone(),
                source: std::io::Error::other(e.clone()),
            }),
            Some(e.clone()),
        ),
    };
    Begun {
        lane: l.lane,
        id: l.id.clone(),
        iteration: l.iteration,
        slot,
        started_at,
        log: l.spec.log_path.clone(),
        attempt_name: l.attempt_name.clone(),
        sample: l.sample.clone(),
        check: l.check.clone(),
        guard: l.guard.clone(),
        before,
        prd_before,
        review: l.review.clone(),
        others: l.others.clone(),
        parallel,
        started,
        isolated: isolated.ok().flatten(),
        unprepared,
    }
}

impl Begun {
    /// The process, when it started.
    pub fn running(&self) -> Option<&Running> {
        self.started.as_ref().ok()
    }

    /// The rest of the attempt, in the worker's task: waits for the process (until `rx` says
    /// otherwise), reads it, takes its work, checks a claimed PASS, and judges it.
    pub async fn finish(self, rx: watch::Receiver<Cancel>) -> WorkerDone {
        let Begun {
            lane,
            id,
            iteration,
            slot,
            started_at,
            log,
            attempt_name,
            sample,
            check,
            guard,
            before,
            prd_before,
            review,
            others,
            parallel,
            started,
            isolated,
            unprepared,
        } = self;
        let mut landing = None;
        let mut work = None;
        let mut broken = None;
        let ran = match started {
            Ok(running) => {
                let finished = running.wait(rx.clone()).await;
                let mut ran = Ran::read(&id, finished, (now_ms() / 1000) as i64);
                if let Some((path, text)) = prd_before {
                    ran.prd_changed = blocking(move || Ok(put_back_orders(&path, &text)))
                        .await
                        .unwrap_or_default();
                }
                // Its work is taken before anything else (its check) touches the worktree.
                if let Some((iso, base)) = &isolated {
                    match take_work(iso, slot, base, &id, &attempt_name).await {
                        Ok(w) => work = Some(w),
                        Err(message) => landing = Some(Landing::Error { message }),
                    }
                }
                // Work that could not be taken (its lane no longer prdloop's folder, say) is
                // not judged: nothing runs in that lane.
                let judged = isolated.is_none() || work.is_some();
                if let Some(job) = check.filter(|_| judged && ran.claims_pass()) {
                    // A command whose own files the attempt changed is no evidence of it.
                    ran.protected = match (&work, &isolated) {
                        // What the check's files say is read through git: off the loop.
                        (Some(w), Some((iso, _))) => {
                            let (i, base, files) = (iso.clone(), w.base.clone(), w.files.clone());
                            let (g, command) = (guard.clone(), job.command.clone());
                            blocking(move || {
                                let read = |p: &str| i.file_at(&base, p);
                                Ok(g.touched(&command, &files, &i.rel(), &read))
                            })
                            .await
                            .unwrap_or_default()
                        }
                        _ => match before {
                            Some(b) => {
                                let g = guard.clone();
                                blocking(move || Ok(b.touched(&g)))
                                    .await
                                    .unwrap_or_default()
                            }
                            None => Vec::new(),
                        },
                    };
                    if ran.protected.is_empty() {
                        ran.check = Some(
                            verify::check(&job.command, &job.settings, &job.log, rx.clone()).await,
                        );
                    }
                }
                let needs_review = judged
                    && ran.claims_pass()
                    && match &ran.check {
                        None => true,
                        Some(Ok(c)) => c.unrunnable() || c.ran_no_test.is_some(),
                        Some(Err(_)) => false,
                    };
                if let Some(job) = review.filter(|_| needs_review) {
                    ran.review =
                        Some(review_attempt(&job, &ran, &work, &isolated, slot, &rx).await);
                }
                if judged && !others.is_empty() && judge_ran(&ran).passes() {
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
            judgement: judge(&ran),
            lane,
            id,
            iteration,
            started_at,
            log,
            ran,
            landing,
            unprepared,
            sample,
            work,
            broken,
        }
    }
}

/// Whether the dispatcher lands this attempt's work before the core hears of it: a single
/// attempt (not a best-of-N sample) that passes, with work taken from a worktree that was made
/// ready, and no landing yet.
pub fn lands(d: &WorkerDone, isolated: bool) -> bool {
    isolated
        && d.sample.is_none()
        && d.landing.is_none()
        && d.work.is_some()
        && d.unprepared.is_none()
        && d.judgement.passes()
}

/// The attempt's work, committed on its base and pinned under its name; the worktree sealed
/// again.
async fn take_work(
    iso: &Arc<Isolation>,
    slot: usize,
    base: &str,
    id: &str,
    attempt_name: &str,
) -> Result<Work, String> {
    let (i, b, c, n) = (
        iso.clone(),
        base.to_string(),
        id.to_string(),
        attempt_name.to_string(),
    );
    blocking(move || {
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
    .await
}

/// The independent verifier on a claimed PASS: the attempt's diff and what the runner found
/// in its prompt; its verdict void when it changed the attempt's files.
async fn review_attempt(
    job: &ReviewJob,
    ran: &Ran,
    work: &Option<Work>,
    isolated: &Option<(Arc<Isolation>, String)>,
    slot: usize,
    rx: &watch::Receiver<Cancel>,
) -> Review {
    /// How much of the diff the verifier's prompt holds.
    const DIFF_MAX: usize = 24 * 1024;
    let mut facts = Vec::new();
    if !ran.protected.is_empty() {
        facts.push(format!(
            "The attempt changed {}, which the criterion's Verify command runs (the check's \
             own files), so the runner did not count that command: check the criterion \
             another way, and judge whether that change weakens the check.",
            ran.protected.join(", ")
        ));
        if let (Some(w), Some((iso, _))) = (work, isolated) {
            let (i, b, c, p) = (
                iso.clone(),
                w.base.clone(),
                w.commit.clone(),
                ran.protected.clone(),
            );
            if let Ok(d) = blocking(move || i.diff_of(&b, &c, &p)).await {
                facts.push(format!(
                    "What the attempt changed of the check's own files:\n```diff\n{d}\n```"
                ));
            }
        }
    }
    if let Some(Ok(c)) = &ran.check
        && c.unrunnable()
    {
        facts.push(format!(
            "The Verify command cannot run here: {}",
            c.reason()
        ));
    }
    if let Some(Ok(c)) = &ran.check
        && c.ran_no_test.is_some()
    {
        facts.push(format!(
            "The Verify command measured nothing: {}",
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
    let tree = |iso: &Arc<Isolation>| {
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

/// Without lanes: what of the PRD's orders (see [`crate::prd::contract`]) changed since
/// `before`, put back as they were in one atomic write (the run's ticks kept); the run's
/// writer takes the file as it finds it. Nothing when nothing changed. Only a text read the
/// same twice in a row is judged (another program may be half-way through writing it), and
/// it is put back only while the file still holds that text. A text that is `before` but for
/// the run's own writes (its boxes, front matter outside the `prdloop:` map) is judged at once:
/// a half-written file is not one, so the usual attempt waits for nothing.
fn put_back_orders(path: &std::path::Path, before: &str) -> Vec<String> {
    let read = || std::fs::read_to_string(path).ok();
    if read().is_some_and(|now| crate::prd::contract::only_boxes_differ(before, &now)) {
        return Vec::new();
    }
    let mut now = None;
    for _ in 0..20 {
        let a = read();
        std::thread::sleep(std::time::Duration::from_millis(50));
        if a.is_some() && a == read() {
            now = a;
            break;
        }
    }
    let Some(now) = now else {
        return Vec::new();
    };
    let Some(t) = crate::prd::contract::tampered(before, &now) else {
        return Vec::new();
    };
    if t.restored != now
        && read().as_deref() == Some(now.as_str())
        && let Err(e) = crate::fsutil::write_atomic(path, t.restored.as_bytes())
    {
        tracing::warn!(
            "could not put back the PRD's orders in {}: {e:#}",
            path.display()
        );
    }
    t.what
}

/// Runs `--setup` in a lane made anew, under a check's rules for the lane (what it runs may
/// be work that landed): `Err` says why it failed.
async fn set_up(spec: &Spec) -> Result<(), String> {
    let cmd = spec.args.last().cloned().unwrap_or_default();
    let place = spec.cwd.display();
    let (_keep, rx) = watch::channel(Cancel::None);
    let f = worker::start(spec.clone())
        .map_err(|e| format!("--setup `{cmd}` could not start in {place}: {e}"))?
        .wait(rx)
        .await;
    if f.exit == (Exit::Code { code: 0 }) {
        return Ok(());
    }
    let last = f
        .stderr_tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let how = match &f.exit {
        Exit::Code { code } => format!("exit status: {code}"),
        Exit::Signal { signal } => format!("killed by signal {signal}"),
        Exit::TimedOut { after_secs } => format!("timed out after {after_secs}s"),
        Exit::Stuck(st) => st.describe(),
        Exit::Cancelled => "cancelled".into(),
    };
    let colon = if last.is_empty() { "" } else { ": " };
    Err(format!(
        "--setup `{cmd}` failed in {place} ({how}){colon}{last}"
    ))
}

/// Runs blocking work (git) off the loop's threads; an error as text.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(e) => Err(e.to_string()),
    }
}
