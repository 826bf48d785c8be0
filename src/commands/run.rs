//! `prdloop run` (and PAI's `-m loop -p`): validate everything, then hand over to the loop.

use anyhow::Result;

use crate::cli::RunOpts;
use crate::config::RunConfig;
use crate::prd::lookup::{self, Locations};
use crate::{exit, report};

pub fn run(prd_arg: &str, opts: &RunOpts, loc: &Locations) -> Result<u8> {
    let path = lookup::resolve(prd_arg, loc)?;
    let doc = crate::commands::load_prd(&path)?;
    start(path, &doc, opts, 1, None, loc)
}

/// `prdloop resume`: the PRD's latest session, with its id, state file, attempt history and
/// (unless `-a` is given) its agent count.
pub fn resume(prd_arg: &str, opts: &RunOpts, loc: &Locations) -> Result<u8> {
    let path = lookup::resolve(prd_arg, loc)?;
    let doc = crate::commands::load_prd(&path)?;
    let paths = crate::config::Paths::new(&path, &opts.exec, loc)?;
    let Some(prev) = latest_session(&paths.state_dir, &path) else {
        report::error(format!(
            "no earlier session of {} in {}; start one with `prdloop run`",
            path.display(),
            paths.state_dir.display()
        ));
        return Ok(exit::USAGE);
    };
    let agents = i64::try_from(prev.parallel_agents).unwrap_or(1);
    start(path, &doc, opts, agents, Some(prev), loc)
}

/// The state file of this PRD's most recent session.
pub(crate) fn latest_session(
    state_dir: &std::path::Path,
    prd: &std::path::Path,
) -> Option<crate::state::SessionState> {
    let want = prd.display().to_string();
    std::fs::read_dir(state_dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| crate::state::SessionState::load(&p).ok())
        .filter(|s| s.prd_path == want)
        .max_by_key(|s| s.algorithm_started_at)
}

fn start(
    path: std::path::PathBuf,
    doc: &crate::prd::Prd,
    opts: &RunOpts,
    default_agents: i64,
    resume: Option<crate::state::SessionState>,
    loc: &Locations,
) -> Result<u8> {
    let doc = doc.clone();
    if doc.criteria.is_empty() {
        report::error(super::no_criteria_message(&path));
        return Ok(exit::USAGE);
    }
    if doc.front.is_complete() && !opts.force {
        already_complete(&path, &doc);
        return Ok(exit::SUCCESS);
    }
    let (cfg, warnings) = RunConfig::new(path.clone(), opts, default_agents, loc)?;
    for w in warnings {
        report::warn(w);
    }
    if opts.dry_run {
        let settings = super::plan::Settings {
            agents: cfg.agents,
            agent: cfg.agent.clone(),
            workdir: cfg.workdir.clone(),
            verify_types: cfg.verify_types.clone(),
            json: opts.json,
        };
        super::plan::print(&path, &doc, &settings)?;
        return Ok(exit::SUCCESS);
    }
    // A missing or non-executable agent is found before anything is written.
    let flag = if cfg.agent.agent == crate::backend::Agent::Claude {
        "--claude-bin (PRDLOOP_CLAUDE_BIN) or --agent-bin (PRDLOOP_AGENT_BIN)"
    } else {
        "--agent-bin (PRDLOOP_AGENT_BIN)"
    };
    if let Err(msg) = crate::platform::find_program(&cfg.agent.bin, flag) {
        report::error(msg);
        return Ok(exit::USAGE);
    }
    super::runtime()?.block_on(crate::run::execute(cfg, resume))
}

/// A PRD that says its work is done is left as it is (PAI answers the same way).
fn already_complete(path: &std::path::Path, doc: &crate::prd::Prd) {
    let said = match doc.front.format {
        crate::prd::Format::V3 => "status: COMPLETE",
        crate::prd::Format::V4 => "phase: complete",
    };
    report::eline(&format!(
        "{} is already complete ({said}); nothing changed. `--force` runs it anyway.",
        path.display()
    ));
    let open: Vec<String> = doc
        .failing()
        .map(|c| format!("  {} {}", c.id, c.description))
        .collect();
    if !open.is_empty() {
        report::eline(&format!(
            "{} box(es) left open, as the author left them:",
            open.len()
        ));
        for line in open {
            report::eline(&line);
        }
    }
}
