//! `prdloop verify`: run every runnable Verify command now, update the boxes and the front
//! matter, report. A CI gate on its own: no agent is needed. `--dry-run` runs nothing and
//! lists what would run; `--no-write` runs the checks and writes nothing.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::config::VerifyMode as Mode;
use crate::config::VerifySettings;
use crate::exit::Exit;
use crate::prd::{Prd, Value};
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
    for (id, why) in &plan.cannot_run {
        report::warn(format!("{id} cannot be verified here: {why}"));
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
            Err(e) => report::warn(format!("could not run the Verify command of {id}: {e}")),
        }
    }
    let changes = apply(&path, &doc, &checks, dry_run);
    for (id, c) in &checks {
        if !c.passed()
            && doc
                .criterion(id)
                .and_then(|x| x.probe.as_ref())
                .is_some_and(|p| p.critical && probe_decides(&doc, id, &types))
        {
            report::warn(format!(
                "{id}: a `severity: critical` probe fails: the product is down by its own Test Strategy"
            ));
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
    print_report(&path, &doc_after, &checks, &changes, dry_run, json)?;
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
/// person's: the same rule as `run` and `plan`.
struct Plan {
    run: Vec<(String, String)>,
    cannot_run: Vec<(String, String)>,
    agent: Vec<(String, String)>,
}

impl Plan {
    fn of(doc: &Prd, types: &crate::prd::VerifyTypes, workdir: &Path) -> Plan {
        let mut plan = Plan {
            run: Vec::new(),
            cannot_run: Vec::new(),
            agent: Vec::new(),
        };
        for c in &doc.criteria {
            match c.how_verified(types) {
                crate::prd::HowVerified::Command(cmd) => {
                    match verify::cannot_run_here(cmd, workdir) {
                        Some(why) => plan.cannot_run.push((c.id.clone(), why)),
                        None => plan.run.push((c.id.clone(), cmd.to_string())),
                    }
                }
                crate::prd::HowVerified::Agent { why } => plan.agent.push((c.id.clone(), why)),
                crate::prd::HowVerified::Person => {}
            }
        }
        plan
    }
}

/// `--dry-run`: what would run, and nothing run.
fn print_dry_run(path: &Path, doc: &Prd, plan: &Plan, json: bool) -> Result<()> {
    let mut out = String::new();
    if json {
        let v = json!({
            "prd": path,
            "dryRun": true,
            "wouldRun": plan.run.iter().map(|(id, c)| json!({"id": id, "command": c})).collect::<Vec<_>>(),
            "cannotRunHere": plan.cannot_run.iter().map(|(id, w)| json!({"id": id, "why": w})).collect::<Vec<_>>(),
            "agentVerified": plan.agent.iter().map(|(id, w)| json!({"id": id, "why": w})).collect::<Vec<_>>(),
            "needsPerson": doc.criteria.iter().filter(|c| c.is_custom()).map(|c| c.id.as_str()).collect::<Vec<_>>(),
            "passing": doc.progress().0,
            "total": doc.progress().1,
        });
        crate::report::json::push_document(&mut out, v)?;
        return Ok(report::stdout(&out)?);
    }
    outln!(out, "dry run: nothing is run, nothing written");
    for (id, cmd) in &plan.run {
        outln!(out, "would run {id:<16} {cmd}");
    }
    for (id, why) in &plan.cannot_run {
        outln!(out, "{} {id:<16} {why}", yellow("cannot run here"));
    }
    for (id, why) in &plan.agent {
        outln!(out, "agent    {id:<16} {why}");
    }
    outln!(
        out,
        "\n{} command(s) would run; {} cannot run here; {} are the agent's",
        plan.run.len(),
        plan.cannot_run.len(),
        plan.agent.len()
    );
    Ok(report::stdout(&out)?)
}

/// What a check did to a box: `ticked`, `unticked`, or nothing.
type Changes = Vec<(String, &'static str)>;

/// Applies the results to the PRD as it is on disk now (edits made meanwhile survive).
fn apply(path: &Path, before: &Prd, checks: &[(String, Check)], dry_run: bool) -> Result<Changes> {
    let mut changes = Vec::new();
    for (id, c) in checks {
        let was = before.criterion(id).is_some_and(|x| x.checked);
        if c.unrunnable() {
            continue;
        }
        if c.passed() && !was {
            changes.push((id.clone(), "ticked"));
        } else if !c.passed() && was {
            changes.push((id.clone(), "unticked"));
        }
    }
    if dry_run {
        return Ok(changes);
    }
    let unticked = changes.iter().any(|(_, c)| *c == "unticked");
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
        report::warn(format!(
            "{}: `verification_summary` is the author's prose, not a count: kept as it is",
            path.display()
        ));
    }
    Ok(changes)
}

fn print_report(
    path: &Path,
    doc: &Prd,
    checks: &[(String, Check)],
    changes: &Changes,
    dry_run: bool,
    json: bool,
) -> Result<()> {
    let change_of = |id: &str| changes.iter().find(|(i, _)| i == id).map(|(_, c)| *c);
    let checked: Vec<&str> = checks.iter().map(|(id, _)| id.as_str()).collect();
    let custom: Vec<&str> = doc
        .criteria
        .iter()
        .filter(|c| c.is_custom())
        .map(|c| c.id.as_str())
        .collect();
    let agent: Vec<&str> = doc
        .criteria
        .iter()
        .filter(|c| !c.is_custom() && !checked.contains(&c.id.as_str()))
        .map(|c| c.id.as_str())
        .collect();
    let passed = checks.iter().filter(|(_, c)| c.passed()).count();
    let mut out = String::new();
    if json {
        let results: Vec<_> = checks
            .iter()
            .map(|(id, c)| {
                json!({
                    "id": id,
                    "command": c.command,
                    "passed": c.passed(),
                    "exit": c.exit,
                    "durationMs": c.duration.as_millis() as u64,
                    "tail": c.tail,
                    "log": c.log,
                    "change": change_of(id),
                })
            })
            .collect();
        let (p, t) = doc.progress();
        let v = json!({
            "prd": path,
            "dryRun": false,
            "noWrite": dry_run,
            "results": results,
            "runnablePassing": passed,
            "runnableTotal": checks.len(),
            "agentVerified": agent,
            "needsPerson": custom,
            "passing": p,
            "total": t,
        });
        crate::report::json::push_document(&mut out, v)?;
        return Ok(report::stdout(&out)?);
    }
    for (id, c) in checks {
        let mark = if c.passed() {
            green("PASS")
        } else {
            red("FAIL")
        };
        let change = change_of(id)
            .map(|ch| format!("  ({}{ch})", if dry_run { "would be " } else { "" }))
            .unwrap_or_default();
        outln!(
            out,
            "{mark} {id:<16} {}  {}{change}",
            c.command,
            report::duration(c.duration)
        );
        if !c.passed() {
            for line in c.reason().lines().skip(1) {
                outln!(out, "       {line}");
            }
            outln!(out, "       log: {}", c.log.display());
        }
    }
    let (p, t) = doc.progress();
    outln!(
        out,
        "\n{passed}/{} runnable criteria pass; {p}/{t} criteria ticked{}",
        checks.len(),
        if dry_run {
            " (--no-write: nothing written)"
        } else {
            ""
        }
    );
    if !agent.is_empty() {
        outln!(
            out,
            "{} no runnable command (reviewed by the verifier in a run, or claimed with --verifier none): {}",
            yellow("not checked:"),
            agent.join(", ")
        );
    }
    if !custom.is_empty() {
        outln!(
            out,
            "{} {}",
            yellow("needs a person (Verify: Custom):"),
            custom.join(", ")
        );
    }
    Ok(report::stdout(&out)?)
}
