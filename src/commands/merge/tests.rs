use super::*;
use crate::bundle::{Manifest, PrdId};
use crate::shard::Shard;

fn bundle(index: usize, iterations: &[(usize, f64, u32)]) -> Bundle {
    Bundle::of_manifest(
        PathBuf::from(format!("b{index}")),
        Manifest {
            version: 1,
            prdloop: "0".into(),
            shard: Shard { index, count: 2 },
            base: "c".into(),
            prd: PrdId {
                path: "PRD.md".into(),
                id: None,
                hash: "h".into(),
            },
            criteria: vec![],
            outcomes: vec![],
            exit_code: 0,
            summary: None,
            stop_reason: None,
            iterations: iterations
                .iter()
                .enumerate()
                .map(|(i, (passing, cost, attempts))| LoopEntry {
                    iteration: i as u64 + 1,
                    started_at: 100 + i as u64,
                    completed_at: 200 + i as u64 + index as u64,
                    criteria_passing: *passing,
                    criteria_total: 10,
                    cost_usd: *cost,
                    attempts: *attempts,
                    ..LoopEntry::default()
                })
                .collect(),
            cost_usd: 0.0,
            usage: Default::default(),
            files: vec![],
            started_at: 0,
            completed_at: 0,
            session: None,
        },
    )
}

#[test]
fn the_shards_iterations_are_summed_side_by_side() {
    // 2 passing before; shard 1 gains 3 then 1, shard 2 gains 4 in one iteration.
    let h = merged_history(
        &[
            bundle(1, &[(5, 1.0, 4), (6, 0.5, 1)]),
            bundle(2, &[(6, 2.0, 5)]),
        ],
        2,
        10,
    );
    assert_eq!(h.len(), 2);
    assert_eq!((h[0].criteria_passing, h[0].attempts), (9, 9));
    assert!((h[0].cost_usd - 3.0).abs() < 1e-9);
    assert_eq!(h[0].completed_at, 202);
    // Shard 2 was done: it still counts what it gained, not what it spent.
    assert_eq!((h[1].criteria_passing, h[1].attempts), (10, 1));
    assert!((h[1].cost_usd - 0.5).abs() < 1e-9);
}

#[test]
fn missing_shards_are_named() {
    assert_eq!(missing_shards(&[bundle(2, &[])]).as_deref(), Some("1/2"));
    assert_eq!(missing_shards(&[bundle(1, &[]), bundle(2, &[])]), None);
}
