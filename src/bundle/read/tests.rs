//! The bundle reader against hostile bundles.
use super::*;
use crate::bundle::{CriterionEnd, CriterionRecord};
use crate::state::{CriterionState, CriterionStatus, LoopEntry};
use proptest::prelude::*;

const PRD: &str = "---\nprd: true\nid: PRD-1\nstatus: IN_PROGRESS\n---\n\n# T\n\n## IDEAL STATE CRITERIA\n\n- [ ] ISC-A-1: a | Verify: CLI: `test -f a`\n- [ ] ISC-A-2: b | Verify: CLI: `test -f b`\n- [ ] ISC-H-1: c | Verify: Custom: a person looks\n";

fn manifest() -> Manifest {
    let outcome = |id: &str, outcome| CriterionRecord {
        id: id.into(),
        outcome,
        state: CriterionState {
            id: id.into(),
            status: CriterionStatus::Completed,
            attempts: 1,
            last_log: Some(format!("{LOGS}/iter1-{id}.log")),
            ..CriterionState::default()
        },
    };
    Manifest {
        version: VERSION,
        prdloop: "0".into(),
        shard: Shard { index: 1, count: 1 },
        base: "b".repeat(40),
        prd: PrdId {
            path: "PRD.md".into(),
            id: Some("PRD-1".into()),
            hash: crate::state::text_hash(PRD),
        },
        criteria: vec!["ISC-A-1".into(), "ISC-A-2".into()],
        outcomes: vec![
            outcome("ISC-A-1", CriterionEnd::Pass),
            outcome("ISC-A-2", CriterionEnd::Fail),
        ],
        exit_code: 1,
        summary: None,
        stop_reason: None,
        iterations: vec![LoopEntry {
            iteration: 1,
            criteria_passing: 1,
            criteria_total: 3,
            attempts: 2,
            ..LoopEntry::default()
        }],
        cost_usd: 0.5,
        usage: Default::default(),
        files: vec!["a".into()],
        started_at: 1,
        completed_at: 2,
        session: None,
    }
}

/// A good bundle in `dir`.
fn good(dir: &Path) -> serde_json::Value {
    std::fs::create_dir_all(dir.join(LOGS)).unwrap();
    for id in ["ISC-A-1", "ISC-A-2"] {
        std::fs::write(dir.join(LOGS).join(format!("iter1-{id}.log")), "log\n").unwrap();
    }
    std::fs::write(dir.join(PATCH), "diff --git a/a b/a\n").unwrap();
    let v = serde_json::to_value(manifest()).unwrap();
    std::fs::write(dir.join(MANIFEST), v.to_string()).unwrap();
    v
}

fn me() -> PrdId {
    manifest().prd
}

fn limits() -> Limits {
    Limits { size: 1 << 20 }
}

#[test]
fn a_good_bundle_is_read_and_fits_its_prd() {
    let t = tempfile::tempdir().unwrap();
    good(t.path());
    let b = Bundle::load(t.path(), &limits()).unwrap();
    assert_eq!(b.logs.len(), 2);
    let prd = Prd::parse(PRD).unwrap();
    b.check(&prd, &me(), &"b".repeat(40)).unwrap();
    // The split decides: as 1 of 2 its criteria would be another shard's.
    let mut m = b.clone();
    m.manifest.shard = Shard { index: 1, count: 2 };
    m.manifest.criteria.reverse();
    let r = m.check(&prd, &me(), &"b".repeat(40)).unwrap_err();
    assert_eq!(r.field.as_deref(), Some("criteria"), "{r}");
    let r = b.check(&prd, &me(), "another").unwrap_err();
    assert_eq!(r.field.as_deref(), Some("base"), "{r}");
}

#[test]
fn more_bundles_than_a_fan_out_has_are_refused_before_any_is_read() {
    let t = tempfile::tempdir().unwrap();
    for i in 0..=MAX_SHARDS {
        let d = t.path().join(format!("b{i}"));
        std::fs::create_dir(&d).unwrap();
        // Not even a manifest: none is read.
        std::fs::write(d.join(MANIFEST), "").unwrap();
    }
    let e = Bundle::find(&[t.path().to_path_buf()], &limits()).unwrap_err();
    let r = e.downcast_ref::<Refused>().expect("a refusal");
    assert!(r.why.contains("257 bundles"), "{r}");
}

#[test]
fn sizes() {
    assert_eq!(parse_size("512M"), Ok(512 << 20));
    assert_eq!(parse_size("2GiB"), Ok(2 << 30));
    assert_eq!(parse_size("10"), Ok(10));
    assert_eq!(parse_size(" 4k "), Ok(4 << 10));
    for bad in ["", "0", "-1", "M", "1T", "99999999999999G"] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
}

/// A change to a good bundle.
#[derive(Debug, Clone)]
enum Mutation {
    /// The manifest's bytes at these offsets set.
    Bytes(Vec<(usize, u8)>),
    Truncate(usize),
    /// The `n`th value of the manifest (in a walk of it) replaced.
    Value(usize, Nasty),
    /// A field the checks are about (a JSON pointer) set.
    Field(&'static str, Nasty),
    /// The `n`th value replaced by an array of `k` copies of itself.
    Repeat(usize, usize),
    Patch(Kind),
    Logs(Kind),
    /// A file under logs/ made one of these.
    LogFile(Kind),
}

#[derive(Debug, Clone)]
enum Nasty {
    Num(serde_json::Number),
    Str(String),
    Deep(usize),
    Null,
    Bool,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    LinkToZero,
    HardLinkOut,
    LinkOut,
    Fifo,
    Folder,
    Big,
    Deep,
}

fn nasty() -> impl Strategy<Value = Nasty> {
    prop_oneof![
        prop_oneof![
            Just(u64::MAX),
            Just(0u64),
            Just(99),
            Just(1),
            Just(2),
            Just(COUNT_MAX + 1),
            any::<u64>()
        ]
        .prop_map(|n| Nasty::Num(n.into())),
        Just(Nasty::Num(serde_json::Number::from(-1i64))),
        Just(Nasty::Num(serde_json::Number::from_f64(1e308).unwrap())),
        prop_oneof![
            Just("../../etc/passwd".to_string()),
            Just("logs/../../x".to_string()),
            Just("/dev/zero".to_string()),
            Just("ISC-H-1".to_string()),
            Just("ISC-A-1".to_string()),
            Just("ISC-A-2".to_string()),
            Just("ISC-B-9".to_string()),
            Just("pass".to_string()),
            Just("logs/iter1-ISC-A-2.log".to_string()),
            Just("\u{1b}]0;owned\u{7}".to_string()),
            "[a-zA-Z0-9/._-]{0,40}",
            (0usize..200_000).prop_map(|n| "x".repeat(n)),
        ]
        .prop_map(Nasty::Str),
        (1usize..400).prop_map(Nasty::Deep),
        Just(Nasty::Null),
        Just(Nasty::Bool),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::LinkToZero),
        Just(Kind::HardLinkOut),
        Just(Kind::LinkOut),
        Just(Kind::Fifo),
        Just(Kind::Folder),
        Just(Kind::Big),
        Just(Kind::Deep),
    ]
}

const FIELDS: &[&str] = &[
    "/version",
    "/shard/index",
    "/shard/count",
    "/base",
    "/prd/path",
    "/prd/hash",
    "/criteria/0",
    "/criteria/1",
    "/criteria",
    "/outcomes/0/id",
    "/outcomes/1/id",
    "/outcomes/1/outcome",
    "/outcomes/0/state/lastLog",
    "/outcomes/0/state/attempts",
    "/outcomes/0/state/costUsd",
    "/files/0",
    "/iterations/0/attempts",
    "/iterations/0/criteriaPassing",
    "/iterations/0/usage/inputTokens",
    "/costUsd",
    "/usage/outputTokens",
];

fn nasty_value(x: &Nasty) -> serde_json::Value {
    match x {
        Nasty::Num(n) => serde_json::Value::Number(n.clone()),
        Nasty::Str(s) => serde_json::Value::String(s.clone()),
        Nasty::Deep(d) => serde_json::from_str(&format!("{}{}", "[".repeat(*d), "]".repeat(*d)))
            .unwrap_or(serde_json::Value::Null),
        Nasty::Null => serde_json::Value::Null,
        Nasty::Bool => serde_json::Value::Bool(true),
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        prop::collection::vec((0usize..4000, any::<u8>()), 1..8).prop_map(Mutation::Bytes),
        (0usize..4000).prop_map(Mutation::Truncate),
        (0usize..200, nasty()).prop_map(|(n, v)| Mutation::Value(n, v)),
        (prop::sample::select(FIELDS), nasty()).prop_map(|(f, v)| Mutation::Field(f, v)),
        (prop::sample::select(FIELDS), nasty()).prop_map(|(f, v)| Mutation::Field(f, v)),
        (0usize..200, 1usize..60_000).prop_map(|(n, k)| Mutation::Repeat(n, k)),
        kind().prop_map(Mutation::Patch),
        kind().prop_map(Mutation::Logs),
        kind().prop_map(Mutation::LogFile),
    ]
}

/// The `n`th value of `v` (modulo their number), walked depth first.
fn nth(v: &mut serde_json::Value, n: usize) -> &mut serde_json::Value {
    fn count(v: &serde_json::Value) -> usize {
        1 + match v {
            serde_json::Value::Array(a) => a.iter().map(count).sum(),
            serde_json::Value::Object(o) => o.values().map(count).sum(),
            _ => 0,
        }
    }
    fn walk(v: &mut serde_json::Value, n: usize) -> &mut serde_json::Value {
        if n == 0 {
            return v;
        }
        let mut n = n - 1;
        let children: Vec<&mut serde_json::Value> = match v {
            serde_json::Value::Array(a) => a.iter_mut().collect(),
            serde_json::Value::Object(o) => o.values_mut().collect(),
            _ => unreachable!("counted"),
        };
        for c in children {
            let k = count(c);
            if n < k {
                return walk(c, n);
            }
            n -= k;
        }
        unreachable!("counted")
    }
    let total = count(v);
    walk(v, n % total)
}

/// `path` made a `kind` of file; best effort (an earlier mutation may have made its
/// folder a file).
fn make(path: &Path, kind: Kind, outside: &Path) {
    let _ = std::fs::remove_dir_all(path);
    let _ = std::fs::remove_file(path);
    let _ = match kind {
        Kind::LinkToZero => std::os::unix::fs::symlink("/dev/zero", path),
        Kind::HardLinkOut => std::fs::hard_link(outside.join("id_ed25519"), path),
        Kind::LinkOut => std::os::unix::fs::symlink(outside, path),
        Kind::Fifo => {
            nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).map_err(std::io::Error::from)
        }
        Kind::Folder => std::fs::create_dir_all(path.join("x")),
        Kind::Big => std::fs::File::create(path).and_then(|f| f.set_len(limits().size + 1)),
        Kind::Deep => {
            let mut p = path.to_path_buf();
            for _ in 0..=LOG_DEPTH_MAX {
                p.push("d");
            }
            std::fs::create_dir_all(&p).and_then(|_| std::fs::write(p.join("f"), ""))
        }
    };
}

fn apply(dir: &Path, v: &serde_json::Value, m: &Mutation, outside: &Path) {
    let write = |v: &serde_json::Value| {
        std::fs::write(dir.join(MANIFEST), v.to_string()).unwrap();
    };
    match m {
        Mutation::Bytes(at) => {
            let mut bytes = v.to_string().into_bytes();
            let len = bytes.len();
            for (i, b) in at {
                bytes[i % len] = *b;
            }
            std::fs::write(dir.join(MANIFEST), bytes).unwrap();
        }
        Mutation::Truncate(n) => {
            let bytes = v.to_string().into_bytes();
            std::fs::write(dir.join(MANIFEST), &bytes[..n % bytes.len()]).unwrap();
        }
        Mutation::Value(n, x) => {
            let mut v = v.clone();
            *nth(&mut v, *n) = nasty_value(x);
            write(&v);
        }
        Mutation::Field(f, x) => {
            let mut v = v.clone();
            if let Some(at) = v.pointer_mut(f) {
                *at = nasty_value(x);
            }
            write(&v);
        }
        Mutation::Repeat(n, k) => {
            let mut v = v.clone();
            let x = nth(&mut v, *n);
            *x = serde_json::Value::Array(vec![x.clone(); *k]);
            write(&v);
        }
        Mutation::Patch(kind) => make(&dir.join(PATCH), *kind, outside),
        Mutation::Logs(kind) => make(&dir.join(LOGS), *kind, outside),
        Mutation::LogFile(kind) => make(&dir.join(LOGS).join("iter1-ISC-A-1.log"), *kind, outside),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    /// The reader over mutated bundles: never a panic or a read without end, and what it
    /// accepts holds what the checks promise.
    #[test]
    fn the_reader_holds_over_mutated_bundles(muts in prop::collection::vec(mutation(), 1..4)) {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("b");
        let outside = t.path().join("private");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("id_ed25519"), "SECRET").unwrap();
        let v = good(&dir);
        for m in &muts {
            apply(&dir, &v, m, &outside);
        }
        let prd = Prd::parse(PRD).unwrap();
        // An endless file (a link to /dev/zero, a FIFO) or a reader that allocates by a
        // count from the manifest would hang here or run out of memory.
        let read = (|| {
            let b = Bundle::load(&dir, &limits())?;
            b.check(&prd, &me(), &"b".repeat(40))?;
            let to = t.path().join("copy");
            b.copy_logs(&to).map_err(|e| refused(&to, None, e.to_string()))?;
            Ok::<Bundle, Refused>(b)
        })();
        if let Ok(b) = read {
            let m = &b.manifest;
            prop_assert!(m.shard.index >= 1 && m.shard.index <= m.shard.count);
            prop_assert!(m.shard.count <= MAX_SHARDS);
            prop_assert!(m.outcomes.iter().all(|o| m.criteria.contains(&o.id)));
            prop_assert!(m.outcomes.iter().all(|o| o.id != "ISC-H-1"));
            prop_assert!(b.patch_len <= limits().size);
            prop_assert!(b.patch().is_ok_and(|p| p.len() as u64 <= limits().size));
            // Merge sums what up to MAX_SHARDS bundles say: no overflow.
            let n = MAX_SHARDS as u64;
            for u in std::iter::once(&m.usage).chain(m.iterations.iter().map(|e| &e.usage)) {
                prop_assert!(u.total().checked_mul(n).is_some());
            }
            for e in &m.iterations {
                prop_assert!(e.attempts.checked_mul(n as u32).is_some());
                prop_assert!(e.cost_usd.is_finite() && e.criteria_passing <= e.criteria_total);
            }
            prop_assert!(m.cost_usd.is_finite() && m.cost_usd >= 0.0);
            let copied = std::fs::read_dir(t.path().join("copy"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| std::fs::read(e.path()).is_ok_and(|x| x == b"SECRET"));
            prop_assert!(!copied);
        }
    }
}
