//! Runner benchmarks with the synthetic (fake) agent. Linux: reads /proc for CPU and memory.
//! Run with `cargo bench --bench run_bench`; `RUN_BENCH_REPS` sets the repetitions (default 5).
//!
//! `RUN_BENCH_PRDLOOP` runs another prdloop binary (to compare with an earlier build);
//! `RUN_BENCH_BASE` (overhead) runs a second one too, interleaved with the first, for numbers
//! side by side under the same load.
//!
//! (a) overhead: 1,000 instant criteria at -a 16, sandbox off: runner CPU time and wall time per
//!     worker;
//! (a2) overhead10k: the same with 10,000 criteria (per-worker CPU should not grow with size);
//! (b) scheduling: 64 criteria in 16 domains of uneven size with known sleeps at -a 8:
//!     makespan / max(total sleep / 8, the largest domain's total sleep); target <= 1.15;
//! (c) peak memory (VmHWM) of the runner with 16 workers each printing 100 MiB; target < 64 MiB;
//! (d) interrupt: a 70,000-criterion PRD, 16 hanging workers, `--kill-grace 500ms`: time from
//!     SIGINT to the runner's exit; target <= 1 s + the grace;
//! (e) retries: 48 criteria in 14 uneven domains, agents of 150 ms to 1.5 s, a quarter failing
//!     1 to 3 times (at once) before passing, -a 6, up to 4 iterations: each iteration's
//!     makespan / its lower bound max(sum of its attempts' durations / 6, its largest domain's
//!     sum, its longest attempt). With `--rounds barrier` (PAI's iterations) against that
//!     barrier bound, and without the barrier (the default) the whole run's makespan against
//!     the free bound: max(sum of all attempts' durations / 6, the largest domain's sum),
//!     each lane busy until no runnable work is left; target <= 1.05;
//! (f) chains: 4 dependency chains of 5 links `(after: …)` (500-800 ms a link) and 16
//!     independent criteria at -a 8: makespan / max(the critical path's attempts, all
//!     attempts / 8); target <= 1.05;
//! (g) conflicts: 32 criteria in 32 domains, each appending to one of 8 shared files (named
//!     in its text), isolated lanes at -a 16: merge conflicts / attempts; target <= 5%.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[path = "support/fake_run.rs"]
mod fake_run;

const PRDLOOP: &str = env!("CARGO_BIN_EXE_prdloop");

fn prdloop() -> String {
    std::env::var("RUN_BENCH_PRDLOOP").unwrap_or_else(|_| PRDLOOP.to_string())
}

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
    run_n(dir, text, plan, agents, 1)
}

fn command(dir: &Path, text: &str, plan: serde_json::Value, agents: usize, n: u32) -> Command {
    let mut c = fake_run::command(&prdloop(), dir, text, &plan);
    c.args(["-a", &agents.to_string(), "-n", &n.to_string()]);
    c
}

fn run_n(dir: &Path, text: &str, plan: serde_json::Value, agents: usize, n: u32) -> Measured {
    run_with(dir, text, plan, agents, n, &[])
}

fn run_with(
    dir: &Path,
    text: &str,
    plan: serde_json::Value,
    agents: usize,
    n: u32,
    extra: &[&str],
) -> Measured {
    let mut cmd = command(dir, text, plan, agents, n);
    cmd.args(extra);
    spawn_measured(dir, cmd)
}

fn spawn_measured(dir: &Path, mut cmd: Command) -> Measured {
    let t = Instant::now();
    let mut child = cmd.spawn().unwrap();
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
    measured(dir, wall, ticks, hwm)
}

fn measured(dir: &Path, wall: Duration, ticks: u64, hwm: u64) -> Measured {
    let hz = 100; // USER_HZ on Linux
    Measured {
        attempts: fake_run::attempts(dir),
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
        overhead(root.path(), 1000, reps, "(a)");
    }
    if want("overhead10k") {
        overhead(root.path(), 10_000, reps, "(a2)");
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

    if want("interrupt") {
        let crits: Vec<(String, String)> = (0..70_000)
            .map(|i| (format!("ISC-D{}-{}", i % 700, i / 700 + 1), "hangs".into()))
            .collect();
        let text = prd(&crits);
        let mut waits = vec![];
        for _ in 0..reps.min(3) {
            let dir = root.path().join("d");
            let mut cmd = command(&dir, &text, serde_json::json!({"*": ["hang"]}), 16, 1);
            let records = dir.join("records");
            std::fs::create_dir_all(&records).unwrap();
            cmd.env("FAKE_AGENT_RECORD", &records)
                .arg("--kill-grace")
                .arg("500ms");
            let mut child = cmd.spawn().unwrap();
            let t = Instant::now();
            while std::fs::read_dir(&records).unwrap().count() < 16 {
                assert!(
                    t.elapsed() < Duration::from_secs(120),
                    "workers did not start"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            // Let the runner settle into its loop (a flush or two) before the signal.
            std::thread::sleep(Duration::from_millis(500));
            let sent = Instant::now();
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGINT,
            )
            .unwrap();
            child.wait().unwrap();
            waits.push(sent.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "(d) interrupt, 70,000-criterion PRD, 16 hanging workers, --kill-grace 500ms: SIGINT to exit {:.0} ms (median; target <= 1,000 ms + the grace)",
            median(waits)
        );
    }

    if want("retries") {
        retries(root.path(), reps);
    }
    if want("chains") {
        chains(root.path(), reps);
    }
    if want("conflicts") {
        conflicts(root.path(), reps);
    }
}

fn span_of(atts: &[&serde_json::Value]) -> f64 {
    let start = atts
        .iter()
        .map(|a| a["startedAt"].as_u64().unwrap())
        .min()
        .unwrap();
    let end = atts
        .iter()
        .map(|a| a["finishedAt"].as_u64().unwrap())
        .max()
        .unwrap();
    (end - start) as f64
}

/// Time the lanes stood idle between one attempt and their next (not after their last).
fn idle_between(all: &[&serde_json::Value]) -> f64 {
    let mut lanes: std::collections::BTreeMap<u64, Vec<(u64, u64)>> = Default::default();
    for a in all {
        lanes
            .entry(a["agent"].as_u64().unwrap())
            .or_default()
            .push((
                a["startedAt"].as_u64().unwrap(),
                a["finishedAt"].as_u64().unwrap(),
            ));
    }
    lanes
        .values_mut()
        .map(|v| {
            v.sort();
            v.windows(2)
                .map(|w| w[1].0.saturating_sub(w[0].1) as f64)
                .sum::<f64>()
        })
        .sum()
}

/// The free bound of a run's attempts: max(their time / the lanes, the largest domain's
/// time), each lane busy until no runnable work is left.
fn free_bound(all: &[&serde_json::Value], agents: usize) -> f64 {
    let total: f64 = all.iter().map(|a| dur(a)).sum();
    let mut domains: std::collections::HashMap<String, f64> = Default::default();
    for a in all {
        let c = a["criterion"].as_str().unwrap();
        *domains
            .entry(c[..c.rfind('-').unwrap()].to_string())
            .or_default() += dur(a);
    }
    let dmax = domains.values().copied().fold(0.0, f64::max);
    (total / agents as f64).max(dmax)
}

fn dur(a: &serde_json::Value) -> f64 {
    (a["finishedAt"].as_u64().unwrap() - a["startedAt"].as_u64().unwrap()) as f64
}

/// (f): chains of `(after: …)` links beside independent work.
fn chains(root: &Path, reps: usize) {
    let agents = 8usize;
    let mut crits = Vec::new();
    let mut plan = serde_json::Map::new();
    for k in 0..4u64 {
        for i in 1..=5 {
            let id = format!("ISC-K{k}-{i}");
            let ms = 500 + k * 100;
            plan.insert(id.clone(), serde_json::json!([format!("sleep:{ms}")]));
            let after = if i > 1 {
                format!(" (after: ISC-K{k}-{})", i - 1)
            } else {
                String::new()
            };
            crits.push((id, format!("link {i} takes {ms} ms{after}")));
        }
    }
    for d in 0..16 {
        let id = format!("ISC-F{d}-1");
        plan.insert(id.clone(), serde_json::json!(["sleep:400"]));
        crits.push((id, "takes 400 ms".to_string()));
    }
    let text = prd(&crits);
    let mut ratios = vec![];
    for _ in 0..reps.min(3) {
        let m = run(
            &root.join("f"),
            &text,
            serde_json::Value::Object(plan.clone()),
            agents,
        );
        let all: Vec<&serde_json::Value> = m.attempts.iter().collect();
        let chain = |k: u64| -> f64 {
            all.iter()
                .filter(|a| {
                    a["criterion"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("ISC-K{k}-"))
                })
                .map(|a| dur(a))
                .sum()
        };
        let critical = (0..4).map(chain).fold(0.0, f64::max);
        let total: f64 = all.iter().map(|a| dur(a)).sum();
        let bound = critical.max(total / agents as f64);
        ratios.push(span_of(&all) / bound);
    }
    println!(
        "(f) chains, 4 chains of 5 `(after:)` links + 16 independent criteria at -a {agents}: makespan / critical-path bound = {:.3} (median; target <= 1.05)",
        median(ratios)
    );
}

/// (g): criteria of different domains appending to shared files, isolated lanes.
fn conflicts(root: &Path, reps: usize) {
    let agents = 16usize;
    let mut crits = Vec::new();
    let mut plan = serde_json::Map::new();
    for d in 0..32 {
        let id = format!("ISC-W{d}-1");
        let file = format!("shared/f{}.txt", d % 8);
        plan.insert(
            id.clone(),
            serde_json::json!([format!("sh:echo {id} >> {file} && sleep 0.3")]),
        );
        crits.push((id, format!("adds its line to `{file}`")));
    }
    let text = prd(&crits);
    for rounds in ["continuous", "barrier"] {
        let (mut shares, mut counts) = (vec![], vec![]);
        for _ in 0..reps.min(3) {
            let dir = root.join("g");
            let mut cmd = command(
                &dir,
                &text,
                serde_json::Value::Object(plan.clone()),
                agents,
                4,
            );
            cmd.args(["--rounds", rounds]);
            let files: Vec<String> = (0..8).map(|f| format!("shared/f{f}.txt")).collect();
            fake_run::repository(&dir, &files, &mut cmd);
            let m = spawn_measured(&dir, cmd);
            let state_dir = fake_run::state_dir(&dir);
            let state: serde_json::Value = std::fs::read_dir(&state_dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|e| e == "json"))
                .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
                .unwrap();
            let conflicts = state["conflicts"].as_u64().unwrap_or(0) as f64;
            counts.push(conflicts);
            shares.push(conflicts / m.attempts.len().max(1) as f64 * 100.0);
        }
        println!(
            "(g) conflicts, 32 criteria / 32 domains appending to 8 shared files, isolated, -a {agents}, --rounds {rounds}: {:.0} conflict retries, {:.1}% of attempts (medians; target <= 5% without the barrier)",
            median(counts),
            median(shares)
        );
    }
}

/// (a)/(a2): `n` instant criteria at -a 16.
fn overhead(root: &Path, n: usize, reps: usize, label: &str) {
    let crits: Vec<(String, String)> = (0..n)
        .map(|i| (format!("ISC-D{}-{}", i % 100, i / 100), "instant".into()))
        .collect();
    let text = prd(&crits);
    // `RUN_BENCH_BASE`: that build runs too, its runs interleaved with this one's (the order
    // swapped each repetition), so that both see the same load.
    let base = std::env::var("RUN_BENCH_BASE").ok();
    let builds: Vec<(&str, String)> = std::iter::once(("", prdloop()))
        .chain(base.map(|b| ("base ", b)))
        .collect();
    let mut runs: Vec<Vec<Measured>> = builds.iter().map(|_| Vec::new()).collect();
    for rep in 0..reps {
        for k in 0..builds.len() {
            let k = if rep % 2 == 0 {
                k
            } else {
                builds.len() - 1 - k
            };
            runs[k].push(overhead_once(root, &text, n, &builds[k].1));
        }
    }
    for ((name, _), runs) in builds.iter().zip(runs) {
        let cpu = median(
            runs.iter()
                .map(|m| m.cpu.as_secs_f64() * 1000.0 / n as f64)
                .collect(),
        );
        let wall = median(runs.iter().map(|m| m.wall.as_secs_f64()).collect());
        println!(
            "{label} {name}overhead, {n} instant criteria at -a 16, {reps} runs: runner CPU {cpu:.3} ms/worker, wall {wall:.2} s ({:.2} ms/worker) (medians)",
            wall * 1000.0 / n as f64
        );
    }
}

/// One run of (a) with `program`: the runner's own cost, no kernel sandbox around each worker.
fn overhead_once(root: &Path, text: &str, n: usize, program: &str) -> Measured {
    let dir = root.join("a");
    let mut cmd = fake_run::command(program, &dir, text, &serde_json::json!({"*": ["pass"]}));
    cmd.args(["-a", "16", "-n", "1", "--sandbox", "off"]);
    let m = spawn_measured(&dir, cmd);
    assert_eq!(m.attempts.len(), n);
    m
}

/// (e): agents of 150 ms to 1.5 s, a quarter failing 1-3 times at once before passing.
fn retries(root: &Path, reps: usize) {
    let agents = 6usize;
    let sizes = [8, 6, 6, 5, 4, 4, 3, 3, 2, 2, 2, 1, 1, 1];
    let mut crits = Vec::new();
    let mut plan = serde_json::Map::new();
    for (d, &n) in sizes.iter().enumerate() {
        for i in 0..n {
            // Domains differ in how long their criteria take.
            let ms = 150 + ((d * 5 + i * 3) % 10) as u64 * 150;
            let id = format!("ISC-R{d}-{}", i + 1);
            let mut steps: Vec<String> = Vec::new();
            if (d + i) % 4 == 0 {
                steps.extend(std::iter::repeat_n("fail".to_string(), 1 + (d + i) % 3));
            }
            steps.push(format!("sleep:{ms}"));
            plan.insert(id.clone(), serde_json::json!(steps));
            crits.push((id, format!("takes {ms} ms")));
        }
    }
    assert_eq!(crits.len(), 48);
    let text = prd(&crits);
    let (mut free, mut idle) = (vec![], vec![]);
    for _ in 0..reps.min(3) {
        let m = run_n(
            &root.join("e"),
            &text,
            serde_json::Value::Object(plan.clone()),
            agents,
            4,
        );
        let all: Vec<&serde_json::Value> = m.attempts.iter().collect();
        free.push(span_of(&all) / free_bound(&all, agents));
        idle.push(idle_between(&all));
    }
    println!(
        "(e) retries without the barrier (default), 48 criteria / 14 uneven domains, -a {agents}: makespan / free bound = {:.3}; lanes idle between attempts {:.0} ms in all (medians; target <= 1.05)",
        median(free),
        median(idle)
    );
    let mut ratios: Vec<Vec<f64>> = vec![];
    let mut overall = vec![];
    let mut barrier_free = vec![];
    for _ in 0..reps.min(3) {
        let m = run_with(
            &root.join("e"),
            &text,
            serde_json::Value::Object(plan.clone()),
            agents,
            4,
            &["--rounds", "barrier"],
        );
        let mut per_iter: std::collections::BTreeMap<u64, Vec<&serde_json::Value>> =
            Default::default();
        for a in &m.attempts {
            per_iter
                .entry(a["iteration"].as_u64().unwrap())
                .or_default()
                .push(a);
        }
        let mut rs = vec![];
        let (mut span_sum, mut bound_sum) = (0.0, 0.0);
        for atts in per_iter.values() {
            let start = atts
                .iter()
                .map(|a| a["startedAt"].as_u64().unwrap())
                .min()
                .unwrap();
            let end = atts
                .iter()
                .map(|a| a["finishedAt"].as_u64().unwrap())
                .max()
                .unwrap();
            let dur = |a: &serde_json::Value| {
                (a["finishedAt"].as_u64().unwrap() - a["startedAt"].as_u64().unwrap()) as f64
            };
            let total: f64 = atts.iter().map(|a| dur(a)).sum();
            let mut domains: std::collections::HashMap<String, f64> = Default::default();
            for a in atts {
                let c = a["criterion"].as_str().unwrap();
                let dom = c[..c.rfind('-').unwrap()].to_string();
                *domains.entry(dom).or_default() += dur(a);
            }
            let longest = atts.iter().map(|a| dur(a)).fold(0.0, f64::max);
            let dmax = domains.values().copied().fold(0.0, f64::max);
            let bound = (total / agents as f64).max(dmax).max(longest);
            let span = (end - start) as f64;
            rs.push(span / bound);
            span_sum += span;
            bound_sum += bound;
        }
        ratios.push(rs);
        overall.push(span_sum / bound_sum);
        let all: Vec<&serde_json::Value> = m.attempts.iter().collect();
        barrier_free.push(span_of(&all) / free_bound(&all, agents));
    }
    let iters = ratios.iter().map(Vec::len).max().unwrap_or(0);
    let per: Vec<String> = (0..iters)
        .map(|i| {
            let v: Vec<f64> = ratios.iter().filter_map(|r| r.get(i).copied()).collect();
            format!("{:.2}", median(v))
        })
        .collect();
    println!(
        "(e) retries with --rounds barrier, 48 criteria / 14 uneven domains, agents 150 ms-1.5 s, a quarter failing 1-3 times, -a {agents}: makespan / lower bound per iteration [{}], all iterations {:.3}; the whole run's makespan / the free bound {:.3} (medians)",
        per.join(", "),
        median(overall),
        median(barrier_free)
    );
}
