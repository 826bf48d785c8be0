//! The options of `run` and `resume`: samples, rounds, shards, isolation, the sandbox,
//! notifications, progress, the dashboard; and the folder, timeout and Verify-type options
//! other commands share (`ExecOpts`, `VerifyTypesOpt`).

use super::*;

#[derive(Debug, Args, Clone, Default)]
pub struct RunOpts {
    #[command(flatten)]
    pub agents: AgentsOpt,

    /// At most N iterations in this run, at least 1 [default: the PRD's maxIterations, else
    /// 128]. Unlike PAI, this counts iterations of this run, not the PRD's lifetime
    /// `iteration` counter.
    #[arg(short = 'n', long = "max-iterations", visible_alias = "max", env = env::MAX_ITERATIONS, value_name = "N", allow_negative_numbers = true, value_parser = parse_at_least_1_u64)]
    pub max_iterations: Option<u64>,

    /// Stop after N iterations in a row with no newly passing criterion; 0 = never stop for
    /// that.
    #[arg(long, env = env::STALL, value_name = "N", default_value_t = 3, allow_negative_numbers = true, value_parser = parse_at_least_0)]
    pub stall: u64,

    /// How attempts follow each other: `continuous` (a failed criterion retries as soon as a
    /// lane is free; -n limits each criterion's attempts) or `barrier` (PAI's: each iteration
    /// gives every failing criterion one attempt and waits for the slowest).
    #[arg(long, env = env::ROUNDS, value_name = "MODE", value_enum, default_value_t = RoundsArg::Continuous)]
    pub rounds: RoundsArg,

    /// Time limit per worker, more than 0 (e.g. 90s, 20m, 1h).
    #[arg(long, env = env::TIMEOUT, value_name = "DUR", default_value = "20m", value_parser = parse_positive_duration)]
    pub timeout: Duration,

    /// End a worker that gives no new tool input (it only repeats calls it made before, or
    /// makes none) for this long (`10m`), for this many tool calls in a row (`40`), or
    /// whichever comes first (`10m,40`); `off` never does. Its attempt fails as stuck, and
    /// the next prompt says what it repeated.
    #[arg(long, env = env::STUCK_AFTER, value_name = "DUR|CALLS", default_value = crate::backend::stuck::StuckAfter::DEFAULT, value_parser = crate::backend::stuck::StuckAfter::parse)]
    pub stuck_after: crate::backend::stuck::StuckAfter,

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

    /// Stop launching workers when the next one could take the run past this long (more than
    /// 0); running ones finish.
    #[arg(long, env = env::MAX_TIME, value_name = "DUR", value_parser = parse_positive_duration)]
    pub max_time: Option<Duration>,

    /// The most time to spend waiting out rate limits, usage limits and overload in this run;
    /// past it the run ends (exit 1) with its state saved. 0: end the run at the first limit
    /// instead of waiting.
    #[arg(long, env = env::MAX_WAIT, value_name = "DUR", default_value = "6h", value_parser = parse_duration)]
    pub max_wait: Duration,

    /// The first wait after a rate limit or overload without a reset time, more than 0; it
    /// doubles on each failure in a row (with jitter) up to 15 minutes.
    #[arg(long, env = env::RETRY_BACKOFF, value_name = "DUR", default_value = "30s", value_parser = parse_positive_duration)]
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

    /// How the run shows itself on stderr. `bar`: a live view (the iteration, passing
    /// criteria, cost and time, and one line per running worker with what its agent is doing
    /// now), finished workers' lines scrolling above it; on a terminal only, else `lines`.
    /// `lines`: one line per event. `none`: only the final summary, warnings and errors.
    /// `auto`: `bar` when stderr is a terminal, `CI` is not set and `TERM` is not `dumb`,
    /// else `lines`.
    #[arg(long, env = env::PROGRESS, value_name = "WHEN", value_enum, default_value_t = ProgressArg::Auto)]
    pub progress: ProgressArg,

    /// Write a JUnit XML report to FILE at the run's end (also on Ctrl-C): one testcase per
    /// criterion, for CI test reporters.
    #[arg(long, env = env::JUNIT, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    #[command(flatten)]
    pub worker: WorkerOpts,

    #[command(flatten)]
    pub isolation: IsolationOpts,

    #[command(flatten)]
    pub pr: PrOpts,

    #[command(flatten)]
    pub sandbox: SandboxOpts,

    #[command(flatten)]
    pub samples: SampleOpts,

    #[command(flatten)]
    pub shard: ShardOpts,

    /// The most workers running at once across all the PRDs of this run (each --best-of
    /// sample is a worker), at least 1 [default with several PRDs, also those --with-children
    /// adds: 16; a single PRD is capped only when this is given].
    #[arg(long, env = env::MAX_WORKERS, value_name = "N", value_parser = parse_at_least_1_usize)]
    pub max_workers: Option<usize>,

    /// Run the PRDs listed in a PRD's `children:` front matter (ids or paths, relative to
    /// the parent's folder) first, as sub-loops, then the PRD itself once all of them are
    /// complete.
    #[arg(long, env = env::WITH_CHILDREN)]
    pub with_children: bool,

    #[command(flatten)]
    pub serve: ServeOpts,
}

/// Best-of-N: several samples of each attempt at once.
#[derive(Debug, Args, Clone)]
pub struct SampleOpts {
    /// Run each attempt at a criterion as N samples at once, each in its own worktree from the
    /// same base; one of those that pass is merged (see --select). 1 to 8, or `auto[:MAX]`
    /// (MAX 1 to 8, default 4): per domain and set-up, from the pass rate the run has seen
    /// (starting at 1, raised while attempts fail, kept in the state for `resume`). Needs
    /// isolated workers above 1. `-a` lanes × N workers run at once.
    #[arg(long, env = env::BEST_OF, value_name = "N|auto[:MAX]", default_value = "1", value_parser = parse_best_of)]
    pub best_of: BestOf,

    /// Which passing sample wins: `first` (the first to pass; its siblings are ended at once)
    /// or `best` (wait for all; fewest other criteria broken, then the smallest diff, the
    /// lowest cost, the lowest sample number).
    #[arg(long, env = env::SELECT, value_name = "HOW", value_enum, default_value_t = SelectArg::First)]
    pub select: SelectArg,

    /// The agent set-ups samples are round-robined across, `agent[:model]` separated by
    /// commas, e.g. `claude:opus,claude:sonnet,codex`: sample k uses set-up k mod their
    /// number [default: the --agent and --model given].
    #[arg(long, env = env::MIX, value_name = "SPEC", conflicts_with = "escalate")]
    pub mix: Option<String>,

    /// Set-ups a criterion climbs when it keeps failing, `agent[:model]` separated by commas
    /// like --mix, e.g. `claude:sonnet,claude:opus`: every criterion starts on the first; one
    /// that failed --escalate-after attempts on a set-up moves to the next (the last is kept).
    #[arg(long, env = env::ESCALATE, value_name = "SETUPS")]
    pub escalate: Option<String>,

    /// With --escalate: failed attempts on one set-up before the criterion moves to the next.
    #[arg(long, env = env::ESCALATE_AFTER, value_name = "K", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..), requires = "escalate")]
    pub escalate_after: u32,

    /// With --escalate: a set-up that hits its usage limit hands its work to the next set-up
    /// until the limit resets, instead of pausing every lane (the criterion keeps its place
    /// on the ladder and goes back once the limit is over).
    #[arg(long, env = env::FALLBACK, requires = "escalate")]
    pub fallback: bool,

    /// Who reviews a claimed PASS that no command of the runner's can check: a fresh agent
    /// run, `agent[:model]` (like --mix), that reads the attempt's tree and diff and must
    /// answer `VERDICT: <id> PASS|FAIL` with its evidence; its PASS makes the tick
    /// `reviewed`, its FAIL sends the attempt back. `none`: trust workers as PAI does (ticks
    /// are `claimed`) [default: the worker's own agent and model].
    #[arg(long, env = env::VERIFIER, value_name = "SETUP")]
    pub verifier: Option<String>,
}

impl Default for SampleOpts {
    fn default() -> SampleOpts {
        SampleOpts {
            best_of: BestOf::Fixed(1),
            select: SelectArg::First,
            mix: None,
            escalate: None,
            escalate_after: 2,
            fallback: false,
            verifier: None,
        }
    }
}

/// `--rounds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum RoundsArg {
    /// No barrier: lanes take the next runnable criterion as soon as they are free.
    #[default]
    Continuous,
    /// PAI's iterations: one attempt per failing criterion, then wait for all of them.
    Barrier,
}

/// `--select`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum SelectArg {
    #[default]
    First,
    Best,
}

/// `--isolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    /// A repository of its own per lane (the default inside a git repository with a
    /// commit); `worktree`, its old name, still works.
    #[value(alias = "worktree")]
    Lane,
    /// Every worker in the one checkout.
    None,
}

/// `--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum SandboxArg {
    /// On where the kernel supports it, else off (with a notice saying why).
    #[default]
    Auto,
    /// On, or the run fails before any worker starts.
    On,
    /// Workers may write wherever their user may.
    Off,
}

/// `--notify-on`: what the targets are told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NotifyOnArg {
    /// Every criterion passes.
    Done,
    /// The run ended without finishing: failed, stalled, stopped, paused, a limit.
    Failed,
    /// What is left needs a person (`Verify: Custom` criteria).
    NeedsPerson,
    /// A usage or rate limit: every lane waits.
    Limit,
    /// A limit's wait is over: workers start again.
    Resumed,
    /// `--max-cost` reached.
    Budget,
}

/// Fan-out: one shard of the PRD per machine.
#[derive(Debug, Args, Clone, Default)]
pub struct ShardOpts {
    /// Work only shard I of N: the PRD's failing criteria split into N shards of whole domain
    /// groups, as `plan --shards N` shows (the same split on every machine). The other
    /// criteria are left alone. Needs --bundle and a git repository.
    #[arg(long, env = env::SHARD, value_name = "I/N", requires = "bundle")]
    pub shard: Option<crate::shard::Shard>,

    /// With --shard: at the run's end (also when it ends early), write the shard's result to
    /// this folder for `prdloop merge`: the base commit, a binary patch of the merged
    /// changes, each criterion's outcome, attempts, cost and tokens, and the logs. A new or
    /// empty folder, or an earlier bundle (replaced whole).
    #[arg(long, env = env::BUNDLE, value_name = "DIR", requires = "shard")]
    pub bundle: Option<PathBuf>,
}

/// `--pr`: the run's work as a pull request.
#[derive(Debug, Args, Clone, Default)]
pub struct PrOpts {
    /// Work on a branch of its own, `prdloop/<prd-id>` (in a git worktree under the state
    /// folder: your checkout and branch are left as they are), commit each passed criterion
    /// (as --commit), push it to `origin` (never forced) and open a pull request, or update
    /// the one it opened before. Its body lists every criterion with its tick's receipt and
    /// issue, and `Closes #N` for each issue whose criteria all pass; questions are asked on
    /// their issues. Exit 10 when the push or GitHub refuses.
    #[arg(long, env = env::PR)]
    pub pr: bool,
    /// The branch the pull request goes into [default: your current branch].
    #[arg(long, env = env::PR_BASE, value_name = "BRANCH", requires = "pr")]
    pub pr_base: Option<String>,
    /// Open the pull request as a draft.
    #[arg(long, env = env::DRAFT, requires = "pr")]
    pub draft: bool,
}

/// Isolated workers: a repository of its own per lane.
#[derive(Debug, Args, Clone, Default)]
pub struct IsolationOpts {
    /// Where workers work: `lane` = a repository of its own per lane (its own refs, config,
    /// hooks, stash and index; the user's objects borrowed read-only), made from the
    /// checkout as it is (uncommitted and untracked files included), their work merged back
    /// as each criterion passes; `none` = all in the folder itself [default: lane inside a
    /// git repository with a commit, else none]. `worktree` is the old name of `lane`.
    #[arg(long, env = env::ISOLATION, value_name = "MODE", value_enum)]
    pub isolation: Option<IsolationArg>,

    /// A command run once in each new lane before its first worker (e.g. `npm ci`).
    #[arg(long, env = env::SETUP, value_name = "CMD")]
    pub setup: Option<String>,

    /// Commit each passed criterion's merged work on HEAD (`ISC-X-1: <description>`) instead
    /// of leaving it uncommitted in the checkout.
    #[arg(long, env = env::COMMIT)]
    pub commit: bool,

    /// Keep the lanes at the run's end (they are removed otherwise; their attempts are kept
    /// under refs/prdloop/ either way).
    #[arg(long, env = env::KEEP_WORKTREES)]
    pub keep_worktrees: bool,

    /// Let through landings the guards refuse: those that delete files whose only copy is
    /// the checkout (uncommitted or untracked), put back the committed version of files you
    /// changed, or delete more than half of the tracked files.
    #[arg(long, env = env::ALLOW_DELETIONS)]
    pub allow_deletions: bool,

    /// A file or folder (ending in `/`) of the checks' own, from the workers' folder, beside
    /// what prdloop finds itself (the scripts a check runs, test files, test configuration):
    /// an attempt that changes one is never ticked `checked` (repeatable; in PRDLOOP_PROTECT
    /// separated by `:`; a PRD's `prdloop:` map can list them as `protect`).
    #[arg(long, env = env::PROTECT, value_name = "PATH", value_delimiter = ':')]
    pub protect: Vec<String>,
}

/// The workers' kernel sandbox.
#[derive(Debug, Args, Clone, Default)]
pub struct SandboxOpts {
    /// Bind each worker and everything it starts with a kernel sandbox (Linux Landlock):
    /// it writes only in its lane (its worktree, or the folder with --isolation none), a
    /// TMPDIR of its own, the agents' state and cache folders and --sandbox-allow paths;
    /// it reads everything but your secrets (~/.ssh, ~/.aws, ~/.gnupg, ~/.config/gh,
    /// ~/.netrc, …) and its environment has no credentials (see --pass-env). `auto`: on where the kernel supports it (a notice
    /// says which); `on`: the run fails (exit 2) where it cannot be had, macOS included;
    /// `off`: no sandbox.
    #[arg(long, env = env::SANDBOX, value_name = "WHEN", value_enum, default_value_t = SandboxArg::Auto)]
    pub sandbox: SandboxArg,

    /// One more folder or file sandboxed workers may write (repeatable; in PRDLOOP_SANDBOX_ALLOW
    /// separated by `:`). Relative to the folder prdloop is started in; it must exist.
    #[arg(long = "sandbox-allow", env = env::SANDBOX_ALLOW, value_name = "PATH", value_delimiter = ':')]
    pub sandbox_allow: Vec<PathBuf>,

    /// Let one variable that sandboxed workers do not get (SSH_AUTH_SOCK, AWS_*, GH_TOKEN, …)
    /// through to them (repeatable; in PRDLOOP_PASS_ENV separated by `,`).
    #[arg(long = "pass-env", env = env::PASS_ENV, value_name = "NAME", value_delimiter = ',')]
    pub pass_env: Vec<String>,

    /// What sandboxed workers (and all they start) may reach over the network. `agent`: only
    /// their agent's API hosts (and its base URL's), through a filtering proxy prdloop runs on
    /// 127.0.0.1, direct TCP blocked by the kernel; `allow:HOST[:PORT],…`: those hosts too;
    /// `off`: no TCP connection at all; `open`: anywhere. Not blocked: UDP, Unix sockets bound
    /// to a path, and the proxy's port on other addresses (the kernel's rule is by port).
    #[arg(long, env = env::NETWORK, value_name = "MODE", default_value = "agent")]
    pub network: crate::worker::network::Network,

    /// Hosts the runner's checks (Verify commands, probes, --setup) may reach besides
    /// --network's `allow:` ones, workers not: a package registry, say (`HOST[:PORT]`,
    /// repeatable; in PRDLOOP_CHECK_ALLOW separated by `,`). Nothing to add under `open`.
    #[arg(long = "check-allow", env = env::CHECK_ALLOW, value_name = "HOST", value_delimiter = ',')]
    pub check_allow: Vec<crate::worker::network::Host>,
}

/// `--progress`: how a run shows itself on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProgressArg {
    #[default]
    Auto,
    Bar,
    Lines,
    None,
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

    /// Send notifications here (repeatable): `ntfy:TOPIC_URL`, a Slack or Discord webhook URL
    /// (or `slack:URL`, `discord:URL`), `desktop` (notify-send / osascript), `pai-voice`
    /// (PAI's voice server at --notify-url, default http://localhost:8888/notify: the start,
    /// each iteration and the outcome) or `command:PROG` (run with `sh -c`, the event as one
    /// JSON object on stdin). Fire and forget; a failing target costs one warning.
    #[arg(long = "notify", value_name = "TARGET", value_parser = crate::notify::Target::parse)]
    pub targets: Vec<crate::notify::Target>,

    /// What the --notify targets are told of, separated by commas: done, failed (the run
    /// ended unfinished: failed, stalled, stopped, paused, a limit), needs-person, limit (a
    /// usage or rate limit's wait began), resumed (it ended), budget (--max-cost reached)
    /// [default: done,failed,needs-person].
    #[arg(long, env = env::NOTIFY_ON, value_name = "KINDS", value_enum, value_delimiter = ',')]
    pub notify_on: Vec<NotifyOnArg>,
}

/// `--serve`: the web dashboard beside a run.
#[derive(Debug, Args, Clone, Default)]
pub struct ServeOpts {
    /// Serve the web dashboard (as `prdloop serve`, this run's state folder) beside this
    /// run, on 127.0.0.1; its address, with its access token, is printed on stderr.
    #[arg(long)]
    pub serve: bool,

    /// The dashboard's port with --serve [default: a free one].
    #[arg(long, value_name = "PORT", requires = "serve")]
    pub serve_port: Option<u16>,
}

/// Where and how processes run: shared by `run` and `verify`.
#[derive(Debug, Args, Clone, Default)]
pub struct ExecOpts {
    /// After SIGTERM, how long a worker (or Verify command) gets before SIGKILL; 0 sends
    /// SIGKILL right after SIGTERM.
    #[arg(long, env = env::KILL_GRACE, value_name = "DUR", default_value = "10s", value_parser = parse_duration)]
    pub kill_grace: Duration,

    /// Working directory of the workers [default: the git top level holding the PRD, else
    /// the PRD's folder].
    #[arg(long, env = env::WORKDIR, value_name = "DIR")]
    pub workdir: Option<PathBuf>,

    /// Where the session state JSON goes [default: $PAI_DIR/MEMORY/STATE/algorithms].
    #[arg(long, env = env::STATE_DIR, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Time limit for one Verify command, more than 0.
    #[arg(long, env = env::VERIFY_TIMEOUT, value_name = "DUR", default_value = "5m", value_parser = parse_positive_duration)]
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
