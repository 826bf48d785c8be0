//! Running git: one command at a time, with the user's environment cleared of the variables
//! that would point git elsewhere, and the few plumbing steps isolation is made of (a
//! snapshot of a working tree, a three-way merge of trees, a binary patch between trees).

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// The oldest git isolation works with: `merge-tree --write-tree` came in 2.38.
pub const MIN_VERSION: (u32, u32) = (2, 38);

/// Variables that would make git work on another repository, index or tree than asked.
const REDIRECTS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
];

/// Identity of the commits prdloop makes for itself (snapshots, pinned attempts): they are
/// refs under `refs/prdloop/`, never on the user's branches.
const SELF: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "prdloop"),
    ("GIT_AUTHOR_EMAIL", "prdloop@localhost"),
    ("GIT_COMMITTER_NAME", "prdloop"),
    ("GIT_COMMITTER_EMAIL", "prdloop@localhost"),
];

/// git, run in one folder.
#[derive(Debug, Clone)]
pub struct Git {
    pub dir: PathBuf,
    /// A git folder given explicitly, with `dir` as its working tree: a lane's files seen
    /// through the user's object store, never through the lane's own `.git`.
    git_dir: Option<PathBuf>,
}

/// One git command to run.
pub struct Cmd<'a> {
    git: &'a Git,
    args: Vec<&'a OsStr>,
    env: Vec<(&'a str, &'a OsStr)>,
    input: Option<&'a [u8]>,
    ok_codes: &'a [i32],
}

impl<'a> Cmd<'a> {
    pub fn arg(mut self, a: &'a (impl AsRef<OsStr> + ?Sized)) -> Self {
        self.args.push(a.as_ref());
        self
    }

    pub fn args<S: AsRef<OsStr> + 'a>(mut self, args: &'a [S]) -> Self {
        self.args.extend(args.iter().map(AsRef::as_ref));
        self
    }

    pub fn env(mut self, k: &'a str, v: &'a (impl AsRef<OsStr> + ?Sized)) -> Self {
        self.env.push((k, v.as_ref()));
        self
    }

    /// With a temporary index instead of the worktree's own.
    pub fn index(self, index: &'a Path) -> Self {
        self.env("GIT_INDEX_FILE", index)
    }

    /// As prdloop (for its own commits).
    pub fn as_self(mut self) -> Self {
        for (k, v) in SELF {
            self.env.push((k, OsStr::new(v)));
        }
        self
    }

    pub fn input(mut self, bytes: &'a [u8]) -> Self {
        self.input = Some(bytes);
        self
    }

    /// Exit codes other than 0 that are answers, not failures.
    pub fn ok_codes(mut self, codes: &'a [i32]) -> Self {
        self.ok_codes = codes;
        self
    }

    /// Runs it with its stdout written into `file` (streamed: a large blob never sits in
    /// memory).
    pub fn to_file(self, file: std::fs::File) -> Result<()> {
        let mut c = self.command();
        c.stdin(Stdio::null()).stdout(file).stderr(Stdio::piped());
        let shown = self.shown();
        let out = c
            .output()
            .with_context(|| format!("could not run `git {shown}`"))?;
        finish(out, self.ok_codes, &|| shown.clone()).map(drop)
    }

    fn shown(&self) -> String {
        self.args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn command(&self) -> Command {
        let mut c = Command::new("git");
        c.arg("-C").arg(&self.git.dir);
        if let Some(g) = &self.git.git_dir {
            c.arg("--git-dir")
                .arg(g)
                .arg("--work-tree")
                .arg(&self.git.dir);
            // A lane holds every file, whatever the user's checkout leaves out.
            c.args([
                "-c",
                "core.sparseCheckout=false",
                "-c",
                "index.sparse=false",
            ]);
        }
        // Output meant for programs, whatever the user's configuration says.
        c.args([
            "-c",
            "core.quotepath=false",
            "-c",
            "color.ui=false",
            "-c",
            "diff.noprefix=false",
            "-c",
            "diff.mnemonicPrefix=false",
            "-c",
            "core.fsmonitor=false",
        ]);
        c.args(&self.args);
        for k in REDIRECTS {
            c.env_remove(k);
        }
        c.env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C");
        // Its own process group: a Ctrl-C at the terminal is for the runner, which ends the
        // run in order; a git command cut off half-way would fail a passing attempt.
        {
            use std::os::unix::process::CommandExt;
            c.process_group(0);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs it; stdout and the exit code.
    pub fn output(self) -> Result<(Vec<u8>, i32)> {
        let mut c = self.command();
        c.stdin(if self.input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let shown = || self.shown();
        let mut child = c
            .spawn()
            .with_context(|| format!("could not run `git {}`", shown()))?;
        if let Some(bytes) = self.input {
            let mut stdin = child.stdin.take().expect("piped");
            // A writer thread: git may fill its stdout pipe before reading all of stdin.
            let bytes = bytes.to_vec();
            let writer = std::thread::spawn(move || {
                let _ = stdin.write_all(&bytes);
            });
            let out = child.wait_with_output()?;
            let _ = writer.join();
            return finish(out, self.ok_codes, &shown);
        }
        let out = child.wait_with_output()?;
        finish(out, self.ok_codes, &shown)
    }

    /// Runs it and reads at most `max` bytes of its stdout (the rest is not read: the
    /// command is ended), so that a huge output never sits in memory.
    pub fn head(self, max: usize) -> Result<Vec<u8>> {
        use std::io::Read;
        let mut c = self.command();
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let shown = self.shown();
        let mut child = c
            .spawn()
            .with_context(|| format!("could not run `git {shown}`"))?;
        let mut out = Vec::new();
        let stdout = child.stdout.take().expect("piped");
        stdout.take(max as u64).read_to_end(&mut out)?;
        let _ = child.kill();
        let _ = child.wait();
        Ok(out)
    }

    /// Runs it; stdout as text, trimmed.
    pub fn text(self) -> Result<String> {
        let (out, _) = self.output()?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    pub fn run(self) -> Result<()> {
        self.output().map(drop)
    }
}

fn finish(
    out: std::process::Output,
    ok_codes: &[i32],
    shown: &dyn Fn() -> String,
) -> Result<(Vec<u8>, i32)> {
    let code = out.status.code().unwrap_or(-1);
    if code == 0 || ok_codes.contains(&code) {
        return Ok((out.stdout, code));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let err = err.trim();
    bail!(
        "`git {}` failed ({}){}{}",
        shown(),
        out.status,
        if err.is_empty() { "" } else { ": " },
        err
    )
}

impl Git {
    pub fn new(dir: impl Into<PathBuf>) -> Git {
        Git {
            dir: dir.into(),
            git_dir: None,
        }
    }

    /// git on the files of `work_tree` with `git_dir`'s objects and config (an index must
    /// be given to each command that uses one).
    pub fn detached(git_dir: impl Into<PathBuf>, work_tree: impl Into<PathBuf>) -> Git {
        Git {
            dir: work_tree.into(),
            git_dir: Some(git_dir.into()),
        }
    }

    pub fn cmd(&self) -> Cmd<'_> {
        Cmd {
            git: self,
            args: Vec::new(),
            env: Vec::new(),
            input: None,
            ok_codes: &[],
        }
    }

    /// `git <args>`, stdout trimmed.
    pub fn text(&self, args: &[&str]) -> Result<String> {
        self.cmd().args(args).text()
    }

    /// The commit a revision names, or `None` when it names none (an unborn HEAD).
    pub fn commit_of(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{commit}}");
        self.cmd()
            .args(&["rev-parse", "--verify", "--quiet", &spec])
            .text()
            .ok()
            .filter(|s| !s.is_empty())
    }

    /// This worktree's git folder (where its index lives).
    pub fn git_dir(&self) -> Result<PathBuf> {
        let d = self.text(&["rev-parse", "--absolute-git-dir"])?;
        Ok(PathBuf::from(d))
    }

    /// Takes the working tree as it is on disk (tracked changes, deletions, untracked files
    /// that are not ignored) as a commit whose parent is `parent`, through a temporary index:
    /// the worktree's own index, stash, branches and HEAD stay as they were. Paths in
    /// `exclude` (relative to the worktree's top) keep what the index has for them.
    pub fn snapshot(&self, parent: &str, exclude: &[String], scratch: &Path) -> Result<String> {
        let tree = self.snapshot_tree(exclude, scratch)?;
        self.commit_tree(&tree, &[parent], "prdloop snapshot")
    }

    /// The tree of [`Git::snapshot`].
    pub fn snapshot_tree(&self, exclude: &[String], scratch: &Path) -> Result<String> {
        let own = self.git_dir()?.join("index");
        self.snapshot_tree_from(&own, exclude, scratch)
    }

    /// The working tree as a tree, through a temporary copy of the index `own` (left as it
    /// is).
    pub fn snapshot_tree_from(
        &self,
        own: &Path,
        exclude: &[String],
        scratch: &Path,
    ) -> Result<String> {
        let index = tempfile::Builder::new()
            .prefix("index-")
            .tempfile_in(scratch)
            .with_context(|| format!("could not make a temporary index in {}", scratch.display()))?
            .into_temp_path();
        // A copy of the index keeps its file stat cache: `add` then hashes only what
        // changed, not the whole tree. It keeps the index's own time too: git trusts a
        // cached entry only when the file is older than the index, and a copy made now
        // would vouch for a file rewritten at the same size in the same clock tick as the
        // index (a change lost).
        if copy_keeping_time(own, &index).is_err() {
            let _ = std::fs::remove_file(&index);
            if self.commit_of("HEAD").is_some() {
                self.cmd()
                    .args(&["read-tree", "HEAD"])
                    .index(&index)
                    .run()?;
            }
        }
        let spec = pathspec(exclude);
        self.cmd()
            .args(&["add", "-A", "--ignore-errors", "--"])
            .args(&spec)
            .index(&index)
            .run()?;
        self.cmd().args(&["write-tree"]).index(&index).text()
    }

    pub fn commit_tree(&self, tree: &str, parents: &[&str], message: &str) -> Result<String> {
        let mut args = vec!["commit-tree", tree];
        for p in parents {
            args.extend(["-p", p]);
        }
        // The message on stdin: an undo point's lists every file, which can be longer than
        // one argument may be.
        args.extend(["-F", "-"]);
        self.cmd()
            .args(&args)
            .input(message.as_bytes())
            .as_self()
            .text()
    }

    pub fn tree_of(&self, commit: &str) -> Result<String> {
        self.text(&["rev-parse", &format!("{commit}^{{tree}}")])
    }

    /// Pins a commit under a ref so that garbage collection keeps it.
    pub fn pin(&self, name: &str, commit: &str) -> Result<()> {
        self.cmd().args(&["update-ref", name, commit]).run()
    }

    /// A three-way merge of `ours` and `theirs` (commits whose merge base is their common
    /// parent) into a tree, without touching any working tree or index.
    pub fn merge_tree(&self, ours: &str, theirs: &str) -> Result<Merge> {
        let (out, code) = self
            .cmd()
            .args(&[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "-z",
                "--no-messages",
                ours,
                theirs,
            ])
            .ok_codes(&[1])
            .output()?;
        let text = String::from_utf8_lossy(&out);
        let mut parts = text.split('\0');
        let tree = parts.next().unwrap_or_default().trim().to_string();
        if code == 0 {
            return Ok(Merge::Clean(tree));
        }
        let mut files: Vec<String> = parts
            .take_while(|s| !s.is_empty())
            .map(String::from)
            .collect();
        files.dedup();
        Ok(Merge::Conflict(files))
    }

    /// The paths that differ between two trees (or commits), outside `exclude`.
    pub fn changed(&self, from: &str, to: &str, exclude: &[String]) -> Result<Vec<String>> {
        let (out, _) = self
            .cmd()
            .args(&["diff", "--name-only", "-z", "--no-renames", from, to, "--"])
            .args(&pathspec(exclude))
            .output()?;
        Ok(String::from_utf8_lossy(&out)
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect())
    }

    /// The textual diff of `paths` from one commit to another, cut to about 4 KiB (for a
    /// prompt).
    pub fn diff_of(&self, from: &str, to: &str, paths: &[String]) -> Result<String> {
        const MAX: usize = 4096;
        let literal: Vec<String> = paths.iter().map(|p| format!(":(literal){p}")).collect();
        let out = self
            .cmd()
            .args(&["diff", "--no-ext-diff", "--no-textconv", from, to, "--"])
            .args(&literal)
            .head(MAX + 1)?;
        let text = crate::text::cut_to(
            String::from_utf8_lossy(&out).into_owned(),
            MAX,
            "\n… (cut short)",
        );
        Ok(text.trim_end().to_string())
    }

    /// A binary-safe patch from one tree to another, outside `exclude`.
    pub fn patch(&self, from: &str, to: &str, exclude: &[String]) -> Result<Vec<u8>> {
        let (out, _) = self
            .cmd()
            .args(&[
                "diff",
                "--binary",
                "--full-index",
                "--no-renames",
                "--no-ext-diff",
                "--no-textconv",
                "--src-prefix=a/",
                "--dst-prefix=b/",
                from,
                to,
                "--",
            ])
            .args(&pathspec(exclude))
            .output()?;
        Ok(out)
    }

    /// A commit on `base` whose tree is `base`'s with `patch` applied, made through a
    /// temporary index: no working tree is touched. Fails when the patch does not apply.
    pub fn commit_patch(
        &self,
        base: &str,
        patch: &[u8],
        scratch: &Path,
        message: &str,
    ) -> Result<String> {
        let index = tempfile::Builder::new()
            .prefix("index-")
            .tempfile_in(scratch)
            .with_context(|| format!("could not make a temporary index in {}", scratch.display()))?
            .into_temp_path();
        let _ = std::fs::remove_file(&index);
        self.cmd().args(&["read-tree", base]).index(&index).run()?;
        if !patch.is_empty() {
            self.cmd()
                .args(&["apply", "--cached", "--whitespace=nowarn", "-"])
                .input(patch)
                .index(&index)
                .run()?;
        }
        let tree = self.cmd().arg("write-tree").index(&index).text()?;
        self.commit_tree(&tree, &[base], message)
    }

    /// The version of git on PATH.
    pub fn version() -> Result<(u32, u32)> {
        let out = Command::new("git")
            .arg("--version")
            .output()
            .context("could not run `git --version`")?;
        let text = String::from_utf8_lossy(&out.stdout);
        parse_version(&text).with_context(|| format!("unrecognised `git --version`: {text}"))
    }
}

/// The result of [`Git::merge_tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    Clean(String),
    /// The files in conflict.
    Conflict(Vec<String>),
}

/// `.` minus the excluded paths, as pathspecs from the top of the worktree.
pub fn pathspec(exclude: &[String]) -> Vec<String> {
    let mut v = vec![":(top)".to_string()];
    v.extend(exclude.iter().map(|p| format!(":(top,exclude,literal){p}")));
    v
}

/// `git version 2.47.3` (also `2.39.3 (Apple Git-146)`, `2.45.1.windows.1`) → (2, 47).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let v = text
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))?;
    let mut it = v.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Copies `from` to `to` with `from`'s modification time.
fn copy_keeping_time(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to)?;
    let modified = std::fs::metadata(from)?.modified()?;
    std::fs::File::options()
        .write(true)
        .open(to)?
        .set_modified(modified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("git version 2.47.3\n"), Some((2, 47)));
        assert_eq!(
            parse_version("git version 2.39.3 (Apple Git-146)"),
            Some((2, 39))
        );
        assert_eq!(parse_version("git version 2.45.1.windows.1"), Some((2, 45)));
        assert_eq!(parse_version("nonsense"), None);
    }

    /// A file rewritten at the same size within the index's own clock tick is seen changed:
    /// the index copy keeps the index's time, so git checks the content of an entry as new
    /// as the index instead of trusting its stat. The race is made by hand: the lane's index
    /// holds the file's current stat with the old content's blob, and has the file's time.
    #[test]
    fn a_snapshot_sees_a_same_size_rewrite_in_the_index_s_own_tick() {
        let dir = tempfile::tempdir().unwrap();
        let (work, scratch) = (dir.path().join("w"), dir.path().join("s"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&scratch).unwrap();
        let g = Git::new(&work);
        g.cmd().args(&["init", "-q"]).run().unwrap();
        let file = work.join("want.txt");
        std::fs::write(&file, "right\n").unwrap();
        let right = g.text(&["hash-object", "-w", "want.txt"]).unwrap();
        std::fs::write(&file, "cheat\n").unwrap();
        let cheat = g.text(&["hash-object", "want.txt"]).unwrap();
        let own = dir.path().join("lane.index");
        g.cmd()
            .args(&["-c", "index.skipHash=true", "add", "want.txt"])
            .index(&own)
            .run()
            .unwrap();
        let hex = |h: &str| -> Vec<u8> {
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect()
        };
        let mut bytes = std::fs::read(&own).unwrap();
        let (from, to) = (hex(&cheat), hex(&right));
        let at = bytes
            .windows(20)
            .position(|w| w == from.as_slice())
            .unwrap();
        bytes[at..at + 20].copy_from_slice(&to);
        std::fs::write(&own, &bytes).unwrap();
        let tick = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::File::options()
            .write(true)
            .open(&own)
            .unwrap()
            .set_modified(tick)
            .unwrap();
        // The snapshot is taken once the clock is past the file's second (git may compare
        // whole seconds).
        let second =
            |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        while second(std::time::SystemTime::now()) <= second(tick) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let tree = g.snapshot_tree_from(&own, &[], &scratch).unwrap();
        let blob = g
            .text(&["cat-file", "-p", &format!("{tree}:want.txt")])
            .unwrap();
        assert_eq!(blob, "cheat");
    }

    #[test]
    fn pathspecs_exclude_literally() {
        assert_eq!(
            pathspec(&["docs/PRD [v2].md".into()]),
            vec![":(top)", ":(top,exclude,literal)docs/PRD [v2].md"]
        );
    }
}
