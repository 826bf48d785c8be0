//! What each agent's backend answers for: its command line, the reader of its output stream,
//! the classification of its failures, the rendering of its log, its login and its state
//! folders. One implementation per agent (`claude`, which amp and cursor share, `codex`,
//! `gemini`, `opencode`, `command`); [`super::registry`] picks it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::agents::AgentOptions;
use super::classify::{AgentFailure, Kind, classify, contains_any as has, retry_time};
use super::claude::command::OutputFormat;
use super::outcome::{Activity, Outcome};
use super::stuck::ToolCall;
use super::verdict::Exit;

/// The environment as a backend reads it (a test passes its own).
pub type Var<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// What can be told about a login without asking the service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    Yes(String),
    No(String),
    Unknown(String),
}

/// One agent's backend.
pub trait Backend: Sync {
    /// The arguments for `prompt` (empty when the prompt goes on stdin).
    fn args(&self, o: &AgentOptions, prompt: &str) -> Vec<String>;

    /// Whether the prompt goes on stdin (else it is an argument and stdin is empty).
    fn prompt_on_stdin(&self) -> bool {
        false
    }

    /// How the agent prints its output.
    fn format(&self, o: &AgentOptions) -> OutputFormat;

    /// A reader of one worker's output stream in `format`.
    fn reader(&self) -> Box<dyn Reader>;

    /// A finished worker's failure in prdloop's classes; `None`: the agent worked and its
    /// verdict stands. By default the agent's own texts and exit codes first, then the shared
    /// rules of [`classify`].
    fn classify(
        &self,
        exit: &Exit,
        o: &Outcome,
        stderr_tail: &str,
        now: i64,
    ) -> Option<AgentFailure> {
        classify_by_rules(self, exit, o, stderr_tail, now)
    }

    /// Its words for a failed login (`all`: its errors and stderr; `code`: its exit code).
    fn says_auth(&self, _all: &str, _code: Option<i32>) -> bool {
        false
    }

    /// Its words for a rate limit.
    fn says_rate_limit(&self, _all: &str, _code: Option<i32>) -> bool {
        false
    }

    /// Its words for an overloaded service.
    fn says_overloaded(&self, _all: &str, _code: Option<i32>) -> bool {
        false
    }

    /// A failure of its own that none of the classes above names (gemini's untrusted folder).
    fn own_failure(&self, _all: &str, _code: Option<i32>) -> Option<AgentFailure> {
        None
    }

    /// Whether its log lines are JSON (else each is shown as the text it is).
    fn speaks_json(&self) -> bool {
        true
    }

    /// One JSON line of its log (control characters already removed) as people read it;
    /// `None` for lines that say nothing to a reader.
    fn render(&self, v: &Json) -> Option<String>;

    /// Whether it looks logged in: an API key variable, or the file it writes at login.
    fn login(&self, var: Var, home: &Path) -> Login;

    /// The folders it keeps its own state in (login, sessions, settings, logs) for a user
    /// whose home is `home`, where the environment moves them.
    fn state_dirs(&self, var: Var, home: &Path) -> Vec<PathBuf>;
}

/// Reads one agent's output stream, a JSON line at a time.
pub trait Reader: Send + std::fmt::Debug {
    /// One line (trimmed, not empty) into `seen`.
    fn line(&mut self, seen: &mut Seen, line: &[u8]);

    /// The stream has ended.
    fn finish(&mut self, _o: &mut Outcome) {}
}

/// What a stream has said so far: the outcome, what the worker is doing, the tool calls not
/// yet taken.
#[derive(Debug, Default)]
pub struct Seen {
    pub outcome: Outcome,
    activity: Activity,
    activity_changed: bool,
    calls: Vec<ToolCall>,
}

impl Seen {
    pub(super) fn set_doing(&mut self, doing: String) {
        if self.activity.doing != doing {
            self.activity.doing = doing;
            self.activity_changed = true;
        }
    }

    pub(super) fn set_tokens(&mut self, tokens: u64) {
        if self.activity.tokens != Some(tokens) {
            self.activity.tokens = Some(tokens);
            self.activity_changed = true;
        }
    }

    /// The tokens counted into the activity so far.
    pub(super) fn tokens(&self) -> Option<u64> {
        self.activity.tokens
    }

    pub(super) fn call(&mut self, call: ToolCall) {
        self.calls.push(call);
    }

    /// The tool calls read since the last call, in order.
    pub(super) fn take_calls(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.calls)
    }

    /// The activity, when it changed since the last call.
    pub(super) fn take_activity(&mut self) -> Option<Activity> {
        std::mem::take(&mut self.activity_changed).then(|| self.activity.clone())
    }
}

/// A reader of JSON objects: each line parsed, read by `read`; what the line says the agent
/// does by `doing`; the tokens so far from the outcome. What codex, gemini and opencode share.
pub(super) fn read_object(
    seen: &mut Seen,
    line: &[u8],
    read: impl FnOnce(&mut Outcome, &Json),
    doing: impl FnOnce(&Json) -> Option<(String, Option<ToolCall>)>,
) {
    match serde_json::from_slice::<Json>(line) {
        Ok(e) if e.is_object() => {
            read(&mut seen.outcome, &e);
            let o = &seen.outcome;
            let tokens = o.tokens_reported.then(|| o.usage.total());
            if let Some((d, call)) = doing(&e) {
                seen.calls.extend(call);
                seen.set_doing(d);
            }
            if let Some(t) = tokens {
                seen.set_tokens(t);
            }
        }
        _ => seen.outcome.unparsed_lines += 1,
    }
}

/// The default classification: timeouts, cancels and stuck workers by the shared rules; then
/// the agent's own words for a failed login, the shared usage-limit and billing texts, its
/// words for a rate limit and an overload, its own failures, and last the shared rules.
fn classify_by_rules<B: Backend + ?Sized>(
    b: &B,
    exit: &Exit,
    o: &Outcome,
    stderr_tail: &str,
    now: i64,
) -> Option<AgentFailure> {
    if matches!(
        exit,
        Exit::Cancelled | Exit::TimedOut { .. } | Exit::Stuck(_)
    ) {
        return classify(exit, o, stderr_tail, now);
    }
    let code = match exit {
        Exit::Code { code } => Some(*code),
        _ => None,
    };
    let errored = o.is_error || code != Some(0);
    if !errored {
        return None;
    }
    let said_text = o.errors.join("\n");
    let all = format!("{said_text}\n{stderr_tail}");
    let said = {
        let s = crate::text::first_line(&said_text).to_string();
        if s.is_empty() {
            // The stderr line that names the error, else its last line.
            stderr_tail
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("Error:") || l.contains("rror"))
                .map(String::from)
                .unwrap_or_else(|| {
                    stderr_tail
                        .lines()
                        .rev()
                        .map(str::trim)
                        .find(|l| !l.is_empty())
                        .unwrap_or("")
                        .to_string()
                })
        } else {
            s
        }
    };
    let fail = |kind: Kind, resets_at: Option<i64>| {
        Some(AgentFailure {
            kind,
            text: said.clone(),
            resets_at,
        })
    };
    // What each agent says (see tests/fixtures/<agent>/README.md).
    if b.says_auth(&all, code) {
        return fail(Kind::Auth, None);
    }
    // OpenAI's `insufficient_quota`: no credits left; waiting does not help.
    if has(&all, &["insufficient_quota"]) {
        return fail(Kind::Billing, None);
    }
    if has(
        &all,
        &[
            "hit your usage limit",
            "exhausted your daily quota",
            "usage_limit_reached",
        ],
    ) {
        return fail(Kind::UsageLimit, retry_time(&all, now));
    }
    if b.says_rate_limit(&all, code) {
        return fail(Kind::RateLimit, retry_time(&all, now));
    }
    if b.says_overloaded(&all, code) {
        return fail(Kind::Overloaded, None);
    }
    if let Some(f) = b.own_failure(&all, code) {
        return Some(f);
    }
    // The shared rules: HTTP statuses (opencode's `statusCode`), claude-like texts, crashes.
    let mut f = classify(exit, o, stderr_tail, now)?;
    if f.kind == Kind::RateLimit && f.resets_at.is_none() {
        f.resets_at = retry_time(&all, now);
    }
    Some(f)
}

/// The folder the variable `k` moves a default to (an empty value moves nothing).
pub(super) fn moved(var: Var, k: &str, default: PathBuf) -> PathBuf {
    var(k)
        .filter(|v| !v.is_empty())
        .map_or(default, PathBuf::from)
}

/// The XDG folders under `home`: (config, data).
pub(super) fn xdg(var: Var, home: &Path) -> (PathBuf, PathBuf) {
    (
        moved(var, "XDG_CONFIG_HOME", home.join(".config")),
        moved(var, "XDG_DATA_HOME", home.join(".local/share")),
    )
}

/// Logged in when one of `keys` is set.
pub(super) fn key_set(var: Var, keys: &[&str]) -> Option<Login> {
    keys.iter()
        .find(|k| var(k).is_some())
        .map(|k| Login::Yes(format!("{k} is set")))
}

/// Logged in when the login file `p` exists; else not, and `missing` says what else is not.
pub(super) fn login_file(p: PathBuf, missing: &str) -> Login {
    if p.is_file() {
        Login::Yes(format!("{} exists", p.display()))
    } else {
        Login::No(format!("no {} and {missing}", p.display()))
    }
}
