//! `prdloop plan`: what the next iteration would do: the lanes, each criterion in order with
//! who verifies it (the runner's command, the agent, or a person) and why, and the worker
//! command. Spawns nothing, writes nothing.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::json;

use crate::backend::AgentOptions;
use crate::plan::{Lane, partition};
use crate::prd::{Criterion, HowVerified, Prd, VerifyTypes};
use crate::{exit, outln};

/// What `plan` (and `run --dry-run`) needs, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    pub agents: usize,
    pub agent: AgentOptions,
    pub workdir: PathBuf,
    pub verify_types: VerifyTypes,
    pub json: bool,
}

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

/// `prdloop plan <PRD>`.
pub fn plan(path: &Path, s: &Settings) -> Result<u8> {
    let doc = super::load_prd(path)?;
    if doc.criteria.is_empty() {
        crate::report::error(super::no_criteria_message(path));
        return Ok(exit::USAGE);
    }
    print(path, &doc, s)?;
    Ok(exit::SUCCESS)
}

/// Who verifies a criterion, as `plan` shows it: a short word and the reason.
pub fn how(c: &Criterion, types: &VerifyTypes) -> (&'static str, String) {
    match c.how_verified(types) {
        HowVerified::Command(cmd) => ("runner", format!("runs `{cmd}`")),
        HowVerified::Agent { why } => ("agent", why),
        HowVerified::Person => ("person", "Verify: Custom".into()),
    }
}

pub fn print(path: &Path, prd: &Prd, s: &Settings) -> Result<()> {
    let mut out = String::new();
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
                        let (by, why) = how(c, &s.verify_types);
                        json!({"id": c.id, "description": c.description, "line": c.line,
                               "verify": c.verify, "domain": c.domain,
                               "verifiedBy": by, "why": why})
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = json!({
            "prd": path,
            "id": prd.id(),
            "title": prd.display_title(),
            "passing": passing,
            "total": total,
            "agents": s.agents,
            "lanes": lanes_json,
            "needsPerson": human,
            "workdir": s.workdir,
            "agent": s.agent.agent,
            "command": {
                "program": s.agent.bin,
                "args": s.agent.display_args(),
                "stdin": if s.agent.prompt_on_stdin() { "prompt" } else { "empty" },
            },
        });
        outln!(out, "{}", serde_json::to_string_pretty(&v)?);
        crate::report::stdout(&out)?;
        return Ok(());
    }
    outln!(
        out,
        "{} {}",
        prd.id().unwrap_or("(no id)"),
        prd.display_title().unwrap_or("")
    );
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
            let (by, why) = how(c, &s.verify_types);
            outln!(out, "  {:<14} {}", c.id, c.description);
            outln!(out, "  {:<14} checked by the {by}: {why}", "");
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
