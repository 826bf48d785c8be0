//! PAI-style notifications: `POST {"message": "...", "voice_id": "..."}` to a URL (PAI's
//! voice server listens on http://localhost:8888/notify). Fire and forget: a background
//! thread posts in order with a short timeout; the loop never waits on it, and an unreachable
//! server costs one warning, which the loop's reporter shows (see [`Notifier::take_warning`]).

use std::sync::mpsc;
use std::time::Duration;

/// Per-request timeout.
const TIMEOUT: Duration = Duration::from_secs(3);

pub struct Notifier {
    tx: Option<mpsc::Sender<String>>,
    done: Option<mpsc::Receiver<()>>,
    warning: Option<mpsc::Receiver<String>>,
}

impl Notifier {
    /// A notifier; `None` turns it off.
    pub fn new(url: Option<String>, voice_id: String) -> Notifier {
        let Some(url) = url else {
            return Notifier {
                tx: None,
                done: None,
                warning: None,
            };
        };
        let (tx, rx) = mpsc::channel::<String>();
        let (done_tx, done_rx) = mpsc::channel();
        let (warn_tx, warn_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .timeout_global(Some(TIMEOUT))
                .http_status_as_error(true)
                .build()
                .into();
            let mut warned = false;
            for message in rx {
                let body =
                    serde_json::json!({"message": message, "voice_id": voice_id}).to_string();
                let r = agent
                    .post(&url)
                    .header("Content-Type", "application/json")
                    .send(body.as_str());
                if let Err(e) = r
                    && !warned
                {
                    let _ = warn_tx.send(format!(
                        "notifications to {url} fail ({e}); the loop goes on without them"
                    ));
                    warned = true;
                }
            }
            let _ = done_tx.send(());
        });
        Notifier {
            tx: Some(tx),
            done: Some(done_rx),
            warning: Some(warn_rx),
        }
    }

    pub fn send(&self, message: impl Into<String>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(message.into());
        }
    }

    /// The warning about failing notifications, once, when there is one.
    pub fn take_warning(&self) -> Option<String> {
        self.warning.as_ref()?.try_recv().ok()
    }

    /// Lets queued messages go out, waiting at most `bound`.
    pub fn finish(&mut self, bound: Duration) {
        self.tx.take();
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(bound);
        }
    }
}
