//! The barrier's lane plan (`--rounds barrier`, see `barrier.rs`): one round's criteria as
//! PAI partitions them over the lanes (`plan::partition_weighted`). Each lane works through
//! its domain groups one criterion at a time (heaviest groups first: the partition orders
//! them by expected duration); a lane out of work takes a whole unstarted group, the
//! heaviest, from the lane with the most work left, so no lane idles while work waits and no
//! domain runs in two lanes at once. Pure: no processes, no clocks. Every step is O(lanes), whatever the PRD's size.

use std::collections::{HashMap, VecDeque};

use crate::plan::{DomainGroup, Lane};

/// What one lane is working on.
#[derive(Debug, Default)]
struct LaneState {
    /// Groups not started yet, in order, with their weights.
    queue: VecDeque<(DomainGroup, u64)>,
    /// The group being worked through: its domain and the ids left.
    current: Option<(String, VecDeque<String>)>,
    /// The criterion its worker runs now.
    running: Option<String>,
    /// Weight of the criteria not started yet (queue and current group).
    left: u64,
}

/// The lanes of one iteration.
#[derive(Debug, Default)]
pub struct LanePlan {
    lanes: Vec<LaneState>,
    /// Each criterion's weight (expected duration; 1 when unknown).
    weights: HashMap<String, u64>,
    /// Criteria not started yet, over all lanes.
    waiting: usize,
}

impl LanePlan {
    /// Lanes whose criteria all weigh the same.
    #[cfg(test)]
    pub fn new(lanes: &[Lane]) -> LanePlan {
        LanePlan::weighted(lanes, |_| 1)
    }

    /// Lanes with each criterion's expected duration (any unit), for choosing what to steal.
    pub fn weighted(lanes: &[Lane], weight: impl Fn(&str) -> u64) -> LanePlan {
        let mut s = LanePlan::default();
        for l in lanes {
            let mut st = LaneState::default();
            for g in &l.groups {
                let mut w = 0;
                for id in &g.ids {
                    let x = weight(id).max(1);
                    s.weights.insert(id.clone(), x);
                    w += x;
                }
                s.waiting += g.ids.len();
                st.left += w;
                st.queue.push_back((g.clone(), w));
            }
            s.lanes.push(st);
        }
        s
    }

    fn weight(&self, id: &str) -> u64 {
        self.weights.get(id).copied().unwrap_or(1)
    }

    /// Lanes whose worker is not running, in lane order.
    pub fn idle_lanes(&self) -> Vec<usize> {
        (0..self.lanes.len())
            .filter(|&i| self.lanes[i].running.is_none())
            .collect()
    }

    /// Lanes with a worker (or a best-of-N group) running.
    pub fn busy_lanes(&self) -> usize {
        self.lanes.iter().filter(|l| l.running.is_some()).count()
    }

    pub fn any_running(&self) -> bool {
        self.lanes.iter().any(|l| l.running.is_some())
    }

    /// Whether criteria wait to be started.
    pub fn work_waits(&self) -> bool {
        self.waiting > 0
    }

    pub fn set_running(&mut self, lane: usize, id: Option<String>) {
        if let Some(l) = self.lanes.get_mut(lane) {
            l.running = id;
        }
    }

    /// The next criterion for a lane: the rest of its current group, then its next group, then
    /// the heaviest unstarted group of the lane with the most work left.
    pub fn next_for_lane(&mut self, lane: usize) -> Option<String> {
        self.lanes.get(lane)?;
        loop {
            if let Some((_, ids)) = self.lanes[lane].current.as_mut() {
                if let Some(id) = ids.pop_front() {
                    let w = self.weight(&id);
                    self.lanes[lane].left -= w;
                    self.waiting -= 1;
                    return Some(id);
                }
                self.lanes[lane].current = None;
            }
            if let Some((g, _)) = self.lanes[lane].queue.pop_front() {
                self.lanes[lane].current = Some((g.domain, g.ids.into()));
                continue;
            }
            let lanes = &mut self.lanes;
            let donor = (0..lanes.len())
                .filter(|&i| i != lane && !lanes[i].queue.is_empty())
                .max_by_key(|&i| (lanes[i].left, std::cmp::Reverse(i)))?;
            let q = &mut lanes[donor].queue;
            let (at, _) = q.iter().enumerate().max_by_key(|(i, (_, w))| (*w, *i))?;
            let (g, w) = q.remove(at)?;
            lanes[donor].left -= w;
            lanes[lane].left += w;
            tracing::debug!(
                "lane {} takes domain {} from lane {}",
                lane + 1,
                g.domain,
                donor + 1
            );
            lanes[lane].current = Some((g.domain, g.ids.into()));
        }
    }

    /// Puts a criterion back at the front of its lane (its attempt could not be made).
    /// The lane with the least work left, idle ones first: where work that comes back (an
    /// answered question) goes.
    pub fn least_busy_lane(&self) -> usize {
        (0..self.lanes.len())
            .min_by_key(|&i| (self.lanes[i].running.is_some(), self.lanes[i].left))
            .unwrap_or(0)
    }

    pub fn requeue(&mut self, lane: usize, id: &str, domain: &str) {
        let w = self.weight(id);
        let Some(l) = self.lanes.get_mut(lane) else {
            return;
        };
        l.left += w;
        self.waiting += 1;
        match l.current.as_mut() {
            Some((_, ids)) => ids.push_front(id.to_string()),
            None => l.current = Some((domain.to_string(), VecDeque::from([id.to_string()]))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(groups: &[(&str, usize)]) -> Lane {
        Lane {
            groups: groups
                .iter()
                .map(|(d, n)| DomainGroup {
                    domain: d.to_string(),
                    ids: (0..*n).map(|i| format!("ISC-{d}-{i}")).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn idle_lane_steals_a_whole_unstarted_group() {
        let mut s = LanePlan::new(&[lane(&[("A", 3), ("B", 1), ("C", 1)]), lane(&[("D", 1)])]);
        assert_eq!(s.next_for_lane(0).as_deref(), Some("ISC-A-0"));
        assert_eq!(s.next_for_lane(1).as_deref(), Some("ISC-D-0"));
        // Lane 2 is out of work: it takes C (lane 1's last unstarted group), never part of A.
        assert_eq!(s.next_for_lane(1).as_deref(), Some("ISC-C-0"));
        assert_eq!(s.next_for_lane(1).as_deref(), Some("ISC-B-0"));
        assert_eq!(s.next_for_lane(1), None);
        assert_eq!(s.next_for_lane(0).as_deref(), Some("ISC-A-1"));
        assert_eq!(s.next_for_lane(0).as_deref(), Some("ISC-A-2"));
        assert_eq!(s.next_for_lane(0), None);
        assert!(!s.work_waits());
    }

    #[test]
    fn a_requeued_criterion_comes_next_in_its_lane() {
        let mut s = LanePlan::new(&[lane(&[("A", 2)])]);
        let first = s.next_for_lane(0).unwrap();
        s.requeue(0, &first, "A");
        assert_eq!(s.next_for_lane(0), Some(first));
        assert_eq!(s.next_for_lane(0).as_deref(), Some("ISC-A-1"));
        s.requeue(0, "ISC-A-1", "A");
        assert!(s.work_waits());
    }

    #[test]
    fn idle_lane_steals_the_heaviest_group() {
        let lanes = [lane(&[("A", 1), ("B", 1), ("C", 1)]), lane(&[("D", 1)])];
        let mut s = LanePlan::weighted(&lanes, |id| if id == "ISC-B-0" { 50 } else { 5 });
        assert_eq!(s.next_for_lane(0).as_deref(), Some("ISC-A-0"));
        assert_eq!(s.next_for_lane(1).as_deref(), Some("ISC-D-0"));
        assert_eq!(s.next_for_lane(1).as_deref(), Some("ISC-B-0"));
        assert_eq!(s.next_for_lane(0).as_deref(), Some("ISC-C-0"));
        assert!(!s.work_waits());
    }
}
