//! Telling an agent failure from a criterion failure: authentication, rate and usage limits,
//! overload, billing, claude's own turn and budget limits, timeouts and crashes. Texts and
//! fields as Claude Code 2.1 prints them (see the fixtures in `tests/fixtures/claude`).

use super::outcome::Outcome;
use super::verdict::Exit;

/// The kinds of agent failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Not logged in, invalid API key, HTTP 401. Retrying cannot help.
    Auth,
    /// Credit balance too low. Retrying cannot help.
    Billing,
    /// HTTP 429, a rejected `rate_limit_event`.
    RateLimit,
    /// Subscription usage limit ("You've hit your limit · resets 4pm (Europe/Berlin)").
    UsageLimit,
    /// HTTP 529 or another server-side error, after claude's own retries.
    Overloaded,
    /// claude's `--max-turns` was reached.
    MaxTurns,
    /// claude's `--max-budget-usd` was reached.
    MaxBudget,
    /// The worker ran past `--timeout`.
    Timeout,
    /// Killed by a signal, or a non-zero exit with no result.
    Crash,
    /// The agent program exists but could not be started: a `#!` line naming an interpreter
    /// that is not there, an exec format error, permission denied at exec. Retrying cannot help.
    CannotStart,
}

impl Kind {
    /// Stops the run at once.
    pub fn is_fatal(self) -> bool {
        matches!(self, Kind::Auth | Kind::Billing | Kind::CannotStart)
    }

    /// Pauses all lanes, then the attempt is retried.
    pub fn is_transient(self) -> bool {
        matches!(self, Kind::RateLimit | Kind::UsageLimit | Kind::Overloaded)
    }

    pub fn label(self) -> &'static str {
        match self {
            Kind::Auth => "authentication failure",
            Kind::Billing => "billing failure",
            Kind::RateLimit => "rate limited",
            Kind::UsageLimit => "usage limit reached",
            Kind::Overloaded => "model service overloaded",
            Kind::MaxTurns => "agent hit its turn limit",
            Kind::MaxBudget => "agent hit its budget limit",
            Kind::Timeout => "timed out",
            Kind::Crash => "agent crashed",
            Kind::CannotStart => "the agent cannot start",
        }
    }

    /// What the user should do about a fatal failure.
    pub fn advice(self) -> &'static str {
        match self {
            Kind::Auth => {
                "log in (`claude /login`) or set a valid ANTHROPIC_API_KEY, then run again"
            }
            Kind::Billing => "add credits to the account, then run again",
            Kind::CannotStart => {
                "check the agent program (the one --agent-bin names, or --claude-bin for claude): \
                 its `#!` line must name an interpreter that exists, and it must be an \
                 executable for this machine"
            }
            _ => "see the worker's log",
        }
    }
}

/// How the exec trampoline reports a program it could not exec (with exit status 127).
const TRAMPOLINE_FAILED: &str = "prdloop: failed to start `";
/// The trampoline's exit status for a program it could not exec.
const TRAMPOLINE_STATUS: i32 = 127;

/// A worker that could not be spawned: the program is there (prdloop checked before the run)
/// but the system refused to start it. `None` for errors that may pass (out of processes or
/// file descriptors): those stay a failed attempt.
pub fn cannot_start(program: &str, e: &std::io::Error) -> Option<AgentFailure> {
    use nix::errno::Errno;
    let errno = Errno::from_raw(e.raw_os_error()?);
    matches!(
        errno,
        Errno::ENOENT
            | Errno::EACCES
            | Errno::EPERM
            | Errno::ENOEXEC
            | Errno::ENOTDIR
            | Errno::ELOOP
            | Errno::ENAMETOOLONG
            | Errno::EISDIR
    )
    .then(|| AgentFailure {
        kind: Kind::CannotStart,
        text: failed_to_start(program, e),
        resets_at: None,
    })
}

/// What an exec error means for a program that exists (prdloop checked that before the run),
/// from the error's own number: `failed to start …: <the error>: <this>`. The exec trampoline
/// adds it to its own report, where the error is made.
pub fn exec_hint(e: &std::io::Error) -> Option<&'static str> {
    use nix::errno::Errno;
    Some(match Errno::from_raw(e.raw_os_error()?) {
        Errno::ENOENT => "the interpreter its `#!` line names (or a library it needs) is missing",
        Errno::ENOEXEC => "it is not a program for this machine and has no `#!` line",
        Errno::EACCES | Errno::EPERM => {
            "it, or the interpreter its `#!` line names, may not be executed"
        }
        _ => return None,
    })
}

/// `failed to start `program`: error[: hint]`.
pub fn failed_to_start(program: &str, e: &std::io::Error) -> String {
    match exec_hint(e) {
        Some(hint) => format!("failed to start `{program}`: {e}: {hint}"),
        None => format!("failed to start `{program}`: {e}"),
    }
}

/// An agent failure: its kind, the text that showed it, and when the limit resets (epoch
/// seconds) when the agent said so.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentFailure {
    pub kind: Kind,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<i64>,
}

/// Whether `hay` contains any of `needles`, ignoring case.
pub(crate) fn contains_any(hay: &str, needles: &[&str]) -> bool {
    let lower = hay.to_ascii_lowercase();
    needles
        .iter()
        .any(|n| lower.contains(&n.to_ascii_lowercase()))
}

/// Classifies a finished worker. `None` means the agent worked: its verdict stands (pass, or a
/// criterion failure). `now` is the current time in epoch seconds (for reset times).
pub fn classify(exit: &Exit, o: &Outcome, stderr_tail: &str, now: i64) -> Option<AgentFailure> {
    let fail = |kind: Kind, text: String| {
        Some(AgentFailure {
            kind,
            text,
            resets_at: None,
        })
    };
    match exit {
        // Stuck is the attempt's failure, not the agent's.
        Exit::Cancelled | Exit::Stuck(_) => return None,
        Exit::TimedOut { .. } => {
            // The agent's last error says why it ran out of time: codex retries an unreachable
            // server forever (`Reconnecting... waiting for network (...)`).
            let text = match o.errors.last().map(|e| crate::text::first_line(e).trim()) {
                Some(e) if !e.is_empty() => {
                    format!("the worker ran past --timeout; its last error: {e}")
                }
                _ => "the worker ran past --timeout".into(),
            };
            return fail(Kind::Timeout, text);
        }
        _ => {}
    }
    if let Some(said) = trampoline_failure(exit, o, stderr_tail) {
        return fail(Kind::CannotStart, said);
    }
    let errored = o.is_error || !matches!(exit, Exit::Code { code: 0 });
    if !errored && o.rate_limit_status.as_deref() != Some("rejected") {
        return None;
    }
    // The texts that can say what went wrong.
    let mut text = String::new();
    if o.is_error || !o.has_result {
        text.push_str(o.final_text.as_deref().unwrap_or(""));
    }
    for e in &o.errors {
        text.push('\n');
        text.push_str(e);
    }
    let first = |s: &str| {
        s.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_string()
    };
    let said = if text.trim().is_empty() {
        first(stderr_tail)
    } else {
        first(&text)
    };
    let all = format!("{text}\n{stderr_tail}");
    let status = o.api_error_status.or(o.retry_status);

    match o.subtype.as_deref() {
        Some("error_max_turns") => return fail(Kind::MaxTurns, said),
        Some("error_max_budget_usd") => return fail(Kind::MaxBudget, said),
        _ => {}
    }
    if contains_any(&all, &["credit balance is too low"]) {
        return fail(Kind::Billing, said);
    }
    if status == Some(401)
        || contains_any(
            &all,
            &[
                "not logged in",
                "invalid api key",
                "authentication_error",
                "oauth token has expired",
                "please run /login",
            ],
        )
    {
        return fail(Kind::Auth, said);
    }
    if contains_any(
        &all,
        &[
            "hit your limit",
            "hit your usage limit",
            "out of usage credits",
            "usage limit reached",
        ],
    ) {
        let resets_at = o
            .rate_limit_resets_at
            .or_else(|| epoch_after_pipe(&all))
            .or_else(|| reset_clock_time(&all, now));
        return Some(AgentFailure {
            kind: Kind::UsageLimit,
            text: said,
            resets_at,
        });
    }
    if status == Some(429)
        || o.rate_limit_status.as_deref() == Some("rejected")
        || contains_any(&all, &["rate_limit", "rate limit", "(429)"])
    {
        return Some(AgentFailure {
            kind: Kind::RateLimit,
            text: said,
            resets_at: o.rate_limit_resets_at,
        });
    }
    if matches!(status, Some(500..=599)) || contains_any(&all, &["overloaded", "api error: 5"]) {
        return fail(Kind::Overloaded, said);
    }
    if o.is_error {
        // Some other API error the agent gave up on.
        return fail(Kind::Crash, said);
    }
    let last_stderr = stderr_tail
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| format!(": {l}"))
        .unwrap_or_default();
    match exit {
        Exit::Signal { signal } => fail(
            Kind::Crash,
            format!("killed by signal {signal}{last_stderr}"),
        ),
        Exit::Code { code } if !o.has_result => fail(
            Kind::Crash,
            format!("exited with status {code} without a result{last_stderr}"),
        ),
        // A non-zero exit after a result that was not an error: the agent worked; the
        // verdict (a FAIL with the exit status) stands as a criterion failure.
        _ => None,
    }
}

/// The exec trampoline's own report that it could not exec the agent (Linux): status 127, no
/// output on stdout, and its `prdloop: failed to start `…`: …` line last on stderr. A program
/// that ran and exited 127 by itself (a shell's "command not found") is not this.
fn trampoline_failure(exit: &Exit, o: &Outcome, stderr_tail: &str) -> Option<String> {
    let status = Exit::Code {
        code: TRAMPOLINE_STATUS,
    };
    if *exit != status || o.has_result || o.final_text.is_some() || o.unparsed_lines > 0 {
        return None;
    }
    let last = stderr_tail
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())?
        .trim();
    if !last.starts_with(TRAMPOLINE_FAILED) {
        return None;
    }
    Some(last.strip_prefix("prdloop: ").unwrap_or(last).to_string())
}

/// `Claude AI usage limit reached|1735689600` (older claude versions).
fn epoch_after_pipe(s: &str) -> Option<i64> {
    let i = s.find("limit reached|")?;
    let digits: String = s[i + "limit reached|".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A wall-clock time as agents write it: `4pm`, `4:30 pm`, `16:00`, `2:25 PM.` → (hour,
/// minute) on a 24-hour clock.
pub(crate) fn parse_clock(clock: &str) -> Option<(i8, i8)> {
    let clock: String = clock
        .to_ascii_lowercase()
        .chars()
        .filter(|c| *c != ' ')
        .collect();
    let clock = clock.trim_end_matches('.');
    let (hm, pm, am) = if let Some(c) = clock.strip_suffix("pm") {
        (c, true, false)
    } else if let Some(c) = clock.strip_suffix("am") {
        (c, false, true)
    } else {
        (clock, false, false)
    };
    let (h, m) = match hm.split_once(':') {
        Some((h, m)) => (h.parse::<i8>().ok()?, m.parse::<i8>().ok()?),
        None => (hm.parse::<i8>().ok()?, 0),
    };
    let h = match (pm, am) {
        (true, _) if h < 12 => h + 12,
        (_, true) if h == 12 => 0,
        _ => h,
    };
    ((0..24).contains(&h) && (0..60).contains(&m)).then_some((h, m))
}

/// The next time after `now` (epoch seconds) that the clock in `tz` reads `h:m`.
pub(crate) fn next_clock(h: i8, m: i8, tz: &jiff::tz::TimeZone, now: i64) -> Option<i64> {
    let mut day = jiff::Timestamp::from_second(now)
        .ok()?
        .to_zoned_datetime(tz.clone())
        .date();
    for _ in 0..2 {
        let at = day.at(h, m, 0, 0).to_zoned_datetime(tz.clone()).ok()?;
        if at.timestamp().as_second() > now {
            return Some(at.timestamp().as_second());
        }
        day = day.tomorrow().ok()?;
    }
    None
}

/// `resets 4pm (Europe/Berlin)`, `resets 4:30 pm (UTC)`, `resets at 16:00 (America/New_York)`:
/// the next such wall-clock time in that zone, as epoch seconds.
fn reset_clock_time(s: &str, now: i64) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let i = lower.find("resets")?;
    let rest = lower[i + "resets".len()..].trim_start();
    let rest = rest.strip_prefix("at ").unwrap_or(rest).trim_start();
    let clock_end = rest.find('(').unwrap_or(rest.len());
    let (h, m) = parse_clock(&rest[..clock_end])?;
    // The zone name keeps its case: take it from the original text.
    let orig_rest = &s[s.len() - rest.len()..];
    let tz = match orig_rest.find('(').zip(orig_rest.find(')')) {
        Some((a, b)) if b > a => jiff::tz::TimeZone::get(orig_rest[a + 1..b].trim()).ok()?,
        _ => jiff::tz::TimeZone::system(),
    };
    next_clock(h, m, &tz, now)
}

/// When a limit lifts, from the agent's words: `try again at 2:25 PM` (codex; the local time
/// zone), `try again in 20s` / `Please try again in 1m30s` (OpenAI), `retry after 1s`
/// (gemini). Epoch seconds.
pub fn retry_time(s: &str, now: i64) -> Option<i64> {
    let lower = s.to_lowercase();
    if let Some(i) = lower.find("try again at ") {
        let rest = &lower[i + "try again at ".len()..];
        if let Some(t) = clock_time(rest, now) {
            return Some(t);
        }
    }
    for key in ["try again in ", "retry after "] {
        if let Some(i) = lower.find(key) {
            let rest = &lower[i + key.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                .unwrap_or(rest.len());
            let word = rest[..end].trim_end_matches('.');
            if let Ok(d) = humantime::parse_duration(word) {
                return Some(now + d.as_secs().max(1) as i64);
            }
        }
    }
    None
}

/// `2:25 pm`, `14:25`, `9am`: the next such wall-clock time in the system's time zone.
fn clock_time(rest: &str, now: i64) -> Option<i64> {
    let end = rest
        .find(|c: char| {
            !(c.is_ascii_digit() || c == ':' || c == ' ' || c == 'a' || c == 'p' || c == 'm')
        })
        .unwrap_or(rest.len());
    let (h, m) = parse_clock(&rest[..end])?;
    next_clock(h, m, &jiff::tz::TimeZone::system(), now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_the_trampoline_could_not_exec_cannot_start() {
        // The trampoline's own report, the hint added from the error's number where it was
        // made (the parent reads nothing back out of the text).
        let enoent = std::io::Error::from_raw_os_error(nix::errno::Errno::ENOENT as i32);
        let said = &format!("prdloop: {}\n", failed_to_start("./agent.sh", &enoent));
        let exit = Exit::Code { code: 127 };
        let f = classify(&exit, &Outcome::default(), said, 0).unwrap();
        assert_eq!(f.kind, Kind::CannotStart);
        assert!(f.kind.is_fatal());
        assert_eq!(
            f.text,
            "failed to start `./agent.sh`: No such file or directory (os error 2): the \
             interpreter its `#!` line names (or a library it needs) is missing"
        );
        // A program that ran and exited 127 by itself crashed; it did start.
        let shell = "sh: 1: frobnicate: not found\n";
        assert_eq!(
            classify(&exit, &Outcome::default(), shell, 0).unwrap().kind,
            Kind::Crash
        );
        let printed = Outcome {
            final_text: Some("working…".into()),
            ..Outcome::default()
        };
        assert_eq!(
            classify(&exit, &printed, said, 0).unwrap().kind,
            Kind::Crash
        );
        let other = Exit::Code { code: 1 };
        assert_eq!(
            classify(&other, &Outcome::default(), said, 0).unwrap().kind,
            Kind::Crash
        );
    }

    #[test]
    fn a_timeout_keeps_the_agents_last_error() {
        let exit = Exit::TimedOut { after_secs: 40 };
        // codex on an unreachable server: its stream ends with this error, never a result.
        let stuck = Outcome {
            errors: vec![
                "Reconnecting... waiting for network (Connection failed: error sending request)"
                    .into(),
            ],
            ..Outcome::default()
        };
        let f = classify(&exit, &stuck, "", 0).unwrap();
        assert_eq!(f.kind, Kind::Timeout);
        assert_eq!(
            f.text,
            "the worker ran past --timeout; its last error: Reconnecting... waiting for network \
             (Connection failed: error sending request)"
        );
        let quiet = classify(&exit, &Outcome::default(), "", 0).unwrap();
        assert_eq!(quiet.text, "the worker ran past --timeout");
    }

    #[test]
    fn spawn_errors_that_cannot_pass_are_fatal() {
        let e = std::io::Error::from_raw_os_error(nix::errno::Errno::ENOEXEC as i32);
        let f = cannot_start("agent", &e).unwrap();
        assert_eq!(f.kind, Kind::CannotStart);
        assert!(
            f.text.starts_with("failed to start `agent`: ")
                && f.text.ends_with(
                    "(os error 8): it is not a program for this machine and has no `#!` line"
                ),
            "{}",
            f.text
        );
        let again = std::io::Error::from_raw_os_error(nix::errno::Errno::EAGAIN as i32);
        assert_eq!(cannot_start("agent", &again), None);
        assert_eq!(cannot_start("agent", &std::io::Error::other("x")), None);
    }

    #[test]
    fn clock_times_in_named_zones() {
        // 2026-11-30 10:00:00 UTC = 11:00 in Berlin.
        let now = 1_796_032_800;
        let at =
            reset_clock_time("You've hit your limit · resets 4pm (Europe/Berlin)", now).unwrap();
        assert_eq!(at - now, 5 * 3600);
        let at = reset_clock_time("resets 9:30am (UTC)", now).unwrap();
        assert_eq!(at - now, 23 * 3600 + 30 * 60, "the next 9:30 is tomorrow");
        assert_eq!(
            reset_clock_time("resets whenever (Mars/Olympus)", now),
            None
        );
        assert_eq!(
            epoch_after_pipe("Claude AI usage limit reached|1735689600"),
            Some(1_735_689_600)
        );
    }
}
