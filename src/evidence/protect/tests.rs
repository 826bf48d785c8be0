use super::*;

/// A guard for a criterion that asks `asked`, on a base holding `files`.
fn touched(asked: &str, files: &[(&str, &str)], command: &str, changed: &[&str]) -> Vec<String> {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let read = move |p: &str| files.iter().find(|(f, _)| f == p).map(|(_, t)| t.clone());
    let changed: Vec<String> = changed.iter().map(|c| c.to_string()).collect();
    Guard {
        asked: asked.into(),
        also: Vec::new(),
    }
    .touched(command, &changed, "", &read)
}

#[test]
fn the_scripts_a_command_runs_are_found_among_the_changed() {
    let changed = ["tests/check.sh", "site/index.html", "check.py"];
    let t = |cmd: &str| touched("", &[], cmd, &changed);
    assert_eq!(t("bash tests/check.sh"), vec!["tests/check.sh"]);
    assert_eq!(t("./tests/check.sh && echo ok"), vec!["tests/check.sh"]);
    assert_eq!(
        t("CI=1 sh -e 'tests/check.sh' --fast"),
        vec!["tests/check.sh"]
    );
    assert_eq!(t("test -f x || python3 check.py"), vec!["check.py"]);
    // What a command reads is the work, not the check.
    assert!(t("grep -q '<title>' site/index.html").is_empty());
    // The workers' folder is a subfolder of the repository.
    let g = Guard::default();
    let changed = vec!["app/verify.sh".to_string()];
    assert_eq!(
        g.touched("./verify.sh", &changed, "app", &|_| None),
        vec!["app/verify.sh"]
    );
    assert!(g.touched("./verify.sh", &changed, "", &|_| None).is_empty());
}

#[test]
fn wrappers_sh_c_and_sourcing_are_seen_through() {
    let changed = ["c.sh"];
    let t = |cmd: &str| touched("", &[], cmd, &changed);
    for cmd in [
        "timeout 20 ./c.sh",
        "timeout -k 5 20s ./c.sh",
        "env ./c.sh",
        "env -i FOO=1 ./c.sh",
        "nice ./c.sh",
        "nice -n 10 ./c.sh",
        "echo a | xargs ./c.sh",
        "sh -c './c.sh --fast'",
        "bash -c 'timeout 5 sh c.sh'",
        ". ./c.sh",
        "source c.sh && run_checks",
        "! ./c.sh",
        "if ./c.sh; then true; fi",
    ] {
        assert_eq!(t(cmd), vec!["c.sh"], "{cmd}");
    }
}

#[test]
fn what_a_script_sources_and_runs_is_its_own() {
    let files = [
        (
            "check.sh",
            "#!/bin/sh\nset -e\n. ./lib/helpers.sh\nsource \"$(dirname \"$0\")/more.sh\"\n./step.sh\n",
        ),
        ("lib/helpers.sh", "check_it() { ./deep.sh; }\n"),
    ];
    let changed = [
        "lib/helpers.sh",
        "more.sh",
        "step.sh",
        "deep.sh",
        "src/app.rs",
    ];
    assert_eq!(
        touched("", &files, "./check.sh", &changed),
        vec!["lib/helpers.sh", "more.sh", "step.sh", "deep.sh"]
    );
}

#[test]
fn make_recipes_and_package_json_scripts_are_the_checks_own() {
    let files = [
        (
            "Makefile",
            "include mk/rules.mk\n.PHONY: check\nall: build\n\ncheck: lint\n\t@./scripts/check.sh\n\nlint:\n\t-sh scripts/lint.sh\n",
        ),
        ("mk/rules.mk", "build:\n\tcc -o app app.c\n"),
        (
            "package.json",
            r#"{"scripts": {"test": "node run-tests.js", "pretest": "sh pre.sh", "e2e": "./e2e.sh"}}"#,
        ),
    ];
    let changed = [
        "Makefile",
        "mk/rules.mk",
        "scripts/check.sh",
        "scripts/lint.sh",
        "app.c",
        "package.json",
        "run-tests.js",
        "pre.sh",
        "e2e.sh",
    ];
    let t = |cmd: &str| touched("", &files, cmd, &changed);
    assert_eq!(
        t("make check"),
        vec![
            "Makefile",
            "mk/rules.mk",
            "scripts/check.sh",
            "scripts/lint.sh"
        ]
    );
    // The first target by default: `all`, then `build`'s recipe (which runs no file).
    assert_eq!(t("make"), vec!["Makefile", "mk/rules.mk"]);
    assert_eq!(
        t("npm test"),
        vec!["package.json", "run-tests.js", "pre.sh"]
    );
    assert_eq!(t("npm run e2e"), vec!["package.json", "e2e.sh"]);
    assert_eq!(t("yarn e2e"), vec!["package.json", "e2e.sh"]);
}

#[test]
fn test_files_and_test_configuration_are_protected_when_a_test_runner_runs() {
    let files = [(
        "pyproject.toml",
        "[project]\nname='x'\n[tool.pytest.ini_options]\n",
    )];
    let changed = [
        "tests/test_api.py",
        "test_calc.py",
        "calc_test.py",
        "pkg/calc_test.go",
        "web/app.spec.ts",
        "web/app.test.js",
        "conftest.py",
        "pytest.ini",
        "jest.config.js",
        "vitest.config.ts",
        "build.rs",
        "pyproject.toml",
        "src/calc.py",
        "web/app.ts",
    ];
    let t = |cmd: &str| touched("", &files, cmd, &changed);
    let tests = t("python3 -m unittest");
    assert!(
        tests.contains(&"tests/test_api.py".to_string()),
        "{tests:?}"
    );
    assert!(tests.contains(&"pyproject.toml".to_string()), "{tests:?}");
    assert!(
        !tests
            .iter()
            .any(|f| f == "src/calc.py" || f == "web/app.ts")
    );
    assert_eq!(t("cargo test auth").len(), 12);
    assert_eq!(t("go test ./..."), t("npx jest"));
    assert_eq!(
        t("timeout 60 pytest -k auth"),
        t("make -n 2>/dev/null; vitest run")
    );
    // No test runner: test files are what it reads.
    assert!(t("grep -q x tests/test_api.py").is_empty());
    // A pyproject.toml without a test section is not test configuration.
    assert!(
        !touched("", &[], "pytest", &["pyproject.toml"]).contains(&"pyproject.toml".to_string())
    );
}

#[test]
fn code_under_test_is_the_work_and_listed_paths_are_protected() {
    // The criterion asks for calc.sh: its check runs it, and it stays checkable.
    assert!(
        touched(
            "calc.sh adds two numbers",
            &[],
            "sh calc.sh 2+2 | grep -q 4",
            &["calc.sh"]
        )
        .is_empty()
    );
    assert_eq!(
        touched(
            "adds two numbers",
            &[],
            "sh calc.sh 2+2 | grep -q 4",
            &["calc.sh"]
        ),
        vec!["calc.sh"]
    );
    let g = Guard {
        asked: String::new(),
        also: vec!["fixtures/".into(), "./golden.txt".into()],
    };
    let changed: Vec<String> = ["fixtures/a.json", "golden.txt", "fixturesx"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        g.touched("grep -q x out.txt", &changed, "", &|_| None),
        vec!["fixtures/a.json", "golden.txt"]
    );
}

#[test]
fn without_a_worktree_the_checks_files_are_compared_with_before() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("check.sh"), ". ./lib.sh\n").unwrap();
    std::fs::write(d.join("lib.sh"), "true\n").unwrap();
    std::fs::write(d.join("app.sh"), "echo 1\n").unwrap();
    let g = Guard::default();
    let before = Before::take("sh check.sh", d, &g);
    assert!(before.touched(&g).is_empty());
    // The work changes; the check's own files do not.
    std::fs::write(d.join("app.sh"), "echo 2\n").unwrap();
    assert!(before.touched(&g).is_empty());
    // A sourced helper made a link: changed, and never followed.
    std::fs::remove_file(d.join("lib.sh")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.join("lib.sh")).unwrap();
    assert_eq!(before.touched(&g), vec!["lib.sh"]);
    // A test runner: a new test file counts too.
    let before = Before::take("pytest -q", d, &g);
    std::fs::write(d.join("test_new.py"), "def test_x(): pass\n").unwrap();
    assert_eq!(before.touched(&g), vec!["test_new.py"]);
}

/// What would run in place of the program a check names is the check's own: for
/// `python -m X` a module or package `X` in the folder it runs in or on its PYTHONPATH
/// (`unittest.py`, `pytest/__main__.py`, a compiled `X.*.so`), for `npx X` the project's
/// `node_modules/.bin/X` and `node_modules/X/`; without a worktree a new one counts too.
#[test]
fn a_module_shadowing_the_program_a_check_runs_is_its_own() {
    let changed = [
        "unittest.py",
        "pytest/__main__.py",
        "src/pytest.py",
        "sub/unittest.py",
        "unittest_helpers/x.py",
        "node_modules/.bin/jest",
        "node_modules/jest/bin/jest.js",
        "calc.py",
    ];
    let t = |cmd: &str| touched("", &[], cmd, &changed);
    assert_eq!(t("python3 -m unittest calc"), vec!["unittest.py"]);
    assert_eq!(t("python -m pytest -q"), vec!["pytest/__main__.py"]);
    assert_eq!(
        t("PYTHONPATH=src python3 -m pytest"),
        vec!["pytest/__main__.py", "src/pytest.py"]
    );
    assert_eq!(t("cd sub; python3 -m unittest.main"), vec!["unittest.py"]);
    assert_eq!(
        t("npx jest"),
        vec!["node_modules/.bin/jest", "node_modules/jest/bin/jest.js"]
    );
    assert!(shell::is_module_file(
        "m",
        "m.cpython-312-x86_64-linux-gnu.so"
    ));
    assert!(!shell::is_module_file("m", "m.d/x.py"));
    // Without a worktree: a module made after the fingerprints were taken.
    let dir = tempfile::tempdir().unwrap();
    let g = Guard::default();
    let before = Before::take("python3 -m unittest", dir.path(), &g);
    std::fs::write(dir.path().join("unittest.py"), "print('OK')\n").unwrap();
    std::fs::create_dir(dir.path().join("pytest")).unwrap();
    assert_eq!(before.touched(&g), vec!["unittest.py"]);
    let before = Before::take("python3 -m pytest", dir.path(), &g);
    std::fs::write(dir.path().join("pytest/__main__.py"), "print('OK')\n").unwrap();
    assert_eq!(before.touched(&g), vec!["pytest/__main__.py"]);
}
