//! `prdloop plan`: what the next iteration would do. Spawns nothing, writes nothing.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::backend::ClaudeOptions;
use crate::outln;
use crate::plan::{Lane, partition};
use crate::prd::Prd;

/// The lanes for a PRD's failing criteria. Criteria that need a person (`Verify: Custom`)
/// get no worker.
pub fn lanes_for(prd: &Prd, agents: usize) -> Vec<Lane> {
    partition(
        prd.failing()
            .filter(|c| !c.is_custom())
            .map(|c| (c.id.as_str(), c.domain.as_str())),
        agents,
    )
}

pub fn print(
    path: &Path,
    prd: &Prd,
    agents: usize,
    claude: &ClaudeOptions,
    workdir: &Path,
    json: bool,
) -> Result<()> {
    let mut out = String::new();
    let lanes = lanes_for(prd, agents);
    let (passing, total) = prd.progress();
    let human: Vec<&str> = prd
        .failing()
        .filter(|c| c.is_custom())
        .map(|c| c.id.as_str())
        .collect();
    if json {
        let lanes_json: Vec<_> = lanes
            .iter()
            .enumerate()
            .map(|(i, l)| {
                json!({
                    "lane": i + 1,
                    "domains": l.groups.iter().map(|g| g.domain.as_str()).collect::<Vec<_>>(),
                    "criteria": l.ids().map(|id| {
                        let c = prd.criterion(id).expect("lane ids come from the PRD");
                        json!({"id": c.id, "description": c.description, "line": c.line,
                               "verify": c.verify, "domain": c.domain})
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = json!({
            "prd": path,
            "id": prd.front.id,
            "title": prd.title,
            "passing": passing,
            "total": total,
            "agents": agents,
            "lanes": lanes_json,
            "needsPerson": human,
            "workdir": workdir,
            "command": { "program": claude.bin, "args": claude.args(), "stdin": "prompt" },
        });
        outln!(out, "{}", serde_json::to_string_pretty(&v)?);
        crate::report::stdout(&out)?;
        return Ok(());
    }
    outln!(
        out,
        "{} {}",
        prd.front.id.as_deref().unwrap_or("(no id)"),
        prd.title.as_deref().unwrap_or("")
    );
    outln!(
        out,
        "{passing}/{total} passing; next iteration: {} criteria in {} lane(s) (-a {agents})",
        lanes.iter().map(Lane::len).sum::<usize>(),
        lanes.len()
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
        for id in lane.ids() {
            let c = prd.criterion(id).expect("lane ids come from the PRD");
            let verify = c
                .verify
                .as_ref()
                .map(|v| {
                    format!(
                        "  [{}{}]",
                        v.kind,
                        if c.command(&crate::prd::VerifyTypes::default()).is_some() {
                            ", runnable"
                        } else {
                            ""
                        }
                    )
                })
                .unwrap_or_default();
            outln!(out, "  {:<14} {}{verify}", c.id, c.description);
        }
    }
    if !human.is_empty() {
        outln!(
            out,
            "\nneeds a person (Verify: Custom), no worker: {}",
            human.join(", ")
        );
    }
    outln!(
        out,
        "\nworker command (one per criterion, prompt on stdin, in {}):",
        workdir.display()
    );
    outln!(out, "  {}", claude.display());
    crate::report::stdout(&out)?;
    Ok(())
}
