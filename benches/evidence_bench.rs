//! Evidence: 40 criteria no command can check, whose fake workers lie on a third of their
//! PASS claims (they say PASS without writing their file), run once with `--verifier none`
//! and once with a verifier (the fake agent as verifier, checking that the file exists).
//! Counts the false ticks (ticked, file missing) and the extra agent runs and time the
//! verifier costs. Run with `cargo bench --bench evidence_bench`; `EVIDENCE_REPS` sets the
//! runs per mode (default 5). Medians.

use std::process::Command;
use std::time::{Duration, Instant};

const PRDLOOP: &str = env!("CARGO_BIN_EXE_prdloop");
const FAKE: &str = env!("CARGO_BIN_EXE_prdloop-fake-agent");
const CRITERIA: usize = 40;

struct Outcome {
    false_ticks: usize,
    ticked: usize,
    reviews: u64,
    took: Duration,
}

fn run_once(verifier: bool) -> Outcome {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut prd = String::from("---\nid: PRD-bench\n---\n\n# B\n\n## CRITERIA\n\n");
    let mut plan = serde_json::Map::new();
    for i in 0..CRITERIA {
        let id = format!("ISC-D{}-{i}", i % 8);
        prd.push_str(&format!("- [ ] {id}: f{i}.txt explains part {i}\n"));
        // Every third worker lies: PASS without the work.
        let step = if i % 3 == 0 {
            "sh:sleep 0.05".to_string()
        } else {
            format!("sh:sleep 0.05; echo done > f{i}.txt")
        };
        plan.insert(id.clone(), serde_json::json!([step]));
        plan.insert(
            format!("verifier:{id}"),
            serde_json::json!([format!("verdict-file:f{i}.txt")]),
        );
    }
    std::fs::write(work.join("PRD.md"), &prd).unwrap();
    let plan_path = tmp.path().join("plan.json");
    std::fs::write(&plan_path, serde_json::Value::Object(plan).to_string()).unwrap();
    let state = tmp.path().join("state");
    let t = Instant::now();
    let mut c = Command::new(PRDLOOP);
    c.args([
        "run",
        "PRD.md",
        "-n",
        "1",
        "-a",
        "4",
        "--claude-bin",
        FAKE,
        "--state-dir",
    ])
    .arg(&state)
    .current_dir(&work)
    .env("FAKE_AGENT_PLAN", &plan_path)
    .stderr(std::process::Stdio::null());
    if !verifier {
        c.args(["--verifier", "none"]);
    }
    let _ = c.status().unwrap();
    let took = t.elapsed();
    let text = std::fs::read_to_string(work.join("PRD.md")).unwrap();
    let mut false_ticks = 0;
    let mut ticked = 0;
    for i in 0..CRITERIA {
        let id = format!("ISC-D{}-{i}", i % 8);
        if text.contains(&format!("- [x] {id}:")) {
            ticked += 1;
            if !work.join(format!("f{i}.txt")).exists() {
                false_ticks += 1;
            }
        }
    }
    let reviews = std::fs::read_dir(&state)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .filter_map(|v| v["reviews"].as_u64())
        .sum();
    Outcome {
        false_ticks,
        ticked,
        reviews,
        took,
    }
}

fn median<T: PartialOrd + Copy>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let reps: usize = std::env::var("EVIDENCE_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    println!(
        "{CRITERIA} agent-checked criteria, a third of the workers lie, -a 4, one attempt each, {reps} runs per mode (medians)"
    );
    for verifier in [false, true] {
        let runs: Vec<Outcome> = (0..reps).map(|_| run_once(verifier)).collect();
        println!(
            "  {:<16} ticked {:>2}, false ticks {:>2}, verifier runs {:>2}, wall {:.2} s",
            if verifier {
                "with a verifier"
            } else {
                "--verifier none"
            },
            median(runs.iter().map(|r| r.ticked).collect()),
            median(runs.iter().map(|r| r.false_ticks).collect()),
            median(runs.iter().map(|r| r.reviews).collect()),
            median(runs.iter().map(|r| r.took.as_secs_f64()).collect()),
        );
    }
}
