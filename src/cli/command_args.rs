//! The arguments of each command but `run` and `resume` (the variant's doc comment in
//! `Command` is its help).

use super::*;

#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    /// The PRD: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    #[command(flatten)]
    pub agents: AgentsOpt,
    #[command(flatten)]
    pub worker: WorkerOpts,
    /// Working directory of the workers [default: the git top level holding the PRD, else
    /// the PRD's folder].
    #[arg(long, env = env::WORKDIR, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    #[command(flatten)]
    pub verify_types: VerifyTypesOpt,
    /// Print JSON on stdout instead of text.
    #[arg(long, env = env::JSON)]
    pub json: bool,
    /// Split the failing criteria into N shards for N machines (CI jobs), each run with
    /// `run --shard I/N`: whole domain groups, balanced like lanes (by what earlier
    /// workers took, when the state has it). With --json, `include` is a GitHub Actions
    /// matrix (`{"include":[{"shard":"1/N"},…]}`, one job per non-empty shard, at least
    /// one) and `shards` lists each shard's criteria. Pick N so that the largest shard's
    /// work fits a job's time limit at -a agents per job; more shards than domain groups
    /// add nothing.
    #[arg(long, env = env::SHARDS, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub shards: Option<u16>,
    /// Where the session state is, for known durations [default:
    /// $PAI_DIR/MEMORY/STATE/algorithms].
    #[arg(long, env = env::STATE_DIR, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct MergeArgs {
    /// The PRD the shards ran: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    /// Bundle folders, or folders holding bundle folders (as download-artifact leaves
    /// them).
    #[arg(required = true, value_name = "DIR")]
    pub bundles: Vec<PathBuf>,
    #[command(flatten)]
    pub agents: AgentsOpt,
    #[command(flatten)]
    pub exec: ExecOpts,
    /// Print the result as JSON on stdout.
    #[arg(long, env = env::JSON)]
    pub json: bool,
    /// The most bytes read of a bundle's patch, and of its logs together (bytes, or with
    /// K, M or G); a bundle above it is refused. The manifest's own limit is 4 MiB.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = crate::bundle::parse_size)]
    pub max_bundle_size: u64,
}

#[derive(Debug, Args, Clone)]
pub struct VerifyArgs {
    /// The PRD: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    #[command(flatten)]
    pub agents: AgentsOpt,
    #[command(flatten)]
    pub exec: ExecOpts,
    /// Run nothing: list the commands that would run, and why the others are not run.
    #[arg(long, env = env::DRY_RUN, conflicts_with = "no_write")]
    pub dry_run: bool,
    /// Run the checks and report, but do not write the PRD.
    #[arg(long)]
    pub no_write: bool,
    /// Print JSON on stdout instead of text.
    #[arg(long, env = env::JSON)]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct NewArgs {
    /// The title (not empty); the id is `PRD-<YYYYMMDD>-<slug of the title>`, with `-2`,
    /// `-3`, … when that name is taken.
    #[arg(short = 't', long = "title")]
    pub title: String,
    /// Effort level: Instant, Fast, Standard, Extended, Advanced, Deep or Comprehensive.
    #[arg(short = 'e', long = "effort", default_value = "Standard")]
    pub effort: String,
    /// The folder to write it in [default: $PAI_DIR/MEMORY/WORK/<YYYYMMDD-HHMMSS>_<slug>/].
    #[arg(short = 'p', long = "path", value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// v3: PAI's loop format (`PRD-<date>-<slug>.md`); v4: PAI v4's (`<slug>/PRD.md`).
    #[arg(long, value_enum, default_value = "v3")]
    pub format: NewFormat,
}

#[derive(Debug, Args, Clone)]
pub struct ImportArgs {
    /// The tracker: `github:OWNER/REPO`.
    #[arg(value_name = "TRACKER")]
    pub tracker: String,
    /// Only open issues with this label; repeated, issues with every one of them.
    #[arg(long = "label", value_name = "L")]
    pub labels: Vec<String>,
    /// Only open issues of this milestone (its title or number).
    #[arg(long, value_name = "M")]
    pub milestone: Option<String>,
    /// These issues only (repeat for several); closed ones and pull requests are skipped.
    #[arg(long = "issue", value_name = "N", conflicts_with_all = ["labels", "milestone"])]
    pub issues: Vec<u64>,
    /// The PRD to write, or to add the new items to when it exists.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "PRD",
        default_value = "PRD.md"
    )]
    pub output: PathBuf,
    /// The longest wait for GitHub's rate limit (`90s`, `2m`); a longer one fails (exit 10).
    #[arg(long, env = env::RATE_LIMIT_WAIT, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub rate_limit_wait: Duration,
}

#[derive(Debug, Args, Clone)]
pub struct AnswerArgs {
    /// The PRD: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    /// The criterion whose question this answers.
    pub id: Option<String>,
    /// The answer.
    pub text: Option<String>,
    /// Your state folder, where the questions are kept (a running loop's own is used
    /// whatever this is) [default: $PAI_DIR/MEMORY/STATE/algorithms].
    #[arg(long, env = env::STATE_DIR, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print JSON on stdout instead of text.
    #[arg(long, env = env::JSON)]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub worker: WorkerOpts,
}

#[derive(Debug, Args, Clone)]
pub struct InteractiveArgs {
    /// The PRD: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    /// The agent program.
    #[arg(long, env = env::CLAUDE_BIN, value_name = "PATH", default_value = "claude")]
    pub claude_bin: String,
    /// Working directory [default: the git top level holding the PRD, else its folder].
    #[arg(long, env = env::WORKDIR, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct LogsArgs {
    /// The PRD: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    /// The criterion [default: the log written last].
    pub criterion: Option<String>,
    /// Which attempt of the criterion [default: the latest].
    #[arg(long, value_name = "N")]
    pub attempt: Option<u32>,
    /// Keep printing while the worker runs.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The log as written (the agent's stream-json and `[stderr] ` lines).
    #[arg(long)]
    pub raw: bool,
    /// Where the session's state and logs are [default: $PAI_DIR/MEMORY/STATE/algorithms].
    #[arg(long, env = env::STATE_DIR, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct CleanArgs {
    /// A folder in the repository [default: the current folder].
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Also delete the refs under refs/prdloop/ (pinned bases and attempts, kept
    /// conflicts) of every session that is not running.
    #[arg(long)]
    pub all: bool,
    /// With --all: delete every undo point too (else those younger than 14 days are
    /// kept).
    #[arg(long, requires = "all")]
    pub force: bool,
    /// Print JSON on stdout instead of text.
    #[arg(long, env = env::JSON)]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct AuditArgs {
    /// The PRD: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    #[command(flatten)]
    pub exec: ExecOpts,
    /// Print one JSON line per tick on stdout instead of text.
    #[arg(long, env = env::JSON)]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct UndoArgs {
    /// Only this PRD's landings [default: any PRD's in this repository].
    pub prd: Option<PathBuf>,
    /// Undo the newest N landings (`--list` numbers them; 1 = the last).
    #[arg(long, value_name = "N", conflicts_with = "all", value_parser = clap::value_parser!(u64).range(1..))]
    pub to: Option<u64>,
    /// Undo every landing listed.
    #[arg(long)]
    pub all: bool,
    /// List the undo points, newest first, instead of undoing.
    #[arg(long)]
    pub list: bool,
    /// Print JSON lines on stdout instead of text.
    #[arg(long, env = env::JSON)]
    pub json: bool,
}

#[derive(Debug, Args, Clone)]
pub struct TrustArgs {
    /// The file: a `prdloop.toml`, or a PRD (its `prdloop:` map) [default: this
    /// repository's prdloop.toml or .config/prdloop.toml].
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Forget the trust given to the file instead.
    #[arg(long, conflicts_with = "list")]
    pub forget: bool,
    /// List the trusted files, and whether each still says what was trusted.
    #[arg(long, conflicts_with = "file")]
    pub list: bool,
}

#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// The port [default: a free one].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Open the address in a browser (xdg-open, open).
    #[arg(long)]
    pub open: bool,
    /// A state folder to show (repeatable) [default: $PAI_DIR/MEMORY/STATE/algorithms,
    /// and $LIFEOS_DIR/MEMORY/STATE/algorithms when LIFEOS_DIR is set].
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dirs: Vec<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct StatusArgs {
    /// PRDs: paths or PRD ids.
    pub prds: Vec<String>,
    /// Your state folder: a running loop is found whatever state folder it was started
    /// with, and its folder is shown when it is not this one
    /// [default: $PAI_DIR/MEMORY/STATE/algorithms].
    #[arg(long, env = env::STATE_DIR, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print JSON on stdout instead of text.
    #[arg(long, env = env::JSON)]
    pub json: bool,
}

/// The arguments of `pause` and `stop`.
#[derive(Debug, Args, Clone)]
pub struct ControlArgs {
    /// The PRD: a path, or a PRD id found in PAI's locations. `-p` works too (PAI's form).
    #[arg(required_unless_present = "prd_flag")]
    pub prd: Option<String>,
    #[arg(short = 'p', long = "prd", value_name = "PRD", conflicts_with = "prd")]
    pub prd_flag: Option<String>,
    /// Your state folder: the running loop is found whatever state folder it was started
    /// with, and its folder is named when it is not this one
    /// [default: $PAI_DIR/MEMORY/STATE/algorithms].
    #[arg(long, env = env::STATE_DIR, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Wait until the loop has ended.
    #[arg(long)]
    pub wait: bool,
}

impl ControlArgs {
    pub fn prd(&self) -> &str {
        self.prd
            .as_deref()
            .or(self.prd_flag.as_deref())
            .unwrap_or_default()
    }
}

#[derive(Debug, Args, Clone, Default)]
pub struct AgentsOpt {
    /// Parallel agents (lanes; for `verify`, commands at once), at least 1 [default: 1; for
    /// `resume`, the paused run's]. More than 16 is lowered to 16 with a warning (as in PAI).
    #[arg(short = 'a', long = "agents", env = env::AGENTS, value_name = "N", allow_negative_numbers = true, value_parser = parse_at_least_1)]
    pub agents: Option<i64>,
}

impl AgentsOpt {
    /// The value given, or `default`.
    pub fn or(&self, default: i64) -> i64 {
        self.agents.unwrap_or(default)
    }
}
