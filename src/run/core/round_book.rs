//! The one owner of the run's rounds (PAI's iterations), whichever policy hands out their
//! attempts: the round open now, the rounds ahead of it that attempts ran in already (the
//! flow), which round each lane's attempt counts in, how many rounds ended and how many of
//! those in a row gained nothing (`--stall`).

use std::collections::{BTreeMap, HashMap};

use super::Now;

/// One round's accounts: what its attempts cost, gained and took.
#[derive(Debug)]
pub(super) struct Iteration {
    pub number: u64,
    pub started_ms: u64,
    pub started: tokio::time::Instant,
    pub gained: usize,
    pub attempts: u32,
    pub cost: f64,
    pub usage: crate::backend::Usage,
}

impl Iteration {
    /// Iteration `number`, starting `now` with nothing spent or gained yet.
    pub(super) fn new(number: u64, now: Now) -> Iteration {
        Iteration {
            number,
            started_ms: now.ms,
            started: now.at,
            gained: 0,
            attempts: 0,
            cost: 0.0,
            usage: Default::default(),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct RoundBook {
    /// The round open now (without the barrier: the lowest round not closed).
    open: Option<Iteration>,
    /// Rounds above the open one that attempts ran in already (without the barrier).
    ahead: BTreeMap<u64, Iteration>,
    /// The iteration before the run's first round (the flow counts rounds from 1), once the
    /// rounds have begun.
    base: Option<u64>,
    /// The round of each lane's current attempt, and of the one whose end is being applied
    /// (what it cost and gained counts there).
    lane_round: HashMap<usize, u64>,
    applying: Option<u64>,
    /// Rounds ended in this run.
    ended: u64,
    /// Rounds in a row, up to the last one ended, that gained nothing.
    stall: u64,
    /// Criteria unticked by the open round's regression checks.
    regressed: usize,
}

impl RoundBook {
    /// The open round's number.
    pub(super) fn open_number(&self) -> Option<u64> {
        self.open.as_ref().map(|i| i.number)
    }

    pub(super) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Opens round `number`: its accounts are the ones its attempts that started already
    /// added up (rounds ahead of it that never opened fold into it).
    pub(super) fn open(&mut self, number: u64, now: Now) -> &Iteration {
        let it = self
            .ahead
            .remove(&number)
            .unwrap_or(Iteration::new(number, now));
        self.ahead.retain(|n, folded| {
            if *n < number {
                tracing::debug!("round {n} folded into {number}: {folded:?}");
            }
            *n > number
        });
        self.regressed = 0;
        self.open.insert(it)
    }

    /// Closes the open round: its accounts.
    pub(super) fn close(&mut self) -> Option<Iteration> {
        self.open.take()
    }

    /// A closed round ended with `gained` new passes: how many rounds in a row gained nothing.
    pub(super) fn ended(&mut self, gained: usize) -> u64 {
        self.ended += 1;
        self.stall = if gained == 0 { self.stall + 1 } else { 0 };
        self.stall
    }

    /// Rounds ended in this run.
    pub(super) fn count(&self) -> u64 {
        self.ended
    }

    pub(super) fn stall(&self) -> u64 {
        self.stall
    }

    pub(super) fn base(&self) -> u64 {
        self.base.unwrap_or_default()
    }

    /// The rounds begin after iteration `base`.
    pub(super) fn begin(&mut self, base: u64) {
        self.base = Some(base);
    }

    /// Whether the rounds have begun (the flow hands out the whole run's attempts: once they
    /// settle, what is left is out of attempts).
    pub(super) fn begun(&self) -> bool {
        self.base.is_some()
    }

    /// The lowest round ahead of the open one that attempts ran in.
    pub(super) fn first_ahead(&self) -> Option<u64> {
        self.ahead.keys().next().copied()
    }

    /// An attempt on `lane` starts in round `number`: a round not open yet gets its accounts.
    pub(super) fn attempt_started(&mut self, lane: usize, number: u64, now: Now) {
        self.lane_round.insert(lane, number);
        if self.open.as_ref().is_some_and(|i| i.number < number) {
            self.ahead
                .entry(number)
                .or_insert_with(|| Iteration::new(number, now));
        }
    }

    /// The round of `lane`'s current (or last) attempt.
    pub(super) fn lane_round(&self, lane: usize) -> Option<u64> {
        self.lane_round.get(&lane).copied()
    }

    /// The event being applied is about an attempt of round `round` (`None`: about none).
    pub(super) fn applying(&mut self, round: Option<u64>) {
        self.applying = round;
    }

    /// The accounts of the round the event being applied counts in: its attempt's round
    /// (the open one, or one ahead of it), else the open one.
    pub(super) fn applying_mut(&mut self) -> Option<&mut Iteration> {
        match self.applying {
            Some(n)
                if self.open.as_ref().is_some_and(|i| i.number != n)
                    && self.ahead.contains_key(&n) =>
            {
                self.ahead.get_mut(&n)
            }
            _ => self.open.as_mut(),
        }
    }

    /// A criterion passing before the open round's checks fails again: its gain is taken back.
    pub(super) fn regressed(&mut self) {
        if let Some(it) = self.open.as_mut() {
            it.gained = it.gained.saturating_sub(1);
        }
        self.regressed += 1;
    }

    /// Criteria unticked by the open round's regression checks.
    pub(super) fn regressions(&self) -> usize {
        self.regressed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_ahead_counts_in_its_round_which_opens_with_it_and_folds_closed_ones() {
        let now = Now::current();
        let mut b = RoundBook::default();
        b.open(1, now);
        b.attempt_started(0, 2, now);
        b.attempt_started(1, 3, now);
        b.applying(Some(3));
        b.applying_mut().unwrap().gained += 1;
        b.applying(Some(1));
        b.applying_mut().unwrap().attempts += 1;
        assert_eq!(b.close().map(|i| (i.number, i.attempts)), Some((1, 1)));
        assert_eq!(b.first_ahead(), Some(2));
        // Round 3 opens (round 2's attempts ended before it opened: folded).
        assert_eq!(b.open(3, now).gained, 1);
        assert_eq!(b.first_ahead(), None);
        assert_eq!(b.ended(0), 1);
        assert_eq!(b.ended(0), 2);
        assert_eq!(b.ended(1), 0);
        assert_eq!(b.count(), 3);
    }
}
