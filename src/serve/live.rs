//! The dashboard's event streams, from one shared snapshot: a ticker reads the session list
//! (and the detail of each session some client watches) once per tick and publishes it on a
//! watch channel; every client takes its update from that snapshot. Reading and serialising
//! cost the same for one client or hundreds, and nothing is read while no client listens.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

/// What every client's update is made of, as of one tick.
#[derive(Debug, Default)]
pub(super) struct Snapshot {
    /// The session list, as JSON.
    pub list: String,
    /// The detail of each watched session, as JSON (`null`: not found).
    pub details: HashMap<String, String>,
    /// False until the first tick.
    pub built: bool,
}

/// Makes a snapshot, with the detail of the sessions given.
pub(super) type Build = dyn Fn(&[String]) -> Snapshot + Send + Sync;

/// The shared snapshot and its ticker.
pub(super) struct Hub {
    build: Arc<Build>,
    every: Duration,
    tx: watch::Sender<Arc<Snapshot>>,
    /// The sessions clients watch, each with its number of clients.
    wanted: Mutex<HashMap<String, usize>>,
    /// A client came: tick now rather than at the next interval.
    nudge: Notify,
    ticking: AtomicBool,
    /// Snapshots built so far.
    builds: AtomicU64,
}

impl Hub {
    pub fn new(build: Arc<Build>, every: Duration) -> Arc<Hub> {
        Arc::new(Hub {
            build,
            every,
            tx: watch::Sender::new(Arc::new(Snapshot::default())),
            wanted: Mutex::new(HashMap::new()),
            nudge: Notify::new(),
            ticking: AtomicBool::new(false),
            builds: AtomicU64::new(0),
        })
    }

    /// Snapshots built so far.
    #[cfg(test)]
    pub fn builds(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }

    /// Builds the snapshot once (off the async threads), for every watched session, and
    /// publishes it.
    pub async fn tick(&self) {
        let wanted: Vec<String> = self.lock_wanted().keys().cloned().collect();
        let build = Arc::clone(&self.build);
        let snap = tokio::task::spawn_blocking(move || build(&wanted))
            .await
            .expect("a dashboard read panicked");
        self.builds.fetch_add(1, Ordering::Relaxed);
        self.tx.send_replace(Arc::new(snap));
    }

    /// A client: its updates, for the session it watches (if any). Starts the ticker on the
    /// first one.
    pub fn subscribe(self: &Arc<Hub>, session: Option<String>) -> Client {
        if let Some(id) = &session {
            *self.lock_wanted().entry(id.clone()).or_default() += 1;
        }
        let rx = self.tx.subscribe();
        if !self.ticking.swap(true, Ordering::SeqCst) {
            let hub = Arc::clone(self);
            tokio::spawn(async move { hub.run().await });
        }
        self.nudge.notify_one();
        Client {
            hub: Arc::clone(self),
            rx,
            session,
            last: String::new(),
        }
    }

    /// Ticks while clients listen; waits for one otherwise.
    async fn run(&self) {
        loop {
            if self.tx.receiver_count() == 0 {
                self.nudge.notified().await;
                continue;
            }
            self.tick().await;
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                _ = self.nudge.notified() => {}
            }
        }
    }

    fn lock_wanted(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.wanted.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One event-stream client.
pub(super) struct Client {
    hub: Arc<Hub>,
    rx: watch::Receiver<Arc<Snapshot>>,
    session: Option<String>,
    /// The last update sent.
    last: String,
}

impl Client {
    /// The next update (`{"sessions": …, "detail": …}`), when it differs from the last one
    /// sent; `None` when the hub is gone.
    pub async fn next(&mut self) -> Option<String> {
        loop {
            let snap = Arc::clone(&self.rx.borrow_and_update());
            let now = self.compose(&snap);
            if let Some(now) = now
                && now != self.last
            {
                self.last.clone_from(&now);
                return Some(now);
            }
            self.rx.changed().await.ok()?;
        }
    }

    /// This client's update from a snapshot; `None` before one holds what it watches.
    fn compose(&self, snap: &Snapshot) -> Option<String> {
        if !snap.built {
            return None;
        }
        let detail = match &self.session {
            Some(id) => snap.details.get(id)?.as_str(),
            None => "null",
        };
        Some(format!(r#"{{"sessions":{},"detail":{detail}}}"#, snap.list))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let Some(id) = &self.session else { return };
        let mut wanted = self.hub.lock_wanted();
        if let Some(n) = wanted.get_mut(id) {
            *n -= 1;
            if *n == 0 {
                wanted.remove(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// However many clients listen, one snapshot is built per tick, with each watched
    /// session's detail once; every client gets its update from it.
    #[tokio::test]
    async fn one_snapshot_per_tick_whatever_the_number_of_clients() {
        let details_built = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&details_built);
        let generation = Arc::new(AtomicU64::new(0));
        let g = Arc::clone(&generation);
        let build: Arc<Build> = Arc::new(move |wanted: &[String]| {
            counted.fetch_add(wanted.len() as u64, Ordering::Relaxed);
            let n = g.load(Ordering::Relaxed);
            Snapshot {
                list: format!("[{n}]"),
                details: wanted
                    .iter()
                    .map(|id| (id.clone(), format!("\"{id}\"")))
                    .collect(),
                built: true,
            }
        });
        // A ticker too slow to tick by itself here: the test ticks.
        let hub = Hub::new(build, Duration::from_secs(3600));
        let mut clients: Vec<Client> = (0..200)
            .map(|i| hub.subscribe((i % 2 == 0).then(|| format!("s-{}", i % 4))))
            .collect();
        // The ticker's first tick; then the subscriptions' nudge (one, however many came)
        // makes it tick once more at once. Wait for that one: it runs off this thread.
        let first = clients[1].next().await.expect("an update");
        assert_eq!(first, r#"{"sessions":[0],"detail":null}"#);
        for _ in 0..1000 {
            if hub.builds() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let settled = hub.builds();
        assert_eq!(
            settled, 2,
            "one tick, and one for the nudge of 200 subscriptions"
        );
        for round in 1..=3u64 {
            generation.store(round, Ordering::Relaxed);
            hub.tick().await;
            assert_eq!(hub.builds(), settled + round, "one build per tick");
            for (i, c) in clients.iter_mut().enumerate() {
                let want = match i % 2 {
                    0 => format!(r#"{{"sessions":[{round}],"detail":"s-{}"}}"#, i % 4),
                    _ => format!(r#"{{"sessions":[{round}],"detail":null}}"#),
                };
                assert_eq!(c.next().await.expect("an update"), want);
            }
        }
        // Two sessions watched: two details per build, not one per client.
        assert_eq!(
            details_built.load(Ordering::Relaxed),
            2 * hub.builds(),
            "each watched session's detail once per build"
        );
        drop(clients);
        assert!(
            hub.lock_wanted().is_empty(),
            "a client gone stops its detail"
        );
    }
}
