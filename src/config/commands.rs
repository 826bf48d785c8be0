//! One settings struct per command (besides `run`'s [`RunConfig`]), each made in one function
//! from clap's arguments of the command ([`crate::cli`]), the environment and PAI's folders:
//! PRDs looked up, folders resolved, counts clamped, modes as enums. The commands take these,
//! never clap's types. Each `new` returns the warnings to print beside the settings.

use super::*;
use crate::cli::{
    AnswerArgs, AuditArgs, CleanArgs, ControlArgs, DoctorArgs, InteractiveArgs, LogsArgs,
    MergeArgs, NewArgs, NewFormat, PlanArgs, RunOpts, ServeArgs, StatusArgs, UndoArgs, VerifyArgs,
};
use crate::prd::VerifyTypes;
use crate::prd::lookup;

/// `-a` for a command that runs commands at once: clamped, with the warning when it was.
fn agents(given: i64, warnings: &mut Vec<Warning>) -> usize {
    let (n, w) = clamp_agents(given);
    warnings.extend(w);
    n
}

/// Where and how processes run (`--workdir`, `--state-dir`, `--kill-grace`,
/// `--verify-timeout`, `--verify-types`): `verify`, `merge` and `audit`.
#[derive(Debug, Clone)]
pub struct Exec {
    pub paths: Paths,
    pub kill_grace: Duration,
    pub verify_timeout: Duration,
    pub verify_types: VerifyTypes,
}

impl Exec {
    pub fn new(prd: &Path, o: &ExecOpts, loc: &Locations) -> Result<Exec> {
        Ok(Exec {
            paths: Paths::new(prd, o, loc)?,
            kill_grace: o.kill_grace,
            verify_timeout: o.verify_timeout,
            verify_types: o.verify_types.get(),
        })
    }
}

/// What `plan` (and `run --dry-run`) needs, validated.
#[derive(Debug, Clone)]
pub struct PlanSettings {
    pub prd: PathBuf,
    pub agents: usize,
    pub agent: AgentOptions,
    pub workdir: PathBuf,
    pub verify_types: VerifyTypes,
    pub json: bool,
    /// `--shards N`: show the split across N machines instead of the lanes.
    pub shards: Option<usize>,
}

impl PlanSettings {
    pub fn new(a: &PlanArgs, loc: &Locations) -> Result<(PlanSettings, Vec<Warning>)> {
        let prd = lookup::resolve(&a.prd, loc)?;
        let mut warnings = Vec::new();
        let agents = agents(a.agents.or(1), &mut warnings);
        let (agent, w) = agent_options(&a.worker)?;
        warnings.extend(w);
        Ok((
            PlanSettings {
                agents,
                agent,
                workdir: workdir(&prd, a.workdir.as_deref())?,
                verify_types: a.verify_types.get(),
                json: a.json,
                shards: a.shards.map(usize::from),
                prd,
            },
            warnings,
        ))
    }
}

/// What `verify` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyMode {
    /// Run the checks, write the boxes and the front matter.
    Write,
    /// Run the checks, write nothing (`--no-write`).
    NoWrite,
    /// Run nothing, list what would run (`--dry-run`).
    DryRun,
}

#[derive(Debug, Clone)]
pub struct VerifySettings {
    pub prd: PathBuf,
    /// Verify commands at once.
    pub agents: usize,
    pub exec: Exec,
    pub mode: VerifyMode,
    pub json: bool,
}

impl VerifySettings {
    pub fn new(a: &VerifyArgs, loc: &Locations) -> Result<(VerifySettings, Vec<Warning>)> {
        let prd = lookup::resolve(&a.prd, loc)?;
        let mut warnings = Vec::new();
        let agents = agents(a.agents.or(1), &mut warnings);
        let mode = match (a.dry_run, a.no_write) {
            (true, _) => VerifyMode::DryRun,
            (_, true) => VerifyMode::NoWrite,
            _ => VerifyMode::Write,
        };
        Ok((
            VerifySettings {
                agents,
                exec: Exec::new(&prd, &a.exec, loc)?,
                mode,
                json: a.json,
                prd,
            },
            warnings,
        ))
    }
}

#[derive(Debug, Clone)]
pub struct MergeSettings {
    pub prd: PathBuf,
    /// The bundle folders as given (or folders holding them).
    pub bundles: Vec<PathBuf>,
    /// Verify commands at once.
    pub agents: usize,
    pub exec: Exec,
    pub json: bool,
    /// `--max-bundle-size`.
    pub limits: crate::bundle::Limits,
    /// GitHub Actions' job summary, when merging there.
    pub ci: CiConfig,
}

impl MergeSettings {
    pub fn new(a: &MergeArgs, loc: &Locations) -> Result<(MergeSettings, Vec<Warning>)> {
        let prd = lookup::resolve(&a.prd, loc)?;
        let mut warnings = Vec::new();
        let agents = agents(a.agents.or(1), &mut warnings);
        Ok((
            MergeSettings {
                bundles: a.bundles.clone(),
                agents,
                exec: Exec::new(&prd, &a.exec, loc)?,
                json: a.json,
                limits: crate::bundle::Limits {
                    size: a.max_bundle_size,
                },
                ci: CiConfig::new(None, &prd, Path::new(".")),
                prd,
            },
            warnings,
        ))
    }
}

#[derive(Debug, Clone)]
pub struct AuditSettings {
    pub prd: PathBuf,
    pub exec: Exec,
    pub json: bool,
}

impl AuditSettings {
    pub fn new(a: &AuditArgs, loc: &Locations) -> Result<AuditSettings> {
        let prd = lookup::resolve(&a.prd, loc)?;
        Ok(AuditSettings {
            exec: Exec::new(&prd, &a.exec, loc)?,
            json: a.json,
            prd,
        })
    }
}

#[derive(Debug, Clone)]
pub struct StatusSettings {
    /// The PRDs given, or every PRD in PAI's locations.
    pub prds: Vec<PathBuf>,
    /// Where PRDs were looked for (for "no PRDs found in …").
    pub searched: String,
    pub state_dir: PathBuf,
    pub json: bool,
}

impl StatusSettings {
    pub fn new(a: &StatusArgs, loc: &Locations) -> Result<StatusSettings> {
        let state_dir = state_dir(a.state_dir.as_deref(), loc)?;
        let prds = if a.prds.is_empty() {
            lookup::candidates(loc)
        } else {
            a.prds
                .iter()
                .map(|p| lookup::resolve(p, loc))
                .collect::<Result<_>>()?
        };
        Ok(StatusSettings {
            prds,
            searched: loc.describe(),
            state_dir,
            json: a.json,
        })
    }
}

#[derive(Debug, Clone)]
pub struct AnswerSettings {
    pub prd: PathBuf,
    /// The criterion whose question is answered (`None`: list the open questions).
    pub id: Option<String>,
    pub text: Option<String>,
    pub state_dir: PathBuf,
    pub json: bool,
}

impl AnswerSettings {
    pub fn new(a: &AnswerArgs, loc: &Locations) -> Result<AnswerSettings> {
        let prd = lookup::resolve(&a.prd, loc)?;
        Ok(AnswerSettings {
            prd,
            id: a.id.clone(),
            text: a.text.clone(),
            state_dir: state_dir(a.state_dir.as_deref(), loc)?,
            json: a.json,
        })
    }
}

/// `pause` and `stop`.
#[derive(Debug, Clone)]
pub struct ControlSettings {
    pub prd: PathBuf,
    pub ask: crate::request::Ask,
    pub state_dir: PathBuf,
    /// `--wait`: until the loop has ended.
    pub wait: bool,
}

impl ControlSettings {
    pub fn new(
        a: &ControlArgs,
        ask: crate::request::Ask,
        loc: &Locations,
    ) -> Result<ControlSettings> {
        let prd = lookup::resolve(a.prd(), loc)?;
        Ok(ControlSettings {
            prd,
            ask,
            state_dir: state_dir(a.state_dir.as_deref(), loc)?,
            wait: a.wait,
        })
    }
}

/// Which kind of PRD `new` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrdFormat {
    /// PAI's loop format (v3): `PRD-<date>-<slug>.md`.
    V3,
    /// PAI v4: `<slug>/PRD.md`.
    V4,
}

impl From<NewFormat> for PrdFormat {
    fn from(f: NewFormat) -> PrdFormat {
        match f {
            NewFormat::V3 => PrdFormat::V3,
            NewFormat::V4 => PrdFormat::V4,
        }
    }
}

#[derive(Debug, Clone)]
pub struct NewSettings {
    pub title: String,
    /// As given (`new` checks it is one of PAI's levels).
    pub effort: String,
    /// `-p DIR`: the folder to write in.
    pub dir: Option<PathBuf>,
    /// Without `-p`: `$PAI_DIR/MEMORY/WORK`, in a new folder of which the PRD is written.
    pub work: PathBuf,
    pub format: PrdFormat,
}

impl NewSettings {
    pub fn new(a: &NewArgs, loc: &Locations) -> NewSettings {
        NewSettings {
            title: a.title.clone(),
            effort: a.effort.clone(),
            dir: a.dir.clone(),
            work: loc.pai_dir.join("MEMORY/WORK"),
            format: a.format.into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct DoctorSettings {
    pub agent: AgentOptions,
    /// What of the options given does not apply to the agent (`doctor` shows them as notes).
    pub notes: Vec<Warning>,
}

impl DoctorSettings {
    pub fn new(a: &DoctorArgs) -> Result<DoctorSettings> {
        let (agent, notes) = agent_options(&a.worker)?;
        Ok(DoctorSettings { agent, notes })
    }
}

#[derive(Debug, Clone)]
pub struct InteractiveSettings {
    pub prd: PathBuf,
    /// Claude Code's program.
    pub program: String,
    /// `--workdir` as given, else the default.
    pub workdir: PathBuf,
}

impl InteractiveSettings {
    /// `interactive PRD`, or PAI's `-m interactive -p PRD` (`program` and `workdir` from
    /// `run`'s options).
    pub fn new(
        prd: &str,
        program: &str,
        workdir: Option<&Path>,
        loc: &Locations,
    ) -> Result<InteractiveSettings> {
        let prd = lookup::resolve(prd, loc)?;
        Ok(InteractiveSettings {
            program: program.to_string(),
            workdir: workdir.map_or_else(|| default_workdir(&prd), Path::to_path_buf),
            prd,
        })
    }

    pub fn of(a: &InteractiveArgs, loc: &Locations) -> Result<InteractiveSettings> {
        InteractiveSettings::new(&a.prd, &a.claude_bin, a.workdir.as_deref(), loc)
    }
}

/// What `logs` was asked for.
#[derive(Debug, Clone)]
pub struct LogsSettings {
    pub prd: PathBuf,
    pub criterion: Option<String>,
    pub attempt: Option<u32>,
    pub follow: bool,
    pub raw: bool,
    pub state_dir: PathBuf,
}

impl LogsSettings {
    pub fn new(a: &LogsArgs, loc: &Locations) -> Result<LogsSettings> {
        let state_dir = state_dir(a.state_dir.as_deref(), loc)?;
        Ok(LogsSettings {
            prd: lookup::resolve(&a.prd, loc)?,
            criterion: a.criterion.clone(),
            attempt: a.attempt,
            follow: a.follow,
            raw: a.raw,
            state_dir,
        })
    }
}

/// How many landings `undo` puts back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Landings {
    /// The newest N.
    Newest(usize),
    All,
}

/// What to undo.
#[derive(Debug, Clone)]
pub struct UndoSettings {
    /// Only this PRD's landings.
    pub prd: Option<PathBuf>,
    /// How many of the newest landings (1 = the last one).
    pub count: Landings,
    /// List the undo points instead.
    pub list: bool,
    pub json: bool,
}

impl UndoSettings {
    pub fn new(a: &UndoArgs) -> UndoSettings {
        UndoSettings {
            prd: a.prd.clone(),
            count: if a.all {
                Landings::All
            } else {
                Landings::Newest(a.to.unwrap_or(1) as usize)
            },
            list: a.list,
            json: a.json,
        }
    }
}

#[derive(Debug, Clone)]
pub struct CleanSettings {
    /// A folder in the repository.
    pub dir: PathBuf,
    /// `--all`: the refs of sessions that are not running too.
    pub all: bool,
    /// `--force`: with `--all`, every undo point too.
    pub force: bool,
    pub json: bool,
}

impl CleanSettings {
    pub fn new(a: &CleanArgs) -> CleanSettings {
        CleanSettings {
            dir: a.dir.clone(),
            all: a.all,
            force: a.force,
            json: a.json,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServeSettings {
    pub options: crate::serve::Options,
    /// `--open`: in a browser.
    pub open: bool,
}

impl ServeSettings {
    /// The state folders given, else PAI's (and LifeOS's, when `LIFEOS_DIR` is set);
    /// `loc` is asked for only then.
    pub fn new(a: &ServeArgs, loc: impl FnOnce() -> Result<Locations>) -> Result<ServeSettings> {
        let state_dirs = if a.state_dirs.is_empty() {
            let loc = loc()?;
            let mut dirs = vec![state_dir(None, &loc)?];
            if let Some(d) = std::env::var_os(env::LIFEOS_DIR).filter(|d| !d.is_empty()) {
                dirs.push(PathBuf::from(d).join("MEMORY/STATE/algorithms"));
            }
            dirs
        } else {
            a.state_dirs
                .iter()
                .map(std::path::absolute)
                .collect::<std::io::Result<_>>()?
        };
        Ok(ServeSettings {
            options: crate::serve::Options {
                state_dirs,
                port: a.port.unwrap_or(0),
            },
            open: a.open,
        })
    }
}

/// `--pr`: the pull request the run's work becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// `--pr-base`: the branch it goes into (`None`: the checkout's current branch).
    pub base: Option<String>,
    pub draft: bool,
}

/// What `run` and `resume` were asked, before the PRD is known: the flags the command itself
/// acts on, typed; [`RunSettings::config`] makes the loop's [`RunConfig`] for one PRD.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// `--json`: JSON events on stdout.
    pub json: bool,
    /// `--force`: run a PRD that says it is complete.
    pub force: bool,
    /// `--dry-run`: show the plan and exit.
    pub dry_run: bool,
    /// `--with-children`: the PRDs of `children:` first, as sub-loops.
    pub with_children: bool,
    /// `--max-workers`.
    pub max_workers: Option<usize>,
    /// `--kill-grace`: also for what the workers detached, at the end.
    pub kill_grace: Duration,
    /// `--serve`: the dashboard's port (0: a free one).
    pub serve: Option<u16>,
    /// `--shard I/N` and `--bundle DIR` (clap requires them together).
    pub shard: Option<crate::shard::Shard>,
    pub bundle: Option<PathBuf>,
    /// `--state-dir` as given.
    pub state_dir: Option<PathBuf>,
    /// `--pr`, `--pr-base`, `--draft`.
    pub pr: Option<PullRequest>,
    /// The flags as given, for [`RunConfig::new`].
    opts: RunOpts,
    /// Where `--sandbox`'s value came from, for the run's sandbox line (see
    /// [`RunSettings::with_sandbox_set_by`]).
    sandbox_set_by: Option<String>,
    /// What the command line and the environment gave, for the state file (see
    /// [`RunSettings::with_given`]).
    given: crate::given::Given,
}

impl RunSettings {
    /// The same settings, knowing what the command line and the environment gave: the
    /// state file records it.
    pub fn with_given(mut self, here: crate::given::SessionSettings) -> RunSettings {
        self.given.here = here;
        self
    }

    /// The same settings, knowing which of its session's settings a `resume` took.
    pub fn with_session_settings(mut self, taken: crate::given::SessionSettings) -> RunSettings {
        self.given.from_session = taken;
        self
    }

    /// The same settings, knowing where `--sandbox`'s value came from when not from the
    /// default or the flag (`env:PRDLOOP_SANDBOX`, a config file's line).
    pub fn with_sandbox_set_by(mut self, set_by: Option<String>) -> RunSettings {
        self.sandbox_set_by = set_by;
        self
    }

    pub fn new(o: &RunOpts) -> RunSettings {
        RunSettings {
            json: o.json,
            force: o.force,
            dry_run: o.dry_run,
            with_children: o.with_children,
            max_workers: o.max_workers,
            kill_grace: o.exec.kill_grace,
            serve: o.serve.serve.then(|| o.serve.serve_port.unwrap_or(0)),
            shard: o.shard.shard,
            bundle: o.shard.bundle.clone(),
            state_dir: o.exec.state_dir.clone(),
            pr: o.pr.pr.then(|| PullRequest {
                base: o.pr.pr_base.clone().filter(|b| !b.trim().is_empty()),
                draft: o.pr.draft,
            }),
            opts: o.clone(),
            sandbox_set_by: None,
            given: Default::default(),
        }
    }

    /// The settings of the run `--pr` makes on its own branch: committing each passed
    /// criterion, and no pull request of its own.
    pub fn on_pull_request_branch(&self) -> RunSettings {
        let mut s = self.clone();
        s.pr = None;
        s.opts.isolation.commit = true;
        s.opts.pr = Default::default();
        s
    }

    /// `--workdir` as given.
    pub fn workdir(&self) -> Option<&Path> {
        self.opts.exec.workdir.as_deref()
    }

    /// The run's folders for the PRD at `prd`.
    pub fn paths(&self, prd: &Path, loc: &Locations) -> Result<Paths> {
        Paths::new(prd, &self.opts.exec, loc)
    }

    /// prdloop's own paths of a run on the PRD at `prd`: its state folder is `--state-dir`,
    /// else PAI's.
    pub fn own_paths(&self, prd: &Path, loc: &Locations) -> Result<OwnPaths> {
        let state_dir = state_dir(self.opts.exec.state_dir.as_deref(), loc)?;
        Ok(OwnPaths::new(prd, state_dir))
    }

    /// The loop's settings for the run whose own paths are `own` (see [`RunConfig::new`]).
    pub fn config(&self, own: &OwnPaths, default_agents: i64) -> Result<(RunConfig, Vec<Warning>)> {
        let (mut cfg, warnings) = RunConfig::new(own, &self.opts, default_agents)?;
        cfg.sandbox.set_by = self.sandbox_set_by.clone();
        cfg.given = self.given.clone();
        Ok((cfg, warnings))
    }
}
