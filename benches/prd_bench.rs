//! PRD model benchmark: parse a generated PRD of 20,000 criteria across 200 domains, tick
//! 1,000 boxes, and write it back atomically. Prints the median of several runs.
//! Run with `cargo bench --bench prd_bench`.

use std::time::{Duration, Instant};

use prdloop::prd::{Prd, Value};

fn generate(criteria: usize, domains: usize) -> String {
    let mut s = String::from(
        "---\nprd: true\nid: PRD-20261130-bench\nstatus: IN_PROGRESS\niteration: 0\nmaxIterations: 128\nloopStatus: null\nfailing_criteria: []\nverification_summary: \"0/0\"\n---\n\n# Bench\n\n## CONTEXT\n\nGenerated.\n\n## IDEAL STATE CRITERIA (Verification Criteria)\n\n",
    );
    let per = criteria / domains;
    for d in 0..domains {
        s.push_str(&format!("### D{d}\n"));
        for i in 0..per {
            s.push_str(&format!(
                "- [ ] ISC-D{d}-{i}: criterion {i} of domain {d} holds | Verify: Test: `cargo test d{d}_{i}`\n"
            ));
        }
        s.push('\n');
    }
    s.push_str("## LOG\n");
    s
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let text = generate(20_000, 200);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("PRD.md");
    std::fs::write(&path, &text).expect("write");
    let ids: Vec<String> = (0..1000)
        .map(|i| format!("ISC-D{}-{}", i % 200, i / 200))
        .collect();
    let runs = 21;
    let (mut parse, mut tick, mut write, mut total) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let t0 = Instant::now();
        let src = std::fs::read_to_string(&path).expect("read");
        let mut prd = Prd::parse(src).expect("parse");
        let t1 = Instant::now();
        for id in &ids {
            prd.set_checked(id, true).expect("tick");
        }
        prd.set_front(&[("verification_summary", Value::Quoted("1000/20000".into()))])
            .expect("front");
        let t2 = Instant::now();
        prdloop::fsutil::write_atomic(&path, prd.text().as_bytes()).expect("write");
        let t3 = Instant::now();
        assert_eq!(prd.criteria.len(), 20_000);
        parse.push(t1 - t0);
        tick.push(t2 - t1);
        write.push(t3 - t2);
        total.push(t3 - t0);
        std::fs::write(&path, &text).expect("reset");
    }
    println!(
        "prd_bench: 20,000 criteria / 200 domains ({} KiB), {runs} runs, medians:",
        text.len() / 1024
    );
    println!("  read+parse          {:>10.2?}", median(parse));
    println!("  tick 1,000 + front  {:>10.2?}", median(tick));
    println!("  atomic write        {:>10.2?}", median(write));
    println!("  total               {:>10.2?}", median(total));
}
