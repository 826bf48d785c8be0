//! `prdloop plan`: what the next iteration would do: the lanes, each criterion in order with
//! who verifies it (the runner's command, the agent, or a person) and why, and the worker
//! command. Spawns nothing, writes nothing.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::config::PlanSettings as Settings;
use crate::exit::Exit;
use crate::plan::{Lane, partition};
use crate::prd::{Criterion, HowVerified, Prd, VerifyTypes};
use crate::{exit, outln};

/// The lanes for a PRD's failing criteria. Criteria that need a person (`Verify: Custom`)
/// get no worker.
pub fn lanes_for(prd: &Prd, agents: usize) -> Vec<Lane> {
    partition(
        prd.failing()
            .filter(|c| !c.is_custom() && !c.is_parent())
            .map(|c| (c.id.as_str(), c.domain.as_str())),
        agents,
    )
}

/// `prdloop plan <PRD>`.
pub fn plan(s: &Settings) -> Result<Exit> {
    let path = &s.prd;
    let doc = super::load_prd(path)?;
    if doc.criteria.is_empty() {
        crate::report::error(super::no_criteria_message(path, &doc));
        return Ok(exit::Exit::Usage);
    }
    match s.shards {
        Some(n) => print_shards(path, &doc, n, s)?,
        None => print(path, &doc, s)?,
    }
    Ok(exit::Exit::Success)
}

/// Who verifies a criterion, as `plan` shows it: a short word and the reason. A command
/// whose program is not installed in `workdir` is the agent's, as in `run` and `verify`.
pub fn how(c: &Criterion, types: &VerifyTypes, workdir: &Path) -> (&'static str, String) {
    match c.how_verified(types) {
        HowVerified::Command(cmd) => match crate::verify::cannot_run_here(cmd, workdir) {
            Some(why) => ("agent", why),
            None => ("runner", format!("runs `{cmd}`")),
        },
        HowVerified::Agent { why } => ("agent", why),
        HowVerified::Person => ("person", "Verify: Custom".into()),
    }
}

/// The first line of `plan`: the PRD's id, title and format.
fn heading(prd: &Prd) -> String {
    format!(
        "{} {} ({})",
        prd.id().unwrap_or("(no id)"),
        prd.display_title().unwrap_or(""),
        prd.format_name()
    )
}

pub fn print(path: &Path, prd: &Prd, s: &Settings) -> Result<()> {
    let mut out = String::new();
    // An unknown id or a cycle in `(after: …)` is an input error, at its line.
    let graph = crate::graph::Graph::checked(prd, path)?;
    let work: Vec<&str> = prd
        .failing()
        .filter(|c| !c.is_custom() && !c.is_parent())
        .map(|c| c.id.as_str())
        .collect();
    let waves = graph.waves(&work);
    // What waits for a deferred task: it does not start while that task is deferred.
    let blocked: Vec<(&str, Vec<&str>)> = work
        .iter()
        .map(|id| (*id, graph.deferred_needs(id)))
        .filter(|(_, d)| !d.is_empty())
        .collect();
    let lanes = lanes_for(prd, s.agents);
    let (passing, total) = prd.progress();
    let human: Vec<&str> = prd
        .failing()
        .filter(|c| c.is_custom())
        .map(|c| c.id.as_str())
        .collect();
    if s.json {
        let lanes_json: Vec<_> = lanes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                json!({
                    "lane": i + 1,
                    "domains": l.groups.iter().map(|g| g.domain.as_str()).collect::<Vec<_>>(),
                    "criteria": l.ids().filter_map(|id| prd.criterion(id)).map(|c| {
                        let (by, why) = how(c, &s.verify_types, &s.workdir);
                        json!({"id": c.id, "description": c.description, "line": c.line,
                               "verify": c.verify, "probe": c.probe, "anti": c.anti, "optional": c.optional, "after": c.after, "domain": c.domain,
                               "verifiedBy": by, "why": why})
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = json!({
            "prd": path,
            "format": prd.format_name(),
            "frontMatter": prd.has_front_matter(),
            "id": prd.id(),
            "title": prd.display_title(),
            "passing": passing,
            "total": total,
            "agents": s.agents,
            "lanes": lanes_json,
            "waves": waves,
            "edges": graph.edges,
            "blockedByDeferred": blocked.iter().map(|(id, d)| json!({"id": id, "deferred": d})).collect::<Vec<_>>(),
            "needsPerson": human,
            "workdir": s.workdir,
            "agent": s.agent.agent,
            "command": {
                "program": s.agent.bin,
                "args": s.agent.display_args(),
                "stdin": if s.agent.prompt_on_stdin() { "prompt" } else { "empty" },
            },
        });
        crate::report::json::push_document(&mut out, v)?;
        crate::report::stdout(&out)?;
        return Ok(());
    }
    outln!(out, "{}", heading(prd));
    outln!(
        out,
        "{passing}/{total} passing; next iteration: {} criteria in {} lane(s) (-a {})",
        lanes.iter().map(Lane::len).sum::<usize>(),
        lanes.len(),
        s.agents
    );
    for (i, lane) in lanes.iter().enumerate() {
        let domains: Vec<&str> = lane.groups.iter().map(|g| g.domain.as_str()).collect();
        outln!(
            out,
            "\nlane {} ({}): {}",
            i + 1,
            lane.len(),
            domains.join(", ")
        );
        for c in lane.ids().filter_map(|id| prd.criterion(id)) {
            let (by, why) = how(c, &s.verify_types, &s.workdir);
            let optional = if c.optional { " (optional)" } else { "" };
            outln!(out, "  {:<14} {}{optional}", c.id, c.description);
            outln!(out, "  {:<14} checked by the {by}: {why}", "");
        }
    }
    if !graph.edges.is_empty() {
        outln!(
            out,
            "\norder (after:): {} wave(s); a criterion starts once what it needs passes",
            waves.len()
        );
        for (i, w) in waves.iter().enumerate() {
            outln!(out, "  wave {}: {}", i + 1, w.join(", "));
        }
        for e in &graph.edges {
            outln!(out, "  {} needs {} (line {})", e.criterion, e.needs, e.line);
        }
    }
    if !blocked.is_empty() {
        outln!(
            out,
            "\nblocked by a deferred task (not started while it is deferred):"
        );
        for (id, d) in &blocked {
            outln!(out, "  {id} needs {}", d.join(", "));
        }
    }
    if !human.is_empty() {
        outln!(
            out,
            "\nneeds a person (Verify: Custom), no worker: {}",
            human.join(", ")
        );
    }
    let how = if s.agent.prompt_on_stdin() {
        "prompt on stdin"
    } else {
        "the prompt as an argument, stdin empty"
    };
    outln!(
        out,
        "\nworker command ({}; one per criterion, {how}, in {}):",
        s.agent.agent,
        s.workdir.display()
    );
    outln!(out, "  {}", s.agent.display());
    crate::report::stdout(&out)?;
    Ok(())
}

/// `plan --shards N`: each shard's criteria and, with `--json`, the GitHub Actions matrix.
fn print_shards(path: &Path, prd: &Prd, n: usize, s: &Settings) -> Result<()> {
    let items = crate::shard::items(prd);
    // By count, never by what this machine's earlier workers took: every job must compute
    // the same split from the PRD alone, whatever history its machine has.
    let expected = std::collections::HashMap::new();
    let shards = crate::shard::split(prd, n, &expected);
    let jobs = crate::shard::jobs(&shards, n);
    let (passing, total) = prd.progress();
    let human: Vec<&str> = prd
        .failing()
        .filter(|c| c.is_custom())
        .map(|c| c.id.as_str())
        .collect();
    let weight = |l: &Lane| -> Option<u64> {
        (!expected.is_empty()).then(|| {
            l.ids()
                .map(|id| expected.get(id).copied().unwrap_or(1))
                .sum()
        })
    };
    let mut out = String::new();
    if s.json {
        let list: Vec<_> = (0..jobs)
            .map(|i| {
                let empty = Lane::default();
                let l = shards.get(i).unwrap_or(&empty);
                json!({
                    "shard": format!("{}/{jobs}", i + 1),
                    "domains": l.groups.iter().map(|g| g.domain.as_str()).collect::<Vec<_>>(),
                    "expectedMs": weight(l),
                    "criteria": l.ids().filter_map(|id| prd.criterion(id)).map(|c| {
                        let (by, why) = how(c, &s.verify_types, &s.workdir);
                        json!({"id": c.id, "description": c.description, "line": c.line,
                               "domain": c.domain, "verifiedBy": by, "why": why})
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        let mut v = crate::shard::matrix(jobs);
        if let Some(m) = v.as_object_mut() {
            m.insert("prd".into(), json!(path));
            m.insert("id".into(), json!(prd.id()));
            m.insert("title".into(), json!(prd.display_title()));
            m.insert("passing".into(), json!(passing));
            m.insert("total".into(), json!(total));
            m.insert("shardsAsked".into(), json!(n));
            m.insert("durationsKnown".into(), json!(!expected.is_empty()));
            m.insert("shards".into(), json!(list));
            m.insert("needsPerson".into(), json!(human));
        }
        crate::report::json::push_document(&mut out, v)?;
        crate::report::stdout(&out)?;
        return Ok(());
    }
    outln!(out, "{}", heading(prd));
    outln!(
        out,
        "{passing}/{total} passing; {} criteria in {jobs} shard(s) (--shards {n}){}",
        items.len(),
        if expected.is_empty() {
            ", balanced by count"
        } else {
            ", balanced by what earlier workers took"
        }
    );
    if jobs < n {
        outln!(
            out,
            "only {} domain group(s) to share: {jobs} shard(s), since a domain is never split",
            shards.len()
        );
    }
    for i in 0..jobs {
        let empty = Lane::default();
        let l = shards.get(i).unwrap_or(&empty);
        let domains: Vec<&str> = l.groups.iter().map(|g| g.domain.as_str()).collect();
        let est = weight(l)
            .map(|ms| {
                format!(
                    ", ~{}",
                    crate::report::duration(std::time::Duration::from_millis(ms))
                )
            })
            .unwrap_or_default();
        outln!(
            out,
            "\nshard {}/{jobs} ({}{est}): {}",
            i + 1,
            l.len(),
            domains.join(", ")
        );
        for c in l.ids().filter_map(|id| prd.criterion(id)) {
            outln!(out, "  {:<14} {}", c.id, c.description);
        }
    }
    if !human.is_empty() {
        outln!(
            out,
            "\nneeds a person (Verify: Custom), in no shard: {}",
            human.join(", ")
        );
    }
    outln!(
        out,
        "\nGitHub Actions matrix: {}",
        crate::shard::matrix(jobs)
    );
    outln!(
        out,
        "each job: prdloop run {} --shard I/{jobs} --bundle DIR; then: prdloop merge {} DIR...",
        path.display(),
        path.display()
    );
    crate::report::stdout(&out)?;
    Ok(())
}
