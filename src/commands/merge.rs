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
//! ([`Bundle::stage`]) before anything changes; a refusal is [`exit::REFUSED`]. A tick rests on
//! evidence: `checked` when its Verify command passed here on the merged tree, `claimed`
//! when only the shard's word holds it up.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use crate::bundle::{Bundle, Limits, Refused, Staged, Verdict, shown};
use crate::cli::ExecOpts;
use crate::config::{self, Paths};
use crate::isolation::Merged;
use crate::isolation::git::Git;
use crate::prd::Prd;
use crate::prd::lookup::{self, Locations};
use crate::run::end::End;
use crate::state::{self, CriterionState, CriterionStatus, Evidence, LoopEntry, SessionState};
use crate::worker::Cancel;
use crate::{exit, outln, report};

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

pub fn merge(
    prd_arg: &str,
    dirs: &[PathBuf],
    agents: i64,
    exec: &ExecOpts,
    json: bool,
    limits: &Limits,
    loc: &Locations,
) -> Result<u8> {
    let path = lookup::resolve(prd_arg, loc)?;
    let doc = super::load_prd(&path)?;
    if doc.criteria.is_empty() {
        report::error(super::no_criteria_message(&path));
        return Ok(exit::USAGE);
    }
    let (agents, w) = config::clamp_agents(agents);
    if let Some(w) = w {
        report::warn(w);
    }
    let paths = Paths::new(&path, exec, loc)?;
    let repo = crate::isolation::find_repo(&paths.workdir)
        .map_err(|why| anyhow::anyhow!("merge needs the git checkout the shards ran on: {why}"))?;
    let git = Git::new(&repo.top);
    let head = git.commit_of("HEAD").context("no HEAD commit")?;
    let refuse = |r: &Refused| {
        report::error(format!(
            "refused the bundle: {r}; nothing was changed (a bundle is checked as untrusted input: see `prdloop merge --help`)"
        ));
        exit::REFUSED
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
    if let Some(w) = missing_shards(&bundles) {
        report::warn(format!(
            "no bundle of shard(s) {w}: their criteria stay as they are"
        ));
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
            return Ok(exit::LOCKED);
        }
        state::LockOutcome::Acquired { lock, .. } => lock,
    };
    let result = merge_locked(
        &path,
        &doc,
        &bundles,
        &staged,
        &paths,
        &git,
        &head,
        &session,
        dirs,
        agents,
        exec,
        json,
        scratch.path(),
    );
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

#[allow(clippy::too_many_arguments)]
fn merge_locked(
    path: &Path,
    doc: &Prd,
    bundles: &[Bundle],
    staged: &[Staged],
    paths: &Paths,
    git: &Git,
    head: &str,
    session: &str,
    dirs: &[PathBuf],
    agents: usize,
    exec: &ExecOpts,
    json: bool,
    scratch: &Path,
) -> Result<u8> {
    let mut own: Vec<&Path> = vec![path, &paths.state_dir, &paths.session_names];
    own.extend(dirs.iter().map(PathBuf::as_path));
    let exclude = crate::isolation::own_exclusions(&git.dir, &own);

    // The patches, in shard order.
    let mut applied: Vec<Applied> = Vec::new();
    for (b, s) in bundles.iter().zip(staged) {
        let shard = b.manifest.shard.to_string();
        let result = match s {
            Staged::Empty => Applied::Unchanged,
            Staged::DoesNotApply(e) => Applied::Error(e.clone()),
            Staged::Commit(a) => {
                let policy = crate::isolation::Policy {
                    allow_deletions: false,
                    origin: crate::isolation::undo::Origin {
                        label: format!("shard {shard}"),
                        prd: Some(path.display().to_string()),
                        session: Some(session.to_string()),
                    },
                };
                match crate::isolation::merge_into_checkout_locked(
                    git, head, a, &exclude, scratch, &policy,
                ) {
                    Ok(Merged::Applied { files, .. }) => Applied::Merged(files),
                    Ok(Merged::Unchanged) => Applied::Unchanged,
                    Ok(Merged::Conflict { files, .. }) => Applied::Conflict(files),
                    Ok(Merged::Refused(r)) => Applied::Error(format!("not applied: {r}")),
                    Err(e) => Applied::Error(format!("{e:#}")),
                }
            }
        };
        if let Some(f) = result.failure(&shard) {
            report::warn(f);
        }
        applied.push(result);
    }

    // Each criterion of the shards, with its bundle's record.
    let mut results: Vec<Result1> = Vec::new();
    for (b, a) in bundles.iter().zip(&applied) {
        let shard = b.manifest.shard.to_string();
        // Only the bundle's own criteria ([`Bundle::check`]), none of them Custom.
        for o in &b.manifest.outcomes {
            let mut st = o.state.clone();
            st.id = o.id.clone();
            let (passed, reason) = match (o.outcome, a.failure(&shard)) {
                (Verdict::Pass, None) => (true, None),
                (Verdict::Pass, Some(why)) => (false, Some(why)),
                (Verdict::Fail, _) => (
                    false,
                    Some(
                        st.last_failure
                            .as_deref()
                            .map(shown)
                            .unwrap_or_else(|| "failed".into()),
                    ),
                ),
                (Verdict::Untried, _) => (
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
                state: st,
            });
        }
    }

    // The passes, checked again on the merged tree.
    let types = exec.verify_types.get();
    let log_dir = paths.state_dir.join(format!("{session}.logs"));
    let settings = crate::verify::Settings::new(
        paths.workdir.clone(),
        exec.verify_timeout,
        exec.kill_grace,
        Some(session),
        path,
    );
    let jobs: Vec<crate::verify::Job> = results
        .iter()
        .filter(|r| r.passed())
        .filter_map(|r| {
            let c = doc.criterion(&r.id)?;
            let cmd = c.command(&types).filter(|_| !c.is_custom())?;
            Some(settings.job(
                &r.id,
                cmd,
                log_dir.join(format!("merge-{}-verify.log", r.id)),
            ))
        })
        .collect();
    let checked = if jobs.is_empty() {
        Vec::new()
    } else {
        let rt = super::runtime()?;
        let (checked, interrupted) = rt.block_on(async {
            let (tx, rx) = tokio::sync::watch::channel(Cancel::None);
            let mut sigs = crate::platform::Signals::listen()?;
            let fut = crate::verify::check_many(jobs, agents, rx);
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
        if interrupted {
            report::error(format!(
                "interrupted while re-checking on the merged tree: the bundles' changes are in the checkout, {} was not updated; `git diff` shows them, `prdloop verify {}` ticks what passes",
                path.display(),
                path.display()
            ));
            return Ok(crate::exit::INTERRUPTED);
        }
        checked
    };
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
            Err(e) => report::warn(format!("could not run the Verify command of {id}: {e}")),
        }
    }

    if !unrechecked.is_empty() {
        report::warn(format!(
            "not re-checked on the merged tree (their Verify commands cannot run here; install what they need in the merge job): {}",
            unrechecked.join(", ")
        ));
    }

    // The PRD: boxes and front matter, on the text as it is on disk now.
    let mut now = crate::prd::load(path)?;
    let disk = now.text().to_string();
    for r in results.iter().filter(|r| r.passed()) {
        // A person's gate, whatever the results say (a bundle cannot hold one: checked).
        if now.criterion(&r.id).is_some_and(|c| !c.is_custom()) {
            now.set_checked(&r.id, true);
        }
    }
    now.tick_parents();
    let (p, t) = now.progress();
    let failing: Vec<String> = now.failing().map(|c| c.id.clone()).collect();
    let end = if failing.is_empty() {
        End::Complete
    } else if now.failing().all(|c| c.is_custom()) {
        End::Blocked
    } else {
        shards_end(bundles)
    };
    let iterations = bundles
        .iter()
        .map(|b| b.manifest.iterations.len())
        .max()
        .unwrap_or(0);
    if iterations > 0 {
        let number = crate::run::front::next_iteration(doc) + iterations as u64 - 1;
        let edits = crate::run::front::at_iteration_end(&now, number, (p, t), failing.clone());
        now.set_front(&edits)
            .map_err(|e| anyhow::anyhow!(e.at(path)))?;
    }
    let edits = crate::run::front::at_end(&now, end, iterations > 0, (p, t), failing.clone());
    now.set_front(&edits)
        .map_err(|e| anyhow::anyhow!(e.at(path)))?;
    if now.text() != disk {
        crate::fsutil::write_atomic(path, now.text().as_bytes())?;
    }

    // One state file for the whole fan-out.
    let state = merged_state(
        session,
        path,
        &now,
        doc,
        bundles,
        &results,
        &paths.workdir,
        &log_dir,
        end,
        iterations,
    );
    if let Err(e) = state.save(&paths.state_dir) {
        report::warn(format!("could not write the state file: {e:#}"));
    }
    let state_path = SessionState::path(&paths.state_dir, session);
    print_summary(
        path,
        bundles,
        &applied,
        &results,
        &now,
        end,
        &state,
        &state_path,
        json,
    )?;
    Ok(end.code())
}

/// How the fan-out ended when criteria still fail: the gravest of the shards' own ends.
fn shards_end(bundles: &[Bundle]) -> End {
    let codes: Vec<u8> = bundles.iter().map(|b| b.manifest.exit_code).collect();
    for (code, end) in [
        (exit::AGENT_FATAL, End::AgentFatal),
        (exit::INTERRUPTED, End::Interrupted),
        (exit::IO, End::Worktree),
    ] {
        if codes.contains(&code) {
            return end;
        }
    }
    End::MaxIterations
}

/// The shards' iterations side by side: the i-th iterations of all shards ran at the same
/// time, so they make one iteration, their attempts, costs and tokens summed.
fn merged_history(bundles: &[Bundle], base_passing: usize, total: usize) -> Vec<LoopEntry> {
    let n = bundles
        .iter()
        .map(|b| b.manifest.iterations.len())
        .max()
        .unwrap_or(0);
    (0..n)
        .map(|i| {
            let mut e = LoopEntry {
                criteria_passing: base_passing,
                criteria_total: total,
                ..LoopEntry::default()
            };
            let mut first = true;
            for b in bundles {
                let its = &b.manifest.iterations;
                // A shard that had finished still holds what it gained.
                let Some(x) = its.get(i).or(its.last()) else {
                    continue;
                };
                e.criteria_passing += x.criteria_passing.saturating_sub(base_passing);
                if its.get(i).is_none() {
                    continue;
                }
                if first {
                    e.iteration = x.iteration;
                    e.started_at = x.started_at;
                    first = false;
                }
                e.started_at = e.started_at.min(x.started_at);
                e.completed_at = e.completed_at.max(x.completed_at);
                e.cost_usd += x.cost_usd;
                e.usage.add(&x.usage);
                e.attempts += x.attempts;
            }
            e.criteria_passing = e.criteria_passing.min(total);
            e
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn merged_state(
    session: &str,
    path: &Path,
    now: &Prd,
    before: &Prd,
    bundles: &[Bundle],
    results: &[Result1],
    workdir: &Path,
    log_dir: &Path,
    end: End,
    iterations: usize,
) -> SessionState {
    // The shards' logs, kept with the merged session.
    for b in bundles.iter().filter(|b| !b.logs.is_empty()) {
        let to = log_dir.join(format!("shard-{}", b.manifest.shard.index));
        if let Err(e) = b.copy_logs(&to) {
            report::warn(format!(
                "could not keep the logs of {}: {e:#}",
                b.dir.display()
            ));
        }
    }
    let by_id: HashMap<&str, &Result1> = results.iter().map(|r| (r.id.as_str(), r)).collect();
    let criteria = now
        .criteria
        .iter()
        .map(|c| match by_id.get(c.id.as_str()) {
            Some(r) => {
                let mut st = r.state.clone();
                // What the PRD says of it is the PRD's; the bundle's words are made fit to show.
                st.description = c.description.clone();
                st.kind = if c.anti {
                    "anti-criterion"
                } else {
                    "criterion"
                }
                .into();
                st.created_in_phase = shown(&st.created_in_phase);
                st.last_agent_failure = st.last_agent_failure.as_deref().map(shown);
                // Its log, where the shard's logs are kept now.
                st.last_log = st.last_log.as_ref().map(|l| {
                    let rel = Path::new(l)
                        .strip_prefix(crate::bundle::LOGS)
                        .unwrap_or(Path::new(l));
                    log_dir
                        .join(format!("shard-{}", r.index))
                        .join(rel)
                        .display()
                        .to_string()
                });
                if let Some(evidence) = r.pass {
                    st.status = CriterionStatus::Completed;
                    // Checked: re-checked here; else it rests on a verdict from elsewhere.
                    st.verified_by = Some(evidence);
                } else {
                    st.status = if st.attempts > 0 || r.reason.is_some() {
                        CriterionStatus::Failed
                    } else {
                        CriterionStatus::Pending
                    };
                    st.verified_by = None;
                    st.last_failure = r.reason.clone().or(st.last_failure);
                }
                st
            }
            None => CriterionState {
                id: c.id.clone(),
                description: c.description.clone(),
                kind: if c.anti {
                    "anti-criterion"
                } else {
                    "criterion"
                }
                .into(),
                status: if c.checked {
                    CriterionStatus::Completed
                } else {
                    CriterionStatus::Pending
                },
                created_in_phase: "OBSERVE".into(),
                verified_by: c.checked.then_some(Evidence::Before),
                ..CriterionState::default()
            },
        })
        .collect();
    let (p, t) = now.progress();
    let mut usage = crate::backend::Usage::default();
    for b in bundles {
        usage.add(&b.manifest.usage);
    }
    let started = bundles
        .iter()
        .map(|b| b.manifest.started_at)
        .min()
        .unwrap_or(0);
    let now_ms = state::now_ms();
    let prd_path = path.display().to_string();
    let history = merged_history(bundles, before.progress().0, t);
    SessionState {
        active: false,
        session_id: session.to_string(),
        task_description: format!(
            "Loop: {} [{p}/{t} merged from {} shards]",
            now.id().or(now.display_title()).unwrap_or("PRD"),
            bundles.len()
        ),
        current_phase: end.phase().into(),
        phase_started_at: now_ms,
        algorithm_started_at: started,
        completed_at: Some(now_ms),
        sla: now.front.effort_level.clone(),
        effort_level: now.front.effort_level.clone(),
        criteria,
        capabilities: ["Task Tool", "SDK", "Loop Runner"]
            .map(String::from)
            .to_vec(),
        prd_path: prd_path.clone(),
        loop_prd_path: prd_path,
        loop_mode: true,
        mode: "loop".into(),
        loop_iteration: crate::run::front::next_iteration(before) - 1 + iterations as u64,
        loop_max_iterations: 0,
        loop_prd_id: now.id().unwrap_or_default().to_string(),
        loop_history: history,
        parallel_agents: bundles.len(),
        summary: Some(format!(
            "{}: {p}/{t} criteria in {iterations} iterations (merged from {} shards)",
            end.word(),
            bundles.len()
        )),
        prdloop_version: state::STATE_VERSION,
        total_cost_usd: bundles.iter().map(|b| b.manifest.cost_usd).sum(),
        usage,
        log_dir: log_dir.display().to_string(),
        workdir: workdir.display().to_string(),
        ..SessionState::default()
    }
}

#[allow(clippy::too_many_arguments)]
fn print_summary(
    path: &Path,
    bundles: &[Bundle],
    applied: &[Applied],
    results: &[Result1],
    now: &Prd,
    end: End,
    state: &SessionState,
    state_path: &Path,
    json: bool,
) -> Result<()> {
    let (p, t) = now.progress();
    let failing: Vec<String> = now.failing().map(|c| c.id.clone()).collect();
    let mut out = String::new();
    if json {
        let v = json!({
            "prd": path,
            "outcome": end.word(),
            "exitCode": end.code(),
            "passing": p,
            "total": t,
            "failing": failing,
            "bundles": bundles.iter().zip(applied).map(|(b, a)| json!({
                "shard": b.manifest.shard.to_string(),
                "dir": b.dir,
                "result": a.word(),
                "files": match a { Applied::Merged(f) | Applied::Conflict(f) => f.clone(), _ => Vec::new() },
                "error": match a { Applied::Error(e) => Some(e.clone()), _ => None },
            })).collect::<Vec<_>>(),
            "criteria": results.iter().map(|r| json!({
                "id": r.id,
                "shard": r.shard,
                "passed": r.passed(),
                "evidence": r.pass.map(Evidence::word),
                "reason": r.reason,
                "attempts": r.state.attempts,
                "costUsd": r.state.cost_usd,
            })).collect::<Vec<_>>(),
            "iterations": state.loop_history.len(),
            "costUsd": state.total_cost_usd,
            "usage": state.usage,
            "state": state_path,
        });
        crate::report::json::push_document(&mut out, v)?;
        return Ok(report::stdout(&out)?);
    }
    for (b, a) in bundles.iter().zip(applied) {
        let what = match a {
            Applied::Merged(f) => format!("merged {} file(s)", f.len()),
            Applied::Unchanged => "no changes".into(),
            Applied::Conflict(f) => format!("CONFLICT in {}: not applied", f.join(", ")),
            Applied::Error(e) => format!("NOT APPLIED: {e}"),
        };
        outln!(
            out,
            "shard {:<7} {what}  ({})",
            b.manifest.shard.to_string(),
            b.dir.display()
        );
    }
    for r in results {
        let mark = match r.pass {
            Some(e) => report::green(&format!("PASS ({})", e.word())),
            None => report::red("FAIL"),
        };
        outln!(
            out,
            "{mark} {:<16} shard {}, {} attempt(s)",
            r.id,
            r.shard,
            r.state.attempts
        );
        if let Some(why) = &r.reason {
            outln!(out, "       {why}");
        }
    }
    outln!(
        out,
        "\n{}: {p}/{t} criteria passing after merging {} shard(s); {} iteration(s), ${:.2}, {} tokens",
        end.word(),
        bundles.len(),
        state.loop_history.len(),
        state.total_cost_usd,
        state.usage.total()
    );
    if !failing.is_empty() {
        outln!(out, "failing: {}", failing.join(", "));
    }
    outln!(out, "state: {}", state_path.display());
    report::stdout(&out)?;
    if let Some(file) = config::CiConfig::new(None, path, Path::new("."))
        .github
        .and_then(|g| g.step_summary)
    {
        let mut md = format!(
            "### prdloop merge: {p}/{t} criteria passing ({})\n\n| shard | result |\n|---|---|\n",
            end.word()
        );
        for (b, a) in bundles.iter().zip(applied) {
            md.push_str(&format!("| {} | {} |\n", b.manifest.shard, a.word()));
        }
        md.push('\n');
        use std::io::Write;
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(md.as_bytes()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{Manifest, PrdId};
    use crate::shard::Shard;

    fn bundle(index: usize, iterations: &[(usize, f64, u32)]) -> Bundle {
        Bundle::of_manifest(
            PathBuf::from(format!("b{index}")),
            Manifest {
                version: 1,
                prdloop: "0".into(),
                shard: Shard { index, count: 2 },
                base: "c".into(),
                prd: PrdId {
                    path: "PRD.md".into(),
                    id: None,
                    hash: "h".into(),
                },
                criteria: vec![],
                outcomes: vec![],
                exit_code: 0,
                summary: None,
                stop_reason: None,
                iterations: iterations
                    .iter()
                    .enumerate()
                    .map(|(i, (passing, cost, attempts))| LoopEntry {
                        iteration: i as u64 + 1,
                        started_at: 100 + i as u64,
                        completed_at: 200 + i as u64 + index as u64,
                        criteria_passing: *passing,
                        criteria_total: 10,
                        cost_usd: *cost,
                        attempts: *attempts,
                        ..LoopEntry::default()
                    })
                    .collect(),
                cost_usd: 0.0,
                usage: Default::default(),
                files: vec![],
                started_at: 0,
                completed_at: 0,
                session: None,
            },
        )
    }

    #[test]
    fn the_shards_iterations_are_summed_side_by_side() {
        // 2 passing before; shard 1 gains 3 then 1, shard 2 gains 4 in one iteration.
        let h = merged_history(
            &[
                bundle(1, &[(5, 1.0, 4), (6, 0.5, 1)]),
                bundle(2, &[(6, 2.0, 5)]),
            ],
            2,
            10,
        );
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].criteria_passing, h[0].attempts), (9, 9));
        assert!((h[0].cost_usd - 3.0).abs() < 1e-9);
        assert_eq!(h[0].completed_at, 202);
        // Shard 2 was done: it still counts what it gained, not what it spent.
        assert_eq!((h[1].criteria_passing, h[1].attempts), (10, 1));
        assert!((h[1].cost_usd - 0.5).abs() < 1e-9);
    }

    #[test]
    fn missing_shards_are_named() {
        assert_eq!(missing_shards(&[bundle(2, &[])]).as_deref(), Some("1/2"));
        assert_eq!(missing_shards(&[bundle(1, &[]), bundle(2, &[])]), None);
    }
}
