//! Fan-out across machines: which criteria shard `i` of `N` works. A shard is a lane one
//! level up: the PRD's failing criteria (but `Verify: Custom` ones, which need a person) are
//! split into `N` shards of whole domain groups by the same greedy rule as lanes
//! ([`crate::plan::partition_weighted`], by known durations when there are any), so every job
//! of a CI matrix computes the same split from the same PRD. Pure: no files, no processes.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use crate::plan::{Lane, partition_weighted};
use crate::prd::Prd;

/// The most shards a PRD is split into (GitHub Actions allows 256 jobs per matrix).
pub const MAX_SHARDS: usize = 256;

/// `--shard i/N`: the `index`th (1-based) of `count` shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad =
            || format!("`{s}` is not a shard: give I/N with 1 <= I <= N <= {MAX_SHARDS}, e.g. 2/4");
        let (i, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count || count > MAX_SHARDS {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// The criteria the shards share out: the failing ones a worker can work, as (id, domain).
pub fn items(prd: &Prd) -> Vec<(&str, &str)> {
    prd.failing()
        .filter(|c| !c.is_custom())
        .map(|c| (c.id.as_str(), c.domain.as_str()))
        .collect()
}

/// The PRD's failing criteria in `count` shards (fewer when there are fewer domain groups;
/// missing shards are empty). `expected`: each criterion's expected duration in ms, from
/// earlier runs (empty: every criterion weighs the same).
pub fn split(prd: &Prd, count: usize, expected: &HashMap<String, u64>) -> Vec<Lane> {
    split_items(&items(prd), count, expected)
}

/// [`split`] of `(id, domain)` pairs.
pub fn split_items(
    items: &[(&str, &str)],
    count: usize,
    expected: &HashMap<String, u64>,
) -> Vec<Lane> {
    let weight = |id: &str| expected.get(id).copied().unwrap_or(1);
    partition_weighted(items.iter().copied(), count, weight)
}

/// The criteria of one shard, in the order its lanes will take them.
pub fn ids_of(shards: &[Lane], shard: Shard) -> Vec<String> {
    shards
        .get(shard.index - 1)
        .map(|l| l.ids().map(String::from).collect())
        .unwrap_or_default()
}

/// How many jobs a matrix for `count` shards needs: one per non-empty shard, and at least
/// one (GitHub refuses an empty matrix; a job with nothing to do ends at once).
pub fn jobs(shards: &[Lane], count: usize) -> usize {
    shards.len().clamp(1, count.max(1))
}

/// The GitHub Actions matrix: `{"include":[{"shard":"1/N"},…]}`. `N` is the number of jobs
/// (so no job is started for an empty shard), and each job's `--shard` recomputes the same
/// split with that `N`.
pub fn matrix(jobs: usize) -> serde_json::Value {
    let include: Vec<serde_json::Value> = (1..=jobs)
        .map(|i| serde_json::json!({ "shard": format!("{i}/{jobs}") }))
        .collect();
    serde_json::json!({ "include": include })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_shards() {
        assert_eq!("2/3".parse(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(" 1 / 1 ".parse(), Ok(Shard { index: 1, count: 1 }));
        for bad in ["0/3", "4/3", "1/0", "x/3", "3", "", "1/257", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(Shard { index: 2, count: 5 }.to_string(), "2/5");
    }

    #[test]
    fn shards_are_whole_domain_groups_balanced_like_lanes() {
        let items = [
            ("ISC-AUTH-1", "AUTH"),
            ("ISC-API-1", "API"),
            ("ISC-AUTH-2", "AUTH"),
            ("ISC-AUTH-3", "AUTH"),
            ("ISC-DB-1", "DB"),
            ("ISC-API-2", "API"),
            ("ISC-UX-1", "UX"),
        ];
        let none = HashMap::new();
        let shards = split_items(&items, 2, &none);
        // The same split as two lanes.
        assert_eq!(shards, crate::plan::partition(items, 2));
        let one = ids_of(&shards, Shard { index: 1, count: 2 });
        let two = ids_of(&shards, Shard { index: 2, count: 2 });
        assert_eq!(one, ["ISC-AUTH-1", "ISC-AUTH-2", "ISC-AUTH-3", "ISC-UX-1"]);
        assert_eq!(two, ["ISC-API-1", "ISC-API-2", "ISC-DB-1"]);
        // More shards than domains: the extra shards are empty, and the matrix has only as
        // many jobs as there are groups.
        let many = split_items(&items, 8, &none);
        assert_eq!(many.len(), 4);
        assert!(ids_of(&many, Shard { index: 6, count: 8 }).is_empty());
        assert_eq!(jobs(&many, 8), 4);
        assert_eq!(jobs(&[], 3), 1);
        assert_eq!(
            matrix(2),
            serde_json::json!({"include": [{"shard": "1/2"}, {"shard": "2/2"}]})
        );
    }

    #[test]
    fn known_durations_balance_the_shards() {
        let items = [
            ("ISC-A-1", "A"),
            ("ISC-A-2", "A"),
            ("ISC-A-3", "A"),
            ("ISC-B-1", "B"),
            ("ISC-C-1", "C"),
        ];
        // B's one criterion takes longer than A's three together: it gets a shard alone.
        let expected = HashMap::from([("ISC-B-1".to_string(), 10_000u64)]);
        let shards = split_items(&items, 2, &expected);
        assert_eq!(ids_of(&shards, Shard { index: 1, count: 2 }), ["ISC-B-1"]);
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
        fn every_criterion_in_exactly_one_shard_and_the_split_is_deterministic(
            items in arb_items(),
            count in 1usize..12,
        ) {
            let pairs: Vec<(&str, &str)> = items.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
            let none = HashMap::new();
            let shards = split_items(&pairs, count, &none);
            let mut seen: Vec<String> = (1..=count)
                .flat_map(|index| ids_of(&shards, Shard { index, count }))
                .collect();
            seen.sort();
            let mut want: Vec<String> = items.iter().map(|(a, _)| a.clone()).collect();
            want.sort();
            prop_assert_eq!(seen, want);
            // No domain in two shards.
            for (_, d) in &items {
                let holders = shards.iter().filter(|l| l.groups.iter().any(|g| &g.domain == d)).count();
                prop_assert_eq!(holders, 1);
            }
            // Every job computes the same split.
            prop_assert_eq!(split_items(&pairs, count, &none), shards);
        }
    }
}
