//! The flags' value parsers: counts, durations, dollars, `--best-of`, `--verify-types`,
//! `--agent`; each message names what is wrong with the value.

use super::*;

/// `--best-of`: a fixed number of samples per attempt, or `auto` with its most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BestOf {
    Fixed(u32),
    Auto { max: u32 },
}

impl BestOf {
    /// The most samples one attempt runs (the worktrees each lane needs).
    pub fn most(self) -> u32 {
        match self {
            BestOf::Fixed(n) => n,
            BestOf::Auto { max } => max,
        }
    }
}

impl std::fmt::Display for BestOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BestOf::Fixed(n) => write!(f, "{n}"),
            BestOf::Auto { max } => write!(f, "auto:{max}"),
        }
    }
}

/// `--best-of N` (1 to 8) or `auto[:MAX]` (MAX 1 to 8, default 4).
pub fn parse_best_of(s: &str) -> Result<BestOf, String> {
    let n = |t: &str| match t.trim().parse::<u32>() {
        Ok(n @ 1..=8) => Ok(n),
        _ => Err(format!("`{t}` is not a number from 1 to 8")),
    };
    let s = s.trim();
    match s.split_once(':') {
        Some((a, max)) if a.eq_ignore_ascii_case("auto") => Ok(BestOf::Auto { max: n(max)? }),
        None if s.eq_ignore_ascii_case("auto") => Ok(BestOf::Auto { max: 4 }),
        _ => n(s)
            .map(BestOf::Fixed)
            .map_err(|_| format!("`{s}`: a number from 1 to 8, or auto[:MAX] (e.g. auto:4)")),
    }
}

pub(super) fn parse_verify_types(s: &str) -> Result<VerifyTypes, String> {
    VerifyTypes::parse(s).map_err(|e| e.to_string())
}

#[derive(Debug, Args, Clone, Default)]
pub struct WorkerOpts {
    /// The old name of --agent-bin, for claude only (hidden): Claude Code's program when
    /// --agent-bin is not given, also for the claude set-ups of --mix, --escalate and
    /// --verifier when --agent is another agent; ignored for other agents.
    #[arg(long, env = env::CLAUDE_BIN, value_name = "PATH", default_value = "claude", hide = true)]
    pub claude_bin: String,

    /// Model for the workers (the agent's model flag: `claude --model`, `codex -m`,
    /// `gemini -m`, `opencode -m provider/model`, `agent --model`; amp: `--mode`).
    #[arg(long, env = env::MODEL, value_name = "MODEL")]
    pub model: Option<String>,

    /// Permission mode for the workers (`claude --permission-mode`).
    #[arg(long, env = env::PERMISSION_MODE, value_name = "MODE")]
    pub permission_mode: Option<String>,

    /// Agent turns per worker (`claude --max-turns`), at least 1.
    #[arg(long, env = env::MAX_TURNS, value_name = "N", allow_negative_numbers = true, value_parser = parse_at_least_1_u32)]
    pub max_turns: Option<u32>,

    /// Tools the workers may use without asking (`claude --allowedTools`); empty for none.
    #[arg(long, env = env::ALLOWED_TOOLS, value_name = "LIST", default_value = DEFAULT_ALLOWED_TOOLS)]
    pub allowed_tools: String,

    /// The old name of --agent-arg, for claude only (hidden): its values come before the
    /// --agent-arg ones; with another agent they are ignored with a warning.
    #[arg(long = "claude-arg", env = env::CLAUDE_ARGS, value_name = "ARG", allow_hyphen_values = true, value_delimiter = '\n', hide = true)]
    pub claude_args: Vec<String>,

    // --- The agent choice (backends) ---
    /// The coding agent the workers run: claude, codex, gemini, opencode, cursor, amp, or
    /// command (any program: the prompt on stdin, `RESULT: <id> PASS` on stdout).
    #[arg(long, env = env::AGENT_CHOICE, value_name = "NAME", value_parser = AgentParser)]
    pub agent: Option<crate::backend::Agent>,

    /// The agent's program [default: the agent's usual binary on PATH: claude, codex, gemini,
    /// opencode, agent, amp; required for `command`]. `--claude-bin` (PRDLOOP_CLAUDE_BIN) is
    /// its old name, for claude only; this wins over it.
    #[arg(long, env = env::AGENT_BIN, value_name = "PATH")]
    pub agent_bin: Option<String>,

    /// An extra argument for the agent, after prdloop's own (repeatable). With claude, setting
    /// `--output-format` here replaces prdloop's `--output-format stream-json --verbose`.
    /// `--claude-arg` (PRDLOOP_CLAUDE_ARGS) is its old name, for claude only; its values come
    /// first.
    #[arg(long = "agent-arg", env = env::AGENT_ARGS, value_name = "ARG", allow_hyphen_values = true, value_delimiter = '\n')]
    pub agent_args: Vec<String>,
}

/// `--agent`: a name; a bare number (prdloop's own lane variable) means the default.
/// `--agent`'s parser: [`parse_agent`], and the agents' names for completion and help.
#[derive(Debug, Clone, Copy)]
pub(super) struct AgentParser;

impl clap::builder::TypedValueParser for AgentParser {
    type Value = crate::backend::Agent;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        let text = value
            .to_str()
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidUtf8).with_cmd(cmd))?;
        parse_agent(text).map_err(|why| {
            let flag = arg.map_or("--agent".to_string(), |a| a.to_string());
            clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("invalid value '{text}' for '{flag}': {why}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            crate::backend::Agent::ALL
                .into_iter()
                .map(|a| clap::builder::PossibleValue::new(a.name())),
        ))
    }
}

pub(super) fn parse_agent(s: &str) -> Result<crate::backend::Agent, String> {
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

/// A whole number of at least `min` (a count: -a, -n, --stall, --max-turns). Negative numbers
/// are parsed as numbers, so `-n -1` says what is wrong instead of taking `-1` for a flag.
pub(super) fn parse_count(s: &str, min: i64) -> Result<i64, String> {
    let n: i64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number"))?;
    if n < min {
        return Err(match min {
            0 => format!("must be 0 or more, not {n}"),
            _ => format!("must be at least {min}, not {n}"),
        });
    }
    Ok(n)
}

/// `-a`: at least 1 (more than 16 is lowered later, with a warning).
pub fn parse_at_least_1(s: &str) -> Result<i64, String> {
    parse_count(s, 1)
}

pub(super) fn parse_at_least_1_usize(s: &str) -> Result<usize, String> {
    parse_count(s, 1).map(|n| n as usize)
}

pub(super) fn parse_at_least_1_u64(s: &str) -> Result<u64, String> {
    parse_count(s, 1).map(|n| n as u64)
}

pub(super) fn parse_at_least_1_u32(s: &str) -> Result<u32, String> {
    let n = parse_count(s, 1)?;
    u32::try_from(n).map_err(|_| format!("must be at most {}, not {n}", u32::MAX))
}

pub(super) fn parse_at_least_0(s: &str) -> Result<u64, String> {
    parse_count(s, 0).map(|n| n as u64)
}

/// A duration that must be more than zero (a time limit or a wait of zero means nothing).
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("must be more than 0, like 90s or 20m, not `{s}`"));
    }
    Ok(d)
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
