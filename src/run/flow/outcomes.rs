//! What comes back to the flow: a lane's worker ended, a criterion requeued, parked or
//! answered, the files an attempt touched, passes and regressions (`settle`, `reopen`), and
//! criteria added to the run.

use super::*;

impl Flow {
    /// A lane's worker ended (its outcome is read at the next [`Flow::settle`]).
    pub fn lane_ended(&mut self, lane: usize) {
        if let Some(i) = self.lanes.get_mut(lane).and_then(Option::take) {
            let it = self.items.at(i);
            if let Some(d) = self.domains.get_mut(&it.domain) {
                d.running = d.running.saturating_sub(1);
            }
            self.ended.push(it.id.clone());
        }
        self.plan_running(lane, None);
    }

    /// A criterion's attempt could not be made, or did not count and waits for a pause to
    /// end (an agent's transient failure): it is tried again in the same round.
    pub fn requeue(&mut self, lane: usize, id: &str) {
        if self
            .lanes
            .get(lane)
            .is_some_and(|l| l.is_some_and(|i| self.items.at(i).id == id))
        {
            self.lane_ended(lane);
        }
        if let Some(it) = self.items.get_mut(id) {
            it.requeued = true;
        }
        self.plan_again(Some(lane), id);
    }

    /// A criterion's worker asked a question: it is not started again until
    /// [`Flow::unpark`]. A running one parks when its attempt ends.
    pub fn park(&mut self, id: &str) {
        let key = self.key_of(id);
        let Some(it) = self.items.get_mut(id) else {
            return;
        };
        match it.state {
            State::Running { .. } => it.parks = true,
            State::Ready => {
                let (round, domain) = (it.round, it.domain.clone());
                it.state = State::Parked;
                self.count(round, false);
                if let (Some(d), Some(key)) = (self.domains.get_mut(&domain), key) {
                    d.ready.remove(&key);
                }
            }
            State::Blocked => it.state = State::Parked,
            _ => {}
        }
    }

    /// A parked criterion's question was answered: it is worked on again, in the round open
    /// now (or its own, if that is later).
    pub fn unpark(&mut self, id: &str) {
        let open = self.open_round();
        let Some(it) = self.items.get_mut(id) else {
            return;
        };
        it.parks = false;
        if it.state != State::Parked {
            return;
        }
        it.round = it.round.max(open.unwrap_or(it.round));
        if it.needs.is_empty() {
            self.make_ready(id);
            if self.planned_round().is_some_and(|r| self.starts_in(id, r)) {
                self.plan_again(None, id);
            }
        } else {
            it.state = State::Blocked;
        }
    }

    fn key_of(&self, id: &str) -> Option<ReadyKey> {
        self.items.contains_key(id).then(|| self.key(id))
    }

    /// A passing attempt of `id` took `ms`: what criteria of unknown duration are expected to
    /// take, in the run and in its domain.
    pub fn observed(&mut self, id: &str, ms: u64) {
        self.seen.0 += ms;
        self.seen.1 += 1;
        if let Some(d) = self
            .items
            .get(id)
            .and_then(|it| self.domains.get_mut(&it.domain))
        {
            d.seen.0 += ms;
            d.seen.1 += 1;
        }
    }

    /// How many passing attempts' durations were observed.
    #[cfg(test)]
    pub fn passes_observed(&self) -> u64 {
        self.seen.1
    }

    /// A criterion handed out that is no longer in the PRD (a tombstone now, removed): its
    /// lane is free and it is not worked on again.
    pub fn forget(&mut self, lane: usize, id: &str) {
        if self
            .lanes
            .get(lane)
            .is_some_and(|l| l.is_some_and(|i| self.items.at(i).id == id))
        {
            self.lanes[lane] = None;
            self.plan_running(lane, None);
        }
        let Some(it) = self.items.get_mut(id) else {
            return;
        };
        if let State::Running { .. } | State::Ready = it.state {
            let (round, domain, index) = (it.round, it.domain.clone(), it.index);
            let ready = it.state == State::Ready;
            it.state = State::Exhausted;
            self.count(round, false);
            if let Some(d) = self.domains.get_mut(&domain) {
                if ready {
                    d.ready.retain(|k| k.2 != index);
                } else {
                    d.running = d.running.saturating_sub(1);
                }
            }
        }
    }

    /// Files an attempt of `id` touched: part of its footprint from now on.
    pub fn touched(&mut self, id: &str, files: &[String]) {
        let Some(it) = self.items.get_mut(id) else {
            return;
        };
        let open = !matches!(it.state, State::Passed { .. });
        for f in files {
            if it.files.insert(f.clone()) && open {
                self.files.entry(f.clone()).or_default().add(it.weight);
            }
        }
    }

    /// Applies the outcomes of the criteria that ended: `passing` is the ledger's. A pass
    /// starts what only needed it; a requeued one is tried again in its round; any other end
    /// (a failure, or an agent's failure that is no attempt, as a barrier run's next
    /// iteration would) tries again in the next round while `-n` tries are left.
    pub fn settle(&mut self, passing: impl Fn(&str) -> bool) {
        for id in std::mem::take(&mut self.ended) {
            let Some(it) = self.items.get(&id) else {
                continue;
            };
            if !matches!(it.state, State::Running { .. }) {
                continue;
            }
            let round = it.round;
            self.count(round, false);
            if passing(&id) {
                self.pass(&id, round);
                continue;
            }
            let it = self.items.get_mut(&id).expect("an item");
            if std::mem::take(&mut it.parks) {
                // A question is no attempt: it waits for its answer.
                it.requeued = false;
                it.state = State::Parked;
                continue;
            }
            if std::mem::take(&mut it.requeued) {
                self.make_ready(&id);
                continue;
            }
            it.attempts += 1;
            it.round += 1;
            if it.attempts >= self.limit {
                self.exhaust(&id);
            } else {
                self.make_ready(&id);
            }
        }
    }

    /// `id` is out of attempts (`-n` made, or none left in the last round): what needs it
    /// waits.
    pub(super) fn exhaust(&mut self, id: &str) {
        let it = self.items.get_mut(id).expect("an item");
        it.state = State::Exhausted;
        let on = format!("{id} (failing after {} attempt(s))", it.attempts);
        for d in it.dependents.clone() {
            self.wait(&d, on.clone());
        }
    }

    fn pass(&mut self, id: &str, round: u64) {
        let it = self.items.get_mut(id).expect("an item");
        it.state = State::Passed { round };
        let (domain, weight) = (it.domain.clone(), it.weight);
        if let Some(d) = self.domains.get_mut(&domain) {
            d.load.remove(weight);
        }
        for f in &it.files {
            if let Some(l) = self.files.get_mut(f) {
                l.remove(weight);
            }
        }
        for dep in it.dependents.clone() {
            let Some(d) = self.items.get_mut(&dep) else {
                continue;
            };
            d.needs.remove(id);
            d.round = d.round.max(round + 1);
            if d.needs.is_empty() && d.state == State::Blocked {
                self.make_ready(&dep);
            }
        }
    }

    /// Passed criteria the ledger says fail again (a regression check unticked them): they
    /// are worked on again, in the round after `round`, while attempts are left.
    pub fn reopen(&mut self, passing: impl Fn(&str) -> bool, round: u64) {
        let reopened: Vec<String> = self
            .items
            .iter()
            .filter(|it| matches!(it.state, State::Passed { .. }) && !passing(&it.id))
            .map(|it| it.id.clone())
            .collect();
        for id in reopened {
            let it = self.items.get_mut(&id).expect("an item");
            it.round = it.round.max(round + 1);
            let (domain, weight, files) = (it.domain.clone(), it.weight, it.files.clone());
            if it.attempts >= self.limit {
                it.state = State::Exhausted;
                continue;
            }
            self.add_load(&domain, &files, weight);
            self.make_ready(&id);
        }
    }

    /// Adds a criterion that passed before and fails now (a regression), when it is new.
    pub fn admit(&mut self, w: Work, round: u64) {
        if self.items.contains_key(&w.id) {
            return;
        }
        let index = self.items.len();
        self.add_load(&w.domain, &w.files, w.weight);
        let id = w.id.clone();
        self.items.push(Item::new(w, index, round + 1));
        self.make_ready(&id);
    }
}
