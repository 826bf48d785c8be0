use super::*;

#[test]
fn deletions_come_first() {
    let op = |path: &str, after: bool| Op {
        change: Change {
            path: path.into(),
            before: Some(Entry {
                mode: 0o100644,
                oid: "a".into(),
            }),
            after: after.then(|| Entry {
                mode: 0o100644,
                oid: "b".into(),
            }),
        },
        temp: PathBuf::new(),
    };
    let ops = vec![op("p/x", true), op("p", false), op("q", true)];
    assert_eq!(order(&ops), vec![1, 0, 2]);
}

#[test]
fn an_executable_bit_counts() {
    let e = |mode| {
        Some(Entry {
            mode,
            oid: "x".into(),
        })
    };
    assert!(matches(&e(0o100644), &e(0o100644)));
    assert!(!matches(&e(0o100644), &e(EXECUTABLE)));
    assert!(!matches(&None, &e(0o100644)));
    assert!(matches(&None, &None));
}

/// A repository with files, its tree now, and a tree with `a` changed, `b` deleted,
/// `c/d` added, `e` made executable.
fn fixture() -> (tempfile::TempDir, Git, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let g = Git::new(dir.path());
    g.cmd().args(&["init", "-q"]).run().unwrap();
    std::fs::write(dir.path().join("a"), "a1\n").unwrap();
    std::fs::write(dir.path().join("b"), "b\n").unwrap();
    std::fs::write(dir.path().join("e"), "#!/bin/sh\n").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let before = g.snapshot_tree(&[], scratch.path()).unwrap();
    let index = scratch.path().join("i");
    g.cmd()
        .args(&["read-tree", &before])
        .index(&index)
        .run()
        .unwrap();
    let blob = |text: &str| {
        g.cmd()
            .args(&["hash-object", "-w", "--stdin"])
            .input(text.as_bytes())
            .text()
            .unwrap()
    };
    let (a2, d, e) = (blob("a2\n"), blob("d\n"), blob("#!/bin/sh\n"));
    let info = format!(
        "100644 {a2}\ta\n0 {}\tb\n100644 {d}\tc/d\n100755 {e}\te\n",
        "0".repeat(40)
    );
    g.cmd()
        .args(&["update-index", "--index-info"])
        .input(info.as_bytes())
        .index(&index)
        .run()
        .unwrap();
    let after = g.cmd().arg("write-tree").index(&index).text().unwrap();
    (dir, g, before, after)
}

fn assert_after(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "a2\n");
    assert!(!dir.join("b").exists());
    assert_eq!(std::fs::read_to_string(dir.join("c/d")).unwrap(), "d\n");
    let mode = std::fs::metadata(dir.join("e"))
        .unwrap()
        .permissions()
        .mode();
    assert!(mode & 0o100 != 0, "{mode:o}");
    assert_no_temporary_files(dir);
}

/// No `.prdloop-landing-*` file is left at the top of the checkout.
fn assert_no_temporary_files(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".prdloop-landing")
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_change_applies_whole() {
    let (dir, g, before, after) = fixture();
    let journal = dir.path().join(".git/prdloop/landing.json");
    let done = apply(&g, &journal, &before, &after, "test").unwrap();
    assert_eq!(done.len(), 4);
    assert_after(dir.path());
    assert!(!journal.exists());
}

#[test]
fn a_checkout_that_changed_is_not_touched() {
    let (dir, g, before, after) = fixture();
    std::fs::write(dir.path().join("a"), "the user's\n").unwrap();
    let journal = dir.path().join(".git/prdloop/landing.json");
    let r = apply(&g, &journal, &before, &after, "test");
    assert!(
        matches!(r, Err(TxError::Changed(ref p)) if p == "a"),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a")).unwrap(),
        "the user's\n"
    );
    assert!(dir.path().join("b").exists());
    assert!(!journal.exists());
}

/// The journal and temporary files as a crash at `phase`, after `swapped` ops, leaves
/// them.
fn crash(dir: &Path, g: &Git, before: &str, after: &str, phase: Phase, swapped: usize) -> PathBuf {
    let journal = dir.join(".git/prdloop/landing.json");
    let changes = changes(g, before, after).unwrap();
    let ops = changes
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let d = if c.after.is_none() {
                dir.to_path_buf()
            } else {
                nearest_dir(dir, &c.path).unwrap()
            };
            Op {
                change: c,
                temp: d.join(format!(".prdloop-landing-9-{i}")),
            }
        })
        .collect();
    let mut j = Journal {
        phase: Phase::Staging,
        top: dir.to_path_buf(),
        label: "ISC-1".into(),
        ops,
        stage: Some(dir.join(".prdloop-landing-9-stage")),
        owed: None,
    };
    save(&journal, &j).unwrap();
    stage(g, &j, &journal).map_err(|e| e.to_string()).unwrap();
    if phase == Phase::Committed {
        j.phase = Phase::Committed;
        save(&journal, &j).unwrap();
        for &i in order(&j.ops).iter().take(swapped) {
            let op = &j.ops[i];
            let target = dir.join(op.change.path.as_path());
            match op.change.after {
                None => std::fs::rename(&target, &op.temp).unwrap(),
                Some(_) if op.change.before.is_some() => exchange(&op.temp, &target).unwrap(),
                Some(_) => {
                    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                    rename_new(&op.temp, &target).unwrap()
                }
            }
        }
    }
    journal
}

#[test]
fn a_crash_after_the_commit_is_finished_by_recovery() {
    for swapped in 0..=4 {
        let (dir, g, before, after) = fixture();
        let journal = crash(dir.path(), &g, &before, &after, Phase::Committed, swapped);
        let msg = recover(&journal, dir.path()).unwrap().unwrap();
        assert!(msg.contains("was finished"), "{msg}");
        assert_after(dir.path());
        assert!(!journal.exists());
    }
}

#[test]
fn what_a_landing_is_owed_outlives_its_journal_only_when_it_was_committed() {
    let owed = |name: &str| Owed {
        name: name.into(),
        prd: Some("/the/PRD.md".into()),
        session: None,
        label: "ISC-1".into(),
        files: vec!["a".into()],
        undo: format!("refs/prdloop-undo/{name}"),
        credit: crate::isolation::owed::Credit {
            base: "b".into(),
            attempt: "a".into(),
            message: "ISC-1: a".into(),
            record: serde_json::json!({}),
        },
    };
    for (phase, kept) in [(Phase::Committed, true), (Phase::Staging, false)] {
        let (dir, g, before, after) = fixture();
        let journal = crash(dir.path(), &g, &before, &after, phase, 2);
        let mut j: Journal = serde_json::from_slice(&std::fs::read(&journal).unwrap()).unwrap();
        j.owed = Some(owed("1"));
        save(&journal, &j).unwrap();
        recover(&journal, dir.path()).unwrap();
        let left = crate::isolation::owed::owed_to(&journal, Path::new("/the/PRD.md")).unwrap();
        assert_eq!(left.len(), usize::from(kept), "{phase:?}");
        assert!(!journal.exists());
    }
}

#[test]
fn a_crash_while_staging_is_rolled_back_by_recovery() {
    let (dir, g, before, after) = fixture();
    let journal = crash(dir.path(), &g, &before, &after, Phase::Staging, 0);
    let msg = recover(&journal, dir.path()).unwrap().unwrap();
    assert!(msg.contains("rolled back"), "{msg}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a")).unwrap(),
        "a1\n"
    );
    assert!(dir.path().join("b").exists() && !dir.path().join("c").exists());
    assert_no_temporary_files(dir.path());
}

#[test]
fn a_replaced_file_loses_its_setuid_and_setgid_bits() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, g, before, after) = fixture();
    let a = dir.path().join("a");
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o6640)).unwrap();
    let journal = dir.path().join(".git/prdloop/landing.json");
    apply(&g, &journal, &before, &after, "test").unwrap();
    let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o7777;
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "a2\n");
    assert_eq!(mode, 0o640, "{mode:o}");
}

#[test]
fn new_content_is_written_with_the_checkouts_line_endings() {
    let (dir, g, before, after) = fixture();
    std::fs::write(dir.path().join(".gitattributes"), "* text eol=crlf\n").unwrap();
    let journal = dir.path().join(".git/prdloop/landing.json");
    apply(&g, &journal, &before, &after, "test").unwrap();
    assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"a2\r\n");
    assert_eq!(std::fs::read(dir.path().join("c/d")).unwrap(), b"d\r\n");
    assert_no_temporary_files(dir.path());
}

#[test]
fn a_damaged_journal_is_an_io_error_naming_what_the_landing_left() {
    for swapped in [0, 2] {
        let (dir, g, before, after) = fixture();
        let journal = crash(dir.path(), &g, &before, &after, Phase::Committed, swapped);
        let bytes = std::fs::read(&journal).unwrap();
        std::fs::write(&journal, &bytes[..bytes.len() / 2]).unwrap();
        let left = recover::leftovers(dir.path());
        assert!(left.len() >= 3, "{left:?}");
        let e = recover(&journal, dir.path()).unwrap_err();
        assert_eq!(crate::exit::code_of(&e), crate::exit::Exit::Io);
        let msg = format!("{e:#}");
        assert!(msg.contains("is damaged"), "{msg}");
        for p in &left {
            assert!(msg.contains(&p.display().to_string()), "{p:?}: {msg}");
        }
        // Nothing was touched: the journal and the files stay for the user to judge.
        assert!(journal.exists());
        assert_eq!(recover::leftovers(dir.path()), left);
    }
}
