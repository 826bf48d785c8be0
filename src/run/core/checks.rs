//! The runner's own checks: each runnable criterion's Verify command, pinned as the run first
//! saw it; the batches run before the first iteration and at each iteration's end; and what
//! their results do to the boxes (tick, untick, regression).

use crate::run::warning::Warning;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use super::{Core, Now};
use crate::run::event::{CheckPurpose, Effect, Effects, Flush, RunEvent};
use crate::state::Evidence;
use crate::verify::{self, Check};
use crate::worker::SpawnError;

/// Each runnable criterion's Verify command as the run first saw it (it decides the criterion
/// for the whole run, whatever an edit makes of it), and the criteria whose command cannot run
/// on this machine.
#[derive(Debug, Default)]
pub(in crate::run) struct Pins {
    commands: HashMap<String, String>,
    /// Criteria whose changed command was already warned about.
    warned_changed: HashSet<String>,
    /// Criteria whose command cannot run here (not installed, exit 126/127).
    unverifiable: HashSet<String>,
}

impl Pins {
    /// Pins `id`'s command, unless it has one pinned already.
    fn pin(&mut self, id: &str, command: &str) {
        if !self.commands.contains_key(id) {
            self.commands.insert(id.to_string(), command.to_string());
        }
    }

    fn get(&self, id: &str) -> Option<&str> {
        self.commands.get(id).map(String::as_str)
    }

    /// Whether `id`'s changed command was warned about already.
    fn warned(&self, id: &str) -> bool {
        self.warned_changed.contains(id)
    }

    /// `id`'s changed command was warned about.
    fn warn_once(&mut self, id: &str) {
        self.warned_changed.insert(id.to_string());
    }

    /// Every pinned command, by criterion.
    fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.commands
            .iter()
            .map(|(id, c)| (id.as_str(), c.as_str()))
    }

    /// `id`'s command cannot run here: whether that is news.
    fn cannot_run(&mut self, id: &str) -> bool {
        self.unverifiable.insert(id.to_string())
    }

    fn runs(&self, id: &str) -> bool {
        !self.unverifiable.contains(id)
    }
}

impl Core {
    /// Pins the Verify command of every runnable criterion the run has not seen yet.
    pub(in crate::run) fn pin_commands(&mut self) {
        for c in &self.doc.criteria {
            if let Some(cmd) = c.command(&self.cfg.verify_types) {
                self.pins.pin(&c.id, cmd);
            }
        }
    }

    /// A changed Verify command is warned about once and ignored: the command from when the
    /// run first saw the criterion still decides. New criteria get theirs pinned.
    pub(in crate::run) fn check_commands(&mut self, r: &mut Effects) {
        let mut new = Vec::new();
        for c in &self.doc.criteria {
            let now = c.command(&self.cfg.verify_types);
            let Some(pinned) = self.pins.get(&c.id) else {
                if let Some(cmd) = now {
                    new.push((c.id.clone(), cmd.to_string()));
                }
                continue;
            };
            if now != Some(pinned) && !self.pins.warned(&c.id) {
                r.say(RunEvent::Warning(Warning::VerifyChanged {
                    prd: self.cfg.prd_path.clone(),
                    line: c.line,
                    id: c.id.clone(),
                    now: now.map(str::to_string),
                    pinned: pinned.to_string(),
                }));
                self.pins.warn_once(&c.id);
            }
        }
        for (id, cmd) in new {
            self.pins.pin(&id, &cmd);
        }
    }

    /// The pinned command that decides this criterion, when checks are on.
    pub(in crate::run) fn command_for(&self, id: &str) -> Option<&str> {
        if !self.cfg.verify {
            return None;
        }
        let c = self.doc.criterion(id)?;
        if c.is_custom() || !self.pins.runs(id) {
            return None;
        }
        self.pins.get(id)
    }

    /// The check of `id` run in `dir`, in the tree of worktree `slot` (a worker's lane, or
    /// the run's folder without isolation), under a worker's rules for that tree. The
    /// start and regression checks (`slot` `None`) are run in a fresh copy of the checkout
    /// when the run is isolated ([`crate::run::dispatcher`]), else in the run's folder.
    pub(in crate::run) fn verify_job(
        &self,
        id: &str,
        log: PathBuf,
        dir: PathBuf,
        slot: Option<usize>,
    ) -> Option<verify::Job> {
        let command = self.command_for(id)?;
        let top = slot.map_or_else(|| self.cfg.workdir.clone(), |s| self.lane_top(s));
        let settings = verify::Settings::new(
            dir,
            self.cfg.verify_timeout,
            self.cfg.kill_grace,
            Some(&self.session),
            &self.cfg.prd_path,
        )
        .sandboxed(self.cfg.sandbox.check_rules(&top));
        Some(settings.job(id, command, log))
    }

    /// What an attempt at `c` may not change of its check's files, beside what the command
    /// runs: the criterion's words say what is the code under test.
    pub(in crate::run) fn guard(
        &self,
        c: &crate::prd::Criterion,
    ) -> crate::evidence::protect::Guard {
        crate::evidence::protect::Guard {
            asked: c.description.clone(),
            also: self.cfg.protect.clone(),
        }
    }

    /// `--select best`: the checks of every other passing criterion, run in a sample's
    /// worktree to count what its change breaks.
    pub(in crate::run) fn other_checks(
        &self,
        id: &str,
        stem: &str,
        dir: &std::path::Path,
        slot: usize,
    ) -> Vec<verify::Job> {
        self.doc
            .criteria
            .iter()
            .filter(|c| c.id != id && self.ledger.passing(&c.id))
            .filter_map(|c| {
                let log = self
                    .log_dir
                    .join(format!("{stem}-others-{}-verify.log", c.id));
                self.verify_job(&c.id, log, dir.to_path_buf(), Some(slot))
            })
            .collect()
    }

    fn check_jobs(&self, purpose: CheckPurpose) -> Vec<verify::Job> {
        let label = match purpose {
            CheckPurpose::Start => "start",
            CheckPurpose::Regression => "regress",
        };
        self.doc
            .criteria
            .iter()
            .filter(|c| self.in_scope(&c.id))
            .filter(|c| match purpose {
                // Boxes ticked before the run are the author's: their checks run only with
                // --recheck (one may be costly: a paid model call, a deploy).
                // A tick made by a prdloop session (resumed) is not the author's.
                CheckPurpose::Start => {
                    !self.ledger.passing(&c.id)
                        || self.cfg.recheck
                        || self.ledger.get(&c.id).is_some_and(|r| r.ticked_in_run)
                }
                // Boxes ticked before the run are the author's: re-checked only on request.
                CheckPurpose::Regression => {
                    self.ledger.passing(&c.id)
                        && (self.cfg.recheck
                            || self.ledger.get(&c.id).is_some_and(|r| r.ticked_in_run))
                }
            })
            .filter_map(|c| {
                let log = self.log_dir.join(format!("{label}-{}-verify.log", c.id));
                self.verify_job(&c.id, log, self.cfg.workdir.clone(), None)
            })
            .collect()
    }

    /// Before the first iteration: every runnable criterion's command, once (of boxes
    /// already ticked, only with --recheck). A command whose program is not installed is
    /// not run: the agent's verdict counts for its criterion, with a warning.
    pub fn start_checks(&mut self) -> Effects {
        let mut r = Effects::default();
        if !self.cfg.verify {
            return r;
        }
        let missing: Vec<(String, String)> = self
            .pins
            .iter()
            .filter_map(|(id, cmd)| {
                verify::cannot_run_here(cmd, &self.cfg.workdir).map(|why| (id.to_string(), why))
            })
            .collect();
        let mut missing = missing;
        missing.sort_by_key(|(id, _)| self.doc.criterion(id).map_or(usize::MAX, |c| c.line));
        for (id, why) in missing {
            r.extend(self.unverifiable(&id, &why));
        }
        let jobs = self.check_jobs(CheckPurpose::Start);
        if !jobs.is_empty() {
            r.say(RunEvent::ChecksStarting { count: jobs.len() });
            r.push(Effect::RunChecks(CheckPurpose::Start, jobs));
        }
        r
    }

    /// At an iteration's end: the commands of every ticked runnable criterion, again.
    pub fn regression_checks(&self) -> Effects {
        let mut r = Effects::default();
        if !self.cfg.verify || self.interrupted() {
            return r;
        }
        let jobs = self.check_jobs(CheckPurpose::Regression);
        if !jobs.is_empty() {
            r.push(Effect::RunChecks(CheckPurpose::Regression, jobs));
        }
        r
    }

    /// The runner's checks of a batch are back: each ticks, unticks or leaves its criterion,
    /// in document order.
    pub(in crate::run) fn checks_done(
        &mut self,
        purpose: CheckPurpose,
        results: Vec<(String, Result<Check, SpawnError>)>,
        now: Now,
    ) -> Effects {
        let mut r = Effects::default();
        let done = self.finished(results, &mut r);
        let waiting = match purpose {
            CheckPurpose::Start => self.waiting(&done),
            CheckPurpose::Regression => HashMap::new(),
        };
        for d in done {
            self.counts.refusals(&d.id, &d.check.refused);
            if let Some(w) = d.check.refused.check_warning(&d.id) {
                r.say(RunEvent::Warning(w.into()));
            }
            let outcome = self.outcome(purpose, &d, waiting.get(&d.id));
            self.apply(outcome, d, now, &mut r);
        }
        r.flush(Flush::Now);
        r
    }

    /// The checks of a batch that ran to their end, in document order; a warning for each
    /// that could not be started.
    fn finished(
        &self,
        results: Vec<(String, Result<Check, SpawnError>)>,
        r: &mut Effects,
    ) -> Vec<Done> {
        let mut done = Vec::new();
        for (id, res) in results {
            match res {
                Ok(check) if !check.cancelled() => done.push(Done { id, check }),
                Ok(_) => {}
                Err(e) => r.say(RunEvent::Warning(Warning::CheckNotRun {
                    id,
                    program: e.program,
                    error: e.source.to_string(),
                })),
            }
        }
        done.sort_by_key(|d| self.doc.criterion(&d.id).map_or(usize::MAX, |c| c.line));
        done
    }

    /// What a finished check does to its criterion, as the ledger has it now; `need` is
    /// what it waits for (of a start check).
    fn outcome(&self, purpose: CheckPurpose, d: &Done, need: Option<&String>) -> Outcome {
        let start = purpose == CheckPurpose::Start;
        let was = self.ledger.passing(&d.id);
        let record = self.ledger.get(&d.id);
        if d.check.unrunnable() {
            return Outcome::Unrunnable;
        }
        // A check that measured nothing says nothing of a tick it did not earn (one a
        // verifier reviewed, or the author's): only a tick this command checked, whose
        // tests are gone now, is unticked by it.
        if d.check.ran_no_test.is_some()
            && was
            && record.and_then(|r| r.verified_by) != Some(Evidence::Checked)
        {
            return Outcome::MeasuredNothing { warn: start };
        }
        if let Some(need) = need {
            return Outcome::Waits(need.clone());
        }
        if d.check.passed() {
            return Outcome::Passed {
                announce: start && !was,
            };
        }
        match purpose {
            CheckPurpose::Start
                if was && !self.cfg.recheck && !record.is_some_and(|r| r.ticked_in_run) =>
            {
                Outcome::Disputed
            }
            CheckPurpose::Start => Outcome::Failed { was },
            CheckPurpose::Regression => Outcome::Regressed,
        }
    }

    /// Carries out what a finished check does: to the ledger, and what the run says of it.
    fn apply(&mut self, outcome: Outcome, d: Done, now: Now, r: &mut Effects) {
        let Done { id, check } = d;
        let reason = || crate::run::judge::one_line(&check.reason(), 200);
        match outcome {
            Outcome::Unrunnable => r.extend(self.unverifiable(&id, &check.reason())),
            Outcome::MeasuredNothing { warn } => {
                if warn {
                    let reason = reason();
                    r.say(RunEvent::Warning(Warning::TickedMeasuredNothing {
                        id,
                        reason,
                    }));
                }
            }
            Outcome::Waits(need) => r.say(RunEvent::Warning(Warning::NeedFails { id, need })),
            Outcome::Passed { announce } => {
                self.tick_checked(&id, &check, now);
                if announce {
                    r.say(RunEvent::StartCheck { id, failed: None });
                }
            }
            Outcome::Disputed => {
                self.ledger.check_disputed(&id);
                let reason = reason();
                r.say(RunEvent::Warning(Warning::TickedCheckFails { id, reason }));
            }
            Outcome::Failed { was } => {
                let reason = crate::run::reason::FailReason::check(&check);
                self.ledger.check_failed(&id, reason.to_string(), was);
                if was {
                    let failed = Some(reason);
                    r.say(RunEvent::StartCheck { id, failed });
                }
            }
            Outcome::Regressed => {
                let reason = crate::run::reason::FailReason::regression(&check);
                self.ledger.check_failed(&id, reason.to_string(), true);
                r.say(RunEvent::Regressed { id, reason });
                self.rounds.regressed();
            }
        }
    }

    /// A passing check ticks its criterion, with a receipt: checked on the checkout itself
    /// (no attempt, no agent).
    fn tick_checked(&mut self, id: &str, check: &Check, now: Now) {
        self.ledger.check_passed(id);
        self.ledger.set_receipt(
            id,
            crate::evidence::receipt::Receipt {
                evidence: crate::state::Evidence::Checked,
                check: Some(crate::evidence::receipt::CheckReceipt::of(check)),
                review: None,
                commit: None,
                base: None,
                agent: None,
                model: None,
                tokens: 0,
                cost_usd: 0.0,
                at_ms: now.ms,
            },
        );
    }

    /// Of the start checks' results, the open criteria whose check passes while something
    /// they need (after:) still fails, each with the first such need. Decided along the
    /// graph's waves, so that a need passing in the same batch counts (a chain whose every
    /// check passes is ticked whole); a need outside the batch counts as the ledger has it.
    fn waiting(&self, results: &[Done]) -> HashMap<String, String> {
        let passes: Vec<&str> = results
            .iter()
            .filter(|d| d.check.passed() && !d.check.unrunnable() && !self.ledger.passing(&d.id))
            .map(|d| d.id.as_str())
            .collect();
        let failed: HashSet<&str> = results
            .iter()
            .filter(|d| !d.check.passed() && !d.check.unrunnable())
            .map(|d| d.id.as_str())
            .collect();
        let mut ticks: HashSet<String> = HashSet::new();
        let mut waiting = HashMap::new();
        for wave in self.graph.waves(&passes) {
            for id in wave {
                let failing = self.graph.needs(&id).iter().find(|n| {
                    !ticks.contains(*n) && (failed.contains(n.as_str()) || !self.ledger.passing(n))
                });
                match failing {
                    Some(n) => {
                        waiting.insert(id, n.clone());
                    }
                    None => {
                        ticks.insert(id);
                    }
                }
            }
        }
        waiting
    }

    /// A criterion whose Verify command cannot run on this machine: one warning, then the
    /// agent's verdict decides it for the rest of the run, and no check unticks it.
    pub(in crate::run) fn unverifiable(&mut self, id: &str, why: &str) -> Effects {
        let mut r = Effects::default();
        if self.pins.cannot_run(id) {
            r.say(RunEvent::Warning(Warning::Unverifiable {
                id: id.to_string(),
                why: crate::run::judge::one_line(why, 200),
            }));
        }
        r
    }
}

/// A check of a batch that ran to its end.
struct Done {
    id: String,
    check: Check,
}

/// What a finished check does to its criterion.
#[derive(Debug)]
enum Outcome {
    /// Its command cannot run here: the agent's verdict decides the criterion from now on.
    Unrunnable,
    /// It ran no test, on a tick it did not earn: the tick stands (`warn`: a start check
    /// says so).
    MeasuredNothing { warn: bool },
    /// It passes, but what it needs fails: it waits for that.
    Waits(String),
    /// It passes: the box is ticked (`announce`: a start check ticking an open box says so).
    Passed { announce: bool },
    /// A start check failing on the author's tick: the tick stands, disputed.
    Disputed,
    /// A start check failing (`was`: on a ticked box, a prdloop session's or any with
    /// `--recheck`, which is unticked and said).
    Failed { was: bool },
    /// A regression check failing on a tick: unticked.
    Regressed,
}
