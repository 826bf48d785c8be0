//! Graph benchmark: a chain of 100,000 criteria, each needing the one before (`(after: …)`),
//! planned. Prints the median time of reading, parsing and ordering it in process (with the
//! process's peak memory, on Linux), and of `prdloop plan` and `prdloop run --dry-run` on it
//! (issue 38: at most 2 s and 200 MB each on the project's machine).
//! Run with `cargo bench --bench graph_bench`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use prdloop::graph::Graph;
use prdloop::prd::Prd;

const PRDLOOP: &str = env!("CARGO_BIN_EXE_prdloop");
const LINKS: usize = 100_000;

fn chain(n: usize) -> String {
    let mut s = String::from(
        "---\nprd: true\nid: PRD-20261130-chain\nstatus: IN_PROGRESS\n---\n\n# Chain\n\n## IDEAL STATE CRITERIA (Verification Criteria)\n\n- [ ] ISC-C-1: step 1 | Verify: Test: `true`\n",
    );
    for i in 2..=n {
        s.push_str(&format!(
            "- [ ] ISC-C-{i}: step {i} (after: ISC-C-{}) | Verify: Test: `true`\n",
            i - 1
        ));
    }
    s
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The process's peak resident memory (`VmHWM`), where /proc says it.
fn peak_memory() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_string()))
        })
        .unwrap_or_else(|| "n/a".into())
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("PRD.md");
    std::fs::write(&path, chain(LINKS)).expect("write");
    let runs = 5;
    let mut in_process = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let prd = Prd::parse(std::fs::read_to_string(&path).expect("read")).expect("parse");
        let graph = Graph::checked(&prd, &path).expect("graph");
        let work: Vec<&str> = prd.criteria.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(graph.depth(&work), LINKS);
        in_process.push(t.elapsed());
    }
    let peak = peak_memory();
    let command = |args: &[&str]| {
        let mut times = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let st = Command::new(PRDLOOP)
                .args(args)
                .current_dir(dir.path())
                .env(
                    "GIT_CEILING_DIRECTORIES",
                    dir.path().parent().expect("a parent"),
                )
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("prdloop");
            assert!(st.success(), "prdloop {args:?}: {st}");
            times.push(t.elapsed());
        }
        median(times)
    };
    let plan = command(&["plan", "PRD.md"]);
    let dry_run = command(&["run", "PRD.md", "--dry-run"]);
    println!("graph_bench: a chain of {LINKS} criteria, {runs} runs, medians:");
    println!(
        "  parse + graph + waves {:>10.2?}  (peak memory {peak})",
        median(in_process)
    );
    println!("  prdloop plan          {plan:>10.2?}");
    println!("  prdloop run --dry-run {dry_run:>10.2?}");
}
