//! A check can be gamed by the attempt it checks: a worker that edits the test script its
//! Verify command runs makes the command pass without the work. A check's own files are
//! protected: an attempt that changes one of them is not `checked` by that command (at best
//! `reviewed`, the verifier told which). They are:
//!
//! - the script the command runs (`./verify.sh`, `bash tests/check.sh`, `node check.js`),
//!   and what would be run in place of the program it names: for `python -m X`, a module
//!   `X.py` or package `X/` in the folder it runs in or on its `PYTHONPATH`; for `npx X`,
//!   `node_modules/.bin/X` and `node_modules/X/`;
//!   seen through the wrappers that run another program (`timeout 20 ./c.sh`, `env ./c.sh`,
//!   `nice`, `xargs`, `sh -c '…'`), and what it sources (`. ./c.sh`, `source lib.sh`, in the
//!   command or in a script it runs);
//! - the recipe `make TARGET` runs (the Makefile and the files it includes), and the scripts
//!   of `package.json` that `npm test` / `npm run X` run;
//! - once a test runner runs (`cargo test`, `pytest`, `python -m unittest`, `go test`, `jest`,
//!   …): the test files by the usual patterns ([`is_test_file`]), the test configuration
//!   (`conftest.py`, `pytest.ini`, jest and vitest configs, …) and build scripts (`build.rs`);
//! - the paths the PRD or the user's config lists as protected ([`Guard::also`]).
//!
//! Code under test is not the check's own: a file the criterion itself names (`calc.sh` for
//! "calc.sh adds two numbers", checked by `sh calc.sh 2+2 | grep -q 4`) is the work. Files a
//! command only reads (`grep -q x site/index.html`) are the work too.
//!
//! What the files say (a script's `source` lines, a Makefile's recipes, `package.json`'s
//! scripts) is read from the attempt's base, never from what the attempt left.

mod before;
mod shell;

pub use before::Before;

use shell::{Runs, Seen};

/// What an attempt may not change of its criterion's check, beside what the command runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guard {
    /// The criterion's own words: a file they name is the work, not the check.
    pub asked: String,
    /// Paths (from the workers' folder; a folder ends with `/`) listed as protected.
    pub also: Vec<String>,
}

impl Guard {
    /// The files of `command`'s check that `changed` (the attempt's changed paths, from the
    /// top of the repository; `rel`: the workers' folder from the top) holds. `read` gives a
    /// file of the attempt's base (a path from the workers' folder), `None` when it has none.
    pub fn touched(
        &self,
        command: &str,
        changed: &[String],
        rel: &str,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<String> {
        let seen = shell::expand(command, read);
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{}/", rel.trim_end_matches('/'))
        };
        let mut hit = Vec::new();
        for from_top in changed {
            let Some(w) = from_top.strip_prefix(&prefix) else {
                continue;
            };
            if self.is_own(&seen, w, read) && !self.under_test(w) && !hit.contains(from_top) {
                hit.push(from_top.clone());
            }
        }
        hit
    }

    /// Whether `path` (from the workers' folder) is one of the check's own files.
    fn is_own(&self, seen: &Seen, path: &str, read: &dyn Fn(&str) -> Option<String>) -> bool {
        let listed = self.also.iter().any(|p| {
            let p = clean(p);
            match p.strip_suffix('/') {
                Some(dir) => path.starts_with(&format!("{dir}/")),
                None => path == p,
            }
        });
        listed
            || seen.files.iter().any(|f| clean(f) == path)
            || seen.modules.iter().any(|m| shell::is_module_file(m, path))
            || (seen.runs.contains(Runs::TESTS)
                && (is_test_file(path) || is_test_config(path) || has_test_section(path, read)))
    }

    /// A file the criterion names is the code under test (its path, or its file name as a
    /// word of its own).
    fn under_test(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        self.asked
            .split(|c: char| c.is_whitespace() || "`'\"(),;:".contains(c))
            .map(|w| w.trim_start_matches("./").trim_end_matches('.'))
            .any(|w| !w.is_empty() && (w == path || w == name))
    }
}

/// A path as written, without `./` in front.
fn clean(p: &str) -> &str {
    let mut p = p;
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    p
}

/// Test files by the usual patterns: under `tests/`, `test/`, `__tests__/`, `spec/`;
/// `test_*.py`, `*_test.py`, `*_test.go`, `*.test.js`, `*.spec.ts` and their kin.
pub fn is_test_file(path: &str) -> bool {
    let in_test_dir = path
        .split('/')
        .rev()
        .skip(1)
        .any(|d| matches!(d, "tests" | "test" | "__tests__" | "spec" | "testdata"));
    let name = path.rsplit('/').next().unwrap_or(path);
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    in_test_dir
        || (ext == "py" && (stem.starts_with("test_") || stem.ends_with("_test")))
        || (ext == "go" && stem.ends_with("_test"))
        || (matches!(
            ext,
            "js" | "jsx" | "ts" | "tsx" | "mjs" | "cjs" | "mts" | "cts"
        ) && (stem.ends_with(".test") || stem.ends_with(".spec")))
        || (ext == "rb" && stem.ends_with("_spec"))
}

/// Test configuration and build scripts a test run reads.
pub fn is_test_config(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let js_config = |base: &str| {
        name.strip_prefix(base)
            .and_then(|r| r.strip_prefix(".config."))
            .is_some_and(|ext| matches!(ext, "js" | "ts" | "mjs" | "cjs" | "mts" | "cts" | "json"))
    };
    matches!(
        name,
        "conftest.py"
            | "pytest.ini"
            | "noxfile.py"
            | ".mocharc.json"
            | ".mocharc.js"
            | ".mocharc.yml"
            | "build.rs"
    ) || js_config("jest")
        || js_config("vitest")
        || js_config("vite")
}

/// `pyproject.toml`, `setup.cfg`, `tox.ini` whose base holds a test runner's section
/// (`[tool.pytest.ini_options]`, `[tool:pytest]`, `[pytest]`, `[testenv]`).
fn has_test_section(path: &str, read: &dyn Fn(&str) -> Option<String>) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(name, "pyproject.toml" | "setup.cfg" | "tox.ini")
        && read(path).is_some_and(|t| {
            t.lines().map(str::trim).any(|l| {
                [
                    "[tool.pytest",
                    "[tool:pytest]",
                    "[pytest]",
                    "[testenv",
                    "[tool.coverage",
                ]
                .iter()
                .any(|s| l.starts_with(s))
            })
        })
}

#[cfg(test)]
mod tests;
