//! Notifications on what matters (`--notify TARGET`, repeatable; `--notify-on KINDS`): an
//! ntfy topic, a Slack or Discord webhook, the desktop (notify-send / osascript), PAI's voice
//! server, or any program (the event as JSON on stdin).
//!
//! Fire and forget: a background thread delivers events in order, each target with a short
//! timeout; the loop never waits on it, and a failing target costs one warning, which the
//! loop's reporter shows (see [`Notifier::take_warning`]).

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::run::end::End;

/// Per-request (and per-program) timeout.
const TIMEOUT: Duration = Duration::from_secs(3);
/// PAI's voice server, for `--notify pai-voice` without `--notify-url`.
pub const PAI_VOICE_URL: &str = "http://localhost:8888/notify";

/// Where a notification goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `ntfy:TOPIC_URL`: POST the message, with `Title`, `Tags` and `Priority` headers.
    Ntfy(String),
    /// A Slack incoming webhook (`https://hooks.slack.com/…`, or `slack:URL`): `{"text"}`.
    Slack(String),
    /// A Discord webhook (`https://discord.com/api/webhooks/…`, or `discord:URL`):
    /// `{"content"}`.
    Discord(String),
    /// notify-send (Linux) or osascript (macOS).
    Desktop,
    /// PAI's voice server: `{"message", "voice_id"}`, at the start, each iteration's end and
    /// the outcome, as `--notify-url` always did.
    PaiVoice { url: String, voice_id: String },
    /// `command:PROG`: `sh -c PROG` with the event as one JSON object on stdin.
    Command(String),
}

impl Target {
    /// Parses a `--notify` value.
    pub fn parse(s: &str) -> Result<Target, String> {
        let s = s.trim();
        let url = |rest: &str, what: &str| -> Result<String, String> {
            if rest.starts_with("http://") || rest.starts_with("https://") {
                Ok(rest.to_string())
            } else {
                Err(format!("{what} needs an http(s) URL, got `{rest}`"))
            }
        };
        if let Some(rest) = s.strip_prefix("ntfy:") {
            return url(rest, "ntfy:").map(Target::Ntfy);
        }
        if let Some(rest) = s.strip_prefix("slack:") {
            return url(rest, "slack:").map(Target::Slack);
        }
        if let Some(rest) = s.strip_prefix("discord:") {
            return url(rest, "discord:").map(Target::Discord);
        }
        if let Some(prog) = s.strip_prefix("command:") {
            if prog.trim().is_empty() {
                return Err("command: needs a program (`command:PROG`)".into());
            }
            return Ok(Target::Command(prog.to_string()));
        }
        match s {
            "desktop" => return Ok(Target::Desktop),
            "pai-voice" => {
                return Ok(Target::PaiVoice {
                    url: PAI_VOICE_URL.into(),
                    voice_id: String::new(),
                });
            }
            _ => {}
        }
        let host = s
            .strip_prefix("https://")
            .and_then(|r| r.split('/').next())
            .unwrap_or("");
        if host == "hooks.slack.com" {
            return Ok(Target::Slack(s.to_string()));
        }
        if matches!(host, "discord.com" | "discordapp.com" | "ptb.discord.com")
            && s.contains("/api/webhooks/")
        {
            return Ok(Target::Discord(s.to_string()));
        }
        Err(format!(
            "`{s}` is not a notification target: use ntfy:TOPIC_URL, a Slack or Discord webhook URL (or slack:URL, discord:URL), desktop, pai-voice or command:PROG"
        ))
    }

    fn describe(&self) -> String {
        match self {
            Target::Ntfy(u) => format!("ntfy {u}"),
            Target::Slack(_) => "the Slack webhook".into(),
            Target::Discord(_) => "the Discord webhook".into(),
            Target::Desktop => "desktop notifications".into(),
            Target::PaiVoice { url, .. } => url.clone(),
            Target::Command(p) => format!("`{p}`"),
        }
    }
}

/// What happened, as `--notify-on` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
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
    /// The run started (PAI's voice only).
    Start,
    /// An iteration ended (PAI's voice only).
    Iteration,
}

/// Every kind.
const ALL_KINDS: [Kind; 8] = [
    Kind::Done,
    Kind::Failed,
    Kind::NeedsPerson,
    Kind::Limit,
    Kind::Resumed,
    Kind::Budget,
    Kind::Start,
    Kind::Iteration,
];

/// `--notify-on`'s default.
pub const DEFAULT_ON: &[Kind] = &[Kind::Done, Kind::Failed, Kind::NeedsPerson];

impl Kind {
    /// The kind of a run's end.
    pub fn of_end(end: End) -> Kind {
        match end {
            End::Complete => Kind::Done,
            End::Blocked | End::Questions => Kind::NeedsPerson,
            End::Budget => Kind::Budget,
            _ => Kind::Failed,
        }
    }

    /// Whether a target that is not PAI's voice gets it, given `--notify-on`. A budget end is
    /// also the run ending unfinished: `failed` gets it too.
    fn chosen(self, on: &BTreeSet<Kind>) -> bool {
        on.contains(&self) || (self == Kind::Budget && on.contains(&Kind::Failed))
    }

    /// Whether PAI's voice says it: its old messages (start, iterations, every end), and
    /// limits when chosen.
    fn spoken(self, on: &BTreeSet<Kind>) -> bool {
        match self {
            Kind::Limit | Kind::Resumed => on.contains(&self),
            _ => true,
        }
    }

    fn priority(self) -> &'static str {
        match self {
            Kind::Failed | Kind::NeedsPerson | Kind::Budget => "high",
            Kind::Done => "default",
            _ => "low",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Kind::Done => "white_check_mark",
            Kind::Failed | Kind::Budget => "x",
            Kind::NeedsPerson => "raising_hand",
            Kind::Limit => "hourglass",
            _ => "arrow_forward",
        }
    }
}

/// `--notify` and `--notify-on`, as the run uses them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    pub targets: Vec<Target>,
    pub on: BTreeSet<Kind>,
}

impl Settings {
    /// From the flags: `--notify-url` is PAI's voice at that URL (also the URL of a
    /// `--notify pai-voice`), and each voice target gets `voice_id`.
    pub fn new(
        mut targets: Vec<Target>,
        on: &[Kind],
        notify_url: Option<String>,
        voice_id: &str,
    ) -> Settings {
        let mut voiced = false;
        for t in &mut targets {
            if let Target::PaiVoice { url, voice_id: v } = t {
                if let Some(u) = &notify_url {
                    *url = u.clone();
                }
                *v = voice_id.to_string();
                voiced = true;
            }
        }
        if let (Some(url), false) = (notify_url, voiced) {
            targets.push(Target::PaiVoice {
                url,
                voice_id: voice_id.to_string(),
            });
        }
        targets.dedup();
        let on = if on.is_empty() { DEFAULT_ON } else { on };
        Settings {
            targets,
            on: on.iter().copied().collect(),
        }
    }
}

/// The run a notifier speaks of.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    pub prd: String,
    pub title: String,
    pub session: String,
}

/// One notification: the JSON a `command:` target reads on stdin.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub event: Kind,
    /// One line for people.
    pub message: String,
    #[serde(flatten)]
    pub context: Context,
    pub passing: usize,
    pub total: usize,
    pub cost_usd: f64,
    /// The run's end (`completed`, `blocked`, `failed`, `paused`, …), for an end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

/// What the dispatcher hands over; the notifier adds the run's context.
#[derive(Debug, Clone)]
pub struct Note {
    pub kind: Kind,
    pub message: String,
    pub passing: usize,
    pub total: usize,
    pub cost_usd: f64,
    pub end: Option<End>,
}

impl Note {
    pub fn new(kind: Kind, message: impl Into<String>, (passing, total): (usize, usize)) -> Note {
        Note {
            kind,
            message: message.into(),
            passing,
            total,
            cost_usd: 0.0,
            end: None,
        }
    }

    pub fn cost(mut self, usd: f64) -> Note {
        self.cost_usd = usd;
        self
    }

    pub fn end(mut self, end: End) -> Note {
        self.end = Some(end);
        self
    }
}

/// The warning that notifications to a target fail (its delivery's error); the loop goes on
/// without them. Its text is its `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// The target, as it describes itself.
    pub target: String,
    pub error: String,
}

impl std::fmt::Display for Failing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "notifications to {} fail ({}); the loop goes on without them",
            self.target, self.error
        )
    }
}

pub struct Notifier {
    tx: Option<mpsc::Sender<Event>>,
    /// Which kinds some target takes (the others are not queued).
    wanted: BTreeSet<Kind>,
    /// Events queued and not yet handled (delivered or failed): what [`Notifier::finish`]
    /// drops when its time is up.
    pending: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    done: Option<mpsc::Receiver<()>>,
    warning: Option<mpsc::Receiver<Failing>>,
    context: Context,
}

impl Notifier {
    /// A notifier; without targets it does nothing.
    pub fn new(settings: Settings, context: Context) -> Notifier {
        if settings.targets.is_empty() {
            return Notifier {
                tx: None,
                wanted: BTreeSet::new(),
                pending: Default::default(),
                done: None,
                warning: None,
                context,
            };
        }
        let wanted = ALL_KINDS
            .into_iter()
            .filter(|k| {
                settings.targets.iter().any(|t| match t {
                    Target::PaiVoice { .. } => k.spoken(&settings.on),
                    _ => k.chosen(&settings.on),
                })
            })
            .collect();
        let pending = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel::<Event>();
        let (done_tx, done_rx) = mpsc::channel();
        let (warn_tx, warn_rx) = mpsc::channel();
        let handled = pending.clone();
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(TIMEOUT))
                .http_status_as_error(true)
                .build()
                .into();
            let mut warned = vec![false; settings.targets.len()];
            for event in rx {
                for (i, t) in settings.targets.iter().enumerate() {
                    let wanted = match t {
                        Target::PaiVoice { .. } => event.event.spoken(&settings.on),
                        _ => event.event.chosen(&settings.on),
                    };
                    if !wanted {
                        continue;
                    }
                    if let Err(e) = deliver(&agent, t, &event)
                        && !warned[i]
                    {
                        let _ = warn_tx.send(Failing {
                            target: t.describe(),
                            error: e.to_string(),
                        });
                        warned[i] = true;
                    }
                }
                handled.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
            let _ = done_tx.send(());
        });
        Notifier {
            tx: Some(tx),
            wanted,
            pending,
            done: Some(done_rx),
            warning: Some(warn_rx),
            context,
        }
    }

    pub fn send(&self, note: Note) {
        if let Some(tx) = self
            .tx
            .as_ref()
            .filter(|_| self.wanted.contains(&note.kind))
        {
            self.pending
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = tx.send(Event {
                event: note.kind,
                message: note.message,
                context: self.context.clone(),
                passing: note.passing,
                total: note.total,
                cost_usd: note.cost_usd,
                outcome: note.end.map(|e| e.word().to_string()),
            });
        }
    }

    /// A warning about a failing target, when there is one (one per target).
    pub fn take_warning(&self) -> Option<Failing> {
        self.warning.as_ref()?.try_recv().ok()
    }

    /// Lets queued messages go out, waiting at most `bound`; how many were dropped (not
    /// handled in time: the process ends without them).
    pub fn finish(&mut self, bound: Duration) -> usize {
        self.tx.take();
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(bound);
        }
        self.pending.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The headline of an event: `prdloop: <title> (done)`.
fn headline(e: &Event) -> String {
    let what = match e.event {
        Kind::Done => "done",
        Kind::Failed => "ended unfinished",
        Kind::NeedsPerson => "needs a person",
        Kind::Limit => "waiting out a limit",
        Kind::Resumed => "resumed",
        Kind::Budget => "budget reached",
        Kind::Start => "started",
        Kind::Iteration => "iteration ended",
    };
    let title = if e.context.title.is_empty() {
        &e.context.prd
    } else {
        &e.context.title
    };
    format!("prdloop: {title} ({what})")
}

/// Slack's message: a worker's text (a question, a title) is escaped as Slack asks (`&`, `<`,
/// `>`), so it cannot mention `<!channel>` or make links.
fn slack_body(e: &Event) -> serde_json::Value {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    serde_json::json!({"text": format!("*{}*\n{}", esc(&headline(e)), esc(&e.message))})
}

/// Discord's message: no mention in it pings anyone (`@everyone` in a worker's question).
fn discord_body(e: &Event) -> serde_json::Value {
    serde_json::json!({
        "content": format!("**{}**\n{}", headline(e), e.message),
        "allowed_mentions": {"parse": []},
    })
}

fn deliver(agent: &ureq::Agent, t: &Target, e: &Event) -> anyhow::Result<()> {
    let json = |url: &str, body: serde_json::Value| -> anyhow::Result<()> {
        agent
            .post(url)
            .header("Content-Type", "application/json")
            .send(body.to_string().as_str())?;
        Ok(())
    };
    match t {
        Target::Ntfy(url) => {
            // A header value is one line of ASCII.
            let title: String = headline(e)
                .chars()
                .map(|c| if c.is_ascii_graphic() { c } else { ' ' })
                .collect();
            agent
                .post(url)
                .header("Title", title.trim())
                .header("Tags", e.event.tag())
                .header("Priority", e.event.priority())
                .send(e.message.as_str())?;
            Ok(())
        }
        Target::Slack(url) => json(url, slack_body(e)),
        Target::Discord(url) => json(url, discord_body(e)),
        Target::PaiVoice { url, voice_id } => json(
            url,
            serde_json::json!({"message": e.message, "voice_id": voice_id}),
        ),
        Target::Desktop => {
            let mut c = if cfg!(target_os = "macos") {
                let mut c = Command::new("osascript");
                // The texts as arguments, never inside the script.
                c.args([
                    "-e",
                    "on run argv",
                    "-e",
                    "display notification (item 2 of argv) with title (item 1 of argv)",
                    "-e",
                    "end run",
                ]);
                c
            } else {
                let mut c = Command::new("notify-send");
                c.args(["--app-name=prdloop", "--"]);
                c
            };
            c.arg(headline(e)).arg(&e.message);
            run(c, None)
        }
        Target::Command(prog) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(prog);
            let mut line = serde_json::to_string(e)?;
            line.push('\n');
            run(c, Some(line))
        }
    }
}

/// Runs a notification program with `stdin`, waiting at most `TIMEOUT` (then it is killed).
fn run(mut c: Command, stdin: Option<String>) -> anyhow::Result<()> {
    let mut child = c
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A program that does not read its stdin is not an error.
        let _ = pipe.write_all(text.as_bytes());
    }
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::ensure!(status.success(), "it exited with {status}");
            return Ok(());
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("it ran longer than {}s and was ended", TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_text_pings_no_one() {
        let e = Event {
            event: Kind::NeedsPerson,
            message: "ISC-1 asks: <!channel> @everyone a & b?".into(),
            context: Context {
                prd: "/p/PRD.md".into(),
                title: "T <x>".into(),
                session: "s".into(),
            },
            passing: 0,
            total: 1,
            cost_usd: 0.0,
            outcome: None,
        };
        assert_eq!(
            slack_body(&e)["text"],
            "*prdloop: T &lt;x&gt; (needs a person)*\nISC-1 asks: &lt;!channel&gt; @everyone a &amp; b?"
        );
        assert_eq!(
            discord_body(&e)["allowed_mentions"]["parse"],
            serde_json::json!([])
        );
    }

    #[test]
    fn targets_parse_and_bad_ones_are_named() {
        assert_eq!(
            Target::parse("ntfy:https://ntfy.sh/t").unwrap(),
            Target::Ntfy("https://ntfy.sh/t".into())
        );
        assert_eq!(
            Target::parse("https://hooks.slack.com/services/A/B").unwrap(),
            Target::Slack("https://hooks.slack.com/services/A/B".into())
        );
        assert_eq!(
            Target::parse("https://discord.com/api/webhooks/1/x").unwrap(),
            Target::Discord("https://discord.com/api/webhooks/1/x".into())
        );
        assert_eq!(Target::parse("desktop").unwrap(), Target::Desktop);
        assert_eq!(
            Target::parse("command:cat > x").unwrap(),
            Target::Command("cat > x".into())
        );
        for bad in [
            "ntfy:topic",
            "command:",
            "https://example.com/hook",
            "voice",
        ] {
            let e = Target::parse(bad).unwrap_err();
            assert!(
                e.contains(bad.trim_end_matches(':')) || e.contains("needs"),
                "{e}"
            );
        }
    }

    #[test]
    fn notify_url_is_pai_voice_and_default_kinds_apply() {
        let s = Settings::new(
            vec![Target::Desktop],
            &[],
            Some("http://127.0.0.1:9/n".into()),
            "v",
        );
        assert_eq!(
            s.targets,
            [
                Target::Desktop,
                Target::PaiVoice {
                    url: "http://127.0.0.1:9/n".into(),
                    voice_id: "v".into()
                }
            ]
        );
        assert!(Kind::Done.chosen(&s.on) && Kind::NeedsPerson.chosen(&s.on));
        assert!(!Kind::Limit.chosen(&s.on) && !Kind::Iteration.chosen(&s.on));
        // A budget end is also an unfinished run.
        assert!(Kind::Budget.chosen(&s.on));
        assert!(Kind::Iteration.spoken(&s.on) && !Kind::Limit.spoken(&s.on));
    }

    #[test]
    fn what_a_slow_target_leaves_at_exit_is_counted_as_dropped() {
        // A server that takes connections and never answers.
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/topic", server.local_addr().unwrap());
        let settings = Settings::new(vec![Target::Ntfy(url)], &[], None, "v");
        let mut n = Notifier::new(settings, Context::default());
        for i in 0..4 {
            n.send(Note::new(
                Kind::NeedsPerson,
                format!("question {i}"),
                (0, 1),
            ));
        }
        // Not a kind the target takes: not queued, so not dropped either.
        n.send(Note::new(Kind::Iteration, "iteration", (0, 1)));
        n.send(Note::new(Kind::Done, "done", (1, 1)));
        assert_eq!(n.finish(Duration::from_millis(100)), 5);
        drop(server);
        // Without targets nothing is queued.
        let mut none = Notifier::new(Settings::default(), Context::default());
        none.send(Note::new(Kind::Done, "done", (1, 1)));
        assert_eq!(none.finish(Duration::from_millis(10)), 0);
    }
}
