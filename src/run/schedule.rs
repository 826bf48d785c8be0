//! What to launch next in an iteration: each lane works through its domain groups one
//! criterion at a time; a lane out of work takes a whole unstarted group from the lane with the
//! most work left, so no lane idles while work waits and no domain runs in two lanes at once.
//! Pure: no processes, no clocks.

use std::collections::VecDeque;

use crate::plan::{Group, Lane};

/// What one lane is working on.
#[derive(Debug, Default)]
struct LaneState {
    /// Groups not started yet, in order.
    queue: VecDeque<Group>,
    /// The group being worked through: its domain and the ids left.
    current: Option<(String, VecDeque<String>)>,
    /// The criterion its worker runs now.
    running: Option<String>,
}

impl LaneState {
    fn work_left(&self) -> usize {
        self.queue.iter().map(|g| g.ids.len()).sum::<usize>()
            + self.current.as_ref().map_or(0, |(_, ids)| ids.len())
    }
}

/// The lanes of one iteration.
#[derive(Debug, Default)]
pub struct Schedule {
    lanes: Vec<LaneState>,
}

impl Schedule {
    pub fn new(lanes: &[Lane]) -> Schedule {
        Schedule {
            lanes: lanes
                .iter()
                .map(|l| LaneState {
                    queue: l.groups.iter().cloned().collect(),
                    ..LaneState::default()
                })
                .collect(),
        }
    }

    /// Lanes whose worker is not running, in lane order.
    pub fn idle_lanes(&self) -> Vec<usize> {
        (0..self.lanes.len())
            .filter(|&i| self.lanes[i].running.is_none())
            .collect()
    }

    pub fn any_running(&self) -> bool {
        self.lanes.iter().any(|l| l.running.is_some())
    }

    /// Whether criteria wait to be started.
    pub fn work_waits(&self) -> bool {
        self.lanes.iter().any(|l| l.work_left() > 0)
    }

    pub fn set_running(&mut self, lane: usize, id: Option<String>) {
        if let Some(l) = self.lanes.get_mut(lane) {
            l.running = id;
        }
    }

    /// The next criterion for a lane: the rest of its current group, then its next group, then
    /// a whole unstarted group taken from the lane with the most work left.
    pub fn next_for_lane(&mut self, lane: usize) -> Option<String> {
        let lanes = &mut self.lanes;
        loop {
            if let Some((_, ids)) = lanes[lane].current.as_mut() {
                if let Some(id) = ids.pop_front() {
                    return Some(id);
                }
                lanes[lane].current = None;
            }
            if let Some(g) = lanes[lane].queue.pop_front() {
                lanes[lane].current = Some((g.domain, g.ids.into()));
                continue;
            }
            let donor = (0..lanes.len())
                .filter(|&i| i != lane && !lanes[i].queue.is_empty())
                .max_by_key(|&i| (lanes[i].work_left(), std::cmp::Reverse(i)))?;
            let g = lanes[donor].queue.pop_back()?;
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
    pub fn requeue(&mut self, lane: usize, id: &str, domain: &str) {
        let Some(l) = self.lanes.get_mut(lane) else {
            return;
        };
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
                .map(|(d, n)| Group {
                    domain: d.to_string(),
                    ids: (0..*n).map(|i| format!("ISC-{d}-{i}")).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn idle_lane_steals_a_whole_unstarted_group() {
        let mut s = Schedule::new(&[lane(&[("A", 3), ("B", 1), ("C", 1)]), lane(&[("D", 1)])]);
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
        let mut s = Schedule::new(&[lane(&[("A", 2)])]);
        let first = s.next_for_lane(0).unwrap();
        s.requeue(0, &first, "A");
        assert_eq!(s.next_for_lane(0), Some(first));
        assert_eq!(s.next_for_lane(0).as_deref(), Some("ISC-A-1"));
        s.requeue(0, "ISC-A-1", "A");
        assert!(s.work_waits());
    }
}
