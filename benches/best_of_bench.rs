//! Best-of-N: time to the first pass of a criterion whose attempts succeed with probability
//! 1/3 (each takes 0.3 s), with N = 1 and N = 3. Run with `cargo bench --bench best_of_bench`;
//! `BEST_OF_REPS` sets the runs per N (default 15). Medians, and the workers each run used.
//!
//! Then `--best-of auto` and `--escalate` (issue 29; `cargo bench --bench best_of_bench --
//! auto` runs these alone): a generated PRD of 16 criteria in 8 domains whose fake agent
//! passes with a fixed probability per domain (0.9 in four, 0.25 in the others; seeded: run r
//! draws with seed r), the Verify command deciding. Against fixed `--best-of 4`, `auto:4`
//! must pass at least as many criteria within the same iteration limit on at most 60% of the
//! worker runs; against `--best-of 1` it must need fewer iterations to finish. Escalation: a
//! domain only the second set-up can pass finishes with exactly K failed attempts on the
//! first. Medians over `BEST_OF_AUTO_REPS` runs (default 21); the bench fails when a bound is
//! missed.

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

/// What one run of the generated PRD came to.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    passed: usize,
    workers: usize,
    iterations: usize,
    complete: bool,
}

/// A git repository holding `criteria` (id, probability per model or `*`) and its plan; runs
/// prdloop in it with `args` and seed `seed`; the outcome and the attempts log.
fn run_prd(
    criteria: &[(String, Vec<(&str, f64)>)],
    args: &[&str],
    seed: usize,
) -> (Outcome, Vec<serde_json::Value>) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q"]);
    std::fs::write(work.join("README"), "r\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "i"]);
    let mut prd = String::from("---\nid: PRD-bench\n---\n\n# B\n\n## CRITERIA\n\n");
    let mut plan = serde_json::Map::new();
    for (id, odds) in criteria {
        prd.push_str(&format!(
            "- [ ] {id}: done | Verify: CLI: `test -f {id}.txt`\n"
        ));
        for (model, p) in odds {
            let key = if *model == "*" {
                id.clone()
            } else {
                format!("{id}@{model}")
            };
            plan.insert(key, serde_json::json!([format!("chance:{p}:{id}.txt")]));
        }
    }
    std::fs::write(work.join("PRD.md"), &prd).unwrap();
    let plan_path = tmp.path().join("plan.json");
    std::fs::write(&plan_path, serde_json::Value::Object(plan).to_string()).unwrap();
    let records = tmp.path().join("records");
    std::fs::create_dir_all(&records).unwrap();
    let state_dir = tmp.path().join("state");
    let st = Command::new(PRDLOOP)
        .args(["run", "PRD.md", "--stall", "0"])
        .args(args)
        .args(["--claude-bin", FAKE, "--state-dir"])
        .arg(&state_dir)
        .current_dir(&work)
        .env("FAKE_AGENT_PLAN", &plan_path)
        .env("FAKE_AGENT_RECORD", &records)
        .env("FAKE_AGENT_SEED", seed.to_string())
        .env("PRDLOOP_SANDBOX_ALLOW", &records)
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    let state_file = std::fs::read_dir(&state_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a state file");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state_file).unwrap()).unwrap();
    let passed = state["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "completed")
        .count();
    let attempts = std::fs::read_to_string(state["attemptsLog"].as_str().unwrap())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (
        Outcome {
            passed,
            workers: std::fs::read_dir(&records).unwrap().count(),
            iterations: state["loopHistory"].as_array().map_or(0, Vec::len),
            complete: st.success(),
        },
        attempts,
    )
}

/// Issue 29's benchmark of `--best-of auto` and `--escalate`.
fn adaptive(reps: usize) {
    // 16 criteria in 8 domains: A to D pass 9 times in 10, E to H once in 4.
    let criteria: Vec<(String, Vec<(&str, f64)>)> = "ABCDEFGH"
        .chars()
        .enumerate()
        .flat_map(|(i, d)| {
            let p = if i < 4 { 0.9 } else { 0.25 };
            (1..=2).map(move |k| (format!("ISC-{d}-{k}"), vec![("*", p)]))
        })
        .collect();
    // The iteration limit both get: fixed 4 needs 3 (its median), best-of 1 about 9.
    let limit = "8";
    let lanes = ["-a", "4"];
    let config = |best_of: &str, n: &str| -> Vec<String> {
        [lanes[0], lanes[1], "--best-of", best_of, "-n", n]
            .map(String::from)
            .to_vec()
    };
    let runs_of = |args: Vec<String>| -> Vec<Outcome> {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        (0..reps).map(|r| run_prd(&criteria, &args, r).0).collect()
    };
    println!(
        "\n--best-of auto: 16 criteria in 8 domains, pass@1 0.9 in 4 and 0.25 in 4, -a 4, {reps} seeded runs each (medians)"
    );
    let fixed4 = runs_of(config("4", limit));
    let auto4 = runs_of(config("auto:4", limit));
    let fixed1 = runs_of(config("1", "40"));
    let auto_long = runs_of(config("auto:4", "40"));
    let show = |name: &str, o: &[Outcome]| {
        println!(
            "  {name:<28} passed {:>2}/16 · {:>3} worker runs · {:>2} iterations · complete in {}/{}",
            median(o.iter().map(|x| x.passed).collect()),
            median(o.iter().map(|x| x.workers).collect()),
            median(o.iter().map(|x| x.iterations).collect()),
            o.iter().filter(|x| x.complete).count(),
            o.len()
        );
    };
    show(&format!("--best-of 4 -n {limit}"), &fixed4);
    show(&format!("--best-of auto:4 -n {limit}"), &auto4);
    show("--best-of 1 -n 40", &fixed1);
    show("--best-of auto:4 -n 40", &auto_long);
    let m = |o: &[Outcome], f: fn(&Outcome) -> usize| median(o.iter().map(f).collect());
    let (p4, pa) = (m(&fixed4, |x| x.passed), m(&auto4, |x| x.passed));
    let (w4, wa) = (m(&fixed4, |x| x.workers), m(&auto4, |x| x.workers));
    let (i1, ia) = (
        m(&fixed1, |x| x.iterations),
        m(&auto_long, |x| x.iterations),
    );
    let share = wa as f64 / w4 as f64;
    let mut missed = Vec::new();
    let mut bound = |ok: bool, what: String| {
        println!("  {} {what}", if ok { "ok  " } else { "MISS" });
        if !ok {
            missed.push(what);
        }
    };
    bound(
        pa >= p4,
        format!("auto:4 passes {pa} ≥ fixed 4's {p4} within -n {limit}"),
    );
    bound(
        share <= 0.60,
        format!(
            "auto:4 spends {wa} worker runs, {:.0}% of fixed 4's {w4} (≤ 60%)",
            share * 100.0
        ),
    );
    bound(
        ia < i1,
        format!("auto:4 finishes in {ia} iterations < best-of 1's {i1}"),
    );

    // Escalation: domain A passes on either set-up; domain B only on the second.
    let k = 2usize;
    let ladder: Vec<(String, Vec<(&str, f64)>)> = [
        ("ISC-A-1", 0.9, 0.9),
        ("ISC-A-2", 0.9, 0.9),
        ("ISC-B-1", 0.0, 0.9),
        ("ISC-B-2", 0.0, 0.9),
    ]
    .into_iter()
    .map(|(id, weak, strong)| (id.to_string(), vec![("weak", weak), ("strong", strong)]))
    .collect();
    println!(
        "\n--escalate claude:weak,claude:strong (K = {k}): domain B passes only on the second set-up, {reps} seeded runs"
    );
    let mut failed_first = Vec::new();
    let mut all_exact = true;
    let mut complete = 0;
    for r in 0..reps {
        let (o, attempts) = run_prd(
            &ladder,
            &[
                "-a",
                "2",
                "-n",
                "20",
                "--escalate",
                "claude:weak,claude:strong",
            ],
            r,
        );
        complete += usize::from(o.complete);
        for id in ["ISC-B-1", "ISC-B-2"] {
            let n = attempts
                .iter()
                .filter(|a| {
                    a["criterion"] == id && a["setup"] == "claude:weak" && a["verdict"] == "fail"
                })
                .count();
            all_exact &= n == k;
            failed_first.push(n);
        }
    }
    println!(
        "  domain B: median {} failed attempt(s) on claude:weak per criterion (min {}, max {}); complete in {complete}/{reps}",
        median(failed_first.clone()),
        failed_first.iter().min().unwrap(),
        failed_first.iter().max().unwrap()
    );
    bound(
        all_exact && complete == reps,
        format!(
            "every criterion of B finished with exactly {k} failed attempts on the first set-up"
        ),
    );
    if !missed.is_empty() {
        panic!("bounds missed: {}", missed.join("; "));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let auto_only = args.iter().any(|a| a == "auto");
    let auto_reps: usize = std::env::var("BEST_OF_AUTO_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(21);
    if auto_only {
        adaptive(auto_reps);
        return;
    }
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
    adaptive(auto_reps);
}
