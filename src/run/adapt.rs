//! Spending where it pays: how many samples an attempt runs under `--best-of auto` (from its
//! domain's pass rate on its set-up), and which set-up a criterion's attempts run under
//! `--escalate` (climbing after K failed attempts; with `--fallback`, stepping past a set-up
//! whose usage limit is reached). The model and the ladder are pure (the counts and the time
//! come in); `core/adapt.rs` applies them to the run.

use std::collections::BTreeMap;

use crate::state::{Escalation, Rung};

/// The Beta prior of a domain's pass@1 before any of its workers is judged: Beta(2, 1), mean
/// 2/3: agents pass most criteria first time, and one judged worker moves the estimate a lot.
pub const PRIOR: (f64, f64) = (2.0, 1.0);

/// What an attempt round costs besides its workers, in worker runs: the iteration (a wait of
/// one worker's length, and another prompt) that a failed attempt adds.
pub const ROUND: f64 = 1.0;

/// The most a criterion's chance of still failing when the iteration limit (`-n`) is reached
/// may be: an attempt runs more samples than the cost alone asks for when fewer would leave it
/// a larger chance of failing in every iteration left.
pub const DEADLINE_RISK: f64 = 0.1;

/// The posterior mean of pass@1 after `passed` and `failed` judged workers.
pub fn pass_at_1(passed: u32, failed: u32) -> f64 {
    let (a, b) = PRIOR;
    (a + f64::from(passed)) / (a + b + f64::from(passed) + f64::from(failed))
}

/// The samples (1 to `max`) an attempt runs when a worker passes with probability `p` and
/// `left` iterations (this one included) remain: the N that minimises the expected cost per
/// passed criterion, `(N + ROUND) / (1 - (1 - p)^N)` (N workers and one round per attempt,
/// over the chance that one of the N passes; the smallest such N on a tie), raised while N
/// samples in each iteration left would still fail them all with a chance above
/// [`DEADLINE_RISK`].
pub fn samples(p: f64, max: u32, left: u64) -> u32 {
    let p = p.clamp(1e-6, 1.0);
    let max = max.max(1);
    let cost = |n: u32| (f64::from(n) + ROUND) / (1.0 - (1.0 - p).powi(n as i32));
    let mut n = (1..=max)
        .min_by(|&a, &b| cost(a).total_cmp(&cost(b)).then(a.cmp(&b)))
        .unwrap_or(1);
    let fails_to_the_end = |n: u32| (1.0 - p).powf(f64::from(n) * left.max(1) as f64);
    while n < max && fails_to_the_end(n) > DEADLINE_RISK {
        n += 1;
    }
    n
}

/// `--escalate`: each criterion's place on the set-ups, and which set-ups are out of usage.
#[derive(Debug, Default)]
pub struct Ladder {
    /// The set-ups' labels, in order.
    setups: Vec<String>,
    after: u32,
    fallback: bool,
    rungs: BTreeMap<String, Place>,
    /// Set-up index → epoch ms its usage limit resets.
    limited: BTreeMap<usize, u64>,
}

#[derive(Debug, Default, Clone)]
struct Place {
    level: usize,
    failed: u32,
    failed_on: BTreeMap<usize, u32>,
}

/// What a failed attempt did to a criterion's place.
#[derive(Debug, PartialEq, Eq)]
pub enum Climb {
    Stays,
    /// It moves up: (from, to, failed attempts on `from`).
    Moves(String, String, u32),
}

impl Ladder {
    pub fn new(setups: Vec<String>, after: u32, fallback: bool) -> Ladder {
        Ladder {
            setups,
            after: after.max(1),
            fallback,
            ..Ladder::default()
        }
    }

    pub fn is_on(&self) -> bool {
        !self.setups.is_empty()
    }

    /// The set-up index a criterion's next worker runs at `now_ms`: its own, or with
    /// `--fallback` the first one after it whose usage limit is not in force (its own when all
    /// of them are limited: then the run waits as without `--fallback`).
    pub fn setup_for(&self, id: &str, now_ms: u64) -> usize {
        let own = self.rungs.get(id).map_or(0, |p| p.level);
        if !self.fallback {
            return own;
        }
        (own..self.setups.len())
            .find(|&i| self.free(i, now_ms))
            .unwrap_or(own)
    }

    /// Whether set-up `i`'s usage limit (if it hit one) is over at `now_ms`.
    fn free(&self, i: usize, now_ms: u64) -> bool {
        self.limited.get(&i).is_none_or(|&t| t <= now_ms)
    }

    pub fn label(&self, i: usize) -> &str {
        &self.setups[i.min(self.setups.len() - 1)]
    }

    pub fn index(&self, label: &str) -> Option<usize> {
        self.setups.iter().position(|s| s == label)
    }

    /// A counted attempt of `id` failed on set-up `i`.
    pub fn failed(&mut self, id: &str, i: usize) -> Climb {
        let last = self.setups.len().saturating_sub(1);
        let after = self.after;
        let p = self.rungs.entry(id.to_string()).or_default();
        *p.failed_on.entry(i).or_insert(0) += 1;
        // An attempt that ran on a fallback set-up does not move it.
        if i != p.level {
            return Climb::Stays;
        }
        p.failed += 1;
        if p.failed >= after && p.level < last {
            let (from, failed) = (p.level, p.failed);
            p.level += 1;
            p.failed = 0;
            return Climb::Moves(
                self.setups[from].clone(),
                self.setups[from + 1].clone(),
                failed,
            );
        }
        Climb::Stays
    }

    /// With `--fallback`: set-up `i` hit its usage limit, which resets at `until_ms`. The
    /// set-up its work goes to meanwhile, if there is one.
    pub fn limited(&mut self, i: usize, until_ms: u64, now_ms: u64) -> Option<usize> {
        if !self.fallback {
            return None;
        }
        let t = self.limited.entry(i).or_insert(0);
        *t = (*t).max(until_ms);
        (i + 1..self.setups.len()).find(|&j| self.free(j, now_ms))
    }

    /// For the state file.
    pub fn state(&self) -> Escalation {
        Escalation {
            setups: self.setups.clone(),
            after: self.after,
            fallback: self.fallback,
            criteria: self
                .rungs
                .iter()
                .map(|(id, p)| {
                    (
                        id.clone(),
                        Rung {
                            setup: self.label(p.level).to_string(),
                            failed: p.failed,
                            failed_on: p
                                .failed_on
                                .iter()
                                .map(|(i, n)| (self.label(*i).to_string(), *n))
                                .collect(),
                        },
                    )
                })
                .collect(),
            limited_until: self
                .limited
                .iter()
                .map(|(i, t)| (self.label(*i).to_string(), *t))
                .collect(),
        }
    }

    /// An earlier session's places (`resume`); set-ups no longer in `--escalate` are
    /// dropped (a criterion on one starts again at the first).
    pub fn restore(&mut self, prev: &Escalation) {
        for (id, r) in &prev.criteria {
            let Some(level) = self.index(&r.setup) else {
                continue;
            };
            self.rungs.insert(
                id.clone(),
                Place {
                    level,
                    failed: r.failed,
                    failed_on: r
                        .failed_on
                        .iter()
                        .filter_map(|(s, n)| self.index(s).map(|i| (i, *n)))
                        .collect(),
                },
            );
        }
        for (s, t) in &prev.limited_until {
            if let Some(i) = self.index(s) {
                self.limited.insert(i, *t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_start_at_one_rise_with_failures_and_stay_within_max() {
        let far = 1000;
        // Nothing seen yet: one sample.
        assert_eq!(samples(pass_at_1(0, 0), 4, far), 1);
        // A domain that passes stays at one.
        assert_eq!(samples(pass_at_1(5, 0), 4, far), 1);
        assert_eq!(samples(pass_at_1(9, 1), 4, far), 1);
        // One that keeps failing gets more, up to the most allowed and never past it.
        assert_eq!(samples(pass_at_1(0, 2), 4, far), 2);
        let mut last = 1;
        for failed in 0..40 {
            let n = samples(pass_at_1(0, failed), 4, far);
            assert!(n >= last && n <= 4, "{failed}: {n}");
            last = n;
        }
        assert_eq!(last, 4);
        assert_eq!(samples(pass_at_1(0, 40), 2, far), 2);
        assert_eq!(samples(0.0, 8, far), 8);
        assert_eq!(samples(0.5, 1, far), 1);
        // A pass rate of 1 in 4: two samples cost least.
        assert_eq!(samples(0.25, 4, far), 2);
        // With the iteration limit near, more: 2 × 2 samples at 1 in 4 would fail all with
        // a chance of 32%; 4 × 2, 10%.
        assert_eq!(samples(0.25, 4, 2), 4);
        assert_eq!(samples(0.25, 8, 2), 5);
        assert_eq!(samples(0.25, 4, 1), 4);
        // An easy domain is not pushed by the limit: 1 sample at 0.9 fails with 10%.
        assert_eq!(samples(0.9, 4, 1), 1);
        assert_eq!(samples(pass_at_1(0, 0), 4, 3), 1);
    }

    #[test]
    fn a_criterion_climbs_after_k_failures_and_falls_back_past_a_limit() {
        let mut l = Ladder::new(vec!["a".into(), "b".into(), "c".into()], 2, true);
        assert_eq!(l.setup_for("X", 0), 0);
        assert_eq!(l.failed("X", 0), Climb::Stays);
        assert_eq!(l.failed("X", 0), Climb::Moves("a".into(), "b".into(), 2));
        assert_eq!(l.setup_for("X", 0), 1);
        assert_eq!(l.setup_for("Y", 0), 0);
        // The last set-up is kept.
        l.failed("X", 1);
        l.failed("X", 1);
        assert_eq!(l.setup_for("X", 0), 2);
        for _ in 0..5 {
            assert_eq!(l.failed("X", 2), Climb::Stays);
        }
        // `a` out of usage until t=100: Y's work goes to `b`, back to `a` after.
        assert_eq!(l.limited(0, 100, 10), Some(1));
        assert_eq!(l.setup_for("Y", 50), 1);
        assert_eq!(l.setup_for("Y", 101), 0);
        // A failure on the fallback set-up does not move Y up.
        assert_eq!(l.failed("Y", 1), Climb::Stays);
        assert_eq!(l.failed("Y", 1), Climb::Stays);
        assert_eq!(l.setup_for("Y", 101), 0);
        // All limited: its own (the run waits).
        l.limited(1, 100, 10);
        l.limited(2, 100, 10);
        assert_eq!(l.setup_for("Y", 50), 0);
        // Through the state and back.
        let s = l.state();
        assert_eq!(s.criteria["X"].setup, "c");
        assert_eq!(s.criteria["Y"].failed_on["b"], 2);
        let mut again = Ladder::new(vec!["a".into(), "b".into(), "c".into()], 2, true);
        again.restore(&s);
        assert_eq!(again.state(), s);
        // Without --fallback a limit moves nothing.
        let mut no = Ladder::new(vec!["a".into(), "b".into()], 1, false);
        assert_eq!(no.limited(0, 100, 10), None);
        assert_eq!(no.setup_for("Y", 50), 0);
    }
}
