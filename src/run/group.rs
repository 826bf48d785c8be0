//! Parallel sub-loops: several PRDs run in one process, each its own loop (session, lock,
//! state, dispatcher and core, exactly as if run alone), sharing three things through a
//! [`Link`]:
//!
//! - a cap on concurrent workers (a semaphore): a worker's task holds a permit until it ends,
//!   so sub-loops never multiply the load;
//! - news between the cores: an agent that cannot work (auth, billing) in one sub-loop stops
//!   the others, and a usage-limit pause in one pauses all. The dispatcher publishes what its
//!   core decided after each response and reads the others' news on each tick, handing it to
//!   its core as a [`LoopEvent::SubLoopNews`](super::event::LoopEvent) like anything else;
//! - a slot for each sub-loop's summary, for the combined summary at the end.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

use super::event::{News, Summary};
use super::reason::StopReason;

/// What is shared by the sub-loops of one process.
pub struct SubLoops {
    permits: Option<Arc<Semaphore>>,
    news: watch::Sender<News>,
    /// Every sub-loop's running workers (process groups), for the third Ctrl-C: the process
    /// exits from one sub-loop and must take the others' workers with it.
    pids: Arc<Mutex<HashSet<u32>>>,
}

impl SubLoops {
    /// `cap`: the most workers running at once across the sub-loops (`None`: no cap).
    pub fn new(cap: Option<usize>) -> SubLoops {
        SubLoops {
            permits: cap.map(|n| Arc::new(Semaphore::new(n.max(1)))),
            news: watch::channel(News::default()).0,
            pids: Arc::default(),
        }
    }

    /// A sub-loop's link; `label` prefixes its lines (`None`: a run alone, no prefix).
    pub fn link(&self, label: Option<String>) -> Link {
        Link {
            label,
            permits: self.permits.clone(),
            news: self.news.clone(),
            seen: self.news.subscribe(),
            summary: Arc::new(Mutex::new(None)),
            pids: self.pids.clone(),
        }
    }
}

/// One sub-loop's side of the [`SubLoops`].
pub struct Link {
    pub label: Option<String>,
    permits: Option<Arc<Semaphore>>,
    news: watch::Sender<News>,
    seen: watch::Receiver<News>,
    summary: Arc<Mutex<Option<Summary>>>,
    pids: Arc<Mutex<HashSet<u32>>>,
}

/// A finished sub-loop, as the combined summary needs it.
#[derive(Debug, Clone)]
pub struct Ended {
    pub word: &'static str,
    pub code: crate::exit::Exit,
    pub passing: usize,
    pub total: usize,
    pub cost: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Why it stopped early, if it did.
    pub reason: Option<StopReason>,
}

impl Link {
    /// Where the sub-loop's summary will be, once it has ended.
    pub fn ended(&self) -> impl Fn() -> Option<Ended> + use<> {
        let slot = self.summary.clone();
        move || {
            let s = slot.lock().ok()?.clone()?;
            Some(Ended {
                word: s.end.word(),
                code: s.end.exit(),
                passing: s.passing,
                total: s.total,
                cost: s.cost,
                input_tokens: s.usage.input_tokens,
                output_tokens: s.usage.output_tokens,
                reason: s.reason,
            })
        }
    }

    pub(super) fn keep_summary(&self, s: &Summary) {
        if let Ok(mut slot) = self.summary.lock() {
            *slot = Some(s.clone());
        }
    }

    /// A worker's process group started (`true`) or ended.
    pub(super) fn track(&self, pid: u32, running: bool) {
        if let Ok(mut pids) = self.pids.lock() {
            if running {
                pids.insert(pid);
            } else {
                pids.remove(&pid);
            }
        }
    }

    /// Every sub-loop's running workers.
    pub(super) fn all_pids(&self) -> Vec<u32> {
        self.pids
            .lock()
            .map(|p| p.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The semaphore workers take a permit from, when there is a cap.
    pub(super) fn permits(&self) -> Option<Arc<Semaphore>> {
        self.permits.clone()
    }

    /// Whether this link shares anything with other sub-loops (otherwise a run alone that only
    /// has a cap).
    fn shared(&self) -> bool {
        self.label.is_some()
    }

    /// What the others said since the last look.
    pub(super) fn news(&mut self) -> Option<News> {
        if !self.shared() || !self.seen.has_changed().unwrap_or(false) {
            return None;
        }
        Some(self.seen.borrow_and_update().clone())
    }

    /// Tells the others what this core decided: an agent that cannot work, a longer pause.
    /// `fatal`: why this core's agent cannot work; `pause`: the end of its pause for a limit.
    pub(super) fn publish(&self, fatal: Option<&StopReason>, pause: Option<Instant>) {
        if !self.shared() {
            return;
        }
        let label = self.label.clone().unwrap_or_default();
        self.news.send_if_modified(|n| {
            let mut changed = false;
            if n.fatal.is_none()
                && let Some(what) = fatal
            {
                n.fatal = Some((label.clone(), what.clone()));
                changed = true;
            }
            if let Some(until) = pause
                && n.pause.as_ref().is_none_or(|(t, _)| until > *t)
            {
                n.pause = Some((until, label.clone()));
                changed = true;
            }
            changed
        });
    }
}

/// A permit to run one worker, held by the worker's task until it ends.
pub(super) type Permit = Option<OwnedSemaphorePermit>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn news_is_seen_once_and_only_by_linked_sub_loops() {
        let g = SubLoops::new(Some(2));
        let mut a = g.link(Some("a".into()));
        let mut alone = g.link(None);
        assert_eq!(a.news(), None);
        let auth = StopReason::AgentFailure {
            failure: crate::backend::Kind::Auth,
            text: "auth".into(),
        };
        g.news
            .send_modify(|n| n.fatal = Some(("b".into(), auth.clone())));
        assert_eq!(a.news().and_then(|n| n.fatal), Some(("b".into(), auth)));
        assert_eq!(a.news(), None, "seen already");
        assert_eq!(alone.news(), None, "a run alone shares no news");
        assert_eq!(a.permits().map(|s| s.available_permits()), Some(2));
    }
}
