//! `prdloop verify`: run every runnable Verify command now, update the boxes and the front
//! matter, report. A CI gate on its own: no agent is needed. `--dry-run` runs nothing and
//! lists what would run; `--no-write` runs the checks and writes nothing.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::plan::Why;
use super::warning::{Warning, Warnings};
use crate::config::VerifyMode as Mode;
use crate::config::VerifySettings;
use crate::exit::Exit;
use crate::prd::{Prd, Value};
use crate::report::json::Version;
use crate::report::{self, green, red, yellow};
use crate::verify::{self, Check, Job};
use crate::worker::Cancel;
use crate::{exit, outln, state};

pub fn verify(s: &VerifySettings) -> Result<Exit> {
    let (path, agents, exec, mode, json) = (s.prd.clone(), s.agents, &s.exec, s.mode, s.json);
    let doc = crate::commands::load_prd(&path)?;
    if doc.criteria.is_empty() {
        // Never give a CI gate a vacuous pass. (A file with criteria and no front matter is
        // verified like any other: its boxes are written, no front matter is added.)
        report::error(
            if doc.has_front_matter() || doc.list_format() != crate::prd::ListFormat::Markdown {
                super::no_criteria_message(&path, &doc)
            } else {
                format!(
                    "{} is not a PRD: it has no front matter (a `---` block at the top) and no criteria; nothing changed",
                    path.display()
                )
            },
        );
        return Ok(exit::Exit::Usage);
    }
    let dry_run = mode != Mode::Write;
    let paths = &exec.paths;
    let types = exec.verify_types.clone();
    let plan = Plan::of(&doc, &types, &paths.workdir);
    if mode == Mode::DryRun {
        print_dry_run(&path, &doc, &plan, json)?;
        return Ok(exit::Exit::Success);
    }
    let session = format!("verify-{}", uuid::Uuid::new_v4());
    // Writing boxes while a loop runs on the PRD would fight the loop: take its lock.
    let lock = if dry_run {
        None
    } else {
        let info = state::LockInfo::new(&session, &path, &paths.state_dir);
        match state::PrdLock::acquire(&path, &info)? {
            state::LockOutcome::Busy(holder) => {
                report::error(format!(
                    "{} is being run by {}; verify it when the loop ends, or use --dry-run",
                    path.display(),
                    state::LockInfo::describe(holder.as_ref())
                ));
                return Ok(exit::Exit::Locked);
            }
            state::LockOutcome::Acquired { lock, .. } => Some(lock),
        }
    };
    let log_dir = paths
        .state_dir
        .join(format!("prdloop-verify-{}", state::path_hash(&path)));
    let settings = verify::Settings::new(
        paths.workdir.clone(),
        exec.verify_timeout,
        exec.kill_grace,
        None,
        &path,
    );
    let mut warnings = Warnings::default();
    for (id, why) in &plan.cannot_run {
        warnings.say(Warning::CannotRunHere {
            id: id.clone(),
            why: why.clone(),
        });
    }
    let jobs: Vec<Job> = plan
        .run
        .iter()
        .map(|(id, command)| settings.job(id, command, log_dir.join(format!("{id}.log"))))
        .collect();
    let rt = super::runtime()?;
    let results = rt.block_on(async {
        let (tx, rx) = tokio::sync::watch::channel(Cancel::None);
        let fut = verify::check_many(jobs, agents, rx);
        tokio::pin!(fut);
        tokio::select! {
            r = &mut fut => Some(r),
            _ = tokio::signal::ctrl_c() => {
                let _ = tx.send(Cancel::Graceful);
                let _ = fut.await;
                None
            }
        }
    });
    // Nothing the Verify commands detached outlives them.
    crate::worker::reaper::end_adopted(exec.kill_grace);
    let Some(results) = results else {
        report::warn("interrupted: nothing was written");
        if let Some(l) = lock {
            l.release();
        }
        return Ok(exit::Exit::Interrupted);
    };
    let mut checks: Vec<(String, Check)> = Vec::new();
    for (id, r) in results {
        match r {
            Ok(c) => checks.push((id, c)),
            Err(e) => warnings.say(Warning::NotRun {
                id,
                error: e.to_string(),
            }),
        }
    }
    let changes = apply(&path, &doc, &checks, dry_run, &mut warnings);
    for (id, c) in &checks {
        if !c.passed()
            && doc
                .criterion(id)
                .and_then(|x| x.probe.as_ref())
                .is_some_and(|p| p.critical && probe_decides(&doc, id, &types))
        {
            warnings.say(Warning::CriticalProbeFails { id: id.clone() });
        }
    }
    if let Some(l) = lock {
        l.release();
    }
    let changes = changes?;
    let doc_after = if dry_run {
        doc.clone()
    } else {
        crate::prd::load(&path)?
    };
    // A check that cannot run here passes nothing: the gate is not green without it.
    let all_pass = checks.iter().all(|(_, c)| c.passed()) && plan.cannot_run.is_empty();
    print_report(
        &path, &doc_after, &checks, &changes, warnings, dry_run, json,
    )?;
    Ok(if all_pass {
        exit::Exit::Success
    } else {
        exit::Exit::Failure
    })
}

/// Whether `id`'s command comes from its Test Strategy probe (no inline Verify method).
fn probe_decides(doc: &Prd, id: &str, types: &crate::prd::VerifyTypes) -> bool {
    doc.criterion(id)
        .is_some_and(|c| c.verify.is_none() && c.command(types).is_some())
}

/// Which criteria's commands run, which cannot run here, and which are the agent's or a
/// person's: the same rule as `run` and `plan` ([`super::plan::how`]).
struct Plan {
    run: Vec<(String, String)>,
    cannot_run: Vec<(String, Why)>,
    agent: Vec<(String, Why)>,
}

impl Plan {
    fn of(doc: &Prd, types: &crate::prd::VerifyTypes, workdir: &Path) -> Plan {
        let mut plan = Plan {
            run: Vec::new(),
            cannot_run: Vec::new(),
            agent: Vec::new(),
        };
        for c in &doc.criteria {
            let id = c.id.clone();
            match super::plan::how(c, types, workdir) {
                Why::Runs { command } => plan.run.push((id, command)),
                why @ Why::CannotRunHere { .. } => plan.cannot_run.push((id, why)),
                why @ Why::NoCommand { .. } => plan.agent.push((id, why)),
                Why::Custom => {}
            }
        }
        plan
    }
}

/// What `verify --dry-run` shows: what would run, and what cannot.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DryRunReport<'a> {
    prd: &'a Path,
    dry_run: bool,
    would_run: Vec<WouldRun<'a>>,
    cannot_run_here: Vec<Because<'a>>,
    agent_verified: Vec<Because<'a>>,
    needs_person: Vec<&'a str>,
    passing: usize,
    total: usize,
    version: Version,
}

/// A criterion's command that would run.
#[derive(Debug, Serialize)]
struct WouldRun<'a> {
    id: &'a str,
    command: &'a str,
}

/// A criterion whose command does not run, and why.
#[derive(Debug, Serialize)]
struct Because<'a> {
    id: &'a str,
    why: &'a Why,
}

impl<'a> DryRunReport<'a> {
    fn of(path: &'a Path, doc: &'a Prd, plan: &'a Plan) -> DryRunReport<'a> {
        let because = |list: &'a [(String, Why)]| {
            list.iter()
                .map(|(id, why)| Because { id, why })
                .collect::<Vec<_>>()
        };
        let (passing, total) = doc.progress();
        DryRunReport {
            prd: path,
            dry_run: true,
            would_run: plan
                .run
                .iter()
                .map(|(id, command)| WouldRun { id, command })
                .collect(),
            cannot_run_here: because(&plan.cannot_run),
            agent_verified: because(&plan.agent),
            needs_person: needs_person(doc),
            passing,
            total,
            version: Version,
        }
    }

    fn text(&self, out: &mut String) {
        outln!(out, "dry run: nothing is run, nothing written");
        for r in &self.would_run {
            outln!(out, "would run {:<16} {}", r.id, r.command);
        }
        for b in &self.cannot_run_here {
            outln!(out, "{} {:<16} {}", yellow("cannot run here"), b.id, b.why);
        }
        for b in &self.agent_verified {
            outln!(out, "agent    {:<16} {}", b.id, b.why);
        }
        outln!(
            out,
            "\n{} command(s) would run; {} cannot run here; {} are the agent's",
            self.would_run.len(),
            self.cannot_run_here.len(),
            self.agent_verified.len()
        );
    }
}

/// `--dry-run`: what would run, and nothing run.
fn print_dry_run(path: &Path, doc: &Prd, plan: &Plan, json: bool) -> Result<()> {
    let report = DryRunReport::of(path, doc, plan);
    let mut out = String::new();
    if json {
        crate::report::json::push_report(&mut out, &report)?;
    } else {
        report.text(&mut out);
    }
    Ok(report::stdout(&out)?)
}

/// What a check did to a box (a box it left as it was has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Change {
    Ticked,
    Unticked,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Change::Ticked => "ticked",
            Change::Unticked => "unticked",
        })
    }
}

/// The boxes the checks changed, by id.
type Changes = Vec<(String, Change)>;

/// Applies the results to the PRD as it is on disk now (edits made meanwhile survive).
fn apply(
    path: &Path,
    before: &Prd,
    checks: &[(String, Check)],
    dry_run: bool,
    warnings: &mut Warnings,
) -> Result<Changes> {
    let mut changes = Vec::new();
    for (id, c) in checks {
        let was = before.criterion(id).is_some_and(|x| x.checked);
        if c.unrunnable() {
            continue;
        }
        if c.passed() && !was {
            changes.push((id.clone(), Change::Ticked));
        } else if !c.passed() && was {
            changes.push((id.clone(), Change::Unticked));
        }
    }
    if dry_run {
        return Ok(changes);
    }
    let unticked = changes.iter().any(|(_, c)| *c == Change::Unticked);
    let mut prose_kept = false;
    crate::prd::write::update(path, |doc| {
        for (id, c) in checks.iter().filter(|(_, c)| !c.unrunnable()) {
            doc.set_checked(id, c.passed());
        }
        doc.tick_parents();
        let (p, t) = doc.progress();
        let front = match doc.front.format {
            crate::prd::Format::V3 if doc.has_front_matter() => {
                let mut e = Vec::new();
                if crate::run::front::summary_is_ours(doc) {
                    e.push(("verification_summary", Value::Quoted(format!("{p}/{t}"))));
                } else {
                    prose_kept = true;
                }
                e.push((
                    "failing_criteria",
                    Value::List(doc.failing().map(|c| c.id.clone()).collect()),
                ));
                e
            }
            _ => crate::run::front::progress(doc, p, t),
        };
        // A box unticked in a file that says it is complete: the file is reopened, so its
        // status and its boxes agree (and `run` takes it up).
        let mut front = front;
        if unticked {
            front.extend(crate::run::front::reopened(doc));
        }
        doc.set_front(&front)
            .map_err(|e| anyhow::anyhow!(e.at(path)))
    })?;
    if prose_kept {
        warnings.say(Warning::SummaryKept {
            prd: path.to_path_buf(),
        });
    }
    Ok(changes)
}

/// What `verify` shows after running the checks: each check's result and what it did to its
/// box, and the criteria no command checks.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct VerifyReport<'a> {
    prd: &'a Path,
    dry_run: bool,
    no_write: bool,
    results: Vec<CheckResult<'a>>,
    runnable_passing: usize,
    runnable_total: usize,
    agent_verified: Vec<&'a str>,
    needs_person: Vec<&'a str>,
    passing: usize,
    total: usize,
    /// What was said on stderr as it happened.
    warnings: Vec<Warning>,
    version: Version,
}

/// One criterion's check.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckResult<'a> {
    id: &'a str,
    command: &'a str,
    passed: bool,
    exit: &'a crate::backend::verdict::Exit,
    duration_ms: u64,
    tail: &'a str,
    log: &'a Path,
    change: Option<Change>,
    /// For the text: how long it took, and why it failed.
    #[serde(skip)]
    duration: std::time::Duration,
    #[serde(skip)]
    reason: String,
}

impl<'a> VerifyReport<'a> {
    fn of(
        path: &'a Path,
        doc: &'a Prd,
        checks: &'a [(String, Check)],
        changes: &Changes,
        warnings: Warnings,
        no_write: bool,
    ) -> VerifyReport<'a> {
        let change_of = |id: &str| changes.iter().find(|(i, _)| i == id).map(|(_, c)| *c);
        let checked: Vec<&str> = checks.iter().map(|(id, _)| id.as_str()).collect();
        let (passing, total) = doc.progress();
        VerifyReport {
            prd: path,
            dry_run: false,
            no_write,
            results: checks
                .iter()
                .map(|(id, c)| CheckResult {
                    id,
                    command: &c.command,
                    passed: c.passed(),
                    exit: &c.exit,
                    duration_ms: c.duration.as_millis() as u64,
                    tail: &c.tail,
                    log: &c.log,
                    change: change_of(id),
                    duration: c.duration,
                    reason: if c.passed() {
                        String::new()
                    } else {
                        c.reason()
                    },
                })
                .collect(),
            runnable_passing: checks.iter().filter(|(_, c)| c.passed()).count(),
            runnable_total: checks.len(),
            agent_verified: doc
                .criteria
                .iter()
                .filter(|c| !c.is_custom() && !checked.contains(&c.id.as_str()))
                .map(|c| c.id.as_str())
                .collect(),
            needs_person: needs_person(doc),
            passing,
            total,
            warnings: warnings.into_vec(),
            version: Version,
        }
    }

    fn text(&self, out: &mut String) {
        for r in &self.results {
            let mark = if r.passed { green("PASS") } else { red("FAIL") };
            let change = r
                .change
                .map(|ch| format!("  ({}{ch})", if self.no_write { "would be " } else { "" }))
                .unwrap_or_default();
            outln!(
                out,
                "{mark} {:<16} {}  {}{change}",
                r.id,
                r.command,
                report::duration(r.duration)
            );
            if !r.passed {
                for line in r.reason.lines().skip(1) {
                    outln!(out, "       {line}");
                }
                outln!(out, "       log: {}", r.log.display());
            }
        }
        outln!(
            out,
            "\n{}/{} runnable criteria pass; {}/{} criteria ticked{}",
            self.runnable_passing,
            self.runnable_total,
            self.passing,
            self.total,
            if self.no_write {
                " (--no-write: nothing written)"
            } else {
                ""
            }
        );
        if !self.agent_verified.is_empty() {
            outln!(
                out,
                "{} no runnable command (reviewed by the verifier in a run, or claimed with --verifier none): {}",
                yellow("not checked:"),
                self.agent_verified.join(", ")
            );
        }
        if !self.needs_person.is_empty() {
            outln!(
                out,
                "{} {}",
                yellow("needs a person (Verify: Custom):"),
                self.needs_person.join(", ")
            );
        }
    }
}

fn print_report(
    path: &Path,
    doc: &Prd,
    checks: &[(String, Check)],
    changes: &Changes,
    warnings: Warnings,
    no_write: bool,
    json: bool,
) -> Result<()> {
    let report = VerifyReport::of(path, doc, checks, changes, warnings, no_write);
    let mut out = String::new();
    if json {
        crate::report::json::push_report(&mut out, &report)?;
    } else {
        report.text(&mut out);
    }
    Ok(report::stdout(&out)?)
}

/// The criteria no command or agent checks, ticked or not (`Verify: Custom`): a person's.
fn needs_person(doc: &crate::prd::Prd) -> Vec<&str> {
    doc.criteria
        .iter()
        .filter(|c| c.is_custom())
        .map(|c| c.id.as_str())
        .collect()
}
