use super::*;

fn written(dir: &Path, logs: &[(&str, &[&[u8]])]) {
    for (name, pieces) in logs {
        let mut out = LogOut::create(&dir.join(name)).unwrap();
        for p in *pieces {
            out.write(p).unwrap();
        }
        out.finish().unwrap();
    }
}

#[test]
fn logs_are_read_back_by_path_in_this_process_and_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let book = Book::of(dir.path()).unwrap();
    written(
        dir.path(),
        &[
            ("a.log", &[b"one\n", b"two\n"]),
            ("b.log", &[b"other\n"]),
            ("quiet.log", &[]),
        ],
    );
    let check = || {
        assert_eq!(head(&dir.path().join("a.log"), 100).unwrap(), b"one\ntwo\n");
        assert_eq!(head(&dir.path().join("quiet.log"), 100).unwrap(), b"");
        let t = tail(&dir.path().join("a.log"), 6).unwrap();
        assert!(t.cut);
        assert_eq!(t.bytes, b"e\ntwo\n");
        assert_eq!(t.from_line_start(), b"two\n");
        let e = head(&dir.path().join("none.log"), 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let mut names: Vec<String> = list(dir.path())
            .unwrap()
            .iter()
            .map(|l| l.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a.log", "b.log", "quiet.log"]);
    };
    // Through the open book's index, then (closed) by reading the file.
    check();
    drop(book);
    assert!(Book::opened(dir.path()).is_none());
    check();
    // One file for them all.
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1);
}

#[test]
fn a_long_log_is_written_as_it_goes_and_cut_into_records() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    let mut out = LogOut::create(&path).unwrap();
    let line = vec![b'x'; 1000];
    for _ in 0..20 {
        out.write(&line).unwrap();
    }
    // More than PENDING_MAX went out before the end.
    assert!(head(&path, u64::MAX).unwrap().len() >= PENDING_MAX);
    out.finish().unwrap();
    assert_eq!(head(&path, u64::MAX).unwrap().len(), 20_000);
    let mut big = LogOut::create(&dir.path().join("huge.log")).unwrap();
    big.write(&vec![b'y'; RECORD_MAX * 2 + 5]).unwrap();
    big.finish().unwrap();
    let f = open_log(dir.path()).unwrap();
    let index = Index::of(&f).unwrap();
    assert_eq!(index.spans["huge.log"].len(), 4);
    assert_eq!(
        tail(&dir.path().join("huge.log"), 10).unwrap().bytes,
        b"yyyyyyyyyy"
    );
}

#[test]
fn a_record_cut_short_by_a_crash_ends_the_log_and_the_next_writer_cuts_it_off() {
    let dir = tempfile::tempdir().unwrap();
    written(dir.path(), &[("a.log", &[b"whole\n"])]);
    let file = dir.path().join(FILE);
    // Half a record, as a crash mid-write leaves it.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    f.write_all(&[TAG, 5, 0, b'b', b'.']).unwrap();
    drop(f);
    let names = list(dir.path()).unwrap();
    assert_eq!(names.len(), 1);
    written(dir.path(), &[("c.log", &[b"after\n"])]);
    assert_eq!(head(&dir.path().join("a.log"), 100).unwrap(), b"whole\n");
    assert_eq!(head(&dir.path().join("c.log"), 100).unwrap(), b"after\n");
}

#[test]
fn a_folder_s_own_files_are_read_as_before_and_the_records_exported_as_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("old.log"), "from an earlier prdloop\n").unwrap();
    written(dir.path(), &[("new.log", &[b"new\n"])]);
    assert_eq!(
        head(&dir.path().join("old.log"), 100).unwrap(),
        b"from an earlier prdloop\n"
    );
    let mut listed = list(dir.path()).unwrap();
    listed.sort_by_key(|l| l.written);
    assert!(listed[1].path.ends_with("new.log"), "{listed:?}");
    let to = tempfile::tempdir().unwrap();
    export(dir.path(), to.path()).unwrap();
    let exported: Vec<_> = std::fs::read_dir(to.path()).unwrap().collect();
    assert_eq!(exported.len(), 1);
    assert_eq!(std::fs::read(to.path().join("new.log")).unwrap(), b"new\n");
}

#[test]
fn following_a_log_gives_what_was_written_since() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.log");
    let book = Book::of(dir.path()).unwrap();
    book.append("a.log", b"first\n").unwrap();
    let mut follow = Follow::open(&path).unwrap();
    assert_eq!(follow.next(3).unwrap(), b"fir");
    assert_eq!(follow.next(100).unwrap(), b"st\n");
    assert_eq!(follow.next(100).unwrap(), b"");
    book.append("b.log", b"not this\n").unwrap();
    book.append("a.log", b"second\n").unwrap();
    assert_eq!(follow.next(100).unwrap(), b"second\n");
}

#[test]
fn a_file_that_is_not_an_output_log_is_refused_and_a_link_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(FILE), "something else\n").unwrap();
    let e = Book::of(dir.path()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    // Left as it was.
    assert_eq!(
        std::fs::read(dir.path().join(FILE)).unwrap(),
        b"something else\n"
    );
    let other = tempfile::tempdir().unwrap();
    let target = other.path().join("target");
    std::fs::write(&target, "keep\n").unwrap();
    let linked = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&target, linked.path().join(FILE)).unwrap();
    assert!(Book::of(linked.path()).is_err());
    assert!(head(&linked.path().join("a.log"), 10).is_err());
    assert_eq!(std::fs::read(&target).unwrap(), b"keep\n");
}

#[test]
fn a_record_can_only_name_a_log_in_its_own_folder() {
    let dir = tempfile::tempdir().unwrap();
    let book = Book::of(dir.path()).unwrap();
    for bad in ["", ".", "..", "/etc/passwd", "a/b", FILE] {
        assert!(book.append(bad, b"x").is_err(), "{bad:?}");
    }
    book.append("good.log", b"x").unwrap();
    drop(book);
    // A record naming another file, as a tampered log would: the log ends before it.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join(FILE))
        .unwrap();
    let name = b"/etc/passwd";
    f.write_all(&[TAG, name.len() as u8, 0]).unwrap();
    f.write_all(name).unwrap();
    f.write_all(&1u32.to_le_bytes()).unwrap();
    f.write_all(b"x").unwrap();
    drop(f);
    let listed = list(dir.path()).unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].path.ends_with("good.log"));
}
