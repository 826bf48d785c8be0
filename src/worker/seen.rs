//! What a worker's two readers have seen so far (its stream parsed, the stderr tail, refused
//! writes, its tool calls for the stuck watch), shared with the wait so that a reader given up
//! on loses nothing it read.

use super::*;

/// What the stdout reader has seen so far. Shared with [`Running::wait`], so that a reader
/// given up on (a process in another session holds the pipe) loses nothing it read.
pub(super) struct OutSeen {
    pub(super) parser: StreamParser,
    pub(super) bytes: u64,
    /// What the agent is doing now, for the live view: set only when it changes; the view
    /// reads the latest value when it draws (at most ~10 times a second), so a stream of
    /// changes costs the run nothing more.
    pub(super) activity: watch::Sender<Activity>,
    pub(super) refused: Option<Arc<StdMutex<RefusalWatch>>>,
    /// Its tool calls, watched for a worker that only repeats itself.
    pub(super) stuck: stuck::StuckWatch,
    /// Told when the tool calls make the worker stuck, and when new input moves its
    /// deadline (the wait loop then looks again).
    pub(super) stuck_news: watch::Sender<Option<stuck::Stuck>>,
}

/// What the stderr reader has seen so far, shared like [`OutSeen`].
#[derive(Default)]
pub(super) struct ErrSeen {
    pub(super) tail: Vec<u8>,
    pub(super) bytes: u64,
    pub(super) refused: Option<Arc<StdMutex<RefusalWatch>>>,
}

/// A sandboxed worker's rules and the refused writes both readers have seen.
pub(super) struct RefusalWatch {
    pub(super) rules: Rules,
    pub(super) seen: Refusals,
}

impl RefusalWatch {
    pub(super) fn see(watch: &Option<Arc<StdMutex<RefusalWatch>>>, line: &[u8]) {
        if let Some(w) = watch {
            let w = &mut *lock(w);
            w.seen.see(&w.rules, line);
        }
    }
}

/// Where a reader puts what it reads (besides the log).
pub(super) trait Sink {
    fn bytes(&self, n: usize);
    fn line(&self, line: &[u8]);
}

/// Locks a mutex even when a panicking holder poisoned it: what it holds is still usable.
pub(super) fn lock<T>(m: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sink for StdMutex<OutSeen> {
    fn bytes(&self, n: usize) {
        lock(self).bytes += n as u64;
    }
    fn line(&self, line: &[u8]) {
        let mut seen = lock(self);
        RefusalWatch::see(&seen.refused, line);
        seen.parser.feed_line(line);
        if let Some(a) = seen.parser.take_activity() {
            seen.activity.send_replace(a);
        }
        let calls = seen.parser.take_calls();
        if !calls.is_empty() {
            let now = tokio::time::Instant::now();
            for c in &calls {
                if let Some(s) = seen.stuck.call(c, now) {
                    seen.stuck_news.send_replace(Some(s));
                }
            }
        }
    }
}

impl Sink for StdMutex<ErrSeen> {
    fn bytes(&self, n: usize) {
        lock(self).bytes += n as u64;
    }
    fn line(&self, line: &[u8]) {
        let seen = &mut *lock(self);
        RefusalWatch::see(&seen.refused, line);
        let tail = &mut seen.tail;
        tail.extend_from_slice(line);
        tail.push(b'\n');
        if tail.len() > 2 * STDERR_TAIL {
            let cut = tail.len() - STDERR_TAIL;
            tail.drain(..cut);
        }
    }
}
