//! Limit and backoff maths, with the time passed in: whether the budget (`--max-cost`) or the
//! time limit (`--max-time`) forbids the next worker, and how long every lane pauses after a
//! rate limit, usage limit or overload (`--retry-backoff`, `--max-wait`).

use std::time::Duration;

use super::reason::StopReason;

/// The longest wait after a transient agent failure without a reset time.
pub const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);

/// What the run has spent so far, and how many workers run (or start in the same pass)
/// whose cost is not known yet.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spending {
    /// What the workers that ended reported.
    pub cost: f64,
    pub workers_done: u32,
    pub worker_time: Duration,
    pub elapsed: Duration,
    pub running: u32,
}

impl Spending {
    /// The expected cost of one worker: the mean of those that ended (0 before any did).
    pub fn each(&self) -> f64 {
        if self.workers_done == 0 {
            0.0
        } else {
            self.cost / f64::from(self.workers_done)
        }
    }

    /// What the running workers are expected to cost, not spent yet.
    pub fn expected_running(&self) -> f64 {
        self.each() * f64::from(self.running)
    }

    /// Spent, plus what the running workers are expected to cost.
    pub fn committed(&self) -> f64 {
        self.cost + self.expected_running()
    }
}

/// Why no further worker may start, if a limit says so: the end it leads to and the detail.
pub fn launch_blocked(
    max_cost: Option<f64>,
    max_time: Option<Duration>,
    s: &Spending,
) -> Option<StopReason> {
    let done = f64::from(s.workers_done.max(1));
    if let Some(max) = max_cost {
        let next = s.each();
        if s.committed() + next > max {
            return Some(StopReason::BudgetReached {
                spent_usd: s.cost,
                running: s.running,
                running_usd: s.expected_running(),
                max_usd: max,
                next_usd: next,
            });
        }
    }
    if let Some(max) = max_time {
        let next = if s.workers_done == 0 {
            Duration::ZERO
        } else {
            s.worker_time.div_f64(done)
        };
        if s.elapsed + next > max {
            return Some(StopReason::TimeLimit {
                ran_ms: s.elapsed.as_millis() as u64,
                max_ms: max.as_millis() as u64,
                next_ms: next.as_millis() as u64,
            });
        }
    }
    None
}

/// Exponential backoff from `start`, doubling per failure in a row (`level`), capped at 15
/// minutes, with ±20% jitter (`jitter` in 0..1) so that many runners do not retry in step.
pub fn backoff(start: Duration, level: u32, jitter: f64) -> Duration {
    let base = start.saturating_mul(1u32 << level.min(16)).min(MAX_BACKOFF);
    base.mul_f64(0.8 + 0.4 * jitter.clamp(0.0, 1.0))
        .min(MAX_BACKOFF)
}

/// How a transient agent failure changes the pause of every lane.
#[derive(Debug, Clone, PartialEq)]
pub enum Pause {
    /// The pause in force already lasts past the new one.
    Covered,
    /// Pause for `delay` from now; `extension` is what it adds to the time waited.
    Until {
        delay: Duration,
        extension: Duration,
    },
    /// Waiting would pass `--max-wait`: stop, for this.
    OverMaxWait(StopReason),
}

/// The inputs of [`pause_for`].
#[derive(Debug, Clone, Copy)]
pub struct PauseInput<'a> {
    /// When the agent said the limit resets (epoch seconds), if it did.
    pub resets_at: Option<i64>,
    pub now_s: i64,
    /// The backoff to use when there is no reset time.
    pub backoff: Duration,
    /// What is left of the pause in force, if any.
    pub remaining: Option<Duration>,
    pub waited: Duration,
    pub max_wait: Duration,
    pub label: &'a str,
}

pub fn pause_for(i: PauseInput) -> Pause {
    let delay = match i.resets_at {
        // One second past the reset, so the limit is really over.
        Some(at) if at > i.now_s => Duration::from_secs((at - i.now_s) as u64 + 1),
        Some(_) => Duration::from_secs(1),
        None => i.backoff,
    };
    let extension = match i.remaining {
        Some(left) if left >= delay => return Pause::Covered,
        Some(left) => delay - left,
        None => delay,
    };
    if i.waited + extension > i.max_wait {
        return Pause::OverMaxWait(StopReason::MaxWait {
            label: i.label.to_string(),
            extension_ms: extension.as_millis() as u64,
            max_wait_ms: i.max_wait.as_millis() as u64,
            waited_ms: i.waited.as_millis() as u64,
        });
    }
    Pause::Until { delay, extension }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_and_time_estimate_the_next_worker_from_the_average() {
        let s = Spending {
            cost: 0.9,
            workers_done: 3,
            worker_time: Duration::from_secs(30),
            elapsed: Duration::from_secs(50),
            running: 0,
        };
        assert_eq!(launch_blocked(Some(1.3), None, &s), None);
        let why = launch_blocked(Some(1.1), None, &s).unwrap();
        assert_eq!(why.end(), crate::run::end::End::Budget);
        assert!(why.to_string().contains("about $0.3000 each"), "{why}");
        assert_eq!(
            launch_blocked(None, Some(Duration::from_secs(55)), &s)
                .unwrap()
                .end(),
            crate::run::end::End::TimeLimit
        );
        // Before any worker ran, only what was spent counts.
        let fresh = Spending::default();
        assert_eq!(
            launch_blocked(Some(0.01), Some(Duration::from_secs(1)), &fresh),
            None
        );
    }

    #[test]
    fn running_workers_are_expected_not_spent() {
        // 4 ended at $0.10, 4 running: $0.40 spent, $0.40 expected, the next $0.10.
        let s = Spending {
            cost: 0.4,
            workers_done: 4,
            running: 4,
            ..Spending::default()
        };
        assert_eq!(launch_blocked(Some(0.95), None, &s), None);
        let why = launch_blocked(Some(0.85), None, &s).unwrap();
        assert_eq!(
            why.to_string(),
            "spent $0.4000 of --max-cost $0.85, $0.4000 more expected from 4 running worker(s); the next worker could pass it (about $0.1000 each)"
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_and_a_cap() {
        let s = Duration::from_secs(30);
        assert_eq!(backoff(s, 0, 0.5), s);
        assert_eq!(backoff(s, 2, 0.5), Duration::from_secs(120));
        assert_eq!(backoff(s, 0, 0.0), Duration::from_secs(24));
        assert_eq!(backoff(s, 0, 1.0), Duration::from_secs(36));
        assert_eq!(backoff(s, 30, 1.0), MAX_BACKOFF);
    }

    #[test]
    fn pauses_extend_only_past_the_current_one_and_respect_max_wait() {
        let base = PauseInput {
            resets_at: Some(1_000),
            now_s: 990,
            backoff: Duration::from_secs(30),
            remaining: None,
            waited: Duration::ZERO,
            max_wait: Duration::from_secs(3600),
            label: "usage limit reached",
        };
        let d = Duration::from_secs(11);
        assert_eq!(
            pause_for(base),
            Pause::Until {
                delay: d,
                extension: d
            }
        );
        let covered = PauseInput {
            remaining: Some(Duration::from_secs(20)),
            ..base
        };
        assert_eq!(pause_for(covered), Pause::Covered);
        let partly = PauseInput {
            remaining: Some(Duration::from_secs(5)),
            ..base
        };
        assert_eq!(
            pause_for(partly),
            Pause::Until {
                delay: d,
                extension: Duration::from_secs(6)
            }
        );
        let no_reset = PauseInput {
            resets_at: None,
            ..base
        };
        assert_eq!(
            pause_for(no_reset),
            Pause::Until {
                delay: Duration::from_secs(30),
                extension: Duration::from_secs(30)
            }
        );
        let over = PauseInput {
            waited: Duration::from_secs(3595),
            ..base
        };
        assert!(
            matches!(pause_for(over), Pause::OverMaxWait(m) if m.to_string().contains("--max-wait"))
        );
    }
}
