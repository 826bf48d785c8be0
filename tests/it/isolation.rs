//! Isolated workers in real temporary git repositories: each fake worker edits files in its
//! own worktree, and what passes is merged back into the user's checkout.

use std::path::Path;

use crate::common::*;
use serde_json::json;

fn read(sb: &Sandbox, name: &str) -> String {
    std::fs::read_to_string(sb.work().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn ticked(sb: &Sandbox, id: &str) -> bool {
    sb.prd_text().contains(&format!("- [x] {id}:"))
}

/// prdloop's lanes still on disk; none is ever one of the repository's worktrees.
fn lanes(sb: &Sandbox) -> Vec<String> {
    let listed = git(&sb.work(), &["worktree", "list", "--porcelain"]);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "a lane is not a worktree of the user's repository: {listed}"
    );
    let mut v = Vec::new();
    for session in std::fs::read_dir(sb.state_dir().join("lanes"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for lane in std::fs::read_dir(session.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = lane.file_name().to_string_lossy().into_owned();
            if name.starts_with("lane-") && !name.ends_with(".prd") && lane.path().is_dir() {
                v.push(lane.path().display().to_string());
            }
        }
    }
    v
}

#[test]
fn two_lanes_on_different_files_both_land_and_lanes_go() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
        ],
        json!({"ISC-A-1": ["write:a.txt"], "ISC-B-1": ["write:b.txt"]}),
        &[("README", "hello\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&sb, "a.txt"), "done\n");
    assert_eq!(read(&sb, "b.txt"), "done\n");
    assert!(ticked(&sb, "ISC-A-1") && ticked(&sb, "ISC-B-1"));
    // Workers ran elsewhere, not in the checkout.
    for r in sb.worker_records() {
        let cwd = r["cwd"].as_str().unwrap();
        assert!(!Path::new(cwd).starts_with(sb.work()), "{cwd}");
    }
    // Uncommitted by default: HEAD is still the first commit.
    assert_eq!(
        git(&sb.work(), &["rev-list", "--count", "HEAD"]).trim(),
        "1"
    );
    assert!(lanes(&sb).is_empty(), "{:?}", lanes(&sb));
    let err = stderr(&out);
    assert!(err.contains("merged 1 file"), "{err}");
    // The JSON events say what landed.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ends: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "worker_end")
        .collect();
    assert_eq!(ends.len(), 2, "{stdout}");
    for e in &ends {
        assert_eq!(e["landing"]["outcome"], "merged", "{e}");
    }
    // Each attempt is pinned.
    let refs = git(
        &sb.work(),
        &["for-each-ref", "--format=%(refname)", "refs/prdloop/"],
    );
    assert!(
        refs.contains("/ISC-A-1/1") && refs.contains("/ISC-B-1/1"),
        "{refs}"
    );
}

#[test]
fn a_failed_attempts_work_is_discarded_but_kept() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt says yes | Verify: CLI: `grep -q yes a.txt`"],
        json!({"ISC-A-1": ["sh:echo no > a.txt"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--json"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(!sb.work().join("a.txt").exists());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let end = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "worker_end")
        .unwrap();
    assert_eq!(end["landing"]["outcome"], "discarded", "{end}");
    assert_eq!(end["landing"]["files"], json!(["a.txt"]));
    let kept = end["landing"]["kept"].as_str().unwrap();
    assert_eq!(git(&sb.work(), &["show", &format!("{kept}:a.txt")]), "no\n");
    // Its changes to 1 file discarded, kept as its ref.
    snapshot!(sb.root(), "a_failed_attempt_discarded", &stderr(&out));
}

#[test]
fn non_overlapping_hunks_of_one_file_both_land() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: line 2 says A | Verify: CLI: `grep -q '^A$' f.txt`",
            "- [ ] ISC-B-1: line 19 says B | Verify: CLI: `grep -q '^B$' f.txt`",
        ],
        json!({
            "ISC-A-1": ["sh:sed -i 's/^line 2$/A/' f.txt"],
            "ISC-B-1": ["sh:sed -i 's/^line 19$/B/' f.txt"],
        }),
        &[("f.txt", &lines(20))],
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let f = read(&sb, "f.txt");
    assert!(f.contains("\nA\n") && f.contains("\nB\n"), "{f}");
    assert_eq!(f.lines().count(), 20);
}

#[test]
fn overlapping_hunks_conflict_then_pass_from_the_new_base() {
    // Both rewrite line 5; the second to land conflicts, leaves the checkout alone, and its
    // next attempt (from the new base) edits its own line instead.
    let sb = repo(
        &[
            "- [ ] ISC-A-1: A is in f.txt | Verify: CLI: `grep -q A f.txt`",
            "- [ ] ISC-B-1: B is in f.txt | Verify: CLI: `grep -q B f.txt`",
        ],
        json!({
            "ISC-A-1": ["sh:sed -i 's/^line 5$/A/' f.txt", "sh:sed -i 's/^line 15$/A/' f.txt"],
            "ISC-B-1": ["sh:sleep 0.3; sed -i 's/^line 5$/B/' f.txt", "sh:sed -i 's/^line 15$/B/' f.txt"],
        }),
        &[("f.txt", &lines(20))],
    );
    // Both name f.txt: without the barrier they would never run at once (no conflict); PAI's
    // iterations run them side by side.
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--rounds", "barrier"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("merge conflict in f.txt"), "{err}");
    let f = read(&sb, "f.txt");
    assert!(f.contains("A") && f.contains("B"), "{f}");
    assert!(!f.contains("<<<<<<<"), "{f}");
    assert_eq!(f.lines().count(), 20, "{f}");
    let state = sb.state();
    let conflict: Vec<_> = attempts(&state)
        .into_iter()
        .filter(|a| a["landing"]["outcome"] == "conflict")
        .collect();
    assert_eq!(conflict.len(), 1, "{state}");
    let kept = conflict[0]["landing"]["kept"].as_str().unwrap();
    // The conflicting attempt is kept for inspection.
    assert!(!git(&sb.work(), &["rev-parse", kept]).trim().is_empty());
    // Its next attempt was told why.
    let id = conflict[0]["criterion"].as_str().unwrap();
    let second = sb
        .worker_records()
        .into_iter()
        .find(|r| r["criterion"] == id && r["attempt"] == 2)
        .expect("a second attempt");
    let prompt = second["prompt"].as_str().unwrap();
    assert!(prompt.contains("merge conflict in f.txt"), "{prompt}");
    // With the other side's change, so the agent can build on it.
    let other = if id == "ISC-A-1" { "+B" } else { "+A" };
    assert!(
        prompt.contains("What changed in the checkout meanwhile") && prompt.contains(other),
        "{prompt}"
    );
}

#[test]
fn the_users_uncommitted_work_is_in_every_base_and_stays() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: saw the edit | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: saw the new file | Verify: CLI: `test -f b.txt`",
        ],
        json!({
            "ISC-A-1": ["sh:grep -q edited tracked.txt && grep -q mine untracked.txt && echo a > a.txt"],
            "ISC-B-1": ["sh:grep -q edited tracked.txt && grep -q mine untracked.txt && echo b > b.txt"],
        }),
        &[("tracked.txt", "original\n")],
    );
    std::fs::write(sb.work().join("tracked.txt"), "edited\n").unwrap();
    std::fs::write(sb.work().join("untracked.txt"), "mine\n").unwrap();
    git(&sb.work(), &["add", "tracked.txt"]);
    let index_before = git(&sb.work(), &["diff", "--cached", "--name-status"]);
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&sb, "tracked.txt"), "edited\n");
    assert_eq!(read(&sb, "untracked.txt"), "mine\n");
    assert_eq!(read(&sb, "a.txt"), "a\n");
    // The user's index is as they left it.
    assert_eq!(
        git(&sb.work(), &["diff", "--cached", "--name-status"]),
        index_before
    );
}

#[test]
fn an_edit_made_during_the_run_survives() {
    // The worker finishes only once the test says so: the edits below happen while it works.
    let go = tempfile::tempdir().unwrap();
    let go_file = go.path().join("go");
    let step = format!(
        "sh:while [ ! -f '{}' ]; do sleep 0.02; done; echo a > a.txt; echo worker >> shared.txt",
        go_file.display()
    );
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": [step]}),
        &[("shared.txt", &lines(10)), ("notes.txt", "v1\n")],
    );
    let child = sb.spawn(&["run", "PRD.md"]);
    sb.wait_for_workers(1);
    // While the worker works: the user edits another file and another part of a shared one.
    std::fs::write(sb.work().join("notes.txt"), "v2 by the user\n").unwrap();
    let shared = lines(10).replace("line 1\n", "user line\n");
    std::fs::write(sb.work().join("shared.txt"), &shared).unwrap();
    std::fs::write(&go_file, "").unwrap();
    let out = wait_output(child, std::time::Duration::from_secs(120));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&sb, "notes.txt"), "v2 by the user\n");
    let s = read(&sb, "shared.txt");
    assert!(
        s.starts_with("user line\n") && s.ends_with("worker\n"),
        "{s}"
    );
    assert_eq!(read(&sb, "a.txt"), "a\n");
}

#[test]
fn every_kind_of_change_lands() {
    let work = concat!(
        "printf 'new\\n' > new.txt && rm gone.txt && git mv -f old.txt renamed.txt 2>/dev/null || mv old.txt renamed.txt; ",
        "printf '\\000\\001\\002\\377' > blob.bin && printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh && ",
        "ln -s new.txt link && mkdir -p deep/er && echo x > deep/er/file.txt"
    );
    let sb = repo(
        &["- [ ] ISC-A-1: all of it | Verify: CLI: `test -x run.sh`"],
        json!({"ISC-A-1": [format!("sh:{work}")]}),
        &[
            ("gone.txt", "bye\n"),
            ("old.txt", "moving\n"),
            ("keep1.txt", "1\n"),
            ("keep2.txt", "2\n"),
        ],
    );
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let w = sb.work();
    assert_eq!(read(&sb, "new.txt"), "new\n");
    assert!(!w.join("gone.txt").exists());
    assert!(!w.join("old.txt").exists());
    assert_eq!(read(&sb, "renamed.txt"), "moving\n");
    assert_eq!(
        std::fs::read(w.join("blob.bin")).unwrap(),
        b"\x00\x01\x02\xff"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(w.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert!(mode & 0o111 != 0, "{mode:o}");
    assert_eq!(
        std::fs::read_link(w.join("link")).unwrap(),
        Path::new("new.txt")
    );
    assert_eq!(read(&sb, "deep/er/file.txt"), "x\n");
}

#[test]
fn a_workers_own_commits_land() {
    let sb = repo(
        &["- [ ] ISC-A-1: committed | Verify: CLI: `grep -q two c.txt`"],
        json!({"ISC-A-1": [
            "sh:export GIT_AUTHOR_NAME=w GIT_AUTHOR_EMAIL=w@x GIT_COMMITTER_NAME=w GIT_COMMITTER_EMAIL=w@x; echo one > c.txt && git add c.txt && git commit -qm one && echo two >> c.txt && git commit -qam two"
        ]}),
        &[("README", "r\n")],
    );
    // The lane is a repository of its own: its commits go into its own `.git`, which a
    // sandboxed worker may write.
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&sb, "c.txt"), "one\ntwo\n");
    // The user's branch did not move.
    assert_eq!(
        git(&sb.work(), &["rev-list", "--count", "HEAD"]).trim(),
        "1"
    );
}

#[test]
fn commit_makes_one_commit_per_criterion() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
        ],
        json!({"ISC-A-1": ["write:a.txt"], "ISC-B-1": ["write:b.txt"]}),
        &[("README", "r\n")],
    );
    // An uncommitted edit of the user's stays out of the commits.
    std::fs::write(sb.work().join("README"), "mine\n").unwrap();
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--commit"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let log = git(&sb.work(), &["log", "--format=%s", "HEAD"]);
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(subjects.len(), 3, "{log}");
    assert!(subjects.contains(&"ISC-A-1: a.txt exists"), "{log}");
    assert!(subjects.contains(&"ISC-B-1: b.txt exists"), "{log}");
    for c in ["HEAD", "HEAD~1"] {
        let files = git(&sb.work(), &["show", "--format=", "--name-only", c]);
        assert_eq!(files.lines().count(), 1, "{c}: {files}");
    }
    assert_eq!(read(&sb, "README"), "mine\n");
    // Only the user's edit is left uncommitted.
    let status = git(
        &sb.work(),
        &["status", "--porcelain", "--", "a.txt", "b.txt", "README"],
    );
    assert_eq!(status.trim(), "M README", "{status}");
}

#[test]
fn a_killed_run_is_cleaned_up_by_the_next_and_passed_work_is_kept() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
        ],
        json!({"ISC-A-1": ["write:a.txt"], "ISC-B-1": ["sh:echo half > half.txt; sleep 300"]}),
        &[("README", "r\n")],
    );
    let child = sb.spawn(&["run", "PRD.md", "-a", "2"]);
    let pid = child.id();
    // A's work reaches the checkout; B is still working.
    let t = std::time::Instant::now();
    while !sb.work().join("a.txt").exists() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "A never landed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // And its pass recorded in the PRD.
    sb.wait_for_prd("- [x] ISC-A-1:");
    send_signal(pid, "KILL");
    let _ = wait_output(child, std::time::Duration::from_secs(30));
    assert!(!lanes(&sb).is_empty(), "the killed run left its lanes");
    sb.set_plan(json!({"*": ["write:b.txt"]}));
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("removed 2 lane(s)"), "{err}");
    assert_eq!(read(&sb, "a.txt"), "done\n");
    assert_eq!(read(&sb, "b.txt"), "done\n");
    assert!(ticked(&sb, "ISC-A-1") && ticked(&sb, "ISC-B-1"));
    assert!(lanes(&sb).is_empty(), "{:?}", lanes(&sb));
    // B's half-done work from the killed run is pinned, not lost.
    let refs = git(
        &sb.work(),
        &["for-each-ref", "--format=%(refname)", "refs/prdloop/"],
    );
    assert!(refs.contains("/crashed/lane-"), "{refs}");
    sb.assert_no_process_left();
}

#[test]
fn outside_a_repository_workers_share_the_folder_with_a_notice() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"]),
        json!({"ISC-A-1": ["write:a.txt"]}),
    );
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // `isolation: none (… is not in a git repository)`.
    snapshot!(sb.root(), "outside_a_repository", &shown(&out));
    assert!(sb.work().join("a.txt").exists());
    // Never a repository made for the user.
    assert!(!sb.work().join(".git").exists());
    let out = sb.run(&["run", "PRD.md", "--force", "--isolation", "worktree"]);
    snapshot!(
        sb.root(),
        "isolation_worktree_outside_a_repository",
        &shown(&out)
    );
}

#[test]
fn worktreeinclude_files_are_copied_and_setup_runs_once_per_worktree() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: saw .env | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-A-2: saw it too | Verify: CLI: `test -f b.txt`",
        ],
        json!({
            "ISC-A-1": ["sh:grep -q secret .env && test -f .setup-ran && echo a > a.txt"],
            "ISC-A-2": ["sh:grep -q secret .env && test -f .setup-ran && echo b > b.txt"],
        }),
        &[
            (".gitignore", ".env\n.setup-ran\n"),
            (".worktreeinclude", ".env\n"),
        ],
    );
    std::fs::write(sb.work().join(".env"), "secret\n").unwrap();
    // The setup runs under a check's rules: it may write its lane, and what
    // --sandbox-allow adds (where it counts its runs).
    let count = sb.root().join("count");
    std::fs::create_dir_all(&count).unwrap();
    let counter = count.join("setups");
    let setup = format!("touch .setup-ran && echo x >> {}", counter.display());
    // One lane: two attempts share a worktree, so setup runs once.
    let allow = count.display().to_string();
    let out = sb.run(&[
        "run",
        "PRD.md",
        "--setup",
        &setup,
        "--sandbox-allow",
        &allow,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "x\n");
    assert!(ticked(&sb, "ISC-A-1") && ticked(&sb, "ISC-A-2"));
    // Ignored files made in a worktree (build caches) never reach the checkout.
    assert!(!sb.work().join(".setup-ran").exists());
}

#[test]
fn a_failing_setup_stops_the_run_without_counting_attempts() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "--setup", "echo no cache >&2; exit 3"]);
    // Exit 6: the worktree could not be made ready, with what the setup said.
    snapshot!(sb.root(), "a_failing_setup", &shown(&out));
    assert!(sb.worker_records().is_empty());
    // No attempt was recorded (the attempts log was never written).
    let log = sb.state()["attemptsLog"].as_str().unwrap().to_string();
    assert!(std::fs::read_to_string(log).unwrap_or_default().is_empty());
    assert!(lanes(&sb).is_empty(), "{:?}", lanes(&sb));
}

#[test]
fn kept_lanes_show_in_status_and_clean_removes_them() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["sh:echo a > a.txt; echo scratch > notes.tmp"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "--keep-worktrees"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("lanes kept in"), "{}", stderr(&out));
    assert_eq!(lanes(&sb).len(), 1);
    // status names the lane left; the run that kept it is over: clean removes it and says
    // what it freed.
    let text = transcript(&sb, &[&["status", "PRD.md"], &["clean"]]);
    snapshot!(
        sb.root(),
        "kept_lanes_status_and_clean",
        &text,
        [(r"freed [\d.]+ [KMG]?i?B", "freed [SIZE]")]
    );
    assert!(lanes(&sb).is_empty());
    let out = sb.run(&["clean", "--all"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let refs = git(&sb.work(), &["for-each-ref", "refs/prdloop/"]);
    assert!(refs.is_empty(), "{refs}");
    assert_eq!(read(&sb, "a.txt"), "a\n");
}

#[test]
fn a_conflict_left_unresolved_shows_in_status() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: A in f.txt | Verify: CLI: `grep -q A f.txt`",
            "- [ ] ISC-B-1: B in f.txt | Verify: CLI: `grep -q B f.txt`",
        ],
        json!({
            "ISC-A-1": ["sh:sed -i 's/^line 5$/A/' f.txt"],
            // B finishes once A's work is in the checkout: B is the one that conflicts.
            "ISC-B-1": ["sh:until grep -q '^A$' \"$CHECKOUT/f.txt\"; do sleep 0.02; done; sed -i 's/^line 5$/B/' f.txt"],
        }),
        &[("f.txt", &lines(10))],
    );
    let child = sb
        // Side by side in PAI's iterations (without the barrier, both naming f.txt, they
        // would run one after the other and never conflict).
        .command(&["run", "PRD.md", "-a", "2", "-n", "1", "--rounds", "barrier"])
        .env("CHECKOUT", sb.work())
        .spawn()
        .unwrap();
    let out = wait_output(child, std::time::Duration::from_secs(120));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let status = sb.run(&["status", "PRD.md"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("unmerged: ISC-B-1's passing attempt conflicted; kept as refs/prdloop/"),
        "{text}"
    );
    let summary = stderr(&out);
    assert!(summary.contains("merge conflict in f.txt"), "{summary}");
}

#[test]
fn resume_after_a_kill_keeps_what_the_dead_runs_worktrees_held() {
    let sb = repo(
        &["- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`"],
        json!({"ISC-B-1": ["sh:echo precious > precious.txt; sleep 300"]}),
        &[("README", "r\n")],
    );
    let child = sb.spawn(&["run", "PRD.md"]);
    let pid = child.id();
    sb.wait_for_workers(1);
    let wt = loop {
        if let Some(p) = lanes(&sb).into_iter().next()
            && Path::new(&p).join("precious.txt").exists()
        {
            break p;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    send_signal(pid, "KILL");
    let _ = wait_output(child, std::time::Duration::from_secs(30));
    sb.set_plan(json!({"*": ["write:b.txt"]}));
    let out = sb.run(&["resume", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("removed 1 lane(s)"),
        "{}",
        stderr(&out)
    );
    let refs = git(
        &sb.work(),
        &["for-each-ref", "--format=%(refname)", "refs/prdloop/"],
    );
    let crashed = refs
        .lines()
        .find(|r| r.contains("/crashed/lane-1"))
        .unwrap_or_else(|| panic!("{refs}"));
    assert_eq!(
        git(&sb.work(), &["show", &format!("{crashed}:precious.txt")]),
        "precious\n"
    );
    assert!(!Path::new(&wt).exists() || lanes(&sb).is_empty());
    sb.assert_no_process_left();
}

#[test]
fn commit_leaves_the_users_staged_and_unstaged_edits_out_and_in_place() {
    let sb = repo(
        &["- [ ] ISC-A-1: line 5 says W | Verify: CLI: `grep -q '^W$' f.txt`"],
        json!({"ISC-A-1": ["sh:sed -i 's/^line 5$/W/' f.txt"]}),
        &[("f.txt", &lines(10))],
    );
    let w = sb.work();
    // Staged: line 1. Unstaged, two lines from the worker's: line 3.
    let staged = lines(10).replace("line 1\n", "staged\n");
    std::fs::write(w.join("f.txt"), &staged).unwrap();
    git(&w, &["add", "f.txt"]);
    std::fs::write(w.join("f.txt"), staged.replace("line 3\n", "unstaged\n")).unwrap();
    let out = sb.run(&["run", "PRD.md", "--commit"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("committed"), "{}", stderr(&out));
    // The commit holds the criterion's line alone.
    let show = git(&w, &["show", "--format=", "-U0", "HEAD", "--", "f.txt"]);
    let changed: Vec<&str> = show
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect();
    assert_eq!(changed, vec!["-line 5", "+W"], "{show}");
    // What was staged is still staged, and only that.
    let cached = git(&w, &["diff", "--cached", "-U0", "--", "f.txt"]);
    assert!(
        cached.contains("+staged") && !cached.contains("W"),
        "{cached}"
    );
    // The file has all three.
    let f = read(&sb, "f.txt");
    assert!(
        f.contains("staged\n") && f.contains("unstaged\n") && f.contains("W\n"),
        "{f}"
    );
}

#[test]
fn commit_with_the_index_locked_merges_without_committing_and_reverts_nothing() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[("README", "r\n")],
    );
    let w = sb.work();
    std::fs::write(w.join(".git/index.lock"), "").unwrap();
    let out = sb.run(&["run", "PRD.md", "--commit"]);
    std::fs::remove_file(w.join(".git/index.lock")).unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("not committed: another git process holds the index"),
        "{err}"
    );
    assert!(ticked(&sb, "ISC-A-1"));
    assert_eq!(read(&sb, "a.txt"), "done\n");
    assert_eq!(git(&w, &["rev-list", "--count", "HEAD"]).trim(), "1");
    assert_eq!(git(&w, &["diff", "--cached", "--name-only"]).trim(), "");
}

#[test]
fn a_worker_popping_and_pushing_the_stash_reaches_only_its_own() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["sh:git stash pop -q >/dev/null 2>&1; echo junk > junk.txt; git stash push -u -q -m theirs; echo a > a.txt"]}),
        &[("secret.txt", "v1\n")],
    );
    let w = sb.work();
    std::fs::write(w.join("secret.txt"), "my stashed edit\n").unwrap();
    git(&w, &["stash", "push", "-q", "-m", "mine"]);
    let before = git(&w, &["stash", "list"]);
    assert!(before.contains("mine"), "{before}");
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The user's stash is exactly as it was: the worker's pop found nothing, its push
    // stayed in its lane.
    assert_eq!(git(&w, &["stash", "list"]), before);
    assert_eq!(
        git(&w, &["show", "stash@{0}:secret.txt"]),
        "my stashed edit\n"
    );
    assert_eq!(read(&sb, "secret.txt"), "v1\n");
    assert_eq!(read(&sb, "a.txt"), "a\n");
    assert!(!w.join("junk.txt").exists());
}

// ---- Sealed lanes: what a hostile worker's git cannot reach ----

/// A repository with a branch, a tag, an uncommitted edit and an untracked file.
fn users_repo(plan: serde_json::Value) -> Sandbox {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        plan,
        &[("mine.txt", "committed\n"), ("lib.txt", "lib\n")],
    );
    let w = sb.work();
    git(&w, &["branch", "feature"]);
    git(&w, &["tag", "v1"]);
    std::fs::write(w.join("mine.txt"), "committed\nmy uncommitted line\n").unwrap();
    std::fs::write(w.join("untracked.txt"), "never committed\n").unwrap();
    sb
}

fn assert_users_work_intact(sb: &Sandbox) {
    assert_eq!(read(sb, "mine.txt"), "committed\nmy uncommitted line\n");
    assert_eq!(read(sb, "untracked.txt"), "never committed\n");
    assert_eq!(read(sb, "lib.txt"), "lib\n");
}

#[test]
fn a_workers_branch_tag_config_and_hook_changes_stay_in_its_lane() {
    let evil = concat!(
        "git checkout -q main 2>/dev/null; git branch -D feature 2>/dev/null; git tag -d v1 2>/dev/null; ",
        "git branch evil 2>/dev/null; git config core.hooksPath /tmp/nowhere; git config user.email evil@example.com; ",
        "mkdir -p .git/hooks && printf '#!/bin/sh\\nexit 1\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit; ",
        "git update-ref refs/heads/main HEAD; echo a > a.txt"
    );
    let sb = users_repo(json!({"ISC-A-1": [format!("sh:{evil}")]}));
    let w = sb.work();
    let before = repository_state(&w);
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(repository_state(&w), before);
    assert_eq!(read(&sb, "a.txt"), "a\n");
    assert_users_work_intact(&sb);
}

#[test]
fn a_worker_that_resets_hard_and_cleans_cannot_undo_the_users_work() {
    // It puts every file back to the last commit and deletes what is untracked, then does
    // its own work: the landing would revert the user's edit and delete their file.
    let sb = users_repo(
        json!({"ISC-A-1": ["sh:git reset -q --hard HEAD~1 && git clean -q -f -d && echo a > a.txt"]}),
    );
    let w = sb.work();
    let before = repository_state(&w);
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    snapshot!(sb.root(), "a_worker_that_resets_hard", &shown(&out));
    assert_users_work_intact(&sb);
    assert!(!w.join("a.txt").exists(), "nothing of the attempt landed");
    assert!(!ticked(&sb, "ISC-A-1"));
    assert_eq!(repository_state(&w), before);
    // The attempt is kept, and the state says why it did not land.
    let st = sb.state();
    let a = &attempts(&st)[0];
    assert_eq!(a["landing"]["outcome"], "refused", "{a}");
    assert_eq!(a["landing"]["reason"]["kind"], "deletes_uncommitted", "{a}");
    let kept = a["landing"]["kept"].as_str().unwrap();
    git(&w, &["rev-parse", "--verify", kept]);
}

#[test]
fn allow_deletions_lets_a_refused_landing_through() {
    let sb = users_repo(json!({"ISC-A-1": ["sh:rm untracked.txt && echo a > a.txt"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--allow-deletions"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!sb.work().join("untracked.txt").exists());
    assert_eq!(read(&sb, "a.txt"), "a\n");
}

#[test]
fn a_worker_that_deletes_everything_and_says_pass_leaves_the_checkout_whole() {
    let sb = repo(
        &["- [ ] ISC-A-1: the code is tidy"],
        json!({"ISC-A-1": ["sh:find . -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +"]}),
        &[("a.txt", "a\n"), ("b.txt", "b\n"), ("src/c.txt", "c\n")],
    );
    let w = sb.work();
    std::fs::write(w.join("untracked.txt"), "mine\n").unwrap();
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_ne!(code(&out), 0, "{}", stderr(&out));
    for (f, text) in [
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("src/c.txt", "c\n"),
        ("untracked.txt", "mine\n"),
    ] {
        assert_eq!(read(&sb, f), text);
    }
    assert!(!ticked(&sb, "ISC-A-1"));
}

#[test]
fn a_tracked_mass_deletion_is_refused() {
    let files: Vec<(String, String)> = (0..6)
        .map(|i| (format!("f{i}.txt"), format!("{i}\n")))
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["sh:rm f*.txt && echo a > a.txt"]}),
        &refs,
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    snapshot!(
        sb.root(),
        "a_worker_that_deletes_tracked_files",
        &shown(&out)
    );
    assert_eq!(read(&sb, "f0.txt"), "0\n");
}

#[test]
fn a_worker_pointing_its_git_at_the_users_repository_reaches_nothing() {
    // Attempt 1 replaces the lane's `.git` by a link to the user's repository and fails, so
    // that the lane is reset for attempt 2 (the old design reset the user's branch there).
    let sb = users_repo(json!({"ISC-A-1": [
        "sh:rm -rf .git && printf 'gitdir: %s/.git\\n' \"$USER_REPO\" > .git && exit 1",
        "sh:rm -rf .git && ln -s \"$USER_REPO/.git\" .git && echo a > a.txt"
    ]}));
    let w = sb.work();
    let before = repository_state(&w);
    let index_before = std::fs::read(w.join(".git/index")).unwrap();
    let out = sb
        .command(&["run", "PRD.md", "-n", "3"])
        .env("USER_REPO", &w)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(repository_state(&w), before);
    assert_eq!(std::fs::read(w.join(".git/index")).unwrap(), index_before);
    assert_eq!(read(&sb, "a.txt"), "a\n");
    assert_users_work_intact(&sb);
}

#[test]
fn a_worker_is_given_its_lanes_copy_of_the_prd_and_writing_beside_it_stays_in_the_lane() {
    let sb = users_repo(json!({"ISC-A-1": [
        "sh:echo overwritten > \"$(dirname \"$PRDLOOP_PRD\")/mine.txt\"; echo x > \"$(dirname \"$PRDLOOP_PRD\")/evil.txt\"; exit 1"
    ]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_users_work_intact(&sb);
    assert!(!sb.work().join("evil.txt").exists());
    let r = &sb.worker_records()[0];
    let given = Path::new(r["prd"].as_str().unwrap());
    assert!(!given.starts_with(sb.work()), "{given:?}");
    assert!(given.starts_with(sb.state_dir().join("lanes")), "{given:?}");
    let prompt = r["prompt"].as_str().unwrap();
    assert!(prompt.contains(&given.display().to_string()), "{prompt}");
}

#[test]
fn a_workers_gc_prune_does_not_break_landings() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
        ],
        json!({
            "ISC-A-1": ["sh:git gc -q --prune=now 2>/dev/null; git reflog expire --expire=now --all; echo a > a.txt"],
            "ISC-B-1": ["sh:sleep 0.3; git gc -q --prune=now 2>/dev/null; echo b > b.txt"]
        }),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&sb, "a.txt"), "a\n");
    assert_eq!(read(&sb, "b.txt"), "b\n");
    // Every pinned attempt still names an object that exists.
    let w = sb.work();
    for line in git(
        &w,
        &["for-each-ref", "--format=%(objectname)", "refs/prdloop/"],
    )
    .lines()
    {
        git(&w, &["cat-file", "-e", line]);
    }
}

#[test]
fn a_criterion_with_a_very_long_id_lands() {
    let id = format!("ISC-{}", "L".repeat(258));
    let line = format!("- [ ] {id}: long.txt exists | Verify: CLI: `test -f long.txt`");
    let sb = repo(
        &[line.as_str()],
        json!({"*": ["write:long.txt"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&sb, "long.txt"), "done\n");
    assert!(ticked(&sb, &id));
}

#[test]
fn work_outside_a_sparse_cone_fails_clearly_and_is_kept() {
    let sb = repo(
        &["- [ ] ISC-A-1: docs are written | Verify: CLI: `test -f docs/guide.md`"],
        json!({"ISC-A-1": ["sh:mkdir -p docs && echo guide > docs/guide.md && echo more >> docs/old.md"]}),
        &[("src/main.txt", "m\n"), ("docs/old.md", "old\n")],
    );
    let w = sb.work();
    git(&w, &["sparse-checkout", "set", "--cone", "src"]);
    assert!(!w.join("docs").exists());
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    snapshot!(sb.root(), "work_outside_a_sparse_cone", &shown(&out));
    assert!(!ticked(&sb, "ISC-A-1"));
    let st = sb.state();
    let kept = attempts(&st)[0]["landing"]["kept"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        git(&w, &["show", &format!("{kept}:docs/guide.md")]),
        "guide\n"
    );
}

// ---- Undo ----

#[test]
fn undo_puts_back_the_newest_landing_and_refuses_over_later_edits() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: lib says b | Verify: CLI: `grep -qx b lib.txt`",
        ],
        json!({"ISC-A-1": ["write:a.txt"], "ISC-B-1": ["sh:echo b >> lib.txt && rm gone.txt"]}),
        &[
            ("lib.txt", "lib\n"),
            ("gone.txt", "g\n"),
            ("x.txt", "x\n"),
            ("y.txt", "y\n"),
        ],
    );
    let w = sb.work();
    std::fs::write(w.join("notes.txt"), "untracked, mine\n").unwrap();
    let out = sb.run(&["run", "PRD.md", "-a", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let list = sb.run(&["undo", "--list", "--json"]);
    assert_eq!(code(&list), 0, "{}", stderr(&list));
    let points: Vec<serde_json::Value> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(points.len(), 2, "{points:?}");
    // The newest first: B's.
    let newest = points[0]["label"].as_str().unwrap().to_string();
    let out = sb.run(&["undo"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("undid {newest}'s landing")),
        "{text}"
    );
    if newest == "ISC-B-1" {
        assert_eq!(read(&sb, "lib.txt"), "lib\n");
        assert_eq!(read(&sb, "gone.txt"), "g\n");
        assert_eq!(read(&sb, "a.txt"), "done\n");
    } else {
        assert!(!w.join("a.txt").exists());
        assert_eq!(read(&sb, "lib.txt"), "lib\nb\n");
    }
    assert_eq!(read(&sb, "notes.txt"), "untracked, mine\n");
    // The other one, after the user changed its file: refused, nothing changed.
    let other_file = if newest == "ISC-B-1" {
        "a.txt"
    } else {
        "lib.txt"
    };
    std::fs::write(w.join(other_file), "the user's own\n").unwrap();
    let out = sb.run(&["undo"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains(other_file), "{}", stderr(&out));
    assert_eq!(read(&sb, other_file), "the user's own\n");
    // Put back as it landed, it can be undone.
    std::fs::write(
        w.join(other_file),
        if newest == "ISC-B-1" {
            "done\n"
        } else {
            "lib\nb\n"
        },
    )
    .unwrap();
    let out = sb.run(&["undo", "--all"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!w.join("a.txt").exists());
    assert_eq!(read(&sb, "lib.txt"), "lib\n");
    assert_eq!(read(&sb, "notes.txt"), "untracked, mine\n");
    let out = sb.run(&["undo"]);
    assert_eq!(code(&out), 1, "nothing left: {}", stderr(&out));
}

#[test]
fn undo_of_a_committed_landing_moves_head_back() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[("README", "r\n")],
    );
    let w = sb.work();
    let head = git(&w, &["rev-parse", "HEAD"]);
    std::fs::write(w.join("README"), "r\nmine\n").unwrap();
    let out = sb.run(&["run", "PRD.md", "--commit"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_ne!(git(&w, &["rev-parse", "HEAD"]), head);
    let text = transcript(&sb, &[&["undo", "--list"], &["undo"], &["undo", "--list"]]);
    snapshot!(sb.root(), "undo_list_and_undo_of_a_commit", &text);
    assert_eq!(git(&w, &["rev-parse", "HEAD"]), head);
    assert!(!w.join("a.txt").exists());
    assert_eq!(git(&w, &["status", "--porcelain", "--", "a.txt"]), "");
    assert_eq!(read(&sb, "README"), "r\nmine\n");
}

// ---- Interrupted landings ----

#[test]
fn a_landing_on_a_full_disk_changes_nothing() {
    // A small tmpfs as the checkout: the landing's new content does not fit.
    let sb = repo(
        &["- [ ] ISC-A-1: big.bin exists | Verify: CLI: `test -f big.bin`"],
        json!({"ISC-A-1": ["sh:echo more >> mine.txt && head -c 3000000 /dev/zero > big.bin"]}),
        &[("mine.txt", "committed\n")],
    );
    let small = sb.root().join("small");
    std::fs::create_dir_all(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&small)
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)");
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(small.clone());
    // The checkout moves onto the tmpfs (the state folder stays where it is).
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", sb.work().display()))
        .arg(&small)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(small.join("mine.txt"), "committed\nmy uncommitted line\n").unwrap();
    let out = sb
        .command(&["run", "PRD.md", "-n", "1"])
        .current_dir(&small)
        .output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("could not merge the work back"), "{err}");
    assert_eq!(
        std::fs::read_to_string(small.join("mine.txt")).unwrap(),
        "committed\nmy uncommitted line\n"
    );
    assert!(!small.join("big.bin").exists());
    let leftovers = landing_leftovers(&small);
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn lines_the_user_appends_during_a_busy_run_are_all_kept() {
    let n = 8;
    let criteria: Vec<String> = (1..=n)
        .map(|k| format!("- [ ] ISC-K{k}-1: line {k} is done | Verify: CLI: `grep -qx 'line {k} done' shared.txt`"))
        .collect();
    let refs: Vec<&str> = criteria.iter().map(String::as_str).collect();
    let mut plan = serde_json::Map::new();
    for k in 1..=n {
        plan.insert(
            format!("ISC-K{k}-1"),
            json!([format!(
                "sh:sed -i 's/^line {k}$/line {k} done/' shared.txt"
            )]),
        );
    }
    let sb = repo(
        &refs,
        serde_json::Value::Object(plan),
        &[("shared.txt", &lines(20))],
    );
    let w = sb.work();
    let child = sb.spawn(&["run", "PRD.md", "-a", "4", "-n", "20"]);
    let pid = child.id();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let appender = {
        let (stop, path) = (stop.clone(), w.join("shared.txt"));
        std::thread::spawn(move || {
            use std::io::Write;
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                writeln!(f, "user {i}").unwrap();
                drop(f);
                i += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            i
        })
    };
    let out = wait_output(child, std::time::Duration::from_secs(170));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let appended = appender.join().unwrap();
    let _ = pid;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = read(&sb, "shared.txt");
    for k in 1..=n {
        assert!(text.contains(&format!("line {k} done\n")), "{text}");
    }
    let users: Vec<&str> = text.lines().filter(|l| l.starts_with("user ")).collect();
    let want: Vec<String> = (0..appended).map(|i| format!("user {i}")).collect();
    assert_eq!(users, want, "lines the user appended were lost");
}

/// A sandboxed worker (Linux Landlock) writes in its lane and its own TMPDIR; its writes into
/// the user's checkout (a file, a new file, `.git`), into $HOME outside the agents' folders
/// and into /tmp outside its TMPDIR are refused, the user's files stay as they were, its
/// TMPDIR is gone after it, and the attempt records the refusals.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_worker_writes_only_in_its_lane_and_its_tmpdir() {
    let other_tmp = tempfile::tempdir().unwrap();
    let sb = repo(
        &["- [ ] ISC-A-1: tries to write everywhere"],
        json!({}),
        &[("keep.txt", "original\n")],
    );
    let (work, home, tmp) = (
        sb.work().display().to_string(),
        sb.root().display().to_string(),
        other_tmp.path().display().to_string(),
    );
    let script = format!(
        "r=''
echo evil > '{work}/keep.txt' && r=\"$r checkout\"
echo evil > '{work}/new.txt' && r=\"$r checkout-new\"
echo evil >> '{work}/.git/config' && r=\"$r git\"
echo evil > '{home}/notes.txt' && r=\"$r home\"
echo evil > '{tmp}/x' && r=\"$r tmp\"
echo ok > \"$TMPDIR/t\" && [ \"$(cat \"$TMPDIR/t\")\" = ok ] && r=\"$r tmpdir\"
echo ok > lane.txt && r=\"$r lane\"
echo \"$TMPDIR\" > tmpdir.txt
echo \"$r\" > result.txt"
    );
    sb.set_plan(json!({ "*": [format!("sh:{script}")] }));
    let git_config = std::fs::read(sb.work().join(".git/config")).unwrap();
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("sandbox: on"), "{err}");
    // What it wrote in its lane landed; nothing else was written.
    assert_eq!(read(&sb, "result.txt").trim(), "tmpdir lane", "{err}");
    assert_eq!(read(&sb, "keep.txt"), "original\n");
    assert!(!sb.work().join("new.txt").exists());
    assert_eq!(
        std::fs::read(sb.work().join(".git/config")).unwrap(),
        git_config
    );
    assert!(!sb.root().join("notes.txt").exists());
    assert!(!other_tmp.path().join("x").exists());
    // Its TMPDIR was its own, and is gone.
    let its_tmp = read(&sb, "tmpdir.txt");
    let its_tmp = Path::new(its_tmp.trim());
    assert!(
        its_tmp.starts_with(std::env::temp_dir())
            && its_tmp
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("prdloop-worker-"),
        "{}",
        its_tmp.display()
    );
    assert!(!its_tmp.exists(), "{}", its_tmp.display());
    // The attempt says what was refused.
    let attempt = &attempts(&sb.state())[0];
    let refused = &attempt["refusedWrites"];
    assert_eq!(refused["lines"], 5, "{attempt}");
    let paths: Vec<&str> = refused["paths"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert!(
        paths.contains(&format!("{work}/keep.txt").as_str()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&format!("{home}/notes.txt").as_str()),
        "{paths:?}"
    );
    assert!(err.contains("the sandbox refused"), "{err}");
}

/// A relative --agent-bin is relative to where prdloop started, also for isolated workers,
/// which run in their lane.
#[test]
fn a_relative_agent_bin_works_with_isolated_workers() {
    let sb = repo(
        &["- [ ] ISC-A-1: a"],
        json!({"*": ["write:a.txt"]}),
        &[("README", "r\n")],
    );
    std::os::unix::fs::symlink(FAKE, sb.root().join("agent-bin")).unwrap();
    let out = sb.run(&["run", "PRD.md", "--agent-bin", "../agent-bin"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(ticked(&sb, "ISC-A-1"), "{err}");
    assert_eq!(read(&sb, "a.txt"), "done\n");
}

#[test]
fn git_config_a_worker_plants_in_its_lane_never_runs_in_the_runners_checks() {
    // The worker sets `core.fsmonitor` (a command git runs on `git status`) in its lane's
    // `.git`; the runner's own Verify command, unsandboxed, runs `git status` in the lane.
    let marker = "escaped-through-fsmonitor";
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `git status --porcelain >/dev/null && test -f a.txt`",
        ],
        json!({"ISC-A-1": ["sh:echo a > a.txt && git config core.fsmonitor \"touch $MARKER; echo\""]}),
        &[("README", "r\n")],
    );
    let mark = sb.root().join(marker);
    let out = sb
        .command(&["run", "PRD.md", "-n", "1"])
        .env("MARKER", &mark)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(ticked(&sb, "ISC-A-1"));
    assert!(
        !mark.exists(),
        "the worker's git config ran outside its sandbox"
    );
}

#[test]
fn a_damaged_landing_journal_stops_the_run_naming_what_it_left() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["sh:echo a > a.txt"]}),
        &[],
    );
    let w = sb.work();
    let journal = w.join(".git/prdloop/landing.json");
    std::fs::create_dir_all(journal.parent().unwrap()).unwrap();
    // Cut in half, with one of its temporary files left in the checkout.
    std::fs::write(&journal, r#"{"phase": "committed", "top": "#).unwrap();
    std::fs::write(w.join(".prdloop-landing-7-0"), "old content\n").unwrap();
    let out = sb.command(&["run", "PRD.md", "-n", "1"]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(code(&out), 6, "{err}");
    assert!(err.contains("is damaged"), "{err}");
    assert!(err.contains(".prdloop-landing-7-0"), "{err}");
    // Nothing ran or landed; what the crash left is kept for the user.
    assert!(!w.join("a.txt").exists());
    assert!(w.join(".prdloop-landing-7-0").exists() && journal.exists());
    assert!(read(&sb, "PRD.md").contains("- [ ] ISC-A-1"));
}

#[test]
fn files_whose_names_are_not_utf8_land_under_their_own_names() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    // `tr\xe9.txt` is tracked; the worker changes it and adds `n\xe9w.txt` (Latin-1 names).
    let tracked = OsStr::from_bytes(b"tr\xe9.txt");
    let new = OsStr::from_bytes(b"n\xe9w.txt");
    let sb = repo(
        &["- [ ] ISC-A-1: both files | Verify: CLI: `test -f \"$(printf 'n\\351w.txt')\"`"],
        json!({"ISC-A-1": ["sh:echo more >> \"$(printf 'tr\\351.txt')\" && echo new > \"$(printf 'n\\351w.txt')\""]}),
        &[("README", "r\n")],
    );
    let w = sb.work();
    std::fs::write(w.join(tracked), "old\n").unwrap();
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-q", "-m", "a Latin-1 name"]);
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(!err.contains("kept changing"), "{err}");
    assert_eq!(std::fs::read(w.join(tracked)).unwrap(), b"old\nmore\n");
    assert_eq!(std::fs::read(w.join(new)).unwrap(), b"new\n");
    // Under its own name only: no other file appeared.
    let names: Vec<Vec<u8>> = std::fs::read_dir(&w)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().as_bytes().to_vec())
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    assert!(ticked(&sb, "ISC-A-1"), "{err}");
    // And it can be undone, byte for byte.
    let undo = sb.run(&["undo", "PRD.md"]);
    assert_eq!(code(&undo), 0, "{}", stderr(&undo));
    assert_eq!(std::fs::read(w.join(tracked)).unwrap(), b"old\n");
    assert!(!w.join(new).exists());
}
