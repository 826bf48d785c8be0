//! Runner benchmarks with the synthetic (fake) agent. Linux: reads /proc for CPU and memory.
//! Run with `cargo bench --bench run_bench`; `RUN_BENCH_REPS` sets the repetitions (default 5).
//!
//! (a) overhead: 1,000 instant criteria at -a 16: runner CPU time and wall time per worker;
//! (b) scheduling: 64 criteria in 16 domains of uneven size with known sleeps at -a 8:
//!     makespan / max(total sleep / 8, the largest domain's total sleep); target <= 1.15;
//! (c) peak memory (VmHWM) of the runner with 16 workers each printing 100 MiB; target < 64 MiB.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PRDLOOP: &str = env!("CARGO_BIN_EXE_prdloop");
const FAKE: &str = env!("CARGO_BIN_EXE_prdloop-fake-agent");

fn prd(criteria: &[(String, String)]) -> String {
    let mut s =
        String::from("---\nid: PRD-bench\nmaxIterations: 5\n---\n\n# Bench\n\n## CRITERIA\n\n");
    for (id, desc) in criteria {
        s.push_str(&format!("- [ ] {id}: {desc}\n"));
    }
    s
}

struct Measured {
    wall: Duration,
    cpu: Duration,
    peak_rss_kib: u64,
    attempts: Vec<serde_json::Value>,
}

fn proc_sample(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((ticks, hwm))
}

fn run(dir: &Path, text: &str, plan: serde_json::Value, agents: usize) -> Measured {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("PRD.md"), text).unwrap();
    std::fs::write(dir.join("plan.json"), plan.to_string()).unwrap();
    let t = Instant::now();
    let mut child = Command::new(PRDLOOP)
        .args(["run", "PRD.md", "-a", &agents.to_string(), "-n", "1"])
        .arg("--state-dir")
        .arg(dir.join("state"))
        .current_dir(dir)
        .env("PRDLOOP_CLAUDE_BIN", FAKE)
        .env("FAKE_AGENT_PLAN", dir.join("plan.json"))
        .env("NO_COLOR", "1")
        .env("PAI_DIR", dir.join("pai"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (mut ticks, mut hwm) = (0, 0);
    loop {
        if let Some((t, h)) = proc_sample(pid) {
            ticks = t;
            hwm = h;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let wall = t.elapsed();
    let hz = 100; // USER_HZ on Linux
    let state_dir = dir.join("state");
    let file = std::fs::read_dir(&state_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let attempts = std::fs::read_to_string(state["attemptsLog"].as_str().unwrap())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Measured {
        attempts,
        wall,
        cpu: Duration::from_millis(ticks * 1000 / hz),
        peak_rss_kib: hwm,
    }
}

fn median<T: PartialOrd + Copy>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let reps: usize = std::env::var("RUN_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let root = tempfile::tempdir().unwrap();
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let want = |k: &str| only.as_deref().is_none_or(|o| o == k);

    if want("overhead") {
        let crits: Vec<(String, String)> = (0..1000)
            .map(|i| (format!("ISC-D{}-{}", i % 100, i / 100), "instant".into()))
            .collect();
        let text = prd(&crits);
        let (mut cpu, mut wall) = (vec![], vec![]);
        for _ in 0..reps {
            let m = run(
                &root.path().join("a"),
                &text,
                serde_json::json!({"*": ["pass"]}),
                16,
            );
            assert_eq!(m.attempts.len(), 1000);
            cpu.push(m.cpu.as_secs_f64() * 1000.0 / 1000.0);
            wall.push(m.wall.as_secs_f64() * 1000.0 / 1000.0);
        }
        println!(
            "(a) overhead, 1,000 instant criteria at -a 16, {reps} runs: runner CPU {:.2} ms/worker, wall {:.2} ms/worker (medians)",
            median(cpu),
            median(wall)
        );
    }

    if want("scheduling") {
        // 16 domains of uneven size (64 criteria), sleeps of 100..=400 ms.
        let sizes = [10, 8, 7, 6, 5, 5, 4, 4, 3, 3, 2, 2, 2, 1, 1, 1];
        let mut crits = Vec::new();
        let mut plan = serde_json::Map::new();
        let mut domain_total = vec![0u64; sizes.len()];
        for (d, &n) in sizes.iter().enumerate() {
            for i in 0..n {
                let ms = 100 + ((d * 7 + i * 13) % 4) as u64 * 100;
                let id = format!("ISC-D{d}-{i}");
                plan.insert(id.clone(), serde_json::json!([format!("sleep:{ms}")]));
                domain_total[d] += ms;
                crits.push((id, format!("sleeps {ms} ms")));
            }
        }
        assert_eq!(crits.len(), 64);
        let total: u64 = domain_total.iter().sum();
        let bound = (total as f64 / 8.0).max(*domain_total.iter().max().unwrap() as f64);
        let text = prd(&crits);
        let mut ratios = vec![];
        for _ in 0..reps {
            let m = run(
                &root.path().join("b"),
                &text,
                serde_json::Value::Object(plan.clone()),
                8,
            );
            let att = &m.attempts;
            let start = att
                .iter()
                .map(|a| a["startedAt"].as_u64().unwrap())
                .min()
                .unwrap();
            let end = att
                .iter()
                .map(|a| a["finishedAt"].as_u64().unwrap())
                .max()
                .unwrap();
            ratios.push((end - start) as f64 / bound);
        }
        println!(
            "(b) scheduling, 64 criteria / 16 uneven domains at -a 8, {reps} runs: makespan / lower bound ({bound:.0} ms) = {:.3} (median; target <= 1.15)",
            median(ratios)
        );
    }

    if want("memory") {
        let crits: Vec<(String, String)> = (0..16)
            .map(|i| (format!("ISC-F{i}-1"), "floods".into()))
            .collect();
        let text = prd(&crits);
        let mut peaks = vec![];
        for _ in 0..reps.min(3) {
            let m = run(
                &root.path().join("c"),
                &text,
                serde_json::json!({"*": ["flood:100"]}),
                16,
            );
            assert_eq!(m.attempts.len(), 16);
            peaks.push(m.peak_rss_kib);
        }
        println!(
            "(c) memory, 16 workers x 100 MiB of output: runner peak RSS {:.1} MiB (median; target < 64 MiB)",
            median(peaks) as f64 / 1024.0
        );
    }
}
