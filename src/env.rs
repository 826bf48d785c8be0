//! Every environment variable prdloop reads or sets, in one place.

/// Where PAI keeps its memory (default `~/.claude`).
pub const PAI_DIR: &str = "PAI_DIR";
/// Where LifeOS (PAI's successor) keeps its memory: read before `PAI_DIR`, and its state
/// folder is shown by `prdloop serve`.
pub const LIFEOS_DIR: &str = "LIFEOS_DIR";
/// Where project PRDs live (default `~/Projects`).
pub const PROJECTS_DIR: &str = "PROJECTS_DIR";
pub const HOME: &str = "HOME";
/// Log filter for diagnostics (tracing's syntax, e.g. `debug` or `prdloop=trace`).
pub const PRDLOOP_LOG: &str = "PRDLOOP_LOG";
/// Disables colour when set to anything (read by anstream, for `--color auto`).
pub const NO_COLOR: &str = "NO_COLOR";
/// Colour in pipes and files too, unless `NO_COLOR` is set (read by anstream, for
/// `--color auto`).
pub const CLICOLOR_FORCE: &str = "CLICOLOR_FORCE";
/// `--color`'s twin.
pub const COLOR: &str = "PRDLOOP_COLOR";
/// `--profile`'s twin: the config files' profile to use.
pub const PROFILE: &str = "PRDLOOP_PROFILE";
/// Where the user's config file is (`$XDG_CONFIG_HOME/prdloop/config.toml`).
pub const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";
/// git's own: folders the search for the repository holding a folder does not climb into.
pub const GIT_CEILING_DIRECTORIES: &str = "GIT_CEILING_DIRECTORIES";
/// Set by Claude Code for its own children; removed from workers' environments.
pub const CLAUDECODE: &str = "CLAUDECODE";
/// The GitHub token of `import` and `run --pr` (GitHub Actions' name), else [`GH_TOKEN`].
pub const GITHUB_TOKEN: &str = "GITHUB_TOKEN";
/// gh's name for the GitHub token.
pub const GH_TOKEN: &str = "GH_TOKEN";
/// GitHub's REST API base (GitHub Actions sets it; GitHub Enterprise's `https://HOST/api/v3`).
pub const GITHUB_API_URL: &str = "GITHUB_API_URL";
/// `--rate-limit-wait`'s twin: the longest wait for GitHub's rate limit.
pub const RATE_LIMIT_WAIT: &str = "PRDLOOP_RATE_LIMIT_WAIT";

// Set for every worker: the contract custom agents rely on.
pub const WORKER_SESSION_ID: &str = "PRDLOOP_SESSION_ID";
pub const WORKER_PRD: &str = "PRDLOOP_PRD";
pub const WORKER_ITERATION: &str = "PRDLOOP_ITERATION";
/// The worker's lane, from 1. PAI gives its workers no variables of its own (they inherit the
/// parent's environment), so no PAI-compatible worker reads one; `PRDLOOP_AGENT` is only
/// `--agent`'s twin.
pub const WORKER_LANE: &str = "PRDLOOP_LANE";
pub const WORKER_CRITERION: &str = "PRDLOOP_CRITERION";
/// Set for every worker: the attempt number of this criterion (1 for the first).
pub const WORKER_ATTEMPT: &str = "PRDLOOP_ATTEMPT";
/// Best-of-N: the sample number (from 1) of a worker.
pub const WORKER_SAMPLE: &str = "PRDLOOP_SAMPLE";

// Option twins (clap reads them; listed here so they are all in one place).
pub const AGENTS: &str = "PRDLOOP_AGENTS";
pub const MAX_ITERATIONS: &str = "PRDLOOP_MAX_ITERATIONS";
pub const TIMEOUT: &str = "PRDLOOP_TIMEOUT";
pub const STUCK_AFTER: &str = "PRDLOOP_STUCK_AFTER";
pub const KILL_GRACE: &str = "PRDLOOP_KILL_GRACE";
pub const STALL: &str = "PRDLOOP_STALL";
pub const ROUNDS: &str = "PRDLOOP_ROUNDS";
pub const WORKDIR: &str = "PRDLOOP_WORKDIR";
pub const STATE_DIR: &str = "PRDLOOP_STATE_DIR";
pub const CLAUDE_BIN: &str = "PRDLOOP_CLAUDE_BIN";
pub const MODEL: &str = "PRDLOOP_MODEL";
pub const PERMISSION_MODE: &str = "PRDLOOP_PERMISSION_MODE";
pub const MAX_TURNS: &str = "PRDLOOP_MAX_TURNS";
pub const ALLOWED_TOOLS: &str = "PRDLOOP_ALLOWED_TOOLS";
pub const CLAUDE_ARGS: &str = "PRDLOOP_CLAUDE_ARGS";
/// `--agent`'s twin.
pub const AGENT_CHOICE: &str = "PRDLOOP_AGENT";
pub const AGENT_BIN: &str = "PRDLOOP_AGENT_BIN";
pub const AGENT_ARGS: &str = "PRDLOOP_AGENT_ARGS";
pub const JSON: &str = "PRDLOOP_JSON";
/// `--progress`'s twin.
pub const PROGRESS: &str = "PRDLOOP_PROGRESS";
/// Set (to anything but `false` or `0`) by CI services: `--progress auto` prints lines there,
/// as some CI logs pretend to be terminals.
pub const CI: &str = "CI";
/// `dumb`: a terminal that cannot move the cursor; `--progress auto` prints lines there.
pub const TERM: &str = "TERM";
pub const DRY_RUN: &str = "PRDLOOP_DRY_RUN";
pub const NO_VERIFY: &str = "PRDLOOP_NO_VERIFY";
pub const RECHECK: &str = "PRDLOOP_RECHECK";
pub const FORCE: &str = "PRDLOOP_FORCE";
pub const MAX_COST: &str = "PRDLOOP_MAX_COST";
pub const MAX_TIME: &str = "PRDLOOP_MAX_TIME";
pub const MAX_WAIT: &str = "PRDLOOP_MAX_WAIT";
pub const RETRY_BACKOFF: &str = "PRDLOOP_RETRY_BACKOFF";
pub const NOTIFY_URL: &str = "PRDLOOP_NOTIFY_URL";
pub const VOICE_ID: &str = "PRDLOOP_VOICE_ID";
pub const NOTIFY_ON: &str = "PRDLOOP_NOTIFY_ON";
pub const VERIFY_TIMEOUT: &str = "PRDLOOP_VERIFY_TIMEOUT";
pub const VERIFY_TYPES: &str = "PRDLOOP_VERIFY_TYPES";

// CI reports.
/// `--junit FILE`'s twin.
pub const JUNIT: &str = "PRDLOOP_JUNIT";
pub const ISOLATION: &str = "PRDLOOP_ISOLATION";
pub const BEST_OF: &str = "PRDLOOP_BEST_OF";
pub const SELECT: &str = "PRDLOOP_SELECT";
pub const MIX: &str = "PRDLOOP_MIX";
pub const ESCALATE: &str = "PRDLOOP_ESCALATE";
pub const ESCALATE_AFTER: &str = "PRDLOOP_ESCALATE_AFTER";
pub const FALLBACK: &str = "PRDLOOP_FALLBACK";
pub const MAX_WORKERS: &str = "PRDLOOP_MAX_WORKERS";
pub const WITH_CHILDREN: &str = "PRDLOOP_WITH_CHILDREN";
pub const SETUP: &str = "PRDLOOP_SETUP";
pub const COMMIT: &str = "PRDLOOP_COMMIT";
/// `--pr`'s twin.
pub const PR: &str = "PRDLOOP_PR";
/// `--pr-base`'s twin.
pub const PR_BASE: &str = "PRDLOOP_PR_BASE";
/// `--draft`'s twin.
pub const DRAFT: &str = "PRDLOOP_DRAFT";
pub const KEEP_WORKTREES: &str = "PRDLOOP_KEEP_WORKTREES";
/// `--allow-deletions`.
pub const ALLOW_DELETIONS: &str = "PRDLOOP_ALLOW_DELETIONS";
/// `--protect`.
pub const PROTECT: &str = "PRDLOOP_PROTECT";
/// `--verifier`.
pub const VERIFIER: &str = "PRDLOOP_VERIFIER";
/// Set to `verifier` in the environment of a verifier's agent (unset for workers).
pub const WORKER_ROLE: &str = "PRDLOOP_ROLE";
/// `--sandbox`, `--sandbox-allow` (paths separated by `:`).
pub const SANDBOX: &str = "PRDLOOP_SANDBOX";
pub const SANDBOX_ALLOW: &str = "PRDLOOP_SANDBOX_ALLOW";
/// `--network`'s twin.
pub const NETWORK: &str = "PRDLOOP_NETWORK";
pub const CHECK_ALLOW: &str = "PRDLOOP_CHECK_ALLOW";
/// `--pass-env`'s twin.
pub const PASS_ENV: &str = "PRDLOOP_PASS_ENV";
/// Set for every worker and Verify command, inherited by all they start: which of prdloop's
/// processes a leftover process belongs to (see `worker::reaper`).
pub const WORKER_TOKEN: &str = "PRDLOOP_WORKER_TOKEN";
/// `run --shard`, `run --bundle`, `plan --shards`.
pub const SHARD: &str = "PRDLOOP_SHARD";
pub const BUNDLE: &str = "PRDLOOP_BUNDLE";
pub const SHARDS: &str = "PRDLOOP_SHARDS";
/// `true` on GitHub Actions runners: groups, annotations and the job summary.
pub const GITHUB_ACTIONS: &str = "GITHUB_ACTIONS";
/// The file GitHub Actions shows as the step's job summary (Markdown, appended to).
pub const GITHUB_STEP_SUMMARY: &str = "GITHUB_STEP_SUMMARY";
/// The checkout GitHub Actions runs in: annotation paths are relative to it.
pub const GITHUB_WORKSPACE: &str = "GITHUB_WORKSPACE";
