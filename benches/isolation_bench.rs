//! Isolated workers on a 10,000-file repository: what each attempt's reset and each merge
//! back cost. Run with `cargo bench --bench isolation_bench`; `ISO_BENCH_FILES` sets the
//! number of files (default 10,000) and `ISO_BENCH_REPS` the repetitions (default 15).
//!
//! - base: the user's checkout (with an uncommitted edit) taken as a commit;
//! - reset: a lane back to a base, untracked files removed, its `.git` made anew (`prepare`
//!   of an existing lane);
//! - take: the worker's lane snapshotted and pinned;
//! - merge: the attempt merged into the checkout and the difference applied (`land`).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use prdloop::isolation::{Isolation, Landing, Repo, Settings, ToLand};

/// Attempt `a` on `base` of criterion `id`, to land.
fn to_land(base: &str, a: &str, id: &str) -> ToLand {
    ToLand {
        base: base.to_string(),
        attempt: a.to_string(),
        kept: "kept".to_string(),
        id: id.to_string(),
        message: format!("{id}: bench"),
        record: None,
    }
}

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
    assert!(st.success(), "git {args:?}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let files: usize = std::env::var("ISO_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let reps: usize = std::env::var("ISO_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path().join("repo");
    let state = tmp.path().join("state");
    std::fs::create_dir_all(&top).unwrap();
    git(&top, &["init", "-q"]);
    for i in 0..files {
        let dir = top.join(format!("src/m{}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(format!("f{i}.rs")),
            format!("// file {i}\n{}", "fn x() {}\n".repeat(20)),
        )
        .unwrap();
    }
    let prd = top.join("PRD.md");
    std::fs::write(&prd, "# PRD\n\n- [ ] ISC-B-1: bench\n").unwrap();
    git(&top, &["add", "-A"]);
    git(&top, &["commit", "-q", "-m", "init"]);
    // An uncommitted edit and an untracked file of the user's.
    std::fs::write(top.join("src/m0/f0.rs"), "// edited by the user\n").unwrap();
    std::fs::write(top.join("notes.txt"), "mine\n").unwrap();

    let iso = Isolation::new(
        Repo {
            top: top.clone(),
            rel: "".into(),
        },
        Settings::default(),
        "bench",
        &state,
        &[&prd],
    )
    .unwrap();
    let t = Instant::now();
    let base = iso.base().unwrap();
    let first_base = t.elapsed();
    let t = Instant::now();
    iso.prepare(0, &base).unwrap();
    let create = t.elapsed();

    let (mut bases, mut resets, mut takes, mut merges) = (vec![], vec![], vec![], vec![]);
    let lane = iso.lane_dir(0);
    for r in 0..reps {
        let t = Instant::now();
        let base = iso.base().unwrap();
        bases.push(t.elapsed());
        let t = Instant::now();
        iso.prepare(0, &base).unwrap();
        resets.push(t.elapsed());
        // The worker: edits two files, adds one, leaves an untracked scratch file.
        let i = (r * 7 + 1) % files;
        let f = lane.join(format!("src/m{}/f{i}.rs", i / 100));
        let mut text = std::fs::read_to_string(&f).unwrap();
        text.push_str(&format!("fn added_{r}() {{}}\n"));
        std::fs::write(&f, text).unwrap();
        std::fs::write(lane.join(format!("src/new_{r}.rs")), "fn n() {}\n").unwrap();
        let t = Instant::now();
        let a = iso.take(0, &base, "ISC-B-1", &r.to_string()).unwrap();
        takes.push(t.elapsed());
        let t = Instant::now();
        let landing = iso.land(&to_land(&base, &a, "ISC-B-1"));
        merges.push(t.elapsed());
        assert!(matches!(landing, Landing::Merged { .. }), "{landing:?}");
    }
    // Memory: a worker adds a 60 MiB file; the runner's own peak while it is taken and
    // landed (the peak is reset first: /proc/self/clear_refs).
    let base = iso.base().unwrap();
    iso.prepare(0, &base).unwrap();
    let big: Vec<u8> = (0..60 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(lane.join("big.bin"), &big).unwrap();
    drop(big);
    let reset_peak = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let before = peak_kib();
    let a = iso.take(0, &base, "ISC-BIG-1", "1").unwrap();
    let landing = iso.land(&to_land(&base, &a, "ISC-BIG-1"));
    assert!(matches!(landing, Landing::Merged { .. }), "{landing:?}");
    let after = peak_kib();
    let _ = iso.finish();
    println!("isolation on a {files}-file repository, {reps} repetitions (medians)");
    println!("  first base snapshot     {}", ms(first_base));
    println!("  lane created            {}", ms(create));
    println!("  base snapshot           {}", ms(median(bases)));
    println!("  reset (per attempt)     {}", ms(median(resets)));
    println!("  take (per attempt)      {}", ms(median(takes)));
    println!("  merge back (per pass)   {}", ms(median(merges)));
    match (reset_peak, before, after) {
        (true, Some(b), Some(a)) => println!(
            "  peak memory landing a 60 MiB file: {:.1} MiB (the process before it: {:.1} MiB)",
            a as f64 / 1024.0,
            b as f64 / 1024.0
        ),
        _ => println!("  peak memory: not measurable here (/proc/self/clear_refs)"),
    }
}

/// The process's peak resident memory (VmHWM), KiB.
fn peak_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
