//! A check that ran no test is no evidence: `cargo test auth` that matched no test passes,
//! and so do `pytest -k x || true`, `go test -run X` with no match and `jest
//! --passWithNoTests` with none found. What the test runners print about their own counts
//! says so; [`ran_no_test`] reads it from a check's output. Each runner is looked at on its
//! own: a check that runs two runners, one of which ran nothing, measured only half of what
//! it names.

/// Why the test runners in `output` (a check's whole output) ran no test, in a few words
/// (`cargo ran 0 tests`); `None` when every runner seen ran at least one, or none is seen.
pub fn ran_no_test(output: &str) -> Option<String> {
    let mut seen = Seen::default();
    for line in output.lines() {
        seen.line(line.trim_end_matches('\r'));
    }
    seen.verdict()
}

/// One runner's counts: whether it was seen, and whether it ran anything.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    seen: bool,
    ran: bool,
}

impl Count {
    fn saw(&mut self, ran: bool) {
        self.seen = true;
        self.ran |= ran;
    }

    fn empty(self) -> bool {
        self.seen && !self.ran
    }
}

#[derive(Debug, Default)]
struct Seen {
    /// libtest (`cargo test`): `running N tests`.
    cargo: Count,
    /// cargo-nextest: `Starting N tests across M binaries`.
    nextest: Count,
    /// pytest's summary: `=== 3 passed in 0.1s ===`, `5 deselected in 0.02s`.
    pytest: Count,
    /// unittest: `Ran N tests in 0.001s`.
    unittest: Count,
    /// `go test`: `ok  pkg 0.1s [no tests to run]`, `? pkg [no test files]`.
    go: Count,
    /// jest and vitest: `No tests found`, `Tests: 3 passed`.
    jest: Count,
    /// mocha: `3 passing`.
    mocha: Count,
}

impl Seen {
    fn line(&mut self, line: &str) {
        let t = line.trim();
        if let Some(n) = between(t, "running ", " test").and_then(number)
            && (t.ends_with(" test") || t.ends_with(" tests"))
        {
            self.cargo.saw(n > 0);
        }
        if let Some(n) = between(t, "Starting ", " test").and_then(number) {
            self.nextest.saw(n > 0);
        }
        if t.starts_with("error: no tests to run") {
            self.nextest.saw(false);
        }
        if let Some(summary) = pytest_summary(t) {
            self.pytest.saw(count_of(summary, "passed") > 0);
        }
        if let Some(n) = between(t, "Ran ", " test").and_then(number) {
            self.unittest.saw(n > 0);
        }
        if t == "NO TESTS RAN" {
            self.unittest.saw(false);
        }
        if t.contains("[no tests to run]")
            || t.contains("[no test files]")
            || t.starts_with("testing: warning: no tests to run")
        {
            self.go.saw(false);
        } else if go_ok(t) || t.starts_with("--- PASS: ") {
            self.go.saw(true);
        }
        if t.starts_with("No tests found") || t.starts_with("No test files found") {
            self.jest.saw(false);
        }
        if let Some(rest) = t
            .strip_prefix("Tests:")
            .or_else(|| t.strip_prefix("Tests  "))
        {
            self.jest.saw(count_of(rest, "passed") > 0);
        }
        if let Some((n, rest)) = t.split_once(" passing")
            && (rest.is_empty() || rest.starts_with(" ("))
            && let Some(n) = number(n)
        {
            self.mocha.saw(n > 0);
        }
    }

    fn verdict(&self) -> Option<String> {
        let said = [
            (
                self.cargo,
                "cargo's test harness ran 0 tests (`running 0 tests`)",
            ),
            (self.nextest, "cargo-nextest ran 0 tests"),
            (
                self.pytest,
                "pytest ran no test (none selected, or no tests ran)",
            ),
            (self.unittest, "unittest ran 0 tests (`Ran 0 tests`)"),
            (self.go, "go test ran no test (`no tests to run`)"),
            (
                self.jest,
                "the test runner found no tests (`No tests found`)",
            ),
            (self.mocha, "mocha ran 0 tests (`0 passing`)"),
        ];
        said.iter()
            .find(|(c, _)| c.empty())
            .map(|(_, why)| (*why).to_string())
    }
}

/// The text between `start` (at the start of `t`) and the first `end` after it.
fn between<'a>(t: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = t.strip_prefix(start)?;
    rest.find(end).map(|i| &rest[..i])
}

fn number(s: &str) -> Option<u64> {
    let s = s.trim();
    (!s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// How many `word` a summary's `3 passed, 1 skipped` counts.
fn count_of(summary: &str, word: &str) -> u64 {
    summary
        .split([',', '|', '('])
        .filter_map(|part| {
            let mut w = part.split_whitespace();
            let n = number(w.next()?)?;
            (w.next() == Some(word)).then_some(n)
        })
        .sum()
}

/// pytest's last line without its `=` rules: `3 passed, 1 skipped in 0.12s` or `no tests ran
/// in 0.01s` (its time in seconds, maybe with `(0:01:02)` after it).
fn pytest_summary(t: &str) -> Option<&str> {
    let t = t.trim_matches('=').trim();
    let (counts, time) = t.rsplit_once(" in ")?;
    let secs = time.split_whitespace().next()?.strip_suffix('s')?;
    if secs.is_empty() || !secs.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let counted = counts == "no tests ran"
        || counts.split(", ").all(|part| {
            let mut w = part.split_whitespace();
            w.next().and_then(number).is_some()
                && w.next().is_some_and(|k| {
                    matches!(
                        k,
                        "passed"
                            | "failed"
                            | "skipped"
                            | "deselected"
                            | "xfailed"
                            | "xpassed"
                            | "error"
                            | "errors"
                            | "warning"
                            | "warnings"
                            | "rerun"
                    )
                })
                && w.next().is_none()
        });
    counted.then_some(counts)
}

/// `go test`'s line for a package whose tests ran: `ok  example.com/x 0.012s` or `(cached)`.
fn go_ok(t: &str) -> bool {
    let mut w = t.split_whitespace();
    if w.next() != Some("ok") || w.next().is_none() {
        return false;
    }
    w.next().is_some_and(|time| {
        time == "(cached)"
            || time
                .strip_suffix('s')
                .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '.'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_that_matched_no_test_ran_none() {
        let none = "   Compiling x v0.1.0\n    Finished `test` profile\n     Running unittests src/lib.rs\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 12 filtered out; finished in 0.00s\n\n   Doc-tests x\n\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
        assert!(ran_no_test(none).unwrap().contains("running 0 tests"));
        let some = "running 0 tests\n\ntest result: ok.\n\nrunning 2 tests\ntest auth::a ... ok\ntest auth::b ... ok\n";
        assert_eq!(ran_no_test(some), None);
        assert_eq!(
            ran_no_test("running 1 test\ntest a ... ok\n"),
            None,
            "one test is `1 test`"
        );
        assert!(ran_no_test("    Starting 0 tests across 2 binaries (9 skipped)\n").is_some());
        assert!(ran_no_test("error: no tests to run\n").is_some());
        assert_eq!(ran_no_test("    Starting 3 tests across 1 binary\n"), None);
    }

    #[test]
    fn pytest_that_selected_nothing_ran_none() {
        assert!(
            ran_no_test(
                "collected 5 items / 5 deselected / 0 selected\n\n==== 5 deselected in 0.02s ====\n"
            )
            .is_some()
        );
        assert!(ran_no_test("=== no tests ran in 0.01s ===\n").is_some());
        assert!(ran_no_test("no tests ran in 0.01s\n").is_some(), "-q");
        assert!(ran_no_test("==== 2 skipped in 0.03s ====\n").is_some());
        assert_eq!(
            ran_no_test("==== 3 passed, 2 deselected in 0.05s ====\n"),
            None
        );
        assert_eq!(
            ran_no_test("3 passed, 1 warning in 1.20s (0:00:01)\n"),
            None
        );
        // A sentence that looks like it is not pytest's.
        assert_eq!(ran_no_test("built the docs in 2.5s\n"), None);
    }

    #[test]
    fn unittest_go_jest_vitest_and_mocha_that_ran_nothing() {
        let unittest = "\n----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n";
        assert!(ran_no_test(unittest).is_some());
        assert_eq!(ran_no_test("...\nRan 3 tests in 0.002s\n\nOK\n"), None);
        assert_eq!(ran_no_test("Ran 1 test in 0.002s\n\nOK\n"), None);

        let go = "ok  \texample.com/calc\t0.002s [no tests to run]\n?   \texample.com/calc/cmd\t[no test files]\n";
        assert!(ran_no_test(go).unwrap().contains("no tests to run"));
        assert!(ran_no_test("testing: warning: no tests to run\nPASS\n").is_some());
        let go_ran =
            "ok  \texample.com/calc\t0.002s\n?   \texample.com/calc/cmd\t[no test files]\n";
        assert_eq!(ran_no_test(go_ran), None);
        assert_eq!(ran_no_test("ok  \texample.com/calc\t(cached)\n"), None);
        // TAP's `ok 1 - name` is not go's.
        assert_eq!(ran_no_test("ok 1 - adds\nok 2 - subtracts\n"), None);

        assert!(
            ran_no_test("No tests found, exiting with code 0\nRun with `--passWithNoTests`\n")
                .is_some()
        );
        assert!(ran_no_test("No test files found, exiting with code 0\n").is_some());
        assert_eq!(
            ran_no_test("Tests:       4 passed, 4 total\nSnapshots:   0 total\n"),
            None
        );
        assert_eq!(ran_no_test("      Tests  3 passed (3)\n"), None);
        assert!(ran_no_test("Tests:       0 total\n").is_some());

        assert!(ran_no_test("\n  0 passing (2ms)\n").is_some());
        assert_eq!(ran_no_test("\n  5 passing (12ms)\n"), None);
    }

    #[test]
    fn output_of_no_runner_and_one_runner_that_ran_nothing() {
        assert_eq!(ran_no_test(""), None);
        assert_eq!(ran_no_test("ok\nall good\n"), None);
        // Two runners: one ran nothing, so the check measured only half.
        let both = "running 4 tests\ntest a ... ok\n==== 5 deselected in 0.02s ====\n";
        assert!(ran_no_test(both).unwrap().contains("pytest"));
    }
}
