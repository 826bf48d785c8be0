//! The runner's checks are evidence only when they measured something and the attempt left
//! them alone: a check whose test runner ran no test is unmeasured, never a pass.

use crate::common::*;
use serde_json::json;

/// What `cargo test auth` prints when no test matches `auth`.
const CARGO_RAN_NOTHING: &str = "printf '\\nrunning 0 tests\\n\\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out; finished in 0.00s\\n\\n'\n";

/// A repository whose one criterion's check runs a test harness that matches no test.
fn ran_none_repo() -> Sandbox {
    repo(
        &["- [ ] ISC-A-1: the auth tests pass | Verify: Test: `sh ran-none.sh`"],
        json!({"ISC-A-1": ["pass"]}),
        &[("ran-none.sh", CARGO_RAN_NOTHING)],
    )
}

/// A check that exits 0 while its test runner says it ran no test ticks nothing: not before
/// any agent runs, not when an agent claims PASS (`--verifier none`: nothing else can pass
/// it), not in `prdloop verify`; the reason says why.
#[test]
fn a_check_that_ran_no_test_ticks_nothing() {
    let sb = ran_none_repo();
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--verifier", "none"]);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert!(!err.contains("ticked without an agent"), "{err}");
    assert!(sb.prd_text().contains("- [ ] ISC-A-1:"), "{err}");
    assert_eq!(sb.worker_records().len(), 1, "{err}");
    let st = sb.state();
    let att = attempts(&st);
    assert_eq!(att[0]["verdict"], "fail", "{att:?}");
    let reason = att[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("`sh ran-none.sh` ran no test: cargo's test harness ran 0 tests"),
        "{reason}"
    );
    // `prdloop verify` does not count it either.
    let out = sb.run(&["verify", "PRD.md", "--no-write"]);
    assert_ne!(code(&out), 0, "{}", stderr(&out));
}

/// The same check with a verifier: the claim goes to the verifier, told that the command
/// measured nothing; its PASS makes the tick `reviewed`, never `checked`.
#[test]
fn a_check_that_ran_no_test_sends_the_claim_to_the_verifier() {
    let sb = ran_none_repo();
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let v = sb.verifier_records();
    assert_eq!(v.len(), 1, "{err}");
    assert!(
        v[0]["prompt"]
            .as_str()
            .unwrap()
            .contains("The Verify command measured nothing"),
        "{}",
        v[0]["prompt"]
    );
    assert_eq!(sb.state()["criteria"][0]["verifiedBy"], "reviewed", "{err}");
}

/// The README's headline example (`examples/demo/PRD.md`) ticks nothing before an agent has
/// worked: its anti-criterion's check needs the pages it looks at.
#[test]
fn the_demo_prd_ticks_nothing_before_an_agent_works() {
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo/PRD.md");
    let sb = Sandbox::new(
        &std::fs::read_to_string(demo).unwrap(),
        json!({"*": ["fail"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert!(!err.contains("ticked without an agent"), "{err}");
    assert!(!sb.prd_text().contains("- [x]"), "{err}");
}

/// A repository (branch `main`, one commit) whose workers' folder holds `files`, the ones
/// named in `exec` executable.
fn repo_with(criteria: &[&str], plan: serde_json::Value, files: &[(&str, &str)]) -> Sandbox {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new(&prd_with(criteria), plan);
    let w = sb.work();
    for (name, text) in files {
        let p = w.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        if name.ends_with(".sh") {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    git(&w, &["init", "-q", "-b", "main"]);
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-q", "-m", "initial"]);
    sb
}

/// Where prdloop keeps its state: beside the PAI folder the tests give it (`PAI_DIR` set), or
/// in PAI's own default layout (`PAI_DIR` unset: `~/.claude`, with a temporary `HOME`).
#[derive(Debug, Clone, Copy)]
enum Layout {
    PaiDir,
    Default,
}

fn run_in(sb: &Sandbox, layout: Layout, args: &[&str]) -> std::process::Output {
    let mut c = sb.command(args);
    if let Layout::Default = layout {
        c.env_remove("PAI_DIR");
    }
    let child = c.spawn().expect("spawn prdloop");
    wait_output(child, std::time::Duration::from_secs(180))
}

/// One hostile worker: it makes its criterion's check pass by rewriting `file` (a file the
/// check runs, through `command`) instead of doing the work. The tick is never `checked`:
/// with `--verifier none` the attempt fails, naming the file, and nothing lands.
fn a_rewritten_check_is_no_evidence(
    layout: Layout,
    command: &str,
    files: &[(&str, &str)],
    file: &str,
    rewrite: &str,
) {
    let criterion = format!("- [ ] ISC-A-1: the feature is done | Verify: Test: `{command}`");
    let sb = repo_with(
        &[&criterion],
        json!({"ISC-A-1": [format!("sh:printf '{rewrite}' > {file}")]}),
        files,
    );
    let before = std::fs::read_to_string(sb.work().join(file)).unwrap();
    let out = run_in(
        &sb,
        layout,
        &["run", "PRD.md", "-n", "1", "--verifier", "none"],
    );
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{command}: {err}");
    assert!(sb.prd_text().contains("- [ ] ISC-A-1:"), "{command}: {err}");
    let st = sb.state_in(layout);
    let att = attempts(&st);
    let reason = att[0]["reason"].as_str().unwrap_or_default().to_string();
    assert!(
        reason.contains(&format!("the attempt changed {file}")),
        "{command}: {reason}\n{err}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.work().join(file)).unwrap(),
        before,
        "{command}: the rewritten check landed"
    );
}

/// The state file of the sandbox's one run, in either layout.
trait StateIn {
    fn state_in(&self, layout: Layout) -> serde_json::Value;
}

impl StateIn for Sandbox {
    fn state_in(&self, layout: Layout) -> serde_json::Value {
        match layout {
            Layout::PaiDir => self.state(),
            Layout::Default => {
                let dir = self.root().join(".claude/MEMORY/STATE/algorithms");
                let file = std::fs::read_dir(&dir)
                    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .find(|p| p.extension().is_some_and(|x| x == "json"))
                    .expect("a state file");
                serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
            }
        }
    }
}

const CHECK: &str = "#!/bin/sh\ntest -f done.txt\n";

#[test]
fn wrapped_and_sourced_check_scripts_rewritten_by_the_attempt_are_no_evidence() {
    for layout in [Layout::PaiDir, Layout::Default] {
        for command in ["timeout 20 ./c.sh", "env ./c.sh", "nice ./c.sh", ". ./c.sh"] {
            a_rewritten_check_is_no_evidence(
                layout,
                command,
                &[("c.sh", CHECK)],
                "c.sh",
                "exit 0\\n",
            );
        }
    }
}

#[test]
fn a_rewritten_makefile_recipe_or_sourced_helper_is_no_evidence() {
    for layout in [Layout::PaiDir, Layout::Default] {
        a_rewritten_check_is_no_evidence(
            layout,
            "make check",
            &[("Makefile", "check:\n\ttest -f done.txt\n")],
            "Makefile",
            "check:\\n\\ttrue\\n",
        );
        a_rewritten_check_is_no_evidence(
            layout,
            "sh check.sh",
            &[
                ("check.sh", "#!/bin/sh\n. ./helper.sh\nverify_it\n"),
                ("helper.sh", "verify_it() { test -f done.txt; }\n"),
            ],
            "helper.sh",
            "verify_it() { true; }\\n",
        );
    }
}

#[test]
fn a_test_file_the_attempt_edited_is_no_evidence() {
    let test = "import unittest\nimport calc\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 2), 4)\n";
    for layout in [Layout::PaiDir, Layout::Default] {
        a_rewritten_check_is_no_evidence(
            layout,
            "python3 -m unittest",
            &[
                ("calc.py", "def add(a, b):\n    return 0\n"),
                ("test_calc.py", test),
            ],
            "test_calc.py",
            "import unittest\\nclass T(unittest.TestCase):\\n    def test_add(self):\\n        pass\\n",
        );
    }
}

/// Code under test is not the check's own: the criterion asks for `calc.sh`, its check runs
/// it, and the attempt that writes it is `checked`.
#[test]
fn the_code_a_criterion_asks_for_is_checked_by_running_it() {
    let sb = repo_with(
        &[
            "- [ ] ISC-A-1: calc.sh prints the sum of its argument | Verify: Test: `sh calc.sh 2+2 | grep -q 4`",
        ],
        json!({"ISC-A-1": ["sh:printf 'echo $(($1))\\n' > calc.sh"]}),
        &[("calc.sh", "echo 0\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--verifier", "none"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("ISC-A-1 PASS (checked)"), "{err}");
}

/// The code a check runs is the workers' (or a cloned repository's): with isolation, the
/// start check runs in a fresh copy of the checkout and an attempt's check in its lane, both
/// under a worker's rules. A `calc.sh` that writes into the checkout and into `$HOME` while
/// it prints the right answer writes nowhere, and its criterion is still `checked`.
#[cfg(target_os = "linux")]
#[test]
fn checks_run_in_the_sandbox_never_on_the_checkout() {
    for layout in [Layout::PaiDir, Layout::Default] {
        let hostile = "touch \"$0.ran-here\"; echo x > \"$WORK/pwned\"; echo x > \"$HOME/pwned\"; echo $(($1))\n";
        let sb = repo_with(
            &[
                "- [ ] ISC-A-1: calc.sh prints the sum of its argument | Verify: Test: `sh calc.sh 2+2 | grep -q 4`",
            ],
            json!({"ISC-A-1": [format!("sh:printf '{}' > calc.sh", hostile.replace('\n', "\\n").replace('%', "%%"))]}),
            &[(
                "calc.sh",
                "touch \"$0.ran-here\"; echo x > \"$WORK/pwned\"; echo 0\n",
            )],
        );
        let mut c = sb.command(&[
            "run",
            "PRD.md",
            "-n",
            "1",
            "--verifier",
            "none",
            "--sandbox",
            "on",
        ]);
        c.env("WORK", sb.work());
        if let Layout::Default = layout {
            c.env_remove("PAI_DIR");
        }
        let out = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(180));
        let err = stderr(&out);
        assert_eq!(code(&out), 0, "{layout:?}: {err}");
        assert!(err.contains("ISC-A-1 PASS (checked)"), "{layout:?}: {err}");
        assert!(!sb.work().join("pwned").exists(), "{layout:?}: {err}");
        assert!(!sb.root().join("pwned").exists(), "{layout:?}: {err}");
        // Neither the start check nor the attempt's ran in the checkout.
        assert!(
            !sb.work().join("calc.sh.ran-here").exists(),
            "{layout:?}: {err}"
        );
    }
}

/// Without lanes (outside git, or `--isolation none`) the rule is the same: the check's own
/// files are fingerprinted before the worker starts, and a `./check.sh` (or a test file) it
/// rewrote is no evidence.
#[test]
fn without_lanes_a_rewritten_check_is_no_evidence() {
    use std::os::unix::fs::PermissionsExt;
    let cases: [(&str, &str, &str, &str); 2] = [
        ("./check.sh", "check.sh", CHECK, "exit 0\\n"),
        (
            "python3 -m unittest",
            "test_calc.py",
            "import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertTrue(False)\n",
            "import unittest\\n",
        ),
    ];
    for (command, file, text, rewrite) in cases {
        for in_git in [false, true] {
            let criterion =
                format!("- [ ] ISC-A-1: the feature is done | Verify: Test: `{command}`");
            let plan = json!({"ISC-A-1": [format!("sh:printf '{rewrite}' > {file}")]});
            let sb = if in_git {
                repo_with(&[&criterion], plan, &[(file, text)])
            } else {
                let sb = Sandbox::new(&prd_with(&[&criterion]), plan);
                let p = sb.work().join(file);
                std::fs::write(&p, text).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
                sb
            };
            let out = sb.run(&[
                "run",
                "PRD.md",
                "-n",
                "1",
                "--verifier",
                "none",
                "--isolation",
                "none",
            ]);
            let err = stderr(&out);
            assert_ne!(code(&out), 0, "{command} (git: {in_git}): {err}");
            assert!(sb.prd_text().contains("- [ ] ISC-A-1:"), "{err}");
            let att = attempts(&sb.state());
            let reason = att[0]["reason"].as_str().unwrap_or_default().to_string();
            assert!(
                reason.contains(&format!("the attempt changed {file}")),
                "{command} (git: {in_git}): {reason}\n{err}"
            );
        }
    }
}

/// `audit` re-runs a checked tick's command in a copy of the checkout under a worker's rules:
/// a `calc.sh` that writes into `$HOME` while it passes writes nothing, and still holds.
#[cfg(target_os = "linux")]
#[test]
fn audit_re_checks_run_in_the_sandbox() {
    let sb = repo_with(
        &[
            "- [ ] ISC-A-1: calc.sh prints the sum of its argument | Verify: Test: `sh calc.sh 2+2 | grep -q 4`",
        ],
        json!({}),
        &[("calc.sh", "echo x > \"$HOME/pwned\"; echo $(($1))\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--sandbox", "on"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"), "{err}");
    assert!(!sb.root().join("pwned").exists(), "{err}");
    let out = sb.run(&["audit", "PRD.md"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(code(&out), 0, "{said}{}", stderr(&out));
    assert!(said.contains("holds"), "{said}");
    assert!(!sb.root().join("pwned").exists(), "{said}");
}

/// A path the user lists with `--protect` (or a PRD's `protect:`) is the check's own: an
/// attempt that changes it is not `checked`, though its check passes.
#[test]
fn a_path_listed_as_protected_is_the_checks_own() {
    let criteria = [
        "- [ ] ISC-A-1: out.txt matches the fixture | Verify: Test: `cmp -s out.txt fixtures/want.txt`",
    ];
    let plan = json!({"ISC-A-1": ["sh:echo cheat > out.txt && echo cheat > fixtures/want.txt"]});
    let files = [("fixtures/want.txt", "right\n")];
    // Not listed: the fixture is data, and the check passes on the attempt's own copy.
    let sb = repo_with(&criteria, plan.clone(), &files);
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--verifier", "none"]);
    assert!(
        stderr(&out).contains("ISC-A-1 PASS (checked)"),
        "{}",
        stderr(&out)
    );
    // Listed: the same attempt is no evidence.
    let sb = repo_with(&criteria, plan, &files);
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-n",
        "1",
        "--verifier",
        "none",
        "--protect",
        "fixtures/",
    ]);
    let err = stderr(&out);
    assert!(!err.contains("ISC-A-1 PASS (checked)"), "{err}");
    assert!(err.contains("fixtures/want.txt"), "{err}");
    assert!(sb.prd_text().contains("- [ ] ISC-A-1"));
}

/// The runner's own checks (at the start, and after a landing) run in a copy that holds what
/// a new lane holds: with the dependency folder `deps/` ignored and named by
/// `.worktreeinclude`, a check that needs the user's `deps/ok` passes there as it did in the
/// lane. One criterion is ticked before any agent runs; the other, worked, is not undone by
/// its regression check (before: `REGRESSED`, unticked, three attempts).
#[test]
fn the_runners_checks_find_the_ignored_files_worktreeinclude_names() {
    let sb = repo_with(
        &[
            "- [ ] ISC-A-1: a.txt is made | Verify: Test: `test -f deps/ok && test -f a.txt`",
            "- [ ] ISC-B-1: the dependencies are there | Verify: Test: `test -f deps/ok`",
        ],
        json!({"ISC-A-1": ["sh:touch a.txt"]}),
        &[(".gitignore", "deps/\n"), (".worktreeinclude", "deps/\n")],
    );
    std::fs::create_dir_all(sb.work().join("deps")).unwrap();
    std::fs::write(sb.work().join("deps/ok"), "").unwrap();
    let out = sb.run(&["run", "PRD.md", "-n", "3", "--verifier", "none"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(!err.contains("REGRESSED"), "{err}");
    assert!(err.contains("ISC-A-1 PASS (checked)"), "{err}");
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"), "{err}");
    assert!(sb.prd_text().contains("- [x] ISC-B-1:"), "{err}");
    assert_eq!(sb.worker_records().len(), 1, "{err}");
    // The worker's lane got deps/ok too, and nothing of it was written back.
    assert!(sb.work().join("a.txt").is_file(), "{err}");
}

/// A new `unittest.py` (or `pytest.py`) in the check's folder is run by `python3 -m
/// unittest` in place of the real one: it is the check's own, so the attempt that writes it
/// is no evidence and it does not land, with the lanes and without them. Before: `PASS
/// (checked)` on a failing test.
#[test]
fn a_module_that_shadows_the_checks_test_runner_is_no_evidence() {
    let test = "import unittest\nimport calc\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 2), 4)\n";
    for (command, module) in [
        ("python3 -m unittest", "unittest.py"),
        ("python3 -m pytest -q", "pytest.py"),
    ] {
        for isolation in ["worktree", "none"] {
            let criterion = format!("- [ ] ISC-A-1: calc adds | Verify: Test: `{command}`");
            let sb = repo_with(
                &[&criterion],
                json!({"ISC-A-1": [format!(
                    "sh:printf 'print(\"Ran 1 test\\\\n\\\\nOK\")\\n' > {module}"
                )]}),
                &[
                    ("calc.py", "def add(a, b):\n    return 0\n"),
                    ("test_calc.py", test),
                ],
            );
            let out = sb.run(&[
                "run",
                "PRD.md",
                "-n",
                "1",
                "--verifier",
                "none",
                "--isolation",
                isolation,
            ]);
            let err = stderr(&out);
            let what = format!("{command} ({isolation})");
            assert_ne!(code(&out), 0, "{what}: {err}");
            assert!(!err.contains("PASS (checked)"), "{what}: {err}");
            assert!(sb.prd_text().contains("- [ ] ISC-A-1:"), "{what}: {err}");
            let reason = attempts(&sb.state())[0]["reason"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            assert!(
                reason.contains(&format!("the attempt changed {module}")),
                "{what}: {reason}\n{err}"
            );
            if isolation == "worktree" {
                assert!(!sb.work().join(module).exists(), "{what}: it landed");
            }
        }
    }
}
