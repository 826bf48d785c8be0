//! Without lanes (`--isolation none`, or outside git) there is no commit to diff: the check's
//! own files are read and fingerprinted before the worker starts ([`Before::take`]) and
//! compared once it has ended ([`Before::touched`]). Only regular files count: a file that is
//! a link or anything else afterwards is changed (and never opened).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{Guard, is_test_config, is_test_file, shell};

/// Folders never walked for test files: tools' output and dependencies.
const SKIP: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    "dist",
    "build",
    ".mypy_cache",
    ".pytest_cache",
];

/// How many entries a walk for test files looks at.
const WALK_MAX: usize = 20_000;

/// How much of a file is read for what it says.
const READ_MAX: u64 = 1024 * 1024;

/// The check's own files as they were before the worker started.
#[derive(Debug, Default)]
pub struct Before {
    dir: PathBuf,
    command: String,
    /// What the files said then (for what they source and run).
    said: HashMap<String, String>,
    /// Each file's fingerprint then (`None`: it was not there).
    prints: Vec<(String, Option<String>)>,
    /// A test runner runs: the test files then.
    tests: bool,
    /// The modules a program it runs is found as (their files, then and after).
    modules: Vec<String>,
}

impl Before {
    /// Takes the fingerprints of `command`'s files in `dir` (the workers' folder).
    pub fn take(command: &str, dir: &Path, guard: &Guard) -> Before {
        let said = std::cell::RefCell::new(HashMap::new());
        let read = |p: &str| {
            let text = read_regular(&dir.join(p))?;
            said.borrow_mut().insert(p.to_string(), text.clone());
            Some(text)
        };
        let seen = shell::expand(command, &read);
        let tests = seen.runs.contains(shell::Runs::TESTS);
        let mut paths = seen.files.clone();
        paths.extend(guard.also.iter().map(|p| super::clean(p).to_string()));
        if tests {
            paths.extend(test_files(dir));
        }
        for m in &seen.modules {
            paths.extend(module_files(dir, m));
        }
        for p in ["pyproject.toml", "setup.cfg", "tox.ini"] {
            let _ = read(p);
        }
        paths.sort();
        paths.dedup();
        let prints = paths
            .into_iter()
            .flat_map(|p| expand_dir(dir, &p))
            .map(|p| {
                let f = print(&dir.join(&p));
                (p, f)
            })
            .collect();
        Before {
            dir: dir.to_path_buf(),
            command: command.to_string(),
            said: said.into_inner(),
            prints,
            tests,
            modules: seen.modules,
        }
    }

    /// The check's own files the attempt changed (added, changed, removed, or made links),
    /// less the code under test (`guard`).
    pub fn touched(&self, guard: &Guard) -> Vec<String> {
        let mut changed: Vec<String> = self
            .prints
            .iter()
            .filter(|(p, was)| print(&self.dir.join(p)) != *was)
            .map(|(p, _)| p.clone())
            .collect();
        if self.tests {
            for p in test_files(&self.dir) {
                if !self.prints.iter().any(|(q, _)| *q == p) {
                    changed.push(p);
                }
            }
        }
        for p in self.modules.iter().flat_map(|m| module_files(&self.dir, m)) {
            if !self.prints.iter().any(|(q, _)| *q == p) && !changed.contains(&p) {
                changed.push(p);
            }
        }
        for p in &guard.also {
            let p = super::clean(p);
            if let Some(d) = p.strip_suffix('/') {
                for f in expand_dir(&self.dir, d) {
                    if !self.prints.iter().any(|(q, _)| *q == f) {
                        changed.push(f);
                    }
                }
            }
        }
        let read = |p: &str| self.said.get(p).cloned();
        guard.touched(&self.command, &changed, "", &read)
    }
}

/// A regular file's text (not through a link), cut to [`READ_MAX`].
fn read_regular(path: &Path) -> Option<String> {
    use std::io::Read;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(READ_MAX)
        .read_to_end(&mut buf)
        .ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// A regular file's fingerprint; a link or anything else is `"other"`; `None`: not there.
fn print(path: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return Some("other".into());
    }
    Some(crate::evidence::receipt::digest(path).unwrap_or_else(|| "unreadable".into()))
}

/// `p` itself, or the files under it when it is a folder (from `dir`).
fn expand_dir(dir: &Path, p: &str) -> Vec<String> {
    let p = p.trim_end_matches('/');
    match std::fs::symlink_metadata(dir.join(p)) {
        Ok(m) if m.is_dir() => walk(dir, p, &|_| true),
        _ => vec![p.to_string()],
    }
}

/// The files of module `m` (a path from `dir`) there now: `m.*` beside it, all under `m/`
/// (see [`shell::is_module_file`]); links and other files are listed too, never followed.
fn module_files(dir: &Path, m: &str) -> Vec<String> {
    let (up, name) = m.rsplit_once('/').unwrap_or(("", m));
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir.join(up))
        .into_iter()
        .flatten()
        .flatten()
    {
        let n = e.file_name().to_string_lossy().into_owned();
        let p = if up.is_empty() {
            n.clone()
        } else {
            format!("{up}/{n}")
        };
        if n == name && e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(dir, &p, &|_| true));
        } else if shell::is_module_file(m, &p) {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The test files and test configuration under `dir`.
fn test_files(dir: &Path) -> Vec<String> {
    walk(dir, "", &|p| is_test_file(p) || is_test_config(p))
}

/// The files under `dir`/`under` that `keep` keeps (paths from `dir`), links not followed,
/// [`SKIP`] folders left out, at most [`WALK_MAX`] entries looked at.
fn walk(dir: &Path, under: &str, keep: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![under.to_string()];
    let mut looked = 0;
    while let Some(rel) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for e in rd.flatten() {
            looked += 1;
            if looked > WALK_MAX {
                return out;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let p = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            match e.file_type() {
                Ok(t) if t.is_dir() && !SKIP.contains(&name.as_str()) => todo.push(p),
                Ok(t) if t.is_dir() => {}
                Ok(_) if keep(&p) => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}
