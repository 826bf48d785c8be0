//! Fan-out across machines, simulated locally: clones of one temporary repository stand for
//! the CI jobs. Each runs its shard (`run --shard I/N --bundle DIR`) with the fake agent, and
//! `merge` in another clone stands for the fan-in job.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;
use serde_json::json;

/// A clone of the sandbox's repository: one CI job's checkout.
fn clone(sb: &Sandbox, name: &str) -> PathBuf {
    let dir = sb.root().join(name);
    git(
        sb.root(),
        &["clone", "-q", &sb.work().display().to_string(), name],
    );
    dir
}

/// prdloop in `dir`.
fn run_in(sb: &Sandbox, dir: &Path, args: &[&str]) -> Output {
    let child = sb
        .command(args)
        .current_dir(dir)
        .spawn()
        .expect("spawn prdloop");
    wait_output(child, std::time::Duration::from_secs(180))
}

fn read(dir: &Path, name: &str) -> Option<Vec<u8>> {
    std::fs::read(dir.join(name)).ok()
}

fn ticked(prd: &str, id: &str) -> bool {
    prd.contains(&format!("- [x] {id}:"))
}

/// The PRD without the lines that hold the time of day.
fn prd_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("PRD.md"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("updated:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What `git status` says of a checkout, but the PRD.
fn status(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = git(dir, &["status", "--porcelain", "--untracked-files=all"])
        .lines()
        .filter(|l| !l.ends_with("PRD.md"))
        .map(String::from)
        .collect();
    v.sort();
    v
}

const CRITERIA: &[&str] = &[
    "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
    "- [ ] ISC-A-2: line 2 says A | Verify: CLI: `grep -q '^A$' f.txt`",
    "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
    "- [ ] ISC-B-2: line 19 says B | Verify: CLI: `grep -q '^B$' f.txt`",
    "- [ ] ISC-C-1: c.bin holds two bytes | Verify: CLI: `test -s c.bin`",
    "- [ ] ISC-D-1: the docs read well | Verify: Review: a person reads docs.md",
    "- [ ] ISC-E-1: the impossible holds | Verify: CLI: `test -f never.txt`",
];

fn plan() -> serde_json::Value {
    json!({
        "ISC-A-1": ["write:a.txt"],
        "ISC-A-2": ["sh:sed -i 's/^line 2$/A/' f.txt"],
        "ISC-B-1": ["write:b.txt"],
        "ISC-B-2": ["sh:sed -i 's/^line 19$/B/' f.txt"],
        "ISC-C-1": ["sh:printf '\\000\\001' > c.bin"],
        "ISC-D-1": ["sh:echo docs > docs.md"],
        "ISC-E-1": ["fail:not today"],
    })
}

#[test]
fn three_shards_merged_give_what_one_run_gives() {
    let sb = repo(CRITERIA, plan(), &[("f.txt", &lines(20))]);
    let jobs: Vec<PathBuf> = (1..=3).map(|i| clone(&sb, &format!("job{i}"))).collect();
    let fan_in = clone(&sb, "fan-in");
    let bundles = sb.root().join("bundles");

    // The setup job: the matrix and each shard's criteria.
    let out = run_in(
        &sb,
        &jobs[0],
        &["plan", "PRD.md", "--shards", "3", "--json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let planned: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        planned["include"],
        json!([{"shard": "1/3"}, {"shard": "2/3"}, {"shard": "3/3"}])
    );
    let shard_ids = |i: usize| -> Vec<String> {
        planned["shards"][i]["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_string())
            .collect()
    };
    // Whole domains, balanced like lanes: A and E, B, C and D.
    assert_eq!(shard_ids(0), ["ISC-A-1", "ISC-A-2", "ISC-E-1"]);
    assert_eq!(shard_ids(1), ["ISC-B-1", "ISC-B-2"]);
    assert_eq!(shard_ids(2), ["ISC-C-1", "ISC-D-1"]);

    // The shard jobs.
    for (i, dir) in jobs.iter().enumerate() {
        let shard = format!("{}/3", i + 1);
        let bundle = bundles.join(format!("prdloop-shard-{}", i + 1));
        let out = run_in(
            &sb,
            dir,
            &[
                "run",
                "PRD.md",
                "-a",
                "2",
                "-n",
                "2",
                "--shard",
                &shard,
                "--bundle",
                bundle.to_str().unwrap(),
            ],
        );
        let want = if i == 0 { 1 } else { 0 };
        assert_eq!(code(&out), want, "shard {shard}: {}", stderr(&out));
        // A shard that finished its criteria does not call the whole PRD complete.
        assert!(!prd_of(dir).contains("status: COMPLETE"), "shard {shard}");
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(bundle.join("bundle.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["shard"], json!({"index": i + 1, "count": 3}));
        assert_eq!(
            manifest["base"].as_str().unwrap(),
            git(&sb.work(), &["rev-parse", "HEAD"]).trim()
        );
        let ids: Vec<&str> = manifest["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert_eq!(ids, shard_ids(i), "shard {shard}");
        // Only its own criteria were worked.
        for r in sb.worker_records() {
            let c = r["criterion"].as_str().unwrap();
            let prd = r["prd"].as_str().unwrap_or_default();
            if prd.starts_with(dir.to_str().unwrap()) {
                assert!(ids.contains(&c), "shard {shard} ran {c}");
            }
        }
        for o in manifest["outcomes"].as_array().unwrap() {
            let want = if o["id"] == "ISC-E-1" { "fail" } else { "pass" };
            assert_eq!(o["outcome"], want, "{o}");
            assert!(o["state"]["attempts"].as_u64().unwrap() >= 1, "{o}");
            let log = o["state"]["lastLog"].as_str().expect("a log");
            assert!(bundle.join(log).is_file(), "{log}");
        }
        assert!(bundle.join("changes.patch").is_file());
    }
    // The binary file travels in the patch.
    let patch = std::fs::read(bundles.join("prdloop-shard-3/changes.patch")).unwrap();
    assert!(
        String::from_utf8_lossy(&patch).contains("GIT binary patch"),
        "{}",
        String::from_utf8_lossy(&patch)
    );

    // The fan-in job: every bundle, as download-artifact leaves them (one folder each).
    let out = run_in(
        &sb,
        &fan_in,
        &["merge", "PRD.md", bundles.to_str().unwrap()],
    );
    // 6/7 passing; what each tick rests on: a Verify command run here (checked), or the
    // shard's word (claimed, a Review).
    snapshot!(sb.root(), "three_shards_merged", &shown(&out));

    // The same, on one machine.
    let out = sb.run(&["run", "PRD.md", "-a", "2", "-n", "2"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));

    let single = sb.work();
    assert_eq!(prd_of(&fan_in), prd_of(&single));
    let prd = prd_of(&fan_in);
    for id in [
        "ISC-A-1", "ISC-A-2", "ISC-B-1", "ISC-B-2", "ISC-C-1", "ISC-D-1",
    ] {
        assert!(ticked(&prd, id), "{id}: {prd}");
    }
    assert!(!ticked(&prd, "ISC-E-1"));
    for f in ["a.txt", "b.txt", "f.txt", "c.bin", "docs.md"] {
        assert_eq!(read(&fan_in, f), read(&single, f), "{f}");
        assert!(read(&fan_in, f).is_some(), "{f}");
    }
    assert_eq!(read(&fan_in, "c.bin").unwrap(), [0u8, 1]);
    assert_eq!(status(&fan_in), status(&single));

    // One state file with the shards' history summed.
    let states: Vec<serde_json::Value> = std::fs::read_dir(sb.state_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok())
        .filter(|s: &serde_json::Value| {
            s["prdPath"]
                .as_str()
                .is_some_and(|p| p.starts_with(fan_in.to_str().unwrap()))
        })
        .collect();
    assert_eq!(states.len(), 1, "{states:?}");
    let st = &states[0];
    assert_eq!(st["loopHistory"].as_array().unwrap().len(), 2);
    // Iteration 1: every criterion once (7 attempts over the shards); iteration 2: E again.
    assert_eq!(st["loopHistory"][0]["attempts"], 7, "{st}");
    assert_eq!(st["loopHistory"][0]["criteriaPassing"], 6, "{st}");
    assert_eq!(st["loopHistory"][1]["attempts"], 1, "{st}");
    let tokens: u64 = st["usage"]["input_tokens"]
        .as_u64()
        .or_else(|| st["usage"]["inputTokens"].as_u64())
        .unwrap_or(0);
    // Eight workers, and the verifier's review of the one pass no command checks (ISC-D-1).
    assert_eq!(tokens, 9 * 100, "{st}");
    let e = st["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ISC-E-1")
        .unwrap();
    assert_eq!(e["attempts"], 2);
    assert!(
        Path::new(e["lastLog"].as_str().unwrap()).is_file(),
        "the shard's log is kept: {e}"
    );
}

#[test]
fn a_conflicting_bundle_is_reported_and_not_applied_half_way() {
    // Domains A and B both rewrite line 2; B also writes a file of its own.
    let sb = repo(
        &[
            "- [ ] ISC-A-1: line 2 says A | Verify: CLI: `grep -q '^A$' f.txt`",
            "- [ ] ISC-B-1: line 2 says B | Verify: CLI: `grep -q '^B$' f.txt`",
            "- [ ] ISC-B-2: b.txt exists | Verify: CLI: `test -f b.txt`",
        ],
        json!({
            "ISC-A-1": ["sh:sed -i 's/^line 2$/A/' f.txt"],
            "ISC-B-1": ["sh:sed -i 's/^line 2$/B/' f.txt"],
            "ISC-B-2": ["write:b.txt"],
        }),
        &[("f.txt", &lines(5))],
    );
    let jobs: Vec<PathBuf> = (1..=2).map(|i| clone(&sb, &format!("job{i}"))).collect();
    let fan_in = clone(&sb, "fan-in");
    let bundles = sb.root().join("bundles");
    for (i, dir) in jobs.iter().enumerate() {
        let bundle = bundles.join(format!("s{}", i + 1));
        let out = run_in(
            &sb,
            dir,
            &[
                "run",
                "PRD.md",
                "--shard",
                &format!("{}/2", i + 1),
                "--bundle",
                bundle.to_str().unwrap(),
            ],
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        // Its summary speaks of its own criteria.
        assert!(
            stderr(&out).contains("complete: all ") && stderr(&out).contains("(this shard's; "),
            "{}",
            stderr(&out)
        );
    }
    let before = std::fs::read_to_string(fan_in.join("f.txt")).unwrap();
    // Shard 1 is domain B (the larger). Bundles are applied in shard order whatever order
    // they are given in: B's change lands, then A's is the one that conflicts.
    let (b_dir, a_dir) = (bundles.join("s1"), bundles.join("s2"));
    let b_first: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b_dir.join("bundle.json")).unwrap()).unwrap();
    assert_eq!(b_first["criteria"], json!(["ISC-B-1", "ISC-B-2"]));
    let out = run_in(
        &sb,
        &fan_in,
        &[
            "merge",
            "PRD.md",
            a_dir.to_str().unwrap(),
            b_dir.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bundles"][0]["result"], "merged", "{v}");
    assert_eq!(v["bundles"][1]["result"], "conflict", "{v}");
    assert_eq!(v["bundles"][1]["files"], json!(["f.txt"]), "{v}");
    let a = v["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ISC-A-1")
        .unwrap();
    assert_eq!(a["passed"], false);
    assert!(
        a["reason"]
            .as_str()
            .unwrap()
            .contains("merge conflict in f.txt"),
        "{a}"
    );
    assert!(stderr(&out).contains("merge conflict in f.txt"));
    // What stderr said, the report lists, typed.
    assert_eq!(v["warnings"][0]["kind"], "not_applied", "{v}");
    assert_eq!(v["warnings"][0]["shard"], "2/2", "{v}");
    assert!(
        stderr(&out).contains(v["warnings"][0]["text"].as_str().unwrap()),
        "{v}"
    );
    // Shard 1's work is all there; shard 2's not at all.
    let f = std::fs::read_to_string(fan_in.join("f.txt")).unwrap();
    assert_eq!(f, before.replace("line 2\n", "B\n"));
    assert!(fan_in.join("b.txt").is_file());
    let prd = prd_of(&fan_in);
    assert!(ticked(&prd, "ISC-B-1") && ticked(&prd, "ISC-B-2"), "{prd}");
    assert!(!ticked(&prd, "ISC-A-1"), "{prd}");
}

#[test]
fn bundles_from_another_base_or_prd_are_refused_and_nothing_changes() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
        ],
        json!({"ISC-A-1": ["write:a.txt"], "ISC-B-1": ["write:b.txt"]}),
        &[("README", "hello\n")],
    );
    let job = clone(&sb, "job");
    let bundle = sb.root().join("bundle");
    let out = run_in(
        &sb,
        &job,
        &[
            "run",
            "PRD.md",
            "--shard",
            "1/2",
            "--bundle",
            bundle.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // The fan-in checkout moved on: another base.
    let moved = clone(&sb, "moved");
    std::fs::write(moved.join("README"), "changed\n").unwrap();
    git(&moved, &["commit", "-q", "-am", "another commit"]);
    let prd_before = std::fs::read_to_string(moved.join("PRD.md")).unwrap();
    let out = run_in(&sb, &moved, &["merge", "PRD.md", bundle.to_str().unwrap()]);
    // Exit 7: the shard ran on another commit.
    snapshot!(sb.root(), "a_bundle_of_another_base", &shown(&out));
    assert_eq!(
        std::fs::read_to_string(moved.join("PRD.md")).unwrap(),
        prd_before
    );
    assert!(!moved.join("a.txt").exists() && !moved.join("b.txt").exists());

    // A bundle of another PRD.
    let fan_in = clone(&sb, "fan-in");
    let manifest = bundle.join("bundle.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    m["prd"]["path"] = json!("docs/OTHER.md");
    std::fs::write(&manifest, m.to_string()).unwrap();
    let out = run_in(&sb, &fan_in, &["merge", "PRD.md", bundle.to_str().unwrap()]);
    snapshot!(sb.root(), "a_bundle_of_another_prd", &shown(&out));
    assert!(status(&fan_in).is_empty(), "{:?}", status(&fan_in));

    // Two shards that claim one criterion (jobs that split differently): the split is
    // computed again, and shard 2's are not these.
    m["prd"]["path"] = json!("PRD.md");
    std::fs::write(&manifest, m.to_string()).unwrap();
    let twin = sb.root().join("twin");
    std::fs::create_dir_all(&twin).unwrap();
    for f in ["bundle.json", "changes.patch"] {
        std::fs::copy(bundle.join(f), twin.join(f)).unwrap();
    }
    std::fs::create_dir_all(twin.join("logs")).unwrap();
    for e in std::fs::read_dir(bundle.join("logs")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), twin.join("logs").join(e.file_name())).unwrap();
    }
    let mut t = m.clone();
    t["shard"]["index"] = json!(2);
    std::fs::write(twin.join("bundle.json"), t.to_string()).unwrap();
    let out = run_in(
        &sb,
        &fan_in,
        &[
            "merge",
            "PRD.md",
            bundle.to_str().unwrap(),
            twin.to_str().unwrap(),
        ],
    );
    snapshot!(sb.root(), "two_bundles_claim_one_criterion", &shown(&out));
    assert!(status(&fan_in).is_empty(), "{:?}", status(&fan_in));
}

#[test]
fn a_shard_with_nothing_to_do_writes_an_empty_bundle() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[("README", "hello\n")],
    );
    let out = sb.run(&["plan", "PRD.md", "--shards", "4", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["include"],
        json!([{"shard": "1/1"}]),
        "one domain: one job"
    );
    let bundle = sb.root().join("b");
    let out = sb.run(&[
        "run",
        "PRD.md",
        "--shard",
        "3/4",
        "--bundle",
        bundle.to_str().unwrap(),
    ]);
    snapshot!(sb.root(), "a_shard_with_nothing_to_do", &shown(&out));
    assert!(sb.worker_records().is_empty());
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("bundle.json")).unwrap())
            .unwrap();
    assert_eq!(m["criteria"], json!([]));
    // --shard needs --bundle.
    let out = sb.run(&["run", "PRD.md", "--shard", "1/2"]);
    assert_eq!(code(&out), 2);
}

#[test]
fn a_bundle_folder_that_cannot_take_the_bundle_is_refused_before_any_work() {
    let sb = repo(
        &["- [ ] ISC-A-1: a1 exists | Verify: CLI: `test -f a1`"],
        json!({"*": ["write:a1"]}),
        &[("main.rs", "fn main() {}\n")],
    );
    // A folder holding other files.
    std::fs::create_dir_all(sb.work().join("src")).unwrap();
    std::fs::write(sb.work().join("src/lib.rs"), "").unwrap();
    let out = sb.run(&["run", "PRD.md", "--shard", "1/1", "--bundle", "src"]);
    snapshot!(
        sb.root(),
        "a_bundle_folder_holding_other_files",
        &shown(&out)
    );
    assert!(
        sb.worker_records().is_empty(),
        "an agent ran before the refusal"
    );
    // A shard run twice in one checkout: the second would split what is still failing
    // differently and replace the first bundle.
    let bundle = sb.root().join("b1");
    let b = bundle.to_str().unwrap();
    let out = sb.run(&["run", "PRD.md", "--shard", "1/1", "--bundle", b]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    std::fs::write(
        sb.prd(),
        sb.prd_text().replace("- [x] ISC-A-1", "- [ ] ISC-A-1"),
    )
    .unwrap();
    let before = std::fs::read_to_string(bundle.join("bundle.json")).unwrap();
    let out = sb.run(&["run", "PRD.md", "--force", "--shard", "1/1", "--bundle", b]);
    snapshot!(sb.root(), "a_shard_run_twice_in_one_bundle", &shown(&out));
    assert_eq!(
        std::fs::read_to_string(bundle.join("bundle.json")).unwrap(),
        before
    );
    // resume --shard is refused.
    let out = sb.run(&["resume", "PRD.md", "--shard", "1/1", "--bundle", b]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("not `resume`"), "{}", stderr(&out));
}

/// A real fan-out of two shards, for tampering with: shard 1 is domain A (ISC-A-1 passes,
/// ISC-A-2 fails), shard 2 is B (ISC-B-1 passes); ISC-H-1 is `Verify: Custom`, in no shard.
struct Tampered {
    sb: Sandbox,
    bundles: PathBuf,
    fan_in: PathBuf,
    /// A stand-in for the merging user's `~/.ssh`.
    private: PathBuf,
    prd_before: Vec<u8>,
    refs_before: String,
    state_before: Vec<PathBuf>,
    cases: std::cell::Cell<usize>,
}

fn refs(d: &Path) -> String {
    git(d, &["for-each-ref"]) + &git(d, &["rev-parse", "HEAD"])
}

/// Every path under `d`.
fn listing(d: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut stack = vec![d.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            v.push(e.path());
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    v.sort();
    v
}

/// The manifest in `dir` edited by `f`.
fn edit(dir: &Path, f: &dyn Fn(&mut serde_json::Value)) {
    let p = dir.join("bundle.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    f(&mut m);
    std::fs::write(&p, m.to_string()).unwrap();
}

/// A `pass` outcome of `id`, made from the manifest's first outcome.
fn pass_of(m: &serde_json::Value, id: &str) -> serde_json::Value {
    let mut o = m["outcomes"][0].clone();
    o["id"] = json!(id);
    o["state"]["id"] = json!(id);
    o["outcome"] = json!("pass");
    o
}

impl Tampered {
    fn new() -> Tampered {
        let sb = repo(
            &[
                "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
                "- [ ] ISC-A-2: the impossible holds | Verify: CLI: `test -f never.txt`",
                "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
                "- [ ] ISC-H-1: a person signs off | Verify: Custom: the release manager looks",
            ],
            json!({
                "ISC-A-1": ["write:a.txt"],
                "ISC-A-2": ["fail:not today"],
                "ISC-B-1": ["write:b.txt"],
            }),
            &[("README", "hello\n")],
        );
        let bundles = sb.root().join("bundles");
        for i in 1..=2 {
            let job = clone(&sb, &format!("job{i}"));
            let bundle = bundles.join(format!("s{i}"));
            let out = run_in(
                &sb,
                &job,
                &[
                    "run",
                    "PRD.md",
                    "-n",
                    "1",
                    "--shard",
                    &format!("{i}/2"),
                    "--bundle",
                    bundle.to_str().unwrap(),
                ],
            );
            assert!(code(&out) <= 1, "shard {i}: {}", stderr(&out));
        }
        let manifest = |i: usize| -> serde_json::Value {
            serde_json::from_str(
                &std::fs::read_to_string(bundles.join(format!("s{i}/bundle.json"))).unwrap(),
            )
            .unwrap()
        };
        assert_eq!(manifest(1)["criteria"], json!(["ISC-A-1", "ISC-A-2"]));
        assert_eq!(manifest(2)["criteria"], json!(["ISC-B-1"]));
        assert_eq!(manifest(1)["outcomes"][1]["outcome"], "fail");
        let fan_in = clone(&sb, "fan-in");
        let private = sb.root().join("private");
        std::fs::create_dir_all(&private).unwrap();
        std::fs::write(private.join("id_ed25519"), "SECRET KEY\n").unwrap();
        Tampered {
            prd_before: std::fs::read(fan_in.join("PRD.md")).unwrap(),
            refs_before: refs(&fan_in),
            state_before: listing(&sb.state_dir()),
            sb,
            bundles,
            fan_in,
            private,
            cases: std::cell::Cell::new(0),
        }
    }

    /// A copy of the good bundles, tampered with by `tamper`, merged (with `extra` flags):
    /// refused with exit 7 and the texts of `want`, and nothing changed. Its stderr.
    fn refused(&self, tamper: &dyn Fn(&Path), extra: &[&str], want: &[&str]) -> String {
        let n = self.cases.get() + 1;
        self.cases.set(n);
        let case = self.sb.root().join(format!("case{n}"));
        let out = std::process::Command::new("cp")
            .args(["-a", self.bundles.to_str().unwrap(), case.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success());
        tamper(&case);
        let mut args = vec!["merge", "PRD.md", case.to_str().unwrap(), "--json"];
        args.extend_from_slice(extra);
        let out = run_in(&self.sb, &self.fan_in, &args);
        let err = stderr(&out);
        assert_eq!(code(&out), 7, "case {n} ({want:?}): {err}");
        for w in want {
            assert!(err.contains(w), "case {n}: wanted `{w}` in: {err}");
        }
        assert!(err.contains("nothing was changed"), "{err}");
        assert!(out.stdout.is_empty(), "case {n}");
        assert_eq!(
            std::fs::read(self.fan_in.join("PRD.md")).unwrap(),
            self.prd_before
        );
        let st = status(&self.fan_in);
        assert!(st.is_empty(), "case {n}: {st:?}");
        assert_eq!(refs(&self.fan_in), self.refs_before);
        assert_eq!(listing(&self.sb.state_dir()), self.state_before, "case {n}");
        err
    }
}

/// The human gate: a bundle's pass for a `Verify: Custom` criterion (which no shard holds).
#[test]
fn a_bundle_cannot_tick_a_custom_criterion() {
    let t = Tampered::new();
    // A pass for the Custom criterion: the human gate.
    t.refused(
        &|c| {
            edit(&c.join("s2"), &|m| {
                let o = pass_of(m, "ISC-H-1");
                m["outcomes"].as_array_mut().unwrap().push(o);
                m["criteria"].as_array_mut().unwrap().push(json!("ISC-H-1"));
            })
        },
        &[],
        &[
            "s2/bundle.json: outcomes[1].id",
            "ISC-H-1 is a `Verify: Custom` criterion",
        ],
    );
    // The same, its outcome alone (not among the bundle's criteria).
    t.refused(
        &|c| {
            edit(&c.join("s2"), &|m| {
                let o = pass_of(m, "ISC-H-1");
                m["outcomes"].as_array_mut().unwrap().push(o);
            })
        },
        &[],
        &[
            "s2/bundle.json: outcomes[1].id",
            "not one of the bundle's criteria",
        ],
    );

    // The bundles as the shards wrote them merge; each pass is checked on the merged tree.
    let out = run_in(
        &t.sb,
        &t.fan_in,
        &["merge", "PRD.md", t.bundles.to_str().unwrap(), "--json"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let of = |id: &str| {
        v["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(of("ISC-A-1")["evidence"], "checked", "{v}");
    assert_eq!(of("ISC-B-1")["evidence"], "checked", "{v}");
    assert_eq!(of("ISC-A-2")["evidence"], json!(null), "{v}");
    let prd = prd_of(&t.fan_in);
    assert!(ticked(&prd, "ISC-A-1") && ticked(&prd, "ISC-B-1"), "{prd}");
    assert!(
        !ticked(&prd, "ISC-A-2") && !ticked(&prd, "ISC-H-1"),
        "{prd}"
    );
    assert!(!prd.contains("status: COMPLETE"), "{prd}");
}

/// Shard 2's manifest claims a pass for shard 1's criterion (which shard 1 failed): the split
/// is computed again from the PRD, and outcomes count only for the bundle's own criteria.
#[test]
fn a_bundle_cannot_claim_another_shards_criterion() {
    let t = Tampered::new();
    // Shard 2 claims a pass for shard 1's criterion, which shard 1 failed.
    t.refused(
        &|c| {
            edit(&c.join("s2"), &|m| {
                let o = pass_of(m, "ISC-A-2");
                m["outcomes"].as_array_mut().unwrap().push(o);
                m["criteria"].as_array_mut().unwrap().push(json!("ISC-A-2"));
            })
        },
        &[],
        &[
            "s2/bundle.json: criteria",
            "ISC-A-2 not shard 2/2's",
            "gives it ISC-B-1",
        ],
    );
    // The same pass as an outcome alone, not among shard 2's criteria.
    t.refused(
        &|c| {
            edit(&c.join("s2"), &|m| {
                let o = pass_of(m, "ISC-A-2");
                m["outcomes"].as_array_mut().unwrap().push(o);
            })
        },
        &[],
        &[
            "s2/bundle.json: outcomes[1].id",
            "ISC-A-2 is not one of the bundle's criteria (ISC-B-1)",
        ],
    );
    // Or with shard 1's bundle left out, so no other bundle holds ISC-A-2.
    t.refused(
        &|c| {
            std::fs::remove_dir_all(c.join("s1")).unwrap();
            edit(&c.join("s2"), &|m| {
                let o = pass_of(m, "ISC-A-2");
                m["outcomes"].as_array_mut().unwrap().push(o);
                m["criteria"].as_array_mut().unwrap().push(json!("ISC-A-2"));
            })
        },
        &[],
        &["s2/bundle.json: criteria", "ISC-A-2 not shard 2/2's"],
    );
    // Shard 1's own criteria under shard 2's name: the split decides, not the bundle.
    t.refused(
        &|c| {
            edit(&c.join("s2"), &|m| {
                m["criteria"] = json!(["ISC-A-2"]);
                let o = pass_of(m, "ISC-A-2");
                m["outcomes"] = json!([o]);
            })
        },
        &[],
        &["s2/bundle.json: criteria", "ISC-A-2 not shard 2/2's"],
    );
}

/// `count: 18446744073709551615` (an endless loop before), index 0 or 99, count 0.
#[test]
fn shard_numbers_out_of_range_are_refused() {
    let t = Tampered::new();
    // Shard numbers out of range, in both bundles (so that they agree with each other).
    for (field, value, want) in [
        (
            "count",
            json!(u64::MAX),
            "shard.count: 18446744073709551615 is not a shard count",
        ),
        ("count", json!(0), "shard.count: 0 is not a shard count"),
        ("index", json!(0), "shard.index: 0 is not a shard of 2"),
        ("index", json!(99), "shard.index: 99 is not a shard of 2"),
    ] {
        t.refused(
            &|c| {
                for s in ["s1", "s2"] {
                    edit(&c.join(s), &|m| m["shard"][field] = value.clone());
                }
            },
            &[],
            &["/bundle.json: ", want],
        );
    }
}

/// A patch that is a link to /dev/zero or a FIFO, or bigger than the limit; a manifest bigger
/// than its limit: none of them is read whole.
#[test]
fn an_endless_or_oversized_file_in_a_bundle_is_refused() {
    let t = Tampered::new();
    // The patch a link to /dev/zero (endless), or a FIFO (a read that never ends).
    t.refused(
        &|c| {
            let p = c.join("s1/changes.patch");
            std::fs::remove_file(&p).unwrap();
            std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        },
        &[],
        &["s1/changes.patch: a symbolic link, not a plain file"],
    );
    t.refused(
        &|c| {
            let p = c.join("s1/changes.patch");
            std::fs::remove_file(&p).unwrap();
            nix::unistd::mkfifo(&p, nix::sys::stat::Mode::S_IRWXU).unwrap();
        },
        &[],
        &["s1/changes.patch: a device, FIFO or socket, not a plain file"],
    );
    // A patch above the limit (a zip bomb's unpacked size).
    t.refused(
        &|_| {},
        &["--max-bundle-size", "10"],
        &[
            "s1/changes.patch: ",
            "above the limit of 10; --max-bundle-size raises it",
        ],
    );
    // A manifest above its limit.
    t.refused(
        &|c| {
            let p = c.join("s1/bundle.json");
            let mut text = std::fs::read_to_string(&p).unwrap();
            text.push_str(&" ".repeat(5 << 20));
            std::fs::write(&p, text).unwrap();
        },
        &[],
        &["s1/bundle.json: ", "above the limit of 4194304"],
    );
}

/// `logs/` a link to a private folder of the merging user, a link inside `logs/`, a `lastLog`
/// out of the bundle: nothing outside the bundle folder is read or copied.
#[test]
fn a_bundle_cannot_reach_outside_its_folder() {
    let t = Tampered::new();
    // logs/ a link to the merging user's private folder; or a link inside logs/.
    let err = t.refused(
        &|c| {
            let p = c.join("s1/logs");
            std::fs::remove_dir_all(&p).unwrap();
            std::os::unix::fs::symlink(&t.private, &p).unwrap();
        },
        &[],
        &["s1/logs: a symbolic link, not a plain folder"],
    );
    assert!(!err.contains("SECRET"));
    t.refused(
        &|c| {
            std::os::unix::fs::symlink(t.private.join("id_ed25519"), c.join("s1/logs/key.log"))
                .unwrap();
        },
        &[],
        &["s1/logs/key.log: a symbolic link, not a plain file"],
    );
    // A hard link to the private file (on the same file system, as a bundle made on this
    // machine could be).
    t.refused(
        &|c| {
            std::fs::hard_link(t.private.join("id_ed25519"), c.join("s1/logs/key.log")).unwrap();
        },
        &[],
        &["s1/logs/key.log: a hard link (one of 2 names of a file), not a plain file"],
    );
    // A log path leading out of the bundle.
    t.refused(
        &|c| {
            edit(&c.join("s1"), &|m| {
                m["outcomes"][0]["state"]["lastLog"] = json!("logs/../../private/id_ed25519")
            })
        },
        &[],
        &["s1/bundle.json: outcomes[0].state.lastLog"],
    );
}

/// The patch deletes a file the manifest's `files` does not name (applied silently before),
/// and the other way round.
#[test]
fn a_patch_must_change_exactly_the_files_its_manifest_lists() {
    let t = Tampered::new();
    // The patch deletes a file its manifest's `files` does not name.
    let deletion = {
        let d = clone(&t.sb, "deleter");
        git(&d, &["rm", "-q", "README"]);
        git(&d, &["diff", "--cached", "--binary", "--full-index"])
    };
    t.refused(
        &|c| {
            let p = c.join("s1/changes.patch");
            let mut patch = std::fs::read_to_string(&p).unwrap();
            patch.push_str(&deletion);
            std::fs::write(&p, patch).unwrap();
        },
        &[],
        &["s1/changes.patch: changes README, which bundle.json's `files` does not name"],
    );
    // `files` names a file the patch does not change.
    t.refused(
        &|c| {
            edit(&c.join("s1"), &|m| {
                m["files"].as_array_mut().unwrap().push(json!("README"))
            })
        },
        &[],
        &["s1/bundle.json: files[1]: names README, which changes.patch does not change"],
    );
    // A patch that does not apply at all is not a refusal: nothing of it is merged, and its
    // shard's passes fail with git's reason (the other shard's work is merged).
    let broken = t.sb.root().join("broken");
    let out = std::process::Command::new("cp")
        .args(["-a", t.bundles.to_str().unwrap(), broken.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(broken.join("s1/changes.patch"), "not a patch\n").unwrap();
    let out = run_in(
        &t.sb,
        &t.fan_in,
        &["merge", "PRD.md", broken.to_str().unwrap(), "--json"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bundles"][0]["result"], "error", "{v}");
    let a1 = v["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ISC-A-1")
        .unwrap();
    assert_eq!(a1["passed"], false, "{a1}");
    assert!(
        a1["reason"]
            .as_str()
            .unwrap()
            .contains("shard 1/2's changes could not be applied"),
        "{a1}"
    );
    assert!(!t.fan_in.join("a.txt").exists());
    assert!(t.fan_in.join("b.txt").exists());
    let prd = prd_of(&t.fan_in);
    assert!(!ticked(&prd, "ISC-A-1") && ticked(&prd, "ISC-B-1"), "{prd}");
}
