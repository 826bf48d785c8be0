//! Validated settings: clamps, defaults and paths resolved once from the arguments and the
//! environment. Nothing below this layer reads arguments or environment variables.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::backend::{Agent, AgentOptions, ClaudeOptions};
use crate::cli::{ExecOpts, RunOpts, WorkerOpts};
use crate::env;
use crate::prd::lookup::Locations;

pub const MAX_AGENTS: usize = 16;

/// PAI's locations from `$PAI_DIR` and `$PROJECTS_DIR` (defaults `~/.claude`, `~/Projects`).
pub fn locations() -> Locations {
    let home = std::env::var_os(env::HOME).map_or_else(|| PathBuf::from("."), PathBuf::from);
    let pai_dir = std::env::var_os(env::PAI_DIR)
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.join(".claude"), PathBuf::from);
    let projects_dir = std::env::var_os(env::PROJECTS_DIR)
        .filter(|v| !v.is_empty())
        .map_or_else(|| home.join("Projects"), PathBuf::from);
    Locations {
        pai_dir,
        projects_dir,
    }
}

/// The state folder: `--state-dir` when given, else `$PAI_DIR/MEMORY/STATE/algorithms`.
pub fn state_dir(given: Option<&Path>, loc: &Locations) -> Result<PathBuf> {
    match given {
        Some(d) => std::path::absolute(d)
            .with_context(|| format!("failed to resolve --state-dir `{}`", d.display())),
        None => Ok(loc.pai_dir.join("MEMORY/STATE/algorithms")),
    }
}

/// Clamps `-a` to 1..=16; returns a warning naming the value used when it changed.
pub fn clamp_agents(n: i64) -> (usize, Option<String>) {
    let used = n.clamp(1, MAX_AGENTS as i64) as usize;
    let warning = (used as i64 != n)
        .then(|| format!("-a/--agents {n} is outside 1..={MAX_AGENTS}; using {used}"));
    (used, warning)
}

pub fn claude_options(w: &WorkerOpts) -> ClaudeOptions {
    ClaudeOptions {
        bin: w.claude_bin.clone(),
        model: w.model.clone().filter(|s| !s.is_empty()),
        permission_mode: w.permission_mode.clone().filter(|s| !s.is_empty()),
        max_turns: w.max_turns,
        allowed_tools: w.allowed_tools.clone(),
        extra_args: w.claude_args.clone(),
    }
}

/// The agent the workers run, from `--agent`, `--agent-bin`, `--agent-arg` and (for claude)
/// the claude options; with the warnings about options that do not apply to that agent.
pub fn agent_options(w: &WorkerOpts) -> Result<(AgentOptions, Vec<String>)> {
    let agent = w.agent.unwrap_or_default();
    let mut claude = claude_options(w);
    let mut warnings = Vec::new();
    let bin = match (&w.agent_bin, agent.default_bin()) {
        (Some(b), _) if !b.is_empty() => b.clone(),
        _ if agent == Agent::Claude => claude.bin.clone(),
        (_, Some(b)) => b.to_string(),
        (_, None) => anyhow::bail!(
            "--agent {agent} needs --agent-bin PATH (PRDLOOP_AGENT_BIN): the program to run"
        ),
    };
    if agent == Agent::Claude {
        claude.bin = bin.clone();
        claude.extra_args.extend(w.agent_args.iter().cloned());
    } else {
        if !w.claude_args.is_empty() {
            warnings.push(format!(
                "--claude-arg applies to claude only; ignored with --agent {agent} (use --agent-arg)"
            ));
        }
        if w.permission_mode.as_deref().is_some_and(|m| !m.is_empty()) || w.max_turns.is_some() {
            warnings.push(format!(
                "--permission-mode and --max-turns apply to claude only; ignored with --agent {agent}"
            ));
        }
    }
    let model = w.model.clone().filter(|s| !s.is_empty());
    Ok((
        AgentOptions {
            agent,
            bin,
            model,
            extra_args: w.agent_args.clone(),
            claude,
        },
        warnings,
    ))
}

/// The folder workers run in by default: the git top level holding the PRD, else its folder.
pub fn default_workdir(prd: &Path) -> PathBuf {
    let folder = prd
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut dir = Some(folder.as_path());
    while let Some(d) = dir {
        if d.join(".git").exists() {
            return d.to_path_buf();
        }
        dir = d.parent();
    }
    folder
}

/// Where a run's processes work and its files go.
#[derive(Debug, Clone)]
pub struct Paths {
    pub workdir: PathBuf,
    pub state_dir: PathBuf,
    pub session_names: PathBuf,
}

/// The workers' folder: `--workdir` when given (it must be a folder), else the default.
pub fn workdir(prd_path: &Path, given: Option<&Path>) -> Result<PathBuf> {
    let workdir = match given {
        Some(d) => std::path::absolute(d)
            .with_context(|| format!("failed to resolve --workdir `{}`", d.display()))?,
        None => default_workdir(prd_path),
    };
    if !workdir.is_dir() {
        anyhow::bail!("--workdir `{}` is not a directory", workdir.display());
    }
    Ok(workdir)
}

impl Paths {
    pub fn new(prd_path: &Path, exec: &ExecOpts, loc: &Locations) -> Result<Paths> {
        let workdir = workdir(prd_path, exec.workdir.as_deref())?;
        let state_dir = state_dir(exec.state_dir.as_deref(), loc)?;
        // session-names.json sits beside the algorithms folder, as in PAI.
        let session_names = state_dir
            .parent()
            .map_or_else(|| loc.pai_dir.join("MEMORY/STATE"), Path::to_path_buf)
            .join("session-names.json");
        Ok(Paths {
            workdir,
            state_dir,
            session_names,
        })
    }
}

/// Everything `run` needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub prd_path: PathBuf,
    pub agents: usize,
    pub max_iterations: Option<u64>,
    pub timeout: Duration,
    pub kill_grace: Duration,
    pub stall: u64,
    /// Run Verify commands (runner-side checks).
    pub verify: bool,
    /// Checks may untick boxes ticked before the run (`--recheck`).
    pub recheck: bool,
    pub verify_timeout: Duration,
    /// The Verify types whose single-code-span method prdloop runs itself.
    pub verify_types: crate::prd::VerifyTypes,
    pub max_cost: Option<f64>,
    pub max_time: Option<Duration>,
    pub max_wait: Duration,
    pub retry_backoff: Duration,
    pub workdir: PathBuf,
    pub state_dir: PathBuf,
    pub session_names: PathBuf,
    /// The agent and its command line.
    pub agent: AgentOptions,
    pub notify_url: Option<String>,
    pub voice_id: String,
    /// JSON events on stdout.
    pub json: bool,
}

impl RunConfig {
    /// `default_agents` applies when `-a` is not given (1, or a resumed run's own).
    pub fn new(
        prd_path: PathBuf,
        opts: &RunOpts,
        default_agents: i64,
        loc: &Locations,
    ) -> Result<(RunConfig, Vec<String>)> {
        let mut warnings = Vec::new();
        let (agents, w) = clamp_agents(opts.agents.or(default_agents));
        warnings.extend(w);
        let paths = Paths::new(&prd_path, &opts.exec, loc)?;
        let (agent, w) = agent_options(&opts.worker)?;
        warnings.extend(w);
        Ok((
            RunConfig {
                prd_path,
                agents,
                max_iterations: opts.max_iterations,
                timeout: opts.timeout,
                kill_grace: opts.exec.kill_grace,
                stall: opts.stall,
                verify: !opts.no_verify,
                recheck: opts.recheck,
                verify_timeout: opts.exec.verify_timeout,
                verify_types: opts.exec.verify_types.get(),
                max_cost: opts.max_cost,
                max_time: opts.max_time,
                max_wait: opts.max_wait,
                retry_backoff: opts.retry_backoff,
                workdir: paths.workdir,
                state_dir: paths.state_dir,
                session_names: paths.session_names,
                agent,
                notify_url: opts.notify.notify_url.clone().filter(|u| !u.is_empty()),
                voice_id: opts.notify.voice_id.clone(),
                json: opts.json,
            },
            warnings,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps() {
        assert_eq!(clamp_agents(4), (4, None));
        assert_eq!(clamp_agents(40).0, 16);
        assert!(clamp_agents(40).1.unwrap().contains("using 16"));
        assert_eq!(clamp_agents(0).0, 1);
        assert_eq!(clamp_agents(-3).0, 1);
    }
}
