//! Stuck workers: an agent that gives no new tool input (it repeats the calls it already made,
//! or makes none) for `--stuck-after` is ended like one that ran past its deadline, and its
//! attempt is recorded as stuck with what it was repeating. Pure: the tool calls and the time
//! come in from the worker's output reader and its wait loop.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// `--stuck-after`: a duration (`10m`), a number of tool calls (`40`, `40calls`), both
/// (`10m,40`: whichever comes first), or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StuckAfter {
    /// How long a worker may go without new tool input.
    pub time: Option<Duration>,
    /// How many tool calls in a row may repeat earlier ones.
    pub calls: Option<u32>,
}

impl StuckAfter {
    pub const DEFAULT: &'static str = "10m,40";
    pub const OFF: StuckAfter = StuckAfter {
        time: None,
        calls: None,
    };

    pub fn is_off(&self) -> bool {
        self.time.is_none() && self.calls.is_none()
    }

    /// Parses `10m`, `40`, `40calls`, `10m,40` or `off`.
    pub fn parse(s: &str) -> Result<StuckAfter, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("off") || s.eq_ignore_ascii_case("never") {
            return Ok(StuckAfter::OFF);
        }
        let mut out = StuckAfter::OFF;
        for part in s.split(',').map(str::trim) {
            let count = part
                .strip_suffix("calls")
                .or_else(|| part.strip_suffix("call"))
                .or_else(|| part.strip_suffix("events"))
                .unwrap_or(part)
                .trim();
            if !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit()) {
                let n: u32 = count
                    .parse()
                    .map_err(|_| format!("`{part}`: too many calls"))?;
                if n == 0 || out.calls.is_some() {
                    return Err(format!("`{part}`: a number of calls, at least 1, once"));
                }
                out.calls = Some(n);
                continue;
            }
            let d = humantime::parse_duration(part).map_err(|_| {
                format!(
                    "`{part}` is neither a duration (`10m`, `90s`) nor a number of tool calls \
                     (`40`); e.g. `10m,40`, `40`, `5m` or `off`"
                )
            })?;
            if d.is_zero() || out.time.is_some() {
                return Err(format!("`{part}`: a duration, more than 0, once"));
            }
            out.time = Some(d);
        }
        Ok(out)
    }
}

impl Default for StuckAfter {
    fn default() -> StuckAfter {
        StuckAfter::parse(StuckAfter::DEFAULT).expect("the default parses")
    }
}

impl fmt::Display for StuckAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(t) = self.time {
            parts.push(humantime::format_duration(t).to_string());
        }
        if let Some(n) = self.calls {
            parts.push(format!("{n} calls"));
        }
        if parts.is_empty() {
            f.write_str("off")
        } else {
            f.write_str(&parts.join(" or "))
        }
    }
}

/// One tool call as the agent's stream shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// A hash of the tool's name and its whole input.
    pub fingerprint: u64,
    /// `Bash: cargo test`, for people.
    pub label: String,
}

/// A shell command as repeats are compared: without its `# comments`, its runs of spacing
/// one space, trimmed. Quoted text (`'…'`, `"…"`) is kept as it is; a `#` starts a comment
/// only where the shell takes it as one, at the start of a word.
pub fn command_key(cmd: &str) -> String {
    let mut out = String::with_capacity(cmd.len());
    let mut quote: Option<char> = None;
    let mut chars = cmd.chars();
    // Whether the last character ends a word (so a `#` next starts a comment).
    let mut word_start = true;
    while let Some(c) = chars.next() {
        if let Some(q) = quote {
            out.push(c);
            if c == q {
                quote = None;
            } else if c == '\\' && q == '"' {
                out.extend(chars.next());
            }
            continue;
        }
        match c {
            '#' if word_start => {
                // To the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                push_space(&mut out);
                word_start = true;
                continue;
            }
            c if c.is_whitespace() => push_space(&mut out),
            '\'' | '"' => {
                quote = Some(c);
                out.push(c);
            }
            '\\' => {
                out.push(c);
                out.extend(chars.next());
            }
            _ => out.push(c),
        }
        word_start = c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')');
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out
}

/// One space, where the last pushed is not one already (and not at the start).
fn push_space(out: &mut String) {
    if !out.is_empty() && !out.ends_with(' ') {
        out.push(' ');
    }
}

/// A call the worker kept making, and how often since its last new one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Repeat {
    pub call: String,
    pub times: u32,
}

/// Why a worker was found stuck.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stuck {
    /// Tool calls since the last new one (all of them repeats).
    pub repeated_calls: u32,
    /// Seconds since the last new tool input (or the start).
    pub idle_secs: u64,
    /// What it repeated, most often first.
    pub repeating: Vec<Repeat>,
}

impl Stuck {
    /// One sentence: what it did instead of progressing.
    pub fn describe(&self) -> String {
        let idle = humantime::format_duration(Duration::from_secs(self.idle_secs));
        if self.repeating.is_empty() {
            return format!("stuck: no new tool call for {idle}");
        }
        let calls: Vec<String> = self
            .repeating
            .iter()
            .map(|r| format!("`{}` ({}×)", r.call, r.times))
            .collect();
        format!(
            "stuck: {} tool calls in {idle} repeated earlier ones, no new tool input; it kept repeating {}",
            self.repeated_calls,
            calls.join(", ")
        )
    }
}

/// The most repeated calls kept for the reason.
const REPEATS_KEPT: usize = 5;

/// Watches one worker's tool calls.
#[derive(Debug)]
pub struct StuckWatch {
    after: StuckAfter,
    /// Every call seen in this attempt, by fingerprint.
    seen: HashSet<u64>,
    /// Calls since the last new one, by fingerprint: (label, times, first seen at).
    since_new: HashMap<u64, (String, u32, u32)>,
    repeated: u32,
    last_new: Instant,
    found: Option<Stuck>,
}

impl StuckWatch {
    pub fn new(after: StuckAfter, now: Instant) -> StuckWatch {
        StuckWatch {
            after,
            seen: HashSet::new(),
            since_new: HashMap::new(),
            repeated: 0,
            last_new: now,
            found: None,
        }
    }

    /// When the time limit runs out if no new input comes.
    pub fn deadline(&self) -> Option<Instant> {
        self.after.time.map(|t| self.last_new + t)
    }

    /// A tool call. `Some` once, when it makes the worker stuck by the count.
    pub fn call(&mut self, call: &ToolCall, now: Instant) -> Option<Stuck> {
        if self.found.is_some() || self.after.is_off() {
            return None;
        }
        if self.seen.insert(call.fingerprint) {
            self.since_new.clear();
            self.repeated = 0;
            self.last_new = now;
            return None;
        }
        self.repeated += 1;
        let order = self.repeated;
        let e = self
            .since_new
            .entry(call.fingerprint)
            .or_insert_with(|| (call.label.clone(), 0, order));
        e.1 += 1;
        match self.after.calls {
            Some(n) if self.repeated >= n => self.stuck(now),
            _ => None,
        }
    }

    /// The time limit: `Some` once, when no new input came for `--stuck-after`'s duration.
    pub fn check_time(&mut self, now: Instant) -> Option<Stuck> {
        if self.found.is_some() {
            return None;
        }
        match self.deadline() {
            Some(d) if now >= d => self.stuck(now),
            _ => None,
        }
    }

    fn stuck(&mut self, now: Instant) -> Option<Stuck> {
        let mut repeating: Vec<(String, u32, u32)> = self.since_new.values().cloned().collect();
        repeating.sort_by_key(|(_, times, first)| (std::cmp::Reverse(*times), *first));
        let s = Stuck {
            repeated_calls: self.repeated,
            idle_secs: now.saturating_duration_since(self.last_new).as_secs(),
            repeating: repeating
                .into_iter()
                .take(REPEATS_KEPT)
                .map(|(call, times, _)| Repeat { call, times })
                .collect(),
        };
        self.found = Some(s.clone());
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(n: u64, label: &str) -> ToolCall {
        ToolCall {
            fingerprint: n,
            label: label.into(),
        }
    }

    #[test]
    fn the_syntax() {
        let p = |s| StuckAfter::parse(s);
        assert_eq!(
            p("10m,40").unwrap(),
            StuckAfter {
                time: Some(Duration::from_secs(600)),
                calls: Some(40)
            }
        );
        assert_eq!(p("40").unwrap().calls, Some(40));
        assert_eq!(p("40calls").unwrap().calls, Some(40));
        assert_eq!(p(" 90s ").unwrap().time, Some(Duration::from_secs(90)));
        assert_eq!(p("off").unwrap(), StuckAfter::OFF);
        assert_eq!(
            p(StuckAfter::DEFAULT).unwrap().to_string(),
            "10m or 40 calls"
        );
        for bad in ["0", "0s", "soon", "", "10m,20m", "4,5", "-3"] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn repeats_count_until_a_new_call_and_trip_once() {
        let t0 = Instant::now();
        let mut w = StuckWatch::new(StuckAfter::parse("3").unwrap(), t0);
        assert_eq!(w.call(&call(1, "Bash: cargo test"), t0), None);
        assert_eq!(w.call(&call(1, "Bash: cargo test"), t0), None);
        assert_eq!(w.call(&call(2, "Read: a.rs"), t0), None, "new input");
        assert_eq!(w.call(&call(1, "Bash: cargo test"), t0), None);
        assert_eq!(w.call(&call(2, "Read: a.rs"), t0), None);
        let s = w.call(&call(1, "Bash: cargo test"), t0).expect("stuck");
        assert_eq!(s.repeated_calls, 3);
        assert_eq!(
            s.repeating,
            vec![
                Repeat {
                    call: "Bash: cargo test".into(),
                    times: 2
                },
                Repeat {
                    call: "Read: a.rs".into(),
                    times: 1
                }
            ]
        );
        assert!(
            s.describe().contains("`Bash: cargo test` (2×)"),
            "{}",
            s.describe()
        );
        assert_eq!(w.call(&call(1, "x"), t0), None, "once");
    }

    #[test]
    fn a_command_is_compared_without_comments_and_spacing() {
        let same = [
            "cargo test",
            "cargo test # try again",
            "  cargo   test\t",
            "cargo test\n# attempt 3\n",
            "# why\ncargo test #again",
        ];
        for s in same {
            assert_eq!(command_key(s), "cargo test", "{s:?}");
        }
        // Not comments: inside quotes, inside a word; quoted spacing is kept.
        assert_eq!(command_key("echo '# a'  b"), "echo '# a' b");
        assert_eq!(command_key("echo \"x  # y\""), "echo \"x  # y\"");
        assert_eq!(command_key("ls a#b"), "ls a#b");
        assert_eq!(command_key("echo \\# x"), "echo \\# x");
        assert_eq!(command_key("true;# x"), "true;");
        assert_ne!(command_key("cargo test a"), command_key("cargo test b"));
    }

    #[test]
    fn no_new_input_for_the_duration_trips() {
        let t0 = Instant::now();
        let mut w = StuckWatch::new(StuckAfter::parse("1m").unwrap(), t0);
        assert_eq!(w.check_time(t0 + Duration::from_secs(59)), None);
        w.call(&call(1, "a"), t0 + Duration::from_secs(30));
        assert_eq!(w.deadline(), Some(t0 + Duration::from_secs(90)));
        w.call(&call(1, "a"), t0 + Duration::from_secs(80));
        let s = w.check_time(t0 + Duration::from_secs(91)).expect("stuck");
        assert_eq!(s.idle_secs, 61);
        assert_eq!(s.repeated_calls, 1);
        let mut w = StuckWatch::new(StuckAfter::parse("1m").unwrap(), t0);
        let s = w.check_time(t0 + Duration::from_secs(60)).expect("stuck");
        assert_eq!(s.describe(), "stuck: no new tool call for 1m");
    }
}
