//! The runs the server started: `prdloop run|resume --json` as children, each followed by a
//! task reading its events. The call that started one gets its `start` event (its session),
//! or how it ended before it had one; every event after goes to the client as a log message
//! (and as a progress notification to a call that waits), a worker's question as a
//! `warning` naming the criterion, the question and the `answer` tool.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::oneshot;

use super::child;

/// A run this server started, as its `start` event names it.
#[derive(Debug, Clone)]
pub struct Run {
    pub session: String,
    pub prd: PathBuf,
    pub state: PathBuf,
    pub logs: PathBuf,
}

impl Run {
    fn of(start: &Value) -> Option<Run> {
        let path = |k: &str| start[k].as_str().map(PathBuf::from);
        Some(Run {
            session: start["session"].as_str()?.to_string(),
            prd: path("prd")?,
            state: path("state")?,
            logs: path("logs")?,
        })
    }
}

/// Where the client hears of a run's events.
#[derive(Clone)]
pub struct Listener {
    pub peer: Peer<RoleServer>,
    /// The level the client asked for (`logging/setLevel`); below it nothing is sent.
    pub level: Arc<Mutex<LoggingLevel>>,
}

impl Listener {
    /// Tells the client the resources listed changed (a run started, a worker's log began).
    async fn resources_changed(&self) {
        if let Err(e) = self.peer.notify_resource_list_changed().await {
            tracing::debug!("cannot send resources/list_changed: {e}");
        }
    }

    async fn log(&self, level: LoggingLevel, data: Value) {
        if level_rank(level) < level_rank(*self.level.lock().expect("level")) {
            return;
        }
        let mut m = LoggingMessageNotificationParam::new(level, data);
        m.logger = Some("prdloop".into());
        if let Err(e) = self.peer.notify_logging_message(m).await {
            tracing::debug!("cannot send a log message: {e}");
        }
    }
}

/// Adds a run to those listed: a session resumed again takes its place (its files are the
/// same), so each is listed once.
fn add(runs: &Mutex<Vec<Run>>, run: Run) {
    let mut runs = runs.lock().expect("runs");
    runs.retain(|r| r.session != run.session);
    runs.push(run);
}

fn level_rank(l: LoggingLevel) -> u8 {
    use LoggingLevel::*;
    match l {
        Debug => 0,
        Info => 1,
        Notice => 2,
        Warning => 3,
        Error => 4,
        Critical => 5,
        Alert => 6,
        Emergency => 7,
    }
}

/// How a run's first part went: its `start` event, or its end before it had one.
pub enum Started {
    Running(Value),
    Ended(End),
}

/// How a run ended.
#[derive(Debug)]
pub struct End {
    /// Its `end` event (`null` when it had none).
    pub event: Value,
    /// Its exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    /// Its stderr: an error's message, a config file's warnings.
    pub stderr: String,
}

impl End {
    /// As a command's outcome: the `end` event its output.
    pub fn outcome(self) -> child::Outcome {
        child::Outcome {
            code: self.code,
            stdout: if self.event.is_null() {
                String::new()
            } else {
                self.event.to_string()
            },
            stderr: self.stderr,
        }
    }
}

/// Starts `argv` (`run …` or `resume …` with `--json`) and follows it: returns once it has
/// a session, or has ended. `progress` (a waiting call's token) gets a notification per
/// event; `ended` hears how the run ended.
pub async fn start(
    globals: &child::Globals,
    argv: Vec<std::ffi::OsString>,
    listener: Listener,
    runs: Arc<Mutex<Vec<Run>>>,
    progress: Option<ProgressToken>,
    ended: Option<oneshot::Sender<End>>,
) -> std::io::Result<Started> {
    // Not killed when the server ends: a run goes on, as one started from a shell would.
    let mut c = globals.prdloop(&argv)?;
    let mut child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = tokio::spawn(child::read_all(child.stderr.take()));
    let (first_tx, first_rx) = oneshot::channel::<Started>();
    tokio::spawn(async move {
        let mut first = Some(first_tx);
        let mut ended = ended;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let mut end = Value::Null;
        let mut seen = 0u32;
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let kind = event["event"].as_str().unwrap_or_default().to_string();
            if kind == "start"
                && let Some(tx) = first.take()
            {
                if let Some(r) = Run::of(&event) {
                    add(&runs, r);
                }
                let _ = tx.send(Started::Running(event.clone()));
                listener.resources_changed().await;
            }
            if kind == "worker_start" {
                // Its log is new.
                listener.resources_changed().await;
            }
            if kind == "end" {
                end = event.clone();
                if first.is_none() {
                    // Ended after its start: the client hears of it below.
                } else {
                    break;
                }
            }
            if let Some(token) = &progress {
                seen += 1;
                notify_progress(&listener.peer, token, seen, &event).await;
            }
            match kind.as_str() {
                "question" => listener.log(LoggingLevel::Warning, asked(&event)).await,
                "end" => listener.log(LoggingLevel::Notice, event.clone()).await,
                _ => listener.log(LoggingLevel::Info, event.clone()).await,
            }
        }
        // Read on (and drop) whatever follows, so the run never blocks on a full pipe.
        while let Ok(Some(_)) = lines.next_line().await {}
        let code = child.wait().await.ok().and_then(|s| s.code());
        let stderr = stderr.await.ok().and_then(Result::ok).unwrap_or_default();
        let how = End {
            event: end,
            code,
            stderr,
        };
        match (first.take(), ended.take()) {
            // Never started: the call hears why.
            (Some(tx), _) => {
                let _ = tx.send(Started::Ended(how));
            }
            (None, Some(tx)) => {
                let _ = tx.send(how);
            }
            (None, None) => {}
        }
    });
    Ok(first_rx.await.unwrap_or(Started::Ended(End {
        event: Value::Null,
        code: None,
        stderr: "the run's reader ended".into(),
    })))
}

/// A worker's question as the client is told it.
fn asked(event: &Value) -> Value {
    let criterion = event["criterion"].as_str().unwrap_or_default();
    let question = event["question"].as_str().unwrap_or_default();
    json!({
        "event": "question",
        "session": event["session"],
        "criterion": criterion,
        "question": question,
        "message": format!(
            "{criterion} asks: {question} (answer it with the `answer` tool: prd, id \"{criterion}\", text)"
        ),
    })
}

/// One event as progress: `progress` counts the events (it must grow); the message says
/// what happened, and how many criteria pass of how many when the event says.
async fn notify_progress(peer: &Peer<RoleServer>, token: &ProgressToken, n: u32, event: &Value) {
    let kind = event["event"].as_str().unwrap_or_default();
    let what = match kind {
        "worker_start" => format!(
            "worker on {} started",
            event["criterion"].as_str().unwrap_or("?")
        ),
        "worker_end" => format!(
            "{}: {}",
            event["criterion"].as_str().unwrap_or("?"),
            event["verdict"].as_str().unwrap_or("?")
        ),
        "question" => asked(event)["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        other => other.to_string(),
    };
    let standing = match (event["passing"].as_u64(), event["total"].as_u64()) {
        (Some(p), Some(t)) => format!(" ({p}/{t} passing)"),
        _ => String::new(),
    };
    let mut p = ProgressNotificationParam::new(token.clone(), f64::from(n));
    p.message = Some(format!("{what}{standing}"));
    if let Err(e) = peer.notify_progress(p).await {
        tracing::debug!("cannot send progress: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_started_again_is_one_run() {
        let run = |session: &str, state: &str| Run {
            session: session.into(),
            prd: "PRD.md".into(),
            state: state.into(),
            logs: "logs".into(),
        };
        let runs = Mutex::new(Vec::new());
        add(&runs, run("s1", "a.json"));
        add(&runs, run("s2", "b.json"));
        add(&runs, run("s1", "a.json"));
        let sessions: Vec<String> = runs
            .into_inner()
            .unwrap()
            .into_iter()
            .map(|r| r.session)
            .collect();
        assert_eq!(sessions, ["s2", "s1"]);
    }
}
