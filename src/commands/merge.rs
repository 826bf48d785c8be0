//! `prdloop merge PRD DIR…`: the fan-in of a PRD fanned out over machines. Each shard's bundle
//! is applied to this checkout in shard order with the three-way merge isolated workers use
//! ([`crate::isolation::merge_into_checkout`]): a bundle whose changes collide with what is
//! merged already is not applied at all, and its criteria fail naming the files. The criteria
//! that passed are re-checked on the merged tree (their runnable Verify commands), then
//! ticked; the front matter, one state file with the shards' history summed, and a summary
//! are written. Exit codes as `run`'s.
//!
//! A bundle is untrusted input (a CI artifact): it is read by [`Bundle::load`], checked
//! against the PRD and the split ([`Bundle::check`]) and its patch against its file list
//! ([`Bundle::stage`]) before anything changes; a refusal is [`exit::Exit::Refused`]. A tick rests on
//! evidence: `checked` when its Verify command passed here on the merged tree, `claimed`
//! when only the shard's word holds it up.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::warning::{Warning, Warnings};
use crate::bundle::{Bundle, CriterionEnd, Refused, StagedPatch, shown};
use crate::config::{MergeSettings, Paths};
use crate::exit::Exit;
use crate::isolation::Merged;
use crate::isolation::git::Git;
use crate::prd::Prd;
use crate::run::end::End;
use crate::state::{self, CriterionState, CriterionStatus, Evidence, LoopEntry, SessionState};
use crate::worker::Cancel;
use crate::{exit, outln, report};

mod history;
mod summary;

#[cfg(test)]
use history::merged_history;
use history::merged_state;
use summary::print_summary;

/// What became of one bundle's patch.
#[derive(Debug, Clone)]
enum Applied {
    Merged(Vec<String>),
    Unchanged,
    Conflict(Vec<String>),
    Error(String),
}

impl Applied {
    fn failure(&self, shard: &str) -> Option<String> {
        match self {
            Applied::Merged(_) | Applied::Unchanged => None,
            Applied::Conflict(files) => Some(format!(
                "merge conflict in {}: shard {shard}'s changes collide with the shards merged before it; nothing of shard {shard} was applied",
                files.join(", ")
            )),
            Applied::Error(e) => Some(format!("shard {shard}'s changes could not be applied: {e}")),
        }
    }

    fn word(&self) -> &'static str {
        match self {
            Applied::Merged(_) => "merged",
            Applied::Unchanged => "unchanged",
            Applied::Conflict(_) => "conflict",
            Applied::Error(_) => "error",
        }
    }
}

/// One criterion's result after the merge.
#[derive(Debug, Clone)]
struct Result1 {
    id: String,
    shard: String,
    index: usize,
    /// Whether it passes, and on what evidence (`None`: it does not pass).
    pass: Option<Evidence>,
    /// Why it does not pass, when it does not.
    reason: Option<String>,
    state: CriterionState,
}

impl Result1 {
    fn passed(&self) -> bool {
        self.pass.is_some()
    }
}

pub fn merge(s: &MergeSettings) -> Result<Exit> {
    let (path, dirs, exec) = (s.prd.clone(), &s.bundles[..], &s.exec);
    let limits = &s.limits;
    let doc = super::load_prd(&path)?;
    if doc.criteria.is_empty() {
        report::error(super::no_criteria_message(&path, &doc));
        return Ok(exit::Exit::Usage);
    }
    let paths = &exec.paths;
    let repo = crate::isolation::find_repo(&paths.workdir)
        .map_err(|why| anyhow::anyhow!("merge needs the git checkout the shards ran on: {why}"))?;
    let git = Git::new(&repo.top);
    let head = git.commit_of("HEAD").context("no HEAD commit")?;
    let refuse = |r: &Refused| {
        report::error(format!(
            "refused the bundle: {r}; nothing was changed (a bundle is checked as untrusted input: see `prdloop merge --help`)"
        ));
        exit::Exit::Refused
    };
    let bundles = match Bundle::find(dirs, limits) {
        Ok(b) => b,
        Err(e) => match e.downcast_ref::<Refused>() {
            Some(r) => return Ok(refuse(r)),
            None => return Err(e),
        },
    };
    let me = crate::bundle::prd_id(&repo.top, &path, &doc);
    if let Err(r) = check_bundles(&bundles, &doc, &me, &head) {
        return Ok(refuse(&r));
    }
    // Each patch on the base in a temporary index, its files compared with its manifest's:
    // the last refusals, before anything is written.
    let scratch = tempfile::Builder::new()
        .prefix("prdloop-merge-")
        .tempdir()
        .context("failed to make a temporary folder")?;
    let mut staged = Vec::new();
    for b in &bundles {
        match b.stage(&git, &head, scratch.path()) {
            Ok(s) => staged.push(s),
            Err(r) => return Ok(refuse(&r)),
        }
    }
    let mut warnings = Warnings::default();
    if let Some(shards) = missing_shards(&bundles) {
        warnings.say(Warning::MissingShards { shards });
    }

    // Writing boxes while a loop runs on the PRD would fight the loop: take its lock.
    let session = uuid::Uuid::new_v4().to_string();
    let info = state::LockInfo::new(&session, &path, &paths.state_dir);
    let lock = match state::PrdLock::acquire(&path, &info)? {
        state::LockOutcome::Busy(holder) => {
            report::error(format!(
                "{} is being run by {}; merge when it ends",
                path.display(),
                state::LockInfo::describe(holder.as_ref())
            ));
            return Ok(exit::Exit::Locked);
        }
        state::LockOutcome::Acquired { lock, .. } => lock,
    };
    let fanin = Fanin {
        path: &path,
        doc: &doc,
        bundles: &bundles,
        paths,
        git: &git,
        head: &head,
        session: &session,
        settings: s,
        scratch: scratch.path(),
    };
    let result = fanin.merge(&staged, warnings);
    lock.release();
    result
}

/// Refuses bundles that are not of this PRD at this commit and of this split, and shard sets
/// that do not fit together.
fn check_bundles(
    bundles: &[Bundle],
    doc: &Prd,
    me: &crate::bundle::PrdId,
    head: &str,
) -> std::result::Result<(), Refused> {
    let Some(first) = bundles.first() else {
        return Ok(());
    };
    let count = first.manifest.shard.count;
    let mut seen = std::collections::HashMap::new();
    for b in bundles {
        b.check(doc, me, head)?;
        let m = &b.manifest;
        let file = b.dir.join(crate::bundle::MANIFEST);
        if m.shard.count != count {
            return Err(Refused {
                file,
                field: Some("shard.count".into()),
                why: format!(
                    "shard {} is of a split into {} shards, but {} is of a split into {count}; give the bundles of one fan-out",
                    m.shard,
                    m.shard.count,
                    first.dir.display()
                ),
            });
        }
        if let Some(other) = seen.insert(m.shard.index, &b.dir) {
            return Err(Refused {
                file,
                field: Some("shard.index".into()),
                why: format!(
                    "a second bundle of shard {} (the first: {}); give each shard's once",
                    m.shard,
                    other.display()
                ),
            });
        }
    }
    Ok(())
}

fn missing_shards(bundles: &[Bundle]) -> Option<String> {
    let count = bundles.first()?.manifest.shard.count;
    let have: Vec<usize> = bundles.iter().map(|b| b.manifest.shard.index).collect();
    let missing: Vec<String> = (1..=count)
        .filter(|i| !have.contains(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// The fan-in under way, once the PRD is locked: what every step of it reads.
struct Fanin<'a> {
    path: &'a Path,
    /// The PRD as it was read before the lock (the front matter's iteration count).
    doc: &'a Prd,
    bundles: &'a [Bundle],
    paths: &'a Paths,
    git: &'a Git,
    head: &'a str,
    session: &'a str,
    settings: &'a MergeSettings,
    scratch: &'a Path,
}

/// The criteria's results after the re-check, by id, as [`crate::verify::check_many`] gives
/// them.
type Rechecked = Vec<(
    String,
    std::result::Result<crate::verify::Check, crate::worker::SpawnError>,
)>;

impl Fanin<'_> {
    /// prdloop's own paths of the merge's PRD.
    fn own(&self) -> crate::config::OwnPaths {
        crate::config::OwnPaths::new(self.path, self.paths.state_dir.clone())
    }

    /// The patches applied, the passes re-checked and ticked, the state and the summary
    /// written.
    fn merge(&self, staged: &[StagedPatch], mut warnings: Warnings) -> Result<Exit> {
        let applied = self.apply_all(staged, &mut warnings);
        let mut results = shard_results(self.bundles, &applied);
        let log_dir = self.own().logs(self.session);
        let Some(checked) = self.recheck(&results, &log_dir)? else {
            report::error(format!(
                "interrupted while re-checking on the merged tree: the bundles' changes are in the checkout, {} was not updated; `git diff` shows them, `prdloop verify {}` ticks what passes",
                self.path.display(),
                self.path.display()
            ));
            return Ok(crate::exit::Exit::Interrupted);
        };
        take_rechecks(&mut results, checked, &mut warnings);
        let iterations = self
            .bundles
            .iter()
            .map(|b| b.manifest.iterations.len())
            .max()
            .unwrap_or(0);
        let now = self.write_prd(&results, iterations)?;
        let end = end_of(&now, self.bundles);

        // One state file for the whole fan-out.
        let state = merged_state(
            self.session,
            self.path,
            &now,
            self.doc,
            self.bundles,
            &results,
            &self.paths.workdir,
            &log_dir,
            end,
            iterations,
            &mut warnings,
        );
        if let Err(e) = state.save(&self.paths.state_dir) {
            warnings.say(Warning::StateNotWritten {
                error: format!("{e:#}"),
            });
        }
        let state_path = SessionState::path(&self.paths.state_dir, self.session);
        print_summary(
            self.path,
            self.bundles,
            &applied,
            &results,
            &now,
            end,
            &state,
            &state_path,
            warnings,
            self.settings.json,
            &self.settings.ci,
        )?;
        Ok(end.exit())
    }

    /// The patches, in shard order, each said when it was not applied.
    fn apply_all(&self, staged: &[StagedPatch], warnings: &mut Warnings) -> Vec<Applied> {
        let own = self.own().unwritable();
        let mut own: Vec<&Path> = own.iter().map(PathBuf::as_path).collect();
        own.extend(self.settings.bundles.iter().map(PathBuf::as_path));
        let exclude = crate::isolation::own_exclusions(&self.git.dir, &own);
        let mut applied = Vec::new();
        for (b, s) in self.bundles.iter().zip(staged) {
            let shard = b.manifest.shard.to_string();
            let result = self.apply(&shard, s, &exclude);
            if let Some(text) = result.failure(&shard) {
                warnings.say(Warning::NotApplied {
                    shard: shard.clone(),
                    text,
                });
            }
            applied.push(result);
        }
        applied
    }

    /// One shard's staged patch, merged into the checkout.
    fn apply(&self, shard: &str, staged: &StagedPatch, exclude: &[String]) -> Applied {
        let commit = match staged {
            StagedPatch::Empty => return Applied::Unchanged,
            StagedPatch::DoesNotApply(e) => return Applied::Error(e.clone()),
            StagedPatch::Commit(a) => a,
        };
        let policy = crate::isolation::Policy {
            allow_deletions: false,
            origin: crate::isolation::undo::Origin {
                label: format!("shard {shard}"),
                prd: Some(self.path.display().to_string()),
                session: Some(self.session.to_string()),
            },
            credit: None,
        };
        match crate::isolation::merge_into_checkout_locked(
            self.git,
            self.head,
            commit,
            exclude,
            self.scratch,
            &policy,
        ) {
            Ok(Merged::Applied { files, .. }) => {
                Applied::Merged(crate::isolation::repo_path::lossy(&files))
            }
            Ok(Merged::Unchanged) => Applied::Unchanged,
            Ok(Merged::Conflict { files, .. }) => Applied::Conflict(files),
            Ok(Merged::Refused(r)) => Applied::Error(format!("not applied: {r}")),
            Err(e) => Applied::Error(format!("{e:#}")),
        }
    }

    /// The passes' Verify commands, run again on the merged tree (`None`: interrupted).
    fn recheck(&self, results: &[Result1], log_dir: &Path) -> Result<Option<Rechecked>> {
        let jobs = self.recheck_jobs(results, log_dir);
        if jobs.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let exec = &self.settings.exec;
        let rt = super::runtime()?;
        let (checked, interrupted) = rt.block_on(async {
            let (tx, rx) = tokio::sync::watch::channel(Cancel::None);
            let mut sigs = crate::platform::Signals::listen()?;
            let fut = crate::verify::check_many(jobs, self.settings.agents, rx);
            tokio::pin!(fut);
            let mut interrupted = false;
            loop {
                tokio::select! {
                    r = &mut fut => break anyhow::Ok((r, interrupted)),
                    _ = sigs.recv() => {
                        // The Verify commands' process groups are ended, then we stop.
                        interrupted = true;
                        let _ = tx.send(Cancel::Graceful);
                    }
                }
            }
        })?;
        // Nothing the Verify commands detached outlives them.
        crate::worker::reaper::end_adopted(exec.kill_grace);
        Ok((!interrupted).then_some(checked))
    }

    /// A job for each pass whose criterion has a Verify command (never a Custom one).
    fn recheck_jobs(&self, results: &[Result1], log_dir: &Path) -> Vec<crate::verify::Job> {
        let exec = &self.settings.exec;
        let settings = crate::verify::Settings::new(
            self.paths.workdir.clone(),
            exec.verify_timeout,
            exec.kill_grace,
            Some(self.session),
            self.path,
        );
        results
            .iter()
            .filter(|r| r.passed())
            .filter_map(|r| {
                let c = self.doc.criterion(&r.id)?;
                let cmd = c.command(&exec.verify_types).filter(|_| !c.is_custom())?;
                Some(settings.job(
                    &r.id,
                    cmd,
                    log_dir.join(format!("merge-{}-verify.log", r.id)),
                ))
            })
            .collect()
    }

    /// The PRD: boxes and front matter, on the text as it is on disk now.
    fn write_prd(&self, results: &[Result1], iterations: usize) -> Result<Prd> {
        let path = self.path;
        crate::prd::write::update(path, |now| {
            for r in results.iter().filter(|r| r.passed()) {
                // A person's gate, whatever the results say (a bundle cannot hold one: checked).
                if now.criterion(&r.id).is_some_and(|c| !c.is_custom()) {
                    now.set_checked(&r.id, true);
                }
            }
            now.tick_parents();
            let (p, t) = now.progress();
            let failing: Vec<String> = now.failing().map(|c| c.id.clone()).collect();
            if iterations > 0 {
                let number = crate::run::front::next_iteration(self.doc) + iterations as u64 - 1;
                let edits =
                    crate::run::front::at_iteration_end(now, number, (p, t), failing.clone());
                now.set_front(&edits)
                    .map_err(|e| anyhow::anyhow!(e.at(path)))?;
            }
            let end = end_of(now, self.bundles);
            let edits = crate::run::front::at_end(now, end, iterations > 0, (p, t), failing);
            now.set_front(&edits)
                .map_err(|e| anyhow::anyhow!(e.at(path)))
        })
    }
}

/// Each criterion of the shards, with its bundle's record.
fn shard_results(bundles: &[Bundle], applied: &[Applied]) -> Vec<Result1> {
    let mut results = Vec::new();
    for (b, a) in bundles.iter().zip(applied) {
        let shard = b.manifest.shard.to_string();
        let failure = a.failure(&shard);
        // Only the bundle's own criteria ([`Bundle::check`]), none of them Custom.
        for o in &b.manifest.outcomes {
            let mut state = o.state.clone();
            state.id = o.id.clone();
            let (passed, reason) = match (o.outcome, &failure) {
                (CriterionEnd::Pass, None) => (true, None),
                (CriterionEnd::Pass, Some(why)) => (false, Some(why.clone())),
                (CriterionEnd::Fail, _) => (
                    false,
                    Some(
                        state
                            .last_failure
                            .as_deref()
                            .map(shown)
                            .unwrap_or_else(|| "failed".into()),
                    ),
                ),
                (CriterionEnd::Untried, _) => (
                    false,
                    Some(format!("not attempted: shard {shard}'s run ended first")),
                ),
            };
            results.push(Result1 {
                id: o.id.clone(),
                shard: shard.clone(),
                index: b.manifest.shard.index,
                // Until its Verify command passes here.
                pass: passed.then_some(Evidence::Claimed),
                reason,
                state,
            });
        }
    }
    results
}

/// The re-check's results on the criteria: a pass is `checked`, a failure no longer passes,
/// and what could not run here is said.
fn take_rechecks(results: &mut [Result1], checked: Rechecked, warnings: &mut Warnings) {
    let mut unrechecked = Vec::new();
    for (id, c) in checked {
        let Some(r) = results.iter_mut().find(|r| r.id == id) else {
            continue;
        };
        match c {
            Ok(c) if c.passed() => r.pass = Some(Evidence::Checked),
            // A command that cannot run here says nothing about the merge: ticked on the
            // shard's check, and said so.
            Ok(c) if c.unrunnable() => unrechecked.push(format!("{id} ({})", c.reason())),
            Ok(c) => {
                r.pass = None;
                r.reason = Some(format!(
                    "its Verify command fails on the merged tree: {}",
                    c.reason()
                ));
            }
            Err(e) => warnings.say(Warning::NotRun {
                id: id.clone(),
                error: e.to_string(),
            }),
        }
    }
    if !unrechecked.is_empty() {
        warnings.say(Warning::NotRechecked {
            criteria: unrechecked,
        });
    }
}

/// How the fan-out ended, by the PRD as it is now.
fn end_of(now: &Prd, bundles: &[Bundle]) -> End {
    if now.failing().next().is_none() {
        End::Complete
    } else if now.failing().all(|c| c.is_custom()) {
        End::Blocked
    } else {
        shards_end(bundles)
    }
}

/// How the fan-out ended when criteria still fail: the gravest of the shards' own ends.
fn shards_end(bundles: &[Bundle]) -> End {
    let codes: Vec<u8> = bundles.iter().map(|b| b.manifest.exit_code).collect();
    for (code, end) in [
        (exit::Exit::AgentFatal, End::AgentFatal),
        (exit::Exit::Interrupted, End::Interrupted),
        (exit::Exit::Io, End::Worktree),
    ] {
        if codes.contains(&code.code()) {
            return end;
        }
    }
    End::MaxIterations
}

#[cfg(test)]
mod tests;
