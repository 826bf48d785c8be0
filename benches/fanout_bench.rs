//! Fan-out makespan: a 200-criterion PRD (26 domains of uneven size) whose fake agents take
//! 0.3 s each and write one file, split over 1, 2, 4 and 8 shards at -a 4 per shard. Each
//! shard runs in its own clone of one repository, as a CI job on its own machine would; the
//! shards run one after the other here (this machine is not N machines), each timed on its
//! own, so the fan-out's makespan is the slowest shard plus the fan-in (`merge` of every
//! bundle in a fourth kind of clone). Reports the median over the repetitions, the ideal
//! (200 × 0.3 s / (4 × N)) and the shards' sizes.
//!
//! Run with `cargo bench --bench fanout_bench`; `FANOUT_BENCH_REPS` sets the repetitions
//! (default 3), `FANOUT_BENCH_AGENTS` the agents per shard (default 4).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const PRDLOOP: &str = env!("CARGO_BIN_EXE_prdloop");
const FAKE: &str = env!("CARGO_BIN_EXE_prdloop-fake-agent");
const CRITERIA: usize = 200;
const AGENT_MS: u64 = 300;

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .output()
        .expect("git");
    assert!(
        st.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&st.stderr)
    );
}

/// The PRD and the fake agents' plan: domain sizes 2..=14, cycling, up to 200 criteria.
fn prd_and_plan() -> (String, serde_json::Value) {
    let mut s = String::from(
        "---\nid: PRD-fanout-bench\nmaxIterations: 3\n---\n\n# Fan-out bench\n\n## CRITERIA\n\n",
    );
    let mut plan = serde_json::Map::new();
    let (mut n, mut d) = (0, 0);
    while n < CRITERIA {
        let size = (2 + (d * 5) % 13).min(CRITERIA - n);
        let domain = format!("D{d:02}");
        for i in 1..=size {
            let id = format!("ISC-{domain}-{i}");
            s.push_str(&format!(
                "- [ ] {id}: {id} is done | Verify: Review: the file says so\n"
            ));
            let secs = AGENT_MS as f64 / 1000.0;
            plan.insert(
                id.clone(),
                serde_json::json!([format!("sh:sleep {secs} && echo done > {id}.txt")]),
            );
        }
        n += size;
        d += 1;
    }
    (s, serde_json::Value::Object(plan))
}

fn prdloop(root: &Path, dir: &Path, args: &[&str]) -> (Duration, i32, String) {
    let t = Instant::now();
    let out = Command::new(PRDLOOP)
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root)
        .env("PAI_DIR", root.join("pai"))
        .env("PRDLOOP_CLAUDE_BIN", FAKE)
        .env("FAKE_AGENT_PLAN", root.join("plan.json"))
        .env("NO_COLOR", "1")
        .env("CLAUDECODE", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("prdloop");
    (
        t.elapsed(),
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

struct Fanned {
    makespan: Duration,
    slowest: Duration,
    merge: Duration,
    sizes: Vec<usize>,
}

fn fan_out(root: &Path, origin: &Path, shards: usize, agents: usize) -> Fanned {
    let run_dir = root.join(format!("n{shards}-{}", uuid_ish()));
    std::fs::create_dir_all(&run_dir).unwrap();
    let o = origin.display().to_string();
    let mut slowest = Duration::ZERO;
    let mut sizes = Vec::new();
    let a = agents.to_string();
    for i in 1..=shards {
        let name = format!("job{i}");
        git(&run_dir, &["clone", "-q", &o, &name]);
        let bundle = run_dir.join(format!("bundles/shard-{i}"));
        let shard = format!("{i}/{shards}");
        let (t, code, err) = prdloop(
            root,
            &run_dir.join(&name),
            &[
                "run",
                "PRD.md",
                "-a",
                &a,
                "--progress",
                "none",
                "--shard",
                &shard,
                "--bundle",
                bundle.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "shard {shard}: {err}");
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(bundle.join("bundle.json")).unwrap())
                .unwrap();
        sizes.push(m["criteria"].as_array().map_or(0, Vec::len));
        slowest = slowest.max(t);
    }
    git(&run_dir, &["clone", "-q", &o, "fan-in"]);
    let bundles = run_dir.join("bundles");
    let (merge, code, err) = prdloop(
        root,
        &run_dir.join("fan-in"),
        &["merge", "PRD.md", bundles.to_str().unwrap()],
    );
    assert_eq!(code, 0, "merge: {err}");
    let prd = std::fs::read_to_string(run_dir.join("fan-in/PRD.md")).unwrap();
    assert_eq!(prd.matches("- [x] ").count(), CRITERIA, "every box ticked");
    let _ = std::fs::remove_dir_all(&run_dir);
    Fanned {
        makespan: slowest + merge,
        slowest,
        merge,
        sizes,
    }
}

fn uuid_ish() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // `cargo test --benches` runs this with `--bench`-less arguments: do nothing then.
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let reps: usize = std::env::var("FANOUT_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let agents: usize = std::env::var("FANOUT_BENCH_AGENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
        .max(1);
    let root = tempfile::tempdir().expect("tempdir");
    let origin = root.path().join("origin");
    std::fs::create_dir_all(&origin).unwrap();
    let (prd, plan) = prd_and_plan();
    std::fs::write(origin.join("PRD.md"), prd).unwrap();
    std::fs::write(root.path().join("plan.json"), plan.to_string()).unwrap();
    git(&origin, &["init", "-q", "-b", "main"]);
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-q", "-m", "PRD"]);

    println!(
        "fan-out: {CRITERIA} criteria, {AGENT_MS} ms agents, -a {agents} per shard, median of {reps}"
    );
    println!(
        "{:>6}  {:>10}  {:>10}  {:>8}  {:>8}  {:>7}  shard sizes",
        "shards", "makespan", "slowest", "merge", "ideal", "speedup"
    );
    let mut base = None;
    for shards in [1usize, 2, 4, 8] {
        let mut makespans = Vec::new();
        let mut slowest = Vec::new();
        let mut merges = Vec::new();
        let mut sizes = Vec::new();
        for _ in 0..reps {
            let f = fan_out(root.path(), &origin, shards, agents);
            makespans.push(f.makespan);
            slowest.push(f.slowest);
            merges.push(f.merge);
            sizes = f.sizes;
        }
        let m = median(makespans);
        let base = *base.get_or_insert(m);
        let ideal =
            Duration::from_millis(CRITERIA as u64 * AGENT_MS / (agents as u64 * shards as u64));
        println!(
            "{shards:>6}  {:>9.2}s  {:>9.2}s  {:>7.2}s  {:>7.2}s  {:>6.2}x  {sizes:?}",
            m.as_secs_f64(),
            median(slowest).as_secs_f64(),
            median(merges).as_secs_f64(),
            ideal.as_secs_f64(),
            base.as_secs_f64() / m.as_secs_f64()
        );
    }
}
