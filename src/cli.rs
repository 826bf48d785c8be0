//! The command line as the user types it (clap derive). `config` validates it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::backend::claude::DEFAULT_ALLOWED_TOOLS;
use crate::env;
use crate::prd::VerifyTypes;

#[derive(Debug, Parser)]
#[command(
    name = "prdloop",
    version,
    about = "Run parallel coding agents against a PRD's criteria until they pass",
    long_about = "Run parallel coding agents against a PRD's criteria until they pass.\n\n\
        prdloop reads a PRD (markdown with YAML front matter and `- [ ] ISC-...:` criteria), \
        splits the failing criteria by domain across agents, runs one coding-agent worker per \
        criterion (`claude -p` unless --agent names another), checks each worker's `RESULT: <id> PASS|FAIL` line, ticks the boxes and \
        keeps PAI's state files. PAI's form `prdloop -m loop -p <PRD>` works too.",
    after_help = crate::exit::HELP,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// PAI compatibility: `-m loop -p <PRD>` is `run <PRD>`; `-m interactive -p <PRD>` is
    /// `interactive <PRD>`.
    #[arg(short = 'm', long = "mode", value_enum, requires = "prd")]
    pub mode: Option<Mode>,

    /// PAI compatibility: the PRD (a path or a PRD id), with `-m`.
    #[arg(short = 'p', long = "prd", value_name = "PRD", requires = "mode")]
    pub prd: Option<String>,

    #[command(flatten)]
    pub run: RunOpts,

    #[command(flatten)]
    pub global: GlobalOpts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Run the loop (same as `prdloop run`).
    Loop,
    /// Start an interactive claude on the PRD (same as `prdloop interactive`).
    Interactive,
}

#[derive(Debug, Args, Clone, Default)]
pub struct GlobalOpts {
    /// More diagnostics on stderr (-v: info, -vv: debug, -vvv: trace). PRDLOOP_LOG overrides.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the loop: workers per failing criterion until all pass or a limit is reached.
    #[command(after_help = crate::exit::HELP)]
    Run {
        /// The PRD: a path, or a PRD id found in PAI's locations.
        prd: String,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Show what the next iteration would do: lanes, criteria in order, the worker command.
    Plan {
        /// The PRD: a path, or a PRD id found in PAI's locations.
        prd: String,
        #[command(flatten)]
        agents: AgentsOpt,
        #[command(flatten)]
        worker: WorkerOpts,
        /// Working directory of the workers [default: the git top level holding the PRD, else
        /// the PRD's folder].
        #[arg(long, env = env::WORKDIR, value_name = "DIR")]
        workdir: Option<PathBuf>,
        #[command(flatten)]
        verify_types: VerifyTypesOpt,
        /// Print JSON on stdout instead of text.
        #[arg(long, env = env::JSON)]
        json: bool,
    },
    /// Run every runnable Verify command now, update the boxes and the front matter, and
    /// report. Exit 0 when all runnable criteria pass, 1 otherwise. No agent is needed.
    #[command(after_help = crate::exit::HELP)]
    Verify {
        /// The PRD: a path, or a PRD id found in PAI's locations.
        prd: String,
        #[command(flatten)]
        agents: AgentsOpt,
        #[command(flatten)]
        exec: ExecOpts,
        /// Report without writing the PRD.
        #[arg(long, env = env::DRY_RUN)]
        dry_run: bool,
        /// Print JSON on stdout instead of text.
        #[arg(long, env = env::JSON)]
        json: bool,
    },
    /// Write a new PRD with PAI's front matter and sections.
    New {
        /// The title (not empty); the id is `PRD-<YYYYMMDD>-<slug of the title>`, with `-2`,
        /// `-3`, … when that name is taken.
        #[arg(short = 't', long = "title")]
        title: String,
        /// Effort level: Instant, Fast, Standard, Extended, Advanced, Deep or Comprehensive.
        #[arg(short = 'e', long = "effort", default_value = "Standard")]
        effort: String,
        /// The folder to write it in [default: $PAI_DIR/MEMORY/WORK/<YYYYMMDD-HHMMSS>_<slug>/].
        #[arg(short = 'p', long = "path", value_name = "DIR")]
        dir: Option<PathBuf>,
        /// v3: PAI's loop format (`PRD-<date>-<slug>.md`); v4: PAI v4's (`<slug>/PRD.md`).
        #[arg(long, value_enum, default_value = "v3")]
        format: crate::commands::new::NewFormat,
    },
    /// Ask the loop running on a PRD to pause: running workers finish and count, then it ends
    /// with `loopStatus: paused`.
    Pause(ControlArgs),
    /// Ask the loop running on a PRD to stop: workers are ended as by Ctrl-C, then it ends with
    /// `loopStatus: stopped`.
    Stop(ControlArgs),
    /// Continue a paused, stopped or crashed loop with its session id, state file, attempt
    /// history and (unless given) its -a.
    #[command(after_help = crate::exit::HELP)]
    Resume {
        /// The PRD: a path, or a PRD id found in PAI's locations.
        prd: String,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Check that the agent can run: its binary, its version, and whether it looks logged in
    /// (without spending tokens). Exit 0 when usable, 2 when not.
    Doctor {
        #[command(flatten)]
        worker: WorkerOpts,
    },
    /// Start an interactive claude on the PRD, in its workdir, with the terminal attached.
    Interactive {
        /// The PRD: a path, or a PRD id found in PAI's locations.
        prd: String,
        /// The agent program.
        #[arg(long, env = env::CLAUDE_BIN, value_name = "PATH", default_value = "claude")]
        claude_bin: String,
        /// Working directory [default: the git top level holding the PRD, else its folder].
        #[arg(long, env = env::WORKDIR, value_name = "DIR")]
        workdir: Option<PathBuf>,
    },
    /// Show each PRD's progress; with no argument, every PRD in PAI's locations.
    Status {
        /// PRDs: paths or PRD ids.
        prds: Vec<String>,
        /// Your state folder: a running loop is found whatever state folder it was started
        /// with, and its folder is shown when it is not this one
        /// [default: $PAI_DIR/MEMORY/STATE/algorithms].
        #[arg(long, env = env::STATE_DIR, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Print JSON on stdout instead of text.
        #[arg(long, env = env::JSON)]
        json: bool,
    },
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
    /// Parallel agents (lanes; for `verify`, commands at once) [default: 1; for `resume`,
    /// the paused run's]. Clamped to 1..=16 with a warning.
    #[arg(short = 'a', long = "agents", env = env::AGENTS, value_name = "N", allow_negative_numbers = true)]
    pub agents: Option<i64>,
}

impl AgentsOpt {
    /// The value given, or `default`.
    pub fn or(&self, default: i64) -> i64 {
        self.agents.unwrap_or(default)
    }
}

#[derive(Debug, Args, Clone, Default)]
pub struct RunOpts {
    #[command(flatten)]
    pub agents: AgentsOpt,

    /// At most N iterations in this run [default: the PRD's maxIterations, else 128]. Unlike
    /// PAI, this counts iterations of this run, not the PRD's lifetime `iteration` counter.
    #[arg(short = 'n', long = "max-iterations", visible_alias = "max", env = env::MAX_ITERATIONS, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_iterations: Option<u64>,

    /// Stop after N iterations in a row with no newly passing criterion (0 = never).
    #[arg(long, env = env::STALL, value_name = "N", default_value_t = 3)]
    pub stall: u64,

    /// Time limit per worker (e.g. 90s, 20m, 1h).
    #[arg(long, env = env::TIMEOUT, value_name = "DUR", default_value = "20m", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Do not run Verify commands: only the workers' verdicts count (as in PAI).
    #[arg(long, env = env::NO_VERIFY)]
    pub no_verify: bool,

    /// Let checks untick boxes that were ticked before the run: a ticked criterion whose
    /// Verify command fails is unticked at the start and re-checked after each iteration.
    /// Without it such a box only gets a warning.
    #[arg(long, env = env::RECHECK)]
    pub recheck: bool,

    /// Run a PRD that says it is complete (`status: COMPLETE`, v4 `phase: complete`).
    #[arg(long, env = env::FORCE)]
    pub force: bool,

    /// Stop launching workers when the next one could take the run's total agent cost
    /// (claude's `total_cost_usd`, summed) past this many US dollars; running ones finish.
    #[arg(long, env = env::MAX_COST, value_name = "USD", value_parser = parse_usd)]
    pub max_cost: Option<f64>,

    /// Stop launching workers when the next one could take the run past this long; running
    /// ones finish.
    #[arg(long, env = env::MAX_TIME, value_name = "DUR", value_parser = parse_duration)]
    pub max_time: Option<Duration>,

    /// The most time to spend waiting out rate limits, usage limits and overload in this run;
    /// past it the run ends (exit 1) with its state saved.
    #[arg(long, env = env::MAX_WAIT, value_name = "DUR", default_value = "6h", value_parser = parse_duration)]
    pub max_wait: Duration,

    /// The first wait after a rate limit or overload without a reset time; it doubles on each
    /// failure in a row (with jitter) up to 15 minutes.
    #[arg(long, env = env::RETRY_BACKOFF, value_name = "DUR", default_value = "30s", value_parser = parse_duration)]
    pub retry_backoff: Duration,

    #[command(flatten)]
    pub exec: ExecOpts,

    #[command(flatten)]
    pub notify: NotifyOpts,

    /// Show the plan and exit (same as `prdloop plan`); spawns nothing, writes nothing.
    #[arg(long, env = env::DRY_RUN)]
    pub dry_run: bool,

    /// Print one JSON event per line on stdout (start, worker_start, worker_end, regression,
    /// iteration_end, end) for CI and scripts; the human lines stay on stderr.
    #[arg(long, env = env::JSON)]
    pub json: bool,

    #[command(flatten)]
    pub worker: WorkerOpts,
}

/// Voice (or any) notifications, PAI style.
#[derive(Debug, Args, Clone, Default)]
pub struct NotifyOpts {
    /// POST `{"message", "voice_id"}` here at loop start, each iteration's end and the outcome
    /// (PAI's voice server: http://localhost:8888/notify). Fire and forget; off when unset.
    #[arg(long, env = env::NOTIFY_URL, value_name = "URL")]
    pub notify_url: Option<String>,

    /// The `voice_id` sent with each notification.
    #[arg(long, env = env::VOICE_ID, value_name = "ID", default_value = "")]
    pub voice_id: String,
}

/// Where and how processes run: shared by `run` and `verify`.
#[derive(Debug, Args, Clone, Default)]
pub struct ExecOpts {
    /// After SIGTERM, how long a worker gets before SIGKILL.
    #[arg(long, env = env::KILL_GRACE, value_name = "DUR", default_value = "10s", value_parser = parse_duration)]
    pub kill_grace: Duration,

    /// Working directory of the workers [default: the git top level holding the PRD, else
    /// the PRD's folder].
    #[arg(long, env = env::WORKDIR, value_name = "DIR")]
    pub workdir: Option<PathBuf>,

    /// Where the session state JSON goes [default: $PAI_DIR/MEMORY/STATE/algorithms].
    #[arg(long, env = env::STATE_DIR, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Time limit for one Verify command.
    #[arg(long, env = env::VERIFY_TIMEOUT, value_name = "DUR", default_value = "5m", value_parser = parse_duration)]
    pub verify_timeout: Duration,

    #[command(flatten)]
    pub verify_types: VerifyTypesOpt,
}

/// Which Verify methods prdloop runs itself.
#[derive(Debug, Args, Clone, Default)]
pub struct VerifyTypesOpt {
    /// Verify types whose method prdloop runs itself when the method is one code span
    /// holding the whole command (`Test: `cargo test auth``); every other method is checked
    /// by the agent. Comma-separated, any case.
    #[arg(long, env = env::VERIFY_TYPES, value_name = "LIST", default_value = "Test,CLI,Command,Run,Build,Lint,Typecheck", value_parser = parse_verify_types)]
    pub verify_types: Option<VerifyTypes>,
}

impl VerifyTypesOpt {
    pub fn get(&self) -> VerifyTypes {
        self.verify_types.clone().unwrap_or_default()
    }
}

fn parse_verify_types(s: &str) -> Result<VerifyTypes, String> {
    VerifyTypes::parse(s).map_err(|e| e.to_string())
}

#[derive(Debug, Args, Clone, Default)]
pub struct WorkerOpts {
    /// Claude Code's program (with `--agent claude`, when --agent-bin is not given). Still
    /// anything that reads a prompt on stdin and prints a `RESULT:` line, as before.
    #[arg(long, env = env::CLAUDE_BIN, value_name = "PATH", default_value = "claude")]
    pub claude_bin: String,

    /// Model for the workers (the agent's model flag: `claude --model`, `codex -m`,
    /// `gemini -m`, `opencode -m provider/model`, `agent --model`; amp: `--mode`).
    #[arg(long, env = env::MODEL, value_name = "MODEL")]
    pub model: Option<String>,

    /// Permission mode for the workers (`claude --permission-mode`).
    #[arg(long, env = env::PERMISSION_MODE, value_name = "MODE")]
    pub permission_mode: Option<String>,

    /// Agent turns per worker (`claude --max-turns`).
    #[arg(long, env = env::MAX_TURNS, value_name = "N")]
    pub max_turns: Option<u32>,

    /// Tools the workers may use without asking (`claude --allowedTools`); empty for none.
    #[arg(long, env = env::ALLOWED_TOOLS, value_name = "LIST", default_value = DEFAULT_ALLOWED_TOOLS)]
    pub allowed_tools: String,

    /// An extra argument for the agent, after prdloop's own (repeatable). Setting
    /// `--output-format` here replaces prdloop's `--output-format stream-json --verbose`.
    #[arg(long = "claude-arg", env = env::CLAUDE_ARGS, value_name = "ARG", allow_hyphen_values = true, value_delimiter = '\n')]
    pub claude_args: Vec<String>,

    // --- The agent choice (backends) ---
    /// The coding agent the workers run: claude, codex, gemini, opencode, cursor, amp, or
    /// command (any program: the prompt on stdin, `RESULT: <id> PASS` on stdout). A number
    /// in PRDLOOP_AGENT (the lane number prdloop gives its own workers) counts as unset.
    #[arg(long, env = env::AGENT_CHOICE, value_name = "NAME", value_parser = parse_agent)]
    pub agent: Option<crate::backend::Agent>,

    /// The agent's program [default: the agent's usual binary on PATH: claude (or
    /// --claude-bin), codex, gemini, opencode, agent, amp; required for `command`].
    #[arg(long, env = env::AGENT_BIN, value_name = "PATH")]
    pub agent_bin: Option<String>,

    /// An extra argument for the agent, after prdloop's own (repeatable). With claude, added
    /// after the --claude-arg ones.
    #[arg(long = "agent-arg", env = env::AGENT_ARGS, value_name = "ARG", allow_hyphen_values = true, value_delimiter = '\n')]
    pub agent_args: Vec<String>,
}

/// `--agent`: a name; a bare number (prdloop's own lane variable) means the default.
fn parse_agent(s: &str) -> Result<crate::backend::Agent, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(crate::backend::Agent::default());
    }
    s.parse()
}

/// Parses a dollar amount such as `5` or `2.50` (a leading `$` is fine).
pub fn parse_usd(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_start_matches('$')
        .parse()
        .map_err(|_| format!("`{s}` is not an amount of US dollars like 5 or 2.50"))?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("`{s}` must be more than 0"))
    }
}

/// Parses `90s`, `20m`, `1h 30m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("`{s}` is not a duration like 90s, 20m or 1h: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("20m").unwrap(), Duration::from_secs(1200));
        assert!(parse_duration("soon").is_err());
    }
}
