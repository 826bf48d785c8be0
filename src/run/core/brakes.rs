//! What keeps new workers from starting, owned in one place: Ctrl-C's, a pause or stop
//! someone asked for, the run's own stop (budget, time, an agent that cannot work, …), and a
//! pause for a rate or usage limit with its backoff. Each is set through a method that keeps
//! its rule (the first stop and the first request stand; a pause only grows; the backoff
//! resets when a worker works).

use std::time::Duration;

use tokio::time::Instant;

use crate::run::end::End;
use crate::run::reason::StopReason;

#[derive(Debug, Default)]
pub(in crate::run) struct Brakes {
    interrupts: u8,
    /// A pause or stop asked for by someone else.
    request: Option<End>,
    /// Why no more workers start in this run; its `end()` is how the run ends.
    stop: Option<StopReason>,
    /// No worker starts before this (a rate or usage limit, overload), and the same in epoch
    /// milliseconds, as the state document says it.
    pause_until: Option<(Instant, u64)>,
    /// Transient agent failures in a row, for the backoff.
    backoff_level: u32,
    /// How long the run has waited for limits (`--max-wait`).
    waited: Duration,
    /// How long the sessions this one resumes waited, as their state documents said.
    waited_earlier: Duration,
}

impl Brakes {
    /// Whether nothing holds new workers back: no Ctrl-C, request or stop.
    pub fn released(&self) -> bool {
        self.interrupts == 0 && self.request.is_none() && self.stop.is_none()
    }

    /// One more Ctrl-C: how many there have been.
    pub fn interrupt(&mut self) -> u8 {
        self.interrupts = self.interrupts.saturating_add(1);
        self.interrupts
    }

    pub fn interrupted(&self) -> bool {
        self.interrupts > 0
    }

    pub fn request(&self) -> Option<End> {
        self.request
    }

    /// Someone asked for a pause or stop: whether it is the first (a later one is ignored).
    pub fn requested(&mut self, end: End) -> bool {
        if self.request.is_some() {
            return false;
        }
        self.request = Some(end);
        true
    }

    pub fn stop(&self) -> Option<&StopReason> {
        self.stop.as_ref()
    }

    /// The run stops starting workers, for `why`, unless it stopped already (the first reason
    /// stands): whether this one did it.
    pub fn stop_for(&mut self, why: StopReason) -> bool {
        if self.stop.is_some() {
            return false;
        }
        self.stop = Some(why);
        true
    }

    pub fn pause_until(&self) -> Option<Instant> {
        self.pause_until.map(|(at, _)| at)
    }

    /// The end of the pause in force, in epoch milliseconds.
    pub fn pause_until_ms(&self) -> Option<u64> {
        self.pause_until.map(|(_, ms)| ms)
    }

    /// The lanes wait until `until` (`until_ms` in epoch milliseconds), unless a pause in
    /// force lasts longer: whether it grew.
    pub fn pause_to(&mut self, until: Instant, until_ms: u64) -> bool {
        if self.pause_until.is_some_and(|(t, _)| t >= until) {
            return false;
        }
        self.pause_until = Some((until, until_ms));
        true
    }

    /// A pause's end came.
    pub fn pause_over(&mut self) {
        self.pause_until = None;
    }

    /// The backoff level for this transient failure; the next one waits longer.
    pub fn back_off(&mut self) -> u32 {
        let level = self.backoff_level;
        self.backoff_level += 1;
        level
    }

    /// A worker worked: the next transient failure backs off from the start again.
    pub fn worked(&mut self) {
        self.backoff_level = 0;
    }

    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The run waits `more` for a limit.
    pub fn wait(&mut self, more: Duration) {
        self.waited += more;
    }

    /// The sessions this one resumes waited `earlier` (not counted against `--max-wait`).
    pub fn waited_earlier(&mut self, earlier: Duration) {
        self.waited_earlier = earlier;
    }

    /// How long this session and those it resumes waited, as the state document says.
    pub fn waited_in_all(&self) -> Duration {
        self.waited_earlier + self.waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_stop_and_request_stand_and_a_pause_only_grows() {
        let mut b = Brakes::default();
        assert!(b.released());
        assert!(b.stop_for(StopReason::Stalled { iterations: 3 }));
        assert!(!b.stop_for(StopReason::Stalled { iterations: 9 }));
        assert!(matches!(
            b.stop(),
            Some(StopReason::Stalled { iterations: 3 })
        ));
        assert!(b.requested(End::PausedByRequest));
        assert!(!b.requested(End::StoppedByRequest));
        assert_eq!(b.request(), Some(End::PausedByRequest));
        let now = Instant::now();
        assert!(b.pause_to(now + Duration::from_secs(10), 10_000));
        assert!(!b.pause_to(now + Duration::from_secs(5), 5_000));
        assert_eq!(b.pause_until(), Some(now + Duration::from_secs(10)));
        assert_eq!(
            b.pause_until_ms(),
            Some(10_000),
            "the longer pause stands, both ways"
        );
        b.wait(Duration::from_secs(2));
        b.waited_earlier(Duration::from_secs(5));
        assert_eq!(
            b.waited(),
            Duration::from_secs(2),
            "--max-wait counts this session"
        );
        assert_eq!(b.waited_in_all(), Duration::from_secs(7));
        assert_eq!((b.back_off(), b.back_off()), (0, 1));
        b.worked();
        assert_eq!(b.back_off(), 0);
        assert!(!b.released());
    }
}
