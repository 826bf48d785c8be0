//! Validated settings: clamps, defaults and paths resolved once from the arguments and the
//! environment. Nothing below this layer reads arguments or environment variables.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::backend::{Agent, AgentOptions, ClaudeOptions};
use crate::cli::{ExecOpts, ProgressArg, RunOpts, WorkerOpts};
use crate::env;
use crate::prd::lookup::Locations;

mod args;
mod ci;
mod commands;
mod own;
mod samples;
mod sandboxing;
mod warning;

pub use sandboxing::Sandboxing;
pub use warning::Warning;

pub use args::{Rounds, Select};
pub use ci::{CiConfig, GithubConfig};
pub use commands::*;
pub use own::OwnPaths;
use own::session_names_beside;
pub use samples::{Escalate, Samples, Setup, SetupsFlag, mix};

pub const MAX_AGENTS: usize = 16;

/// PAI's locations from `$PAI_DIR` and `$PROJECTS_DIR` (defaults `~/.claude`, `~/Projects`).
/// `None` when neither `PAI_DIR` nor `HOME` is set (or they are empty): then nobody knows
/// where PAI's folders are, and guessing (`./.claude`) would scatter state files.
pub fn locations() -> Option<Locations> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = var(env::HOME);
    // LifeOS's `LIFEOS_DIR` plays the part `PAI_DIR` played, and wins when both are set.
    let pai_dir = var(env::LIFEOS_DIR)
        .or_else(|| var(env::PAI_DIR))
        .or_else(|| home.as_ref().map(|h| h.join(".claude")))?;
    let projects_dir = var(env::PROJECTS_DIR)
        .or_else(|| home.map(|h| h.join("Projects")))
        .unwrap_or_else(|| unknown(env::PROJECTS_DIR));
    Some(Locations {
        pai_dir,
        projects_dir,
    })
}

/// A folder that cannot exist (`/dev/null` is a file), for a location nobody set: reading it
/// finds nothing and writing into it fails, even as root.
fn unknown(var: &str) -> PathBuf {
    PathBuf::from(format!("/dev/null/{var} unset"))
}

/// PAI's locations for a command. `needed`: whether the command needs them given its
/// arguments (a PRD id to look up, the default state folder, the default folder of a new
/// PRD); when not, and they are unknown, stand-ins that no command reads or writes are used.
/// `instead` says what makes them unnecessary for this command (`give --state-dir and the
/// PRD's path`).
pub fn locations_for(needed: bool, instead: &str) -> Result<Locations> {
    match locations() {
        Some(loc) => Ok(loc),
        None if !needed => Ok(Locations {
            pai_dir: unknown(env::PAI_DIR),
            projects_dir: unknown(env::PROJECTS_DIR),
        }),
        None => anyhow::bail!(
            "neither PAI_DIR nor HOME is set, so PAI's folders are unknown (PAI_DIR defaults to \
             $HOME/.claude); set PAI_DIR or HOME, or {instead}"
        ),
    }
}

/// Whether a PRD argument is a path (found without PAI's folders) rather than an id to look
/// up in them: as `prd::lookup::resolve` tells them apart.
pub fn is_prd_path(arg: &str) -> bool {
    Path::new(arg).exists()
        || arg.contains(std::path::MAIN_SEPARATOR)
        || arg.contains('/')
        || arg.to_ascii_lowercase().ends_with(".md")
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
pub fn clamp_agents(n: i64) -> (usize, Option<Warning>) {
    let used = n.clamp(1, MAX_AGENTS as i64) as usize;
    let warning = (used as i64 != n).then_some(Warning::AgentsClamped { given: n, used });
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
pub fn agent_options(w: &WorkerOpts) -> Result<(AgentOptions, Vec<Warning>)> {
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
    let bin = from_start_dir(bin)?;
    if agent == Agent::Claude {
        claude.bin = bin.clone();
        claude.extra_args.extend(w.agent_args.iter().cloned());
    } else {
        if !w.claude_args.is_empty() {
            warnings.push(Warning::ClaudeArgIgnored { agent });
        }
        if w.permission_mode.as_deref().is_some_and(|m| !m.is_empty()) || w.max_turns.is_some() {
            warnings.push(Warning::ClaudeLimitsIgnored { agent });
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
            // Settled once the sandbox is (`Sandboxing::decide`).
            in_prdloop_sandbox: false,
        },
        warnings,
    ))
}

/// An agent program given as a relative path (`./bin/agent`, `../tools/agent`) is relative
/// to the folder prdloop was started in, not to the worker's (its lane): made absolute here.
/// A bare name (looked up on PATH) and an absolute path stay as they are.
fn from_start_dir(bin: String) -> Result<String> {
    let p = Path::new(&bin);
    if !bin.contains('/') || p.is_absolute() {
        return Ok(bin);
    }
    let abs = std::path::absolute(p)
        .with_context(|| format!("failed to resolve the agent program `{bin}`"))?;
    Ok(abs.to_string_lossy().into_owned())
}

/// The folder workers run in by default: the git top level holding the PRD, else its folder.
pub fn default_workdir(prd: &Path) -> PathBuf {
    let folder = prd
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    repo_top_holding(&folder).unwrap_or(folder)
}

/// The top of the git repository holding `dir`, found as git finds it: the nearest folder
/// (`dir` or above) with a `.git` that is a repository (a folder with `HEAD`, or a
/// `gitdir:` file; an empty or stray `.git` is not one), not climbing into a folder of
/// `GIT_CEILING_DIRECTORIES`.
pub fn repo_top_holding(dir: &Path) -> Option<PathBuf> {
    let ceilings: Vec<PathBuf> = std::env::var_os(crate::env::GIT_CEILING_DIRECTORIES)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| p.is_absolute())
                .collect()
        })
        .unwrap_or_default();
    repo_top_below(dir, &ceilings)
}

/// [`repo_top_holding`] with the ceilings given.
fn repo_top_below(dir: &Path, ceilings: &[PathBuf]) -> Option<PathBuf> {
    let mut here = Some(dir);
    while let Some(d) = here {
        if is_repository(&d.join(".git")) {
            return Some(d.to_path_buf());
        }
        here = d.parent().filter(|up| !ceilings.iter().any(|c| c == up));
    }
    None
}

/// Whether `dotgit` is a repository as git reads one: a folder holding `HEAD`, or a file
/// naming one (`gitdir: …`, a worktree's or a submodule's).
fn is_repository(dotgit: &Path) -> bool {
    match std::fs::metadata(dotgit) {
        Ok(m) if m.is_dir() => dotgit.join("HEAD").is_file(),
        Ok(m) if m.is_file() => std::fs::read(dotgit).is_ok_and(|t| t.starts_with(b"gitdir:")),
        _ => false,
    }
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
        let session_names = session_names_beside(&state_dir);
        Ok(Paths {
            workdir,
            state_dir,
            session_names,
        })
    }
}

/// Everything `run` needs. Its PRD, state folder and session names are its [`OwnPaths`]'
/// (`RunConfig::new` takes them from there).
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub prd_path: PathBuf,
    /// What the command line and the environment gave this run, for its state file, so that
    /// `resume` runs the session as it ran (set by [`RunSettings::config`]).
    pub given: crate::given::Given,
    pub agents: usize,
    pub max_iterations: Option<u64>,
    pub timeout: Duration,
    /// `--stuck-after`.
    pub stuck_after: crate::backend::stuck::StuckAfter,
    pub kill_grace: Duration,
    pub stall: u64,
    /// `--rounds`: continuous (no barrier between iterations) or PAI's barrier.
    pub rounds: Rounds,
    /// Run Verify commands (runner-side checks).
    pub verify: bool,
    /// Checks may untick boxes ticked before the run (`--recheck`).
    pub recheck: bool,
    pub verify_timeout: Duration,
    /// The Verify types whose single-code-span method prdloop runs itself.
    pub verify_types: crate::prd::VerifyTypes,
    /// `--protect`: paths of the checks' own (from the workers' folder) an attempt may not
    /// change and still be `checked`.
    pub protect: Vec<String>,
    pub max_cost: Option<f64>,
    pub max_time: Option<Duration>,
    pub max_wait: Duration,
    pub retry_backoff: Duration,
    pub workdir: PathBuf,
    pub state_dir: PathBuf,
    pub session_names: PathBuf,
    /// The agent and its command line.
    pub agent: AgentOptions,
    /// `--notify`, `--notify-on`, `--notify-url`, `--voice-id`.
    pub notify: crate::notify::Settings,
    /// JSON events on stdout.
    pub json: bool,
    /// CI reports: JUnit, GitHub Actions.
    pub ci: CiConfig,
    /// `--isolation`, `--setup`, `--commit`, `--keep-worktrees`.
    pub isolation: crate::isolation::Settings,
    /// `--best-of`, `--select`, `--mix`.
    pub samples: Samples,
    /// `--verifier`: who reviews claimed passes no command can check.
    pub verifier: crate::evidence::verifier::Verifier,
    /// How the run shows itself on stderr.
    pub progress: Progress,
    /// `--shard`: the only criteria the run works and checks (`None`: all of them).
    pub scope: Option<std::collections::HashSet<String>>,
    /// `--sandbox`, `--sandbox-allow`.
    pub sandbox: Sandboxing,
}

/// Whether this is CI: `CI` set to anything but empty, `false` or `0`.
pub fn in_ci() -> bool {
    std::env::var(env::CI).is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// How a run shows itself on stderr (`--progress`, resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The live view: a header and one line per running worker, redrawn in place.
    Live,
    /// One line per event (also what pipes, files and CI logs get).
    Lines,
    /// Only the final summary, warnings and errors.
    Summary,
}

impl Progress {
    /// `--progress` as given, for a stderr that is a terminal or not, in CI or not, on a
    /// `dumb` terminal or not. Only a terminal can show the live view: elsewhere `bar` is
    /// `lines`. `auto` also prints lines in CI, whose logs may pretend to be terminals.
    pub fn resolve(arg: ProgressArg, terminal: bool, ci: bool, dumb: bool) -> Progress {
        match arg {
            ProgressArg::None => Progress::Summary,
            ProgressArg::Lines => Progress::Lines,
            ProgressArg::Bar if terminal => Progress::Live,
            ProgressArg::Auto if terminal && !ci && !dumb => Progress::Live,
            ProgressArg::Bar | ProgressArg::Auto => Progress::Lines,
        }
    }

    /// `--progress` as given, for this process's stderr and environment.
    pub fn detect(arg: ProgressArg) -> Progress {
        use std::io::IsTerminal;
        let ci = in_ci();
        let dumb = std::env::var(env::TERM).is_ok_and(|t| t == "dumb");
        Progress::resolve(arg, std::io::stderr().is_terminal(), ci, dumb)
    }
}

impl RunConfig {
    /// `default_agents` applies when `-a` is not given (1, or a resumed run's own). `own`: the
    /// run's own paths, whose PRD, state folder and session names these settings carry.
    pub fn new(
        own: &OwnPaths,
        opts: &RunOpts,
        default_agents: i64,
    ) -> Result<(RunConfig, Vec<Warning>)> {
        let mut warnings = Vec::new();
        let (agents, w) = clamp_agents(opts.agents.or(default_agents));
        warnings.extend(w);
        let workdir = workdir(&own.prd, opts.exec.workdir.as_deref())?;
        let ci = CiConfig::new(opts.junit.clone(), &own.prd, &workdir);
        let (agent, w) = agent_options(&opts.worker)?;
        warnings.extend(w);
        let mix_setups = match opts.samples.mix.as_deref().filter(|m| !m.trim().is_empty()) {
            Some(spec) => {
                let (m, w) = mix(spec, SetupsFlag::Mix, &opts.worker)?;
                warnings.extend(w);
                m
            }
            None => Vec::new(),
        };
        let escalate = match opts
            .samples
            .escalate
            .as_deref()
            .filter(|m| !m.trim().is_empty())
        {
            Some(spec) => {
                let (m, w) = mix(spec, SetupsFlag::Escalate, &opts.worker)?;
                warnings.extend(w);
                m
            }
            None => Vec::new(),
        };
        let verifier = match opts.samples.verifier.as_deref().map(str::trim) {
            None | Some("") => crate::evidence::verifier::Verifier::Same,
            Some("none") => crate::evidence::verifier::Verifier::None,
            Some(spec) => {
                let (mut m, w) = mix(spec, SetupsFlag::Verifier, &opts.worker)?;
                warnings.extend(w);
                if m.len() != 1 {
                    anyhow::bail!(
                        "--verifier `{spec}`: one agent set-up (agent[:model]), or `none`"
                    );
                }
                let s = m.remove(0);
                crate::evidence::verifier::Verifier::Setup {
                    label: s.label,
                    agent: Box::new(s.agent),
                }
            }
        };
        let sandbox = Sandboxing::new(
            &opts.sandbox,
            std::iter::once(agent.agent)
                .chain(mix_setups.iter().chain(&escalate).map(|s| s.agent.agent)),
        )?;
        let lanes_x_samples = agents * opts.samples.best_of.most() as usize;
        if lanes_x_samples > 16 {
            warnings.push(Warning::ManyWorkers {
                agents,
                best_of: opts.samples.best_of,
            });
        }
        Ok((
            RunConfig {
                prd_path: own.prd.clone(),
                given: Default::default(),
                agents,
                max_iterations: opts.max_iterations,
                timeout: opts.timeout,
                stuck_after: opts.stuck_after,
                kill_grace: opts.exec.kill_grace,
                stall: opts.stall,
                rounds: opts.rounds.into(),
                verify: !opts.no_verify,
                recheck: opts.recheck,
                verify_timeout: opts.exec.verify_timeout,
                verify_types: opts.exec.verify_types.get(),
                protect: opts.isolation.protect.clone(),
                max_cost: opts.max_cost,
                max_time: opts.max_time,
                max_wait: opts.max_wait,
                retry_backoff: opts.retry_backoff,
                workdir,
                state_dir: own.state_dir.clone(),
                session_names: own.session_names.clone(),
                agent,
                notify: args::notify(&opts.notify),
                json: opts.json,
                ci,
                isolation: args::isolation(&opts.isolation),
                samples: Samples {
                    n: opts.samples.best_of.most(),
                    auto: matches!(opts.samples.best_of, crate::cli::BestOf::Auto { .. }),
                    select: opts.samples.select.into(),
                    mix: mix_setups,
                    escalate: Escalate {
                        setups: escalate,
                        after: opts.samples.escalate_after,
                        fallback: opts.samples.fallback,
                    },
                },
                verifier,
                progress: Progress::detect(opts.progress),
                scope: None,
                sandbox,
            },
            warnings,
        ))
    }
}

#[cfg(test)]
mod tests;
