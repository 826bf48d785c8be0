//! Telling an agent failure from a criterion failure: authentication, rate and usage limits,
//! overload, billing, claude's own turn and budget limits, timeouts and crashes. Texts and
//! fields as Claude Code 2.1 prints them (see the fixtures in `tests/fixtures/claude`).

use super::Outcome;
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
}

impl Kind {
    /// Stops the run at once.
    pub fn is_fatal(self) -> bool {
        matches!(self, Kind::Auth | Kind::Billing)
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
        }
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

fn contains_any(hay: &str, needles: &[&str]) -> bool {
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
        Exit::Cancelled => return None,
        Exit::TimedOut { .. } => {
            return fail(Kind::Timeout, "the worker ran past --timeout".into());
        }
        _ => {}
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

/// `Claude AI usage limit reached|1735689600` (older claude versions).
fn epoch_after_pipe(s: &str) -> Option<i64> {
    let i = s.find("limit reached|")?;
    let digits: String = s[i + "limit reached|".len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `resets 4pm (Europe/Berlin)`, `resets 4:30 pm (UTC)`, `resets at 16:00 (America/New_York)`:
/// the next such wall-clock time in that zone, as epoch seconds.
fn reset_clock_time(s: &str, now: i64) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let i = lower.find("resets")?;
    let rest = lower[i + "resets".len()..].trim_start();
    let rest = rest.strip_prefix("at ").unwrap_or(rest).trim_start();
    let clock_end = rest.find('(').unwrap_or(rest.len());
    let clock = rest[..clock_end].trim().replace(' ', "");
    let (hm, pm, am) = if let Some(c) = clock.strip_suffix("pm") {
        (c.to_string(), true, false)
    } else if let Some(c) = clock.strip_suffix("am") {
        (c.to_string(), false, true)
    } else {
        (clock.clone(), false, false)
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
    if !(0..24).contains(&h) || !(0..60).contains(&m) {
        return None;
    }
    // The zone name keeps its case: take it from the original text.
    let orig_rest = &s[s.len() - rest.len()..];
    let tz = match orig_rest.find('(').zip(orig_rest.find(')')) {
        Some((a, b)) if b > a => jiff::tz::TimeZone::get(orig_rest[a + 1..b].trim()).ok()?,
        _ => jiff::tz::TimeZone::system(),
    };
    let now_zoned = jiff::Timestamp::from_second(now)
        .ok()?
        .to_zoned_datetime(tz.clone());
    let mut day = now_zoned.date();
    for _ in 0..2 {
        let at = day.at(h, m, 0, 0).to_zoned_datetime(tz.clone()).ok()?;
        if at.timestamp().as_second() > now {
            return Some(at.timestamp().as_second());
        }
        day = day.tomorrow().ok()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
