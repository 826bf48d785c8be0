//! PAI's barrier (`--rounds barrier`) as a policy of the flow: zero rounds ahead, so a round
//! closes with its last attempt; when a round opens, its criteria are partitioned over the
//! lanes by PAI's rule ([`Flow::plan`], a [`LanePlan`]), and each lane works through its
//! domain groups, taking a whole unstarted group from the busiest lane when it runs out; no
//! round past the `-n`-th starts (a chain's later link gets the iterations that are left, as
//! in PAI's loop).

use super::plan::LanePlan;
use super::*;

/// The barrier's side of the flow: the open round's lane plan and the last round.
#[derive(Debug)]
pub(super) struct Barrier {
    /// The open round's criteria as partitioned over the lanes when it opened.
    plan: LanePlan,
    /// The round it plans: no other starts.
    round: u64,
    /// The last round that starts (`-n`).
    last_round: u64,
}

impl Flow {
    /// Hands out attempts as PAI's iterations do (see the module's documentation).
    pub fn barrier(&mut self) {
        self.max_ahead = 0;
        self.barrier = Some(Barrier {
            plan: LanePlan::default(),
            round: 0,
            last_round: u64::from(self.limit),
        });
    }

    /// Whether each round is partitioned over the lanes when it opens (the barrier).
    pub fn plans_rounds(&self) -> bool {
        self.barrier.is_some()
    }

    /// The last round that starts, when there is one (the barrier's `-n`).
    pub fn last_round(&self) -> Option<u64> {
        self.barrier.as_ref().map(|b| b.last_round)
    }

    /// The round the barrier's plan is for.
    pub(super) fn planned_round(&self) -> Option<u64> {
        self.barrier.as_ref().map(|b| b.round)
    }

    /// Whether `id` is ready to start in `round` (what a round's plan partitions).
    pub fn starts_in(&self, id: &str, round: u64) -> bool {
        self.items
            .get(id)
            .is_some_and(|it| it.state == State::Ready && it.round == round)
    }

    /// Round `round` opens with its lane plan (the barrier).
    pub fn plan(&mut self, round: u64, plan: LanePlan) {
        if let Some(b) = self.barrier.as_mut() {
            b.plan = plan;
            b.round = round;
        }
    }

    /// The barrier's next criterion for `lane`: its plan's next one that is still ready in
    /// the open round; when no lane's plan holds any more, one that is ready in the open round
    /// all the same (none should be: what comes back is planned again), so that the round
    /// always closes.
    pub(super) fn next_planned(&mut self, lane: usize) -> Option<String> {
        let open = self.barrier.as_ref()?.round;
        loop {
            let b = self.barrier.as_mut()?;
            let Some(id) = b.plan.next_for_lane(lane) else {
                break;
            };
            if self.starts_in(&id, open) {
                return Some(self.start(lane, &id));
            }
        }
        if self.barrier.as_ref()?.plan.work_waits() {
            return None;
        }
        let id = self
            .domains
            .values()
            .filter(|d| d.running == 0)
            .filter_map(|d| d.ready.iter().find(|k| self.items.at(k.2).round == open))
            .min_by_key(|k| k.2)
            .map(|k| self.items.at(k.2).id.clone())?;
        Some(self.start(lane, &id))
    }

    /// The barrier's plan: `lane`'s worker started (`Some`) or ended.
    pub(super) fn plan_running(&mut self, lane: usize, id: Option<String>) {
        if let Some(b) = self.barrier.as_mut() {
            b.plan.set_running(lane, id);
        }
    }

    /// The barrier's plan: `id` comes back to `lane`'s front (its attempt could not be
    /// made), or, answered, to the least busy lane's.
    pub(super) fn plan_again(&mut self, lane: Option<usize>, id: &str) {
        let Some(domain) = self.items.get(id).map(|it| it.domain.clone()) else {
            return;
        };
        if let Some(b) = self.barrier.as_mut() {
            let lane = lane.unwrap_or_else(|| b.plan.least_busy_lane());
            b.plan.requeue(lane, id, &domain);
        }
    }

    /// Whether a criterion's next attempt in `round` is past the last round that starts.
    pub(super) fn past_last_round(&self, round: u64) -> bool {
        self.last_round().is_some_and(|last| round > last)
    }
}
