//! A user edits the PRD while a run of 600 instant workers (-a 16) keeps rewriting it: a line
//! appended every 10 ms, alternately in place (`O_APPEND`) and as an editor saves (a temporary
//! file in the same folder renamed over the PRD). Every line must survive exactly once, no
//! box may be reported as changed outside prdloop, every box ends ticked and the PRD parses.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::*;
use serde_json::json;

const CRITERIA: usize = 600;

fn user_line(i: usize) -> String {
    format!("- user note {i:05}: written during the run\n")
}

/// Appends numbered lines until told to stop; returns how many it wrote.
fn edit_while_running(prd: &Path, stop: &AtomicBool) -> usize {
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let line = user_line(i);
        if i % 2 == 0 {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(prd)
                .expect("open the PRD to append");
            f.write_all(line.as_bytes()).expect("append");
        } else {
            // An editor: read, add the line, write a temporary file, rename it over.
            let text = std::fs::read_to_string(prd).expect("read the PRD");
            let tmp = prd.with_file_name(format!(".PRD.md.editor-{i}"));
            std::fs::write(&tmp, format!("{text}{line}")).expect("write the editor's copy");
            std::fs::rename(&tmp, prd).expect("rename over the PRD");
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    i
}

#[test]
fn user_lines_survive_a_busy_run_and_no_false_warning() {
    let lines: Vec<String> = (0..CRITERIA)
        .map(|i| format!("- [ ] ISC-D{}-{}: instant", i % 12, i / 12 + 1))
        .collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sb = Sandbox::new(&prd_with(&lines), json!({"*": ["pass"]}));
    let prd = sb.prd();
    let stop = Arc::new(AtomicBool::new(false));
    let editor = {
        let (prd, stop) = (prd.clone(), stop.clone());
        std::thread::spawn(move || edit_while_running(&prd, &stop))
    };
    let out = sb.run(&["run", "PRD.md", "-a", "16", "-n", "1"]);
    stop.store(true, Ordering::Relaxed);
    let written = editor.join().unwrap();
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(written > 20, "the editor wrote only {written} lines");

    let text = sb.prd_text();
    for i in 0..written {
        let n = text.matches(&user_line(i)).count();
        assert_eq!(
            n, 1,
            "user line {i} of {written} is in the PRD {n} times:\n{text}"
        );
    }
    assert!(!err.contains("outside prdloop"), "false warnings:\n{err}");
    let doc = prdloop::prd::Prd::parse(text.clone()).expect("the PRD parses");
    assert_eq!(doc.criteria.len(), CRITERIA);
    assert!(doc.criteria.iter().all(|c| c.checked), "{text}");
    // Nothing left beside the PRD but the editor's leftovers (none) and no kept copies.
    let strays: Vec<String> = std::fs::read_dir(sb.work())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "PRD.md")
        .collect();
    assert!(strays.is_empty(), "files left beside the PRD: {strays:?}");
}
