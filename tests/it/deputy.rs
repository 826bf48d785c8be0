//! No confused deputy (issue 34, its first two parts): nothing of prdloop's is writable by a
//! sandboxed worker, in PAI's default layout too (`PAI_DIR` unset, so the state and the PRD
//! under `~/.claude/MEMORY`), and the runner follows no link a worker made in its lane.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::json;

/// A checkout (a git repository with a commit) and a PRD in PAI's default layout: HOME is the
/// sandbox's root, the PRD in `~/.claude/MEMORY/WORK/…`, the state (unless `state` names a
/// folder) in `~/.claude/MEMORY/STATE/algorithms`, a claude login in `~/.claude`.
struct Pai {
    sb: Sandbox,
    prd: PathBuf,
    state: Option<PathBuf>,
}

impl Pai {
    fn new(criteria: &[&str], plan: serde_json::Value, state_elsewhere: bool) -> Pai {
        let sb = repo(
            criteria,
            plan,
            &[("mine.txt", "committed\n"), ("lib/x.txt", "lib\n")],
        );
        git(&sb.work(), &["rm", "-q", "PRD.md"]);
        git(
            &sb.work(),
            &["commit", "-qm", "the PRD lives in PAI's folders"],
        );
        let claude = sb.root().join(".claude");
        let prd = claude.join("MEMORY/WORK/20261201-test/PRD.md");
        std::fs::create_dir_all(prd.parent().unwrap()).unwrap();
        std::fs::write(&prd, prd_with(criteria)).unwrap();
        std::fs::write(claude.join(".credentials.json"), "{\"token\":\"t\"}").unwrap();
        std::fs::write(claude.join("settings.json"), "{}").unwrap();
        let state = state_elsewhere.then(|| sb.root().join("state"));
        Pai { sb, prd, state }
    }

    fn state_dir(&self) -> PathBuf {
        self.state
            .clone()
            .unwrap_or_else(|| self.sb.root().join(".claude/MEMORY/STATE/algorithms"))
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        let prd = self.prd.display().to_string();
        let work = self.sb.work().display().to_string();
        let mut all = vec!["run", prd.as_str(), "--workdir", work.as_str()];
        let state = self.state.as_ref().map(|s| s.display().to_string());
        if let Some(s) = &state {
            all.extend(["--state-dir", s.as_str()]);
        }
        all.extend(args);
        let mut c = self.sb.command(&all);
        c.env_remove("PAI_DIR");
        wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(180))
    }
}

/// Every file under `dir` with its bytes, sorted by path.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_file() {
                out.push((e.path(), std::fs::read(e.path()).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// A sandboxed worker in PAI's default layout (and with the state elsewhere) tries to write
/// everything of prdloop's and the user's it can name: another lane, a new lane, the real PRD
/// (a `prdloop:` map, another criterion's Verify), the state JSON, the attempts log, the
/// question book, its lane folder's place, `~/.claude` and the PRD copy's folder. Each write
/// fails; it may write its lane and its private agent home, which holds a copy of the login.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_worker_writes_nothing_of_prdloops_or_the_users_in_either_layout() {
    for elsewhere in [false, true] {
        let criteria = [
            "- [ ] ISC-A-1: tries everything | Verify: CLI: `test -f result.txt`",
            "- [ ] ISC-B-1: b.txt says b | Verify: CLI: `grep -q b b.txt`",
        ];
        let pai = Pai::new(&criteria, json!({}), elsewhere);
        let state = pai.state_dir();
        std::fs::create_dir_all(&state).unwrap();
        let (prd, st, claude) = (
            pai.prd.display().to_string(),
            state.display().to_string(),
            pai.sb.root().join(".claude").display().to_string(),
        );
        let script = format!(
            "r=''
m=FOR; m=\"${{m}}GED\"
echo \"$m\" > ../lane-2/evil.txt && r=\"$r other-lane\"
mkdir ../lane-9 && r=\"$r new-lane\"
mv \"$PWD\" \"$PWD.gone\" && r=\"$r moved-lane\"
printf 'prdloop:\\n  sandbox: off # %s\\n' \"$m\" >> '{prd}' && r=\"$r prd\"
sed -i 's/grep -q b b.txt/true/' '{prd}' && r=\"$r verify\"
for f in $(find '{st}' -type f -not -path \"$PWD/*\"); do echo \"$m\" >> \"$f\" && r=\"$r $(basename \"$f\")\"; done
echo '{{}}' > '{st}/forged.questions.json' && r=\"$r forged\"
echo \"$m\" > '{claude}/settings.json' && r=\"$r claude-settings\"
echo \"$m\" > \"$(dirname \"$PRDLOOP_PRD\")/evil\" && r=\"$r prd-folder\"
grep -q token \"$CLAUDE_CONFIG_DIR/.credentials.json\" && r=\"$r login\"
echo ok > \"$CLAUDE_CONFIG_DIR/session.jsonl\" && r=\"$r home\"
echo ok > result.txt && r=\"$r lane\"
echo \"$CLAUDE_CONFIG_DIR\" > home.txt
echo \"$r\" >> result.txt"
        );
        pai.sb.set_plan(json!({
            "ISC-A-1": [format!("sh:sleep 1; {script}")],
            "ISC-B-1": ["sh:echo b > b.txt"],
        }));
        let before_git = repository_state(&pai.sb.work());
        let out = pai.run(&["-a", "2", "-n", "1", "--sandbox", "on"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 0, "{err}");
        assert!(err.contains("sandbox: on"), "{err}");
        let result = std::fs::read_to_string(pai.sb.work().join("result.txt")).unwrap();
        assert_eq!(
            result, "ok\n login home lane\n",
            "state elsewhere: {elsewhere}; {err}"
        );
        // Nothing of prdloop's and of the user's was changed by the worker.
        let text = std::fs::read_to_string(&pai.prd).unwrap();
        assert!(!text.contains("prdloop:"), "{text}");
        assert!(text.contains("grep -q b b.txt"), "{text}");
        for (path, bytes) in files_under(&state) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains("FORGED"),
                "{}",
                path.display()
            );
        }
        assert!(!state.join("forged.questions.json").exists());
        assert_eq!(
            std::fs::read_to_string(pai.sb.root().join(".claude/settings.json")).unwrap(),
            "{}"
        );
        assert_eq!(repository_state(&pai.sb.work()), before_git);
        assert!(!pai.sb.work().join("evil.txt").exists());
        // Its agent home was its own, and is gone.
        let home = std::fs::read_to_string(pai.sb.work().join("home.txt")).unwrap();
        let home = Path::new(home.trim());
        assert!(
            home.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("prdloop-home-")
                && !home.exists(),
            "{}",
            home.display()
        );
        // B's work landed as B's (nothing of A's in it).
        assert_eq!(
            std::fs::read_to_string(pai.sb.work().join("b.txt")).unwrap(),
            "b\n"
        );
    }
}

/// A `--sandbox-allow` holding `~/.claude` would let workers write prdloop's state in PAI's
/// layout: the run stops before any worker, naming both.
#[cfg(target_os = "linux")]
#[test]
fn a_state_folder_workers_could_write_stops_the_run() {
    let pai = Pai::new(&["- [ ] ISC-A-1: a"], json!({}), false);
    let claude = pai.sb.root().join(".claude");
    let out = pai.run(&[
        "--sandbox",
        "on",
        "--sandbox-allow",
        claude.to_str().unwrap(),
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("MEMORY/STATE/algorithms") && err.contains("--state-dir"),
        "{err}"
    );
    assert!(pai.sb.worker_records().is_empty());
}

/// Unsandboxed, a worker swaps its lane folder for a link to the user's checkout (whose path
/// its `.git` names). The runner never enters it: the attempt's work is not taken, the next
/// attempt's lane is made anew (the link removed, not its target), the run says so, and the
/// user's `.git` and files are as they were.
#[test]
fn a_lane_swapped_for_a_link_to_the_checkout_is_thrown_away_not_entered() {
    // Its Verify command says where it ran (links resolved).
    let sb = repo(&[], json!({}), &[("mine.txt", "committed\n")]);
    let cwds = sb.root().join("cwds.txt");
    std::fs::write(
        sb.prd(),
        prd_with(&[&format!(
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `pwd -P >> {}; test -f a.txt`",
            cwds.display()
        )]),
    )
    .unwrap();
    git(&sb.work(), &["commit", "-qam", "the PRD"]);
    let work = sb.work().display().to_string();
    sb.set_plan(json!({"ISC-A-1": [
        format!("sh:lane=\"$PWD\"; cd / && rm -rf \"$lane\" && ln -s '{work}' \"$lane\""),
        "write:a.txt",
    ]}));
    std::fs::write(sb.work().join("untracked.txt"), "mine\n").unwrap();
    let before = repository_state(&sb.work());
    let dotgit = sb.work().join(".git");
    let users_own = || {
        let mut v = files_under(&dotgit);
        // What a landing adds: objects, and prdloop's own records and refs.
        v.retain(|(p, _)| {
            let rel = p
                .strip_prefix(&dotgit)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            !rel.starts_with("objects/")
                && !rel.starts_with("refs/prdloop")
                && !rel.starts_with("prdloop")
        });
        v
    };
    let bytes_before = users_own();
    let out = sb.run(&["run", "PRD.md", "--sandbox", "off", "-n", "3"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains("is not the one prdloop made (a symbolic link to"),
        "{err}"
    );
    assert!(err.contains("thrown away and made anew"), "{err}");
    // The attempt in the swapped lane is not judged there: after the run's own start-of-run
    // check (in a fresh copy of the checkout), the next check is the second attempt's, in
    // its new lane; none runs in the checkout itself.
    assert!(
        err.contains("ISC-A-1 FAIL")
            && err.contains("could not merge the work back: lane 1's folder"),
        "{err}"
    );
    let real = std::fs::canonicalize(sb.work()).unwrap();
    let ran = std::fs::read_to_string(&cwds).unwrap();
    let ran: Vec<&Path> = ran.lines().map(Path::new).collect();
    assert!(ran[0].ends_with("checkout") && ran[0] != real, "{ran:?}");
    assert!(ran[1].ends_with("lane-1"), "{ran:?}");
    assert!(!ran.contains(&real.as_path()), "{ran:?}");
    assert_eq!(repository_state(&sb.work()), before);
    assert_eq!(users_own(), bytes_before);
    assert_eq!(
        git(&sb.work(), &["rev-list", "--count", "HEAD"]).trim(),
        "2"
    );
    assert_eq!(
        std::fs::read_to_string(sb.work().join("mine.txt")).unwrap(),
        "committed\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.work().join("untracked.txt")).unwrap(),
        "mine\n"
    );
    assert!(sb.work().join("a.txt").exists());
}

/// Unsandboxed, a worker makes its `.git` a link to the user's, and links in its tree to the
/// user's folders (over a tracked folder, and untracked): taking the attempt, remaking the
/// lane's `.git`, the reset and the clean follow none of them.
#[test]
fn links_a_worker_leaves_in_its_lane_are_not_followed() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({}),
        &[("mine.txt", "committed\n"), ("lib/x.txt", "lib\n")],
    );
    let work = sb.work().display().to_string();
    sb.set_plan(json!({"ISC-A-1": [
        format!(
            "sh:rm -rf .git lib && ln -s '{work}/.git' .git && ln -s '{work}/lib' lib && ln -s '{work}' evil && false"
        ),
        "write:a.txt",
    ]}));
    let before = repository_state(&sb.work());
    let out = sb.run(&["run", "PRD.md", "--sandbox", "off", "-n", "3"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert_eq!(repository_state(&sb.work()), before);
    assert_eq!(
        std::fs::read_to_string(sb.work().join("lib/x.txt")).unwrap(),
        "lib\n"
    );
    assert!(sb.work().join("mine.txt").exists());
    assert!(sb.work().join("a.txt").exists());
    assert!(!sb.work().join("evil").exists());
}

/// Unsandboxed, with the PRD outside the checkout (PAI's layout), a worker swaps the folder
/// of its PRD copy for a link into the user's checkout: the next copy goes into a folder made
/// anew, never through the link, and the run says so.
#[test]
fn a_prd_copy_folder_swapped_for_a_link_is_made_anew() {
    let pai = Pai::new(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({}),
        false,
    );
    let work = pai.sb.work().display().to_string();
    pai.sb.set_plan(json!({"ISC-A-1": [
        format!("sh:d=$(dirname \"$PRDLOOP_PRD\"); rm -rf \"$d\" && ln -s '{work}' \"$d\" && false"),
        "write:a.txt",
    ]}));
    let before = repository_state(&pai.sb.work());
    let out = pai.run(&["--sandbox", "off", "-n", "3"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("PRD folder"), "{err}");
    assert!(err.contains("thrown away and made anew"), "{err}");
    assert!(!pai.sb.work().join("PRD.md").exists());
    assert_eq!(repository_state(&pai.sb.work()), before);
    assert!(pai.sb.work().join("a.txt").exists());
}

/// A PRD inside the checkout whose folder in the lane a worker made a link to the user's:
/// the copy is never written through it (the lane is reset, or thrown away and made anew).
#[test]
fn a_prd_copy_is_not_written_through_a_link_in_the_lane() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({}),
        &[("docs/keep.txt", "keep\n")],
    );
    // The PRD in docs/ of the checkout.
    let prd = sb.work().join("docs/PRD.md");
    std::fs::rename(sb.prd(), &prd).unwrap();
    std::fs::write(sb.work().join("PRD.md"), "not the PRD\n").unwrap();
    git(&sb.work(), &["add", "-A"]);
    git(&sb.work(), &["commit", "-qm", "prd"]);
    let elsewhere = sb.root().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let e = elsewhere.display().to_string();
    sb.set_plan(json!({"ISC-A-1": [
        format!("sh:rm -rf docs && ln -s '{e}' docs && false"),
        "write:a.txt",
    ]}));
    let out = sb.run(&["run", "docs/PRD.md", "--sandbox", "off", "-n", "3"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        std::fs::read_dir(&elsewhere).unwrap().next().is_none(),
        "written through the link: {err}"
    );
}

/// Without lanes every worker writes the run's folder: a state folder inside it is refused
/// before any worker starts.
#[cfg(target_os = "linux")]
#[test]
fn a_state_folder_in_the_run_s_folder_without_lanes_stops_the_run() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let out = sb.run(&[
        "run",
        "PRD.md",
        "--isolation",
        "none",
        "--sandbox",
        "on",
        "--state-dir",
        "state",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("the run's folder without lanes") && err.contains("--state-dir"),
        "{err}"
    );
    assert!(sb.worker_records().is_empty());
    assert!(!sb.prd_text().contains("- [x]"));
}

/// `--setup` runs in a lane made anew under a check's rules for that lane: what it runs may
/// be a worker's landed work. A worker rewrites `setup.sh` to write into `$HOME`, and it
/// lands; the next run's new lane runs it, and it writes nothing outside the lane (the
/// setup fails, and says so). Before: `$HOME/PWNED-BY-SETUP` was made.
#[cfg(target_os = "linux")]
#[test]
fn setup_runs_in_the_sandbox_whatever_landed() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": [
            "sh:printf 'echo pwned > \"$HOME/PWNED-BY-SETUP\"\\n' > setup.sh; touch a.txt"
        ]}),
        &[("setup.sh", "touch setup-ran\n")],
    );
    let args = [
        "run",
        "PRD.md",
        "-n",
        "1",
        "--sandbox",
        "on",
        "--setup",
        "sh setup.sh",
    ];
    // The user's own setup runs in the sandbox: it writes in its lane.
    let out = sb.run(&args);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let landed = std::fs::read_to_string(sb.work().join("setup.sh")).unwrap();
    assert!(
        landed.contains("PWNED-BY-SETUP"),
        "the rewrite did not land: {err}"
    );
    // A second run, with a criterion to work: its new lane runs the landed setup.sh.
    let prd = sb.prd_text().replace(
        "ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
        "ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`\n- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
    );
    std::fs::write(sb.prd(), prd).unwrap();
    sb.set_plan(json!({"ISC-B-1": ["sh:touch b.txt"]}));
    let out = sb.run(&[&args[..], &["--force"]].concat());
    let err = stderr(&out);
    assert!(!sb.root().join("PWNED-BY-SETUP").exists(), "{err}");
    assert!(err.contains("--setup `sh setup.sh` failed"), "{err}");
    assert!(!sb.prd_text().contains("- [x] ISC-B-1"), "{err}");
}

/// Without lanes every worker writes the run's folder, the PRD in it: a worker that makes
/// another criterion's Verify `true` and adds a `prdloop:` map is refused, the PRD's orders
/// are put back as they were (the run's own ticks kept), and the next run does not tick
/// that criterion without an agent. Before: only a warning, and the next run obeyed the edit.
#[cfg(target_os = "linux")]
#[test]
fn without_lanes_a_worker_s_edit_of_the_prd_s_orders_is_refused_and_put_back() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: made-a exists | Verify: CLI: `test -f made-a`",
            "- [ ] ISC-B-1: made-b exists | Verify: CLI: `test -f made-b`",
        ],
        json!({"ISC-A-1": [
            "sh:sed -i 's/`test -f made-b`/`true`/; s/^status: IN_PROGRESS$/status: IN_PROGRESS\\nprdloop:\\n  sandbox: off/' \"$PRDLOOP_PRD\"; touch made-a",
            "write:made-a",
        ], "ISC-B-1": ["fail"]}),
        &[("README", "r\n")],
    );
    let before = sb.prd_text();
    let args = [
        "run",
        "PRD.md",
        "-a",
        "1",
        "-n",
        "1",
        "--verifier",
        "none",
        "--isolation",
        "none",
        "--sandbox",
        "on",
    ];
    let out = sb.run(&args);
    let err = stderr(&out);
    let att = attempts(&sb.state());
    let a = att
        .iter()
        .find(|a| a["criterion"] == "ISC-A-1")
        .unwrap_or_else(|| panic!("{att:?}\n{err}"));
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the PRD's orders changed during the attempt (ISC-B-1, the prdloop: map)"),
        "{reason}\n{err}"
    );
    let prd = sb.prd_text();
    assert!(prd.contains("Verify: CLI: `test -f made-b`"), "{prd}");
    assert!(!prd.contains("prdloop:"), "{prd}");
    assert!(before.contains("Verify: CLI: `test -f made-b`"));
    // The next run does not take the worker's orders.
    sb.set_plan(json!({"*": ["fail"]}));
    let out = sb.run(&args);
    let err = stderr(&out);
    assert!(!err.contains("ISC-B-1 PASS"), "{err}");
    assert!(!sb.prd_text().contains("- [x] ISC-B-1"), "{err}");
}
