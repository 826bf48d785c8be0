//! Partitioning failing criteria into lanes: PAI's greedy rule, as a pure function.

/// A domain group: criteria of one domain, in document order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DomainGroup {
    pub domain: String,
    pub ids: Vec<String>,
}

/// One agent's share: whole domain groups.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Lane {
    pub groups: Vec<DomainGroup>,
}

impl Lane {
    pub fn len(&self) -> usize {
        self.groups.iter().map(|g| g.ids.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.groups
            .iter()
            .flat_map(|g| g.ids.iter().map(String::as_str))
    }
}

/// Groups `(id, domain)` pairs by domain in order of first appearance.
pub fn group_by_domain<'a>(
    items: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<DomainGroup> {
    let mut groups: Vec<DomainGroup> = Vec::new();
    for (id, domain) in items {
        match groups.iter_mut().find(|g| g.domain == domain) {
            Some(g) => g.ids.push(id.to_string()),
            None => groups.push(DomainGroup {
                domain: domain.to_string(),
                ids: vec![id.to_string()],
            }),
        }
    }
    groups
}

/// Groups by domain (first appearance), sorts groups by size (largest first, stable), gives
/// each whole group to the lane with the fewest criteria (ties: the lowest lane), and uses
/// min(agents, groups) lanes. `agents` below 1 counts as 1.
pub fn partition<'a>(
    items: impl IntoIterator<Item = (&'a str, &'a str)>,
    agents: usize,
) -> Vec<Lane> {
    partition_weighted(items, agents, |_| 1)
}

/// [`partition`] with a weight per criterion (its expected duration): groups are sorted by
/// their weight (heaviest first, stable) and each goes to the lane with the least weight so
/// far (ties: the lowest lane): the longest groups start first. With every weight 1 this is
/// [`partition`].
pub fn partition_weighted<'a>(
    items: impl IntoIterator<Item = (&'a str, &'a str)>,
    agents: usize,
    weight: impl Fn(&str) -> u64,
) -> Vec<Lane> {
    let mut groups: Vec<(u64, DomainGroup)> = group_by_domain(items)
        .into_iter()
        .map(|g| (g.ids.iter().map(|id| weight(id)).sum(), g))
        .collect();
    groups.sort_by_key(|(w, _)| std::cmp::Reverse(*w));
    let n = agents.max(1).min(groups.len());
    let mut lanes = vec![Lane::default(); n];
    let mut loads = vec![0u64; n];
    for (w, g) in groups {
        let (best, _) = loads
            .iter()
            .enumerate()
            .min_by_key(|&(i, s)| (*s, i))
            .expect("at least one lane");
        loads[best] += w;
        lanes[best].groups.push(g);
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(lanes: &[Lane]) -> Vec<Vec<&str>> {
        lanes.iter().map(|l| l.ids().collect()).collect()
    }

    #[test]
    fn greedy_balancing() {
        let items = [
            ("ISC-AUTH-1", "AUTH"),
            ("ISC-API-1", "API"),
            ("ISC-AUTH-2", "AUTH"),
            ("ISC-AUTH-3", "AUTH"),
            ("ISC-DB-1", "DB"),
            ("ISC-API-2", "API"),
            ("ISC-UX-1", "UX"),
        ];
        let lanes = partition(items, 2);
        assert_eq!(
            ids(&lanes),
            vec![
                vec!["ISC-AUTH-1", "ISC-AUTH-2", "ISC-AUTH-3", "ISC-UX-1"],
                vec!["ISC-API-1", "ISC-API-2", "ISC-DB-1"],
            ]
        );
        assert_eq!(partition(items, 16).len(), 4);
        assert_eq!(partition(items, 0).len(), 1);
        assert!(partition([], 4).is_empty());
    }

    #[test]
    fn heaviest_groups_first() {
        let items = [
            ("ISC-A-1", "A"),
            ("ISC-A-2", "A"),
            ("ISC-A-3", "A"),
            ("ISC-B-1", "B"),
            ("ISC-C-1", "C"),
        ];
        // B's one criterion takes longer than A's three together.
        let w = |id: &str| if id == "ISC-B-1" { 10 } else { 1 };
        let lanes = partition_weighted(items, 2, w);
        assert_eq!(
            ids(&lanes),
            vec![
                vec!["ISC-B-1"],
                vec!["ISC-A-1", "ISC-A-2", "ISC-A-3", "ISC-C-1"]
            ]
        );
    }

    fn arb_items() -> impl Strategy<Value = Vec<(String, String)>> {
        prop::collection::vec(0u8..12, 0..80).prop_map(|domains| {
            domains
                .into_iter()
                .enumerate()
                .map(|(i, d)| (format!("ISC-D{d}-{i}"), format!("D{d}")))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn partition_invariants(items in arb_items(), agents in 0usize..20) {
            let lanes = partition(items.iter().map(|(a, b)| (a.as_str(), b.as_str())), agents);
            // Every criterion in exactly one lane.
            let mut seen: Vec<&str> = lanes.iter().flat_map(|l| l.ids()).collect();
            seen.sort();
            let mut want: Vec<&str> = items.iter().map(|(a, _)| a.as_str()).collect();
            want.sort();
            prop_assert_eq!(seen, want);
            // No domain spans two lanes, no empty lane, lane count rule.
            let groups = group_by_domain(items.iter().map(|(a, b)| (a.as_str(), b.as_str())));
            prop_assert_eq!(lanes.len(), agents.max(1).min(groups.len()));
            for l in &lanes {
                prop_assert!(!l.is_empty());
            }
            for g in &groups {
                let holders = lanes.iter().filter(|l| l.groups.iter().any(|lg| lg.domain == g.domain)).count();
                prop_assert_eq!(holders, 1);
            }
            // Lane sizes match the greedy rule, computed independently.
            let mut sizes: Vec<usize> = groups.iter().map(|g| g.ids.len()).collect();
            sizes.sort_by(|a, b| b.cmp(a));
            let mut expect = vec![0usize; lanes.len()];
            for s in sizes {
                let i = (0..expect.len()).min_by_key(|&i| (expect[i], i)).unwrap();
                expect[i] += s;
            }
            let got: Vec<usize> = lanes.iter().map(Lane::len).collect();
            prop_assert_eq!(got, expect);
        }

        #[test]
        fn weighted_partition_keeps_groups_whole_and_balances_weight(
            items in arb_items(),
            agents in 1usize..20,
            seed in 0u64..1000,
        ) {
            let w = |id: &str| (id.len() as u64 * 7919 + seed) % 97 + 1;
            let lanes = partition_weighted(items.iter().map(|(a, b)| (a.as_str(), b.as_str())), agents, w);
            let groups = group_by_domain(items.iter().map(|(a, b)| (a.as_str(), b.as_str())));
            prop_assert_eq!(lanes.len(), agents.min(groups.len()));
            let mut seen: Vec<&str> = lanes.iter().flat_map(|l| l.ids()).collect();
            seen.sort();
            let mut want: Vec<&str> = items.iter().map(|(a, _)| a.as_str()).collect();
            want.sort();
            prop_assert_eq!(seen, want);
            // Greedy by weight (LPT): no lane exceeds the lightest lane by more than the
            // heaviest group.
            let gw = |g: &DomainGroup| g.ids.iter().map(|id| w(id)).sum::<u64>();
            let loads: Vec<u64> = lanes.iter().map(|l| l.groups.iter().map(gw).sum()).collect();
            if let (Some(max), Some(min)) = (loads.iter().max(), loads.iter().min()) {
                let heaviest = groups.iter().map(gw).max().unwrap_or(0);
                prop_assert!(max - min <= heaviest);
            }
            // Every weight 1: the plain partition.
            let plain = partition(items.iter().map(|(a, b)| (a.as_str(), b.as_str())), agents);
            let ones = partition_weighted(items.iter().map(|(a, b)| (a.as_str(), b.as_str())), agents, |_| 1);
            prop_assert_eq!(plain, ones);
        }
    }
}
