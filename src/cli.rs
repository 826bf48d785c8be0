//! The command line as the user types it (clap derive). `config` validates it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::backend::claude::DEFAULT_ALLOWED_TOOLS;
use crate::env;
use crate::prd::VerifyTypes;

mod command_args;
mod raw;
mod run_opts;
mod values;

pub use command_args::*;
pub use raw::{color_asked, pai_form_hint, wants_json_run};
pub use run_opts::*;
pub use values::*;

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
    after_help = "`prdloop <COMMAND> --help` lists a command's options; `prdloop --help` adds the exit codes and PAI's `-m loop` form.",
    after_long_help = top_long_help(),
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    mut_args = hide_pai_twins
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

/// What `--help` says after the options: PAI's form, whose `run` flags it does not list at the
/// top, and the exit codes.
fn top_long_help() -> String {
    format!(
        "PAI's form: `prdloop -m loop -p <PRD> [run's options]` is `prdloop run <PRD> [options]` \
         (every option of `prdloop run --help` is taken at the top level too); `prdloop -m \
         interactive -p <PRD>` is `prdloop interactive <PRD>`.\n\n{}",
        crate::exit::HELP
    )
}

/// The top level's help lists the commands and the global options only: `run`'s options,
/// which the top level takes too for PAI's `-m loop` form, are listed under `run --help`.
fn hide_pai_twins(a: clap::Arg) -> clap::Arg {
    const SHOWN: &[&str] = &[
        "mode", "prd", "verbose", "profile", "color", "help", "version",
    ];
    if SHOWN.contains(&a.get_id().as_str()) {
        a
    } else {
        a.hide(true)
    }
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

    /// The config files' `[profile.NAME]` tables to use over their top-level settings
    /// [default: `ci` when CI is set and a file has a `[profile.ci]`].
    #[arg(long, env = env::PROFILE, value_name = "NAME", global = true)]
    pub profile: Option<String>,

    /// When to colour the output, decided per stream: `auto` on a terminal unless NO_COLOR is
    /// set (CLICOLOR_FORCE colours pipes too), `always`, `never`.
    #[arg(long, env = env::COLOR, value_name = "WHEN", value_enum, default_value_t = ColorArg::Auto, global = true)]
    pub color: ColorArg,
}

/// Which kind of PRD `new` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NewFormat {
    /// PAI's loop format (v3): `id`, `status`, `loopStatus`, … in `PRD-<date>-<slug>.md`.
    V3,
    /// PAI v4: `task`, `slug`, `phase`, `progress`, … in `<slug>/PRD.md`.
    V4,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorArg {
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorArg {
    /// The choice for every output stream.
    pub fn choice(self) -> anstream::ColorChoice {
        match self {
            ColorArg::Auto => anstream::ColorChoice::Auto,
            ColorArg::Always => anstream::ColorChoice::Always,
            ColorArg::Never => anstream::ColorChoice::Never,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the loop: workers per failing criterion until all pass or a limit is reached
    #[command(after_help = crate::exit::HELP)]
    Run {
        /// The PRD: a path, or a PRD id found in PAI's locations. Several PRDs run at once as
        /// sub-loops of one process, each with its own session, lock and state, under one
        /// --max-workers cap; one combined summary, and the worst outcome's exit code.
        #[arg(required = true, num_args = 1.., value_name = "PRD")]
        prds: Vec<String>,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Show what the next iteration would do: lanes, criteria, the worker command
    Plan(PlanArgs),
    /// Fan in: merge CI shards' bundles into this checkout
    ///
    /// The shards' bundles are those of `run --shard I/N --bundle DIR`.
    ///
    /// The bundles are applied in shard order with a three-way merge (a bundle that conflicts is not applied and its
    /// criteria fail, naming the files), tick the criteria that passed, re-run their
    /// runnable Verify commands on the merged tree (one that fails is not ticked), and write
    /// the front matter, one state file with the shards' history summed, and a summary. Exit
    /// codes as `run`'s.
    ///
    /// A bundle is untrusted input (a CI artifact anyone who can run a job controls): merge
    /// refuses, with exit 7 and nothing changed, a bundle of another commit, PRD or split; one
    /// whose criteria are not those the split gives its shard, or that speaks of a `Verify:
    /// Custom` criterion; a file that is a link, a device or above the size limits; numbers
    /// out of range; a patch that changes files its manifest does not list. Each pass is
    /// shown `checked` (its Verify command passed here) or `claimed` (the shard's word only).
    #[command(after_help = crate::exit::HELP)]
    Merge(MergeArgs),
    /// Run every runnable Verify command now and tick the boxes (no agent)
    ///
    /// Updates the boxes and the front matter, and reports. Exit 0 when all runnable criteria
    /// pass, 1 otherwise. No agent is needed.
    #[command(after_help = crate::exit::HELP)]
    Verify(VerifyArgs),
    /// Write a new PRD with PAI's front matter and sections.
    New(NewArgs),
    /// Write (or add to) a PRD from a tracker's open issues
    ///
    /// One criterion per task-list item of each matching issue (one for an issue without a
    /// list), with ids `ISC-GH<issue>-<k>`, each naming its issue (`#N`); the front matter's
    /// `tracker:` records the repository. Into an existing PRD it adds only the items not
    /// there yet: ids, ticks and your text stay as they are. The token is GITHUB_TOKEN, else
    /// GH_TOKEN, else `gh auth token`'s; the API is GITHUB_API_URL's [default:
    /// https://api.github.com]. Exit 10 when GitHub refuses (the message names the status).
    #[command(after_help = crate::exit::HELP)]
    Import(ImportArgs),
    /// Answer a worker's question about a criterion; without an id, list the open ones
    ///
    /// A worker asks with `QUESTION: <id> <text>`: the criterion, parked until now, is worked
    /// on again with the answer in its prompt (by the loop running on the PRD within a second,
    /// else by the next run).
    Answer(AnswerArgs),
    /// Ask the loop running on a PRD to pause
    ///
    /// Running workers finish and count, then it ends with `loopStatus: paused`.
    Pause(ControlArgs),
    /// Ask the loop running on a PRD to stop
    ///
    /// Workers are ended as by Ctrl-C, then it ends with `loopStatus: stopped`.
    Stop(ControlArgs),
    /// Continue a paused, stopped, interrupted or crashed loop
    ///
    /// With its session id, state file, attempt history and (unless given) its -a.
    #[command(after_help = crate::exit::HELP)]
    Resume {
        /// The PRD: a path, or a PRD id found in PAI's locations.
        prd: String,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Check that the agent can run: its binary, version and login
    ///
    /// Without spending tokens. Exit 0 when usable, 2 when not.
    Doctor(DoctorArgs),
    /// Start an interactive claude on the PRD, in its workdir, with the terminal attached.
    Interactive(InteractiveArgs),
    /// Show a worker's log for people
    ///
    /// Assistant text, tool calls and results, the final result. The latest attempt by
    /// default.
    Logs(LogsArgs),
    /// Remove the lanes prdloop left in a repository
    ///
    /// Those of runs that crashed or were given --keep-worktrees, after keeping what was in
    /// them under refs/prdloop/; running sessions' lanes are left alone. Finishes a landing a
    /// crash interrupted, and deletes undo points older than 14 days. Says how much disk it
    /// freed.
    Clean(CleanArgs),
    /// Re-run the commands that earned each `checked` tick, on the checkout as it is now
    ///
    /// Every tick has a receipt (in the PRD's latest session state): what earned it. `audit`
    /// runs each `checked` tick's command again in a throw-away copy of the checkout (made
    /// through git; your files are never touched), and lists which ticks still hold, which
    /// regressed, and which are only `reviewed` by a verifier or `claimed` by a worker. Exit
    /// 0 when every checked tick holds, 1 otherwise: meant for CI after a merge.
    Audit(AuditArgs),
    /// Put back the files the newest landing changed, as they were before it
    ///
    /// Before prdloop merges a criterion's work into your checkout it keeps the checkout's
    /// whole working state (tracked, staged and untracked files) under
    /// refs/prdloop-undo/. `prdloop undo` puts the files of the newest landing back (and
    /// HEAD, when --commit made a commit of it and nothing moved HEAD since); it refuses,
    /// changing nothing, where you have changed those files since. `prdloop clean` keeps undo
    /// points for 14 days.
    Undo(UndoArgs),
    /// A local web dashboard of every session in the state folders
    ///
    /// Live runs update as they go: per PRD its criteria and how each tick was earned, per
    /// lane what its agent is doing now, cost and tokens against --max-cost, a limit's
    /// countdown; per criterion its attempts, their reasons and logs, the diff that landed;
    /// a timeline of the lanes and the cost over time. Pause, stop and resume buttons make
    /// the requests `prdloop pause|stop|resume` make. Bound to 127.0.0.1, with a random
    /// token in the address it prints: requests without it, or with a foreign Host or
    /// Origin, are refused.
    Serve(ServeArgs),
    /// Show each PRD's progress; with no argument, every PRD in PAI's locations.
    Status(StatusArgs),
    /// An MCP server on stdin/stdout, so an agent session can run the loop with tool calls
    ///
    /// Protocol 2025-06-18. Tools: plan, run, status, logs, answer, pause, stop, resume,
    /// audit, undo; each runs this prdloop's own command (so config files, PRDLOOP_*
    /// variables, the trust rules, the lock and exit codes are the command line's). `run` and
    /// `resume` start the loop in the background and return its session; its events come as
    /// log messages (a worker's question as a warning). Resources: each started run's PRD,
    /// state file and logs. Add it with `claude mcp add prdloop -- prdloop mcp`.
    Mcp,
    /// Print the settings in effect, as TOML
    ///
    /// From the config files, the PRDLOOP_* variables and the defaults.
    ///
    /// The config files: `prdloop.toml` at the repository root (or `.config/prdloop.toml`),
    /// the user's `$XDG_CONFIG_HOME/prdloop/config.toml` (`~/.config/prdloop/config.toml`),
    /// and a `prdloop:` map in a PRD's front matter. Keys are the long flag names
    /// (`timeout = "30m"`); `[profile.NAME]` tables apply with --profile NAME (`ci` when CI
    /// is set). Precedence: flag > PRDLOOP_* > the PRD's map > the project's > the user's >
    /// default.
    Config {
        /// Include this PRD's own `prdloop:` map (a path or a PRD id); the project is then its
        /// repository.
        prd: Option<String>,
        /// Say where each setting comes from: `default`, `env:NAME`, or
        /// `SCOPE:FILE:LINE` (scope `user`, `project` or `prd`).
        #[arg(long)]
        show_origin: bool,
    },
    /// Trust a repository's config file: its commands and safety settings then apply
    ///
    /// A repository's `prdloop.toml` (or `.config/prdloop.toml`) and a PRD's `prdloop:` map
    /// come with the repository, from whoever wrote it or a worker's landed work. Until you
    /// trust what such a file says, prdloop ignores (and names) its keys that run commands,
    /// send data out or weaken a safety: agent-bin, agent-arg, setup, notify, notify-url,
    /// verifier, mix, escalate, verify-types, junit, serve, state-dir, workdir, sandbox,
    /// sandbox-allow, network, pass-env, isolation, allow-deletions, allowed-tools,
    /// permission-mode, no-verify. Trust is for those settings' values as they are now:
    /// change one, and it must be trusted again. Kept in `trusted` beside your own config
    /// file.
    Trust(TrustArgs),
    /// Print the completion script for a shell on stdout
    ///
    /// bash: `prdloop completions bash > ~/.local/share/bash-completion/completions/prdloop`;
    /// zsh: into a folder of your `fpath` as `_prdloop`; fish:
    /// `~/.config/fish/completions/prdloop.fish`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (prdloop.1, prdloop-run.1, …) into a folder
    Man {
        /// The folder (made if missing), e.g. ~/.local/share/man/man1. Pages of the same
        /// names there are replaced.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

#[cfg(test)]
mod tests;
