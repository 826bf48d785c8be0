//! Best-of-N: time to the first pass of a criterion whose attempts succeed with probability
//! 1/3 (each takes 0.3 s), with N = 1 and N = 3. Run with `cargo bench --bench best_of_bench`;
//! `BEST_OF_REPS` sets the runs per N (default 15). Medians, and the workers each run used.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const PRDLOOP: &str = env!("CARGO_BIN_EXE_prdloop");
const FAKE: &str = env!("CARGO_BIN_EXE_prdloop-fake-agent");

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@x")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@x")
        .status()
        .unwrap();
    assert!(st.success());
}

fn run_once(n: u32) -> (Duration, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q"]);
    std::fs::write(work.join("README"), "r\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "i"]);
    std::fs::write(
        work.join("PRD.md"),
        "---\nid: PRD-bench\n---\n\n# B\n\n## CRITERIA\n\n- [ ] ISC-A-1: lucky | Verify: CLI: `test -f lucky.txt`\n",
    )
    .unwrap();
    // Passes one time in three: a random byte below 85.
    let step = "sh:sleep 0.3; b=$(od -An -N1 -tu1 /dev/urandom | tr -d ' '); if [ \"$b\" -lt 85 ]; then echo y > lucky.txt; else exit 1; fi";
    let plan = tmp.path().join("plan.json");
    std::fs::write(&plan, serde_json::json!({"*": [step]}).to_string()).unwrap();
    let records = tmp.path().join("records");
    std::fs::create_dir_all(&records).unwrap();
    let t = Instant::now();
    let st = Command::new(PRDLOOP)
        .args([
            "run",
            "PRD.md",
            "-n",
            "40",
            "--stall",
            "0",
            "--best-of",
            &n.to_string(),
        ])
        .args(["--claude-bin", FAKE, "--state-dir"])
        .arg(tmp.path().join("state"))
        .current_dir(&work)
        .env("FAKE_AGENT_PLAN", &plan)
        .env("FAKE_AGENT_RECORD", &records)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let took = t.elapsed();
    assert!(st.success(), "the run did not complete");
    (took, std::fs::read_dir(&records).unwrap().count())
}

fn median<T: Ord + Copy>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let reps: usize = std::env::var("BEST_OF_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    println!("time to the first pass, p = 1/3 per attempt, 0.3 s per worker, {reps} runs each");
    for n in [1, 3] {
        let runs: Vec<(Duration, usize)> = (0..reps).map(|_| run_once(n)).collect();
        let t = median(runs.iter().map(|r| r.0).collect());
        let w = median(runs.iter().map(|r| r.1).collect());
        println!(
            "  --best-of {n}: median {:.2} s, median {w} worker(s)",
            t.as_secs_f64()
        );
    }
}
