//! Runner-side checks: a criterion's Verify command (the code span in its method) run with
//! `sh -c` in the workdir, in its own process group, with a timeout and the workers' kill
//! sequence. Exit status 0 is a pass.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;

use crate::backend::OutputFormat;
use crate::backend::verdict::Exit;
use crate::worker::{self, Cancel, Spec};

pub mod copy;
pub mod no_test;

/// How one check went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub command: String,
    pub exit: Exit,
    /// The last lines of its output (stdout, then stderr).
    pub tail: String,
    pub duration: Duration,
    pub log: PathBuf,
    /// It ended well, but the test runners it ran say they ran no test ([`no_test`]): why.
    /// Such a check measured nothing and is never a pass.
    pub ran_no_test: Option<String>,
    /// The connections its network proxy refused (a sandboxed check, `--network agent`).
    pub refused: crate::worker::network::NetRefusals,
}

impl Check {
    /// It ended well and measured something.
    pub fn passed(&self) -> bool {
        self.exit == Exit::Code { code: 0 } && self.ran_no_test.is_none()
    }

    pub fn cancelled(&self) -> bool {
        self.exit == Exit::Cancelled
    }

    /// The command cannot run on this machine (the shell's 126 "cannot execute" or 127 "not
    /// found"): that says nothing about the criterion.
    pub fn unrunnable(&self) -> bool {
        matches!(self.exit, Exit::Code { code: 126 | 127 })
    }

    /// A one-paragraph reason for a failed check: the command, how it ended, its output's tail.
    pub fn reason(&self) -> String {
        match &self.ran_no_test {
            Some(why) => ran_nothing(&self.command, why),
            None => describe(&self.command, &self.exit, &self.tail),
        }
    }
}

/// A check's end in words: `` `make test` exited with status 1; its output ends:\n… ``.
pub fn describe(command: &str, exit: &Exit, tail: &str) -> String {
    let how = match exit {
        Exit::Code { code } => format!("exited with status {code}"),
        Exit::Signal { signal } => format!("was killed by signal {signal}"),
        Exit::TimedOut { after_secs } => format!(
            "timed out after {}",
            humantime::format_duration(Duration::from_secs(*after_secs))
        ),
        Exit::Cancelled => "was cancelled".into(),
        Exit::Stuck(st) => st.describe(),
    };
    if tail.trim().is_empty() {
        format!("`{command}` {how}")
    } else {
        format!("`{command}` {how}; its output ends:\n{}", tail.trim_end())
    }
}

/// A check that ran no test, in words: `` `cargo test auth` ran no test: … ``.
pub fn ran_nothing(command: &str, why: &str) -> String {
    format!("`{command}` ran no test: {why}; a check that tests nothing is no evidence")
}

/// How much of a check's output (its end) is read for the test runners' counts.
const COUNTS_MAX: u64 = 4 * 1024 * 1024;

/// What the test runners in a finished check's log (`log`) say they ran nothing, if they do.
fn runners_ran_nothing(log: &Path) -> Option<String> {
    let buf = worker::output_log::tail(log, COUNTS_MAX).ok()?.bytes;
    // The log marks its stderr lines; the runners' own words are after the mark.
    let text = String::from_utf8_lossy(&buf);
    let output: String = text
        .lines()
        .map(|l| l.strip_prefix(worker::STDERR_MARK).unwrap_or(l))
        .flat_map(|l| [l, "\n"])
        .collect();
    no_test::ran_no_test(&output)
}

/// Settings shared by every check of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub workdir: PathBuf,
    pub timeout: Duration,
    pub kill_grace: Duration,
    pub env: Vec<(String, String)>,
    /// The kernel sandbox it runs under: the rules of a worker of the tree it checks (`None`:
    /// the sandbox is off).
    pub sandbox: Option<crate::worker::sandbox::Rules>,
}

impl Settings {
    /// The settings for Verify commands of the PRD at `prd`: they run in `workdir` with
    /// prdloop's variables for the session (when there is one) and the PRD.
    pub fn new(
        workdir: PathBuf,
        timeout: Duration,
        kill_grace: Duration,
        session: Option<&str>,
        prd: &Path,
    ) -> Settings {
        let mut env = Vec::new();
        if let Some(s) = session {
            env.push((crate::env::WORKER_SESSION_ID.into(), s.to_string()));
        }
        env.push((crate::env::WORKER_PRD.into(), prd.display().to_string()));
        Settings {
            workdir,
            timeout,
            kill_grace,
            env,
            sandbox: None,
        }
    }

    /// The same settings, the check run under `rules`.
    pub fn sandboxed(mut self, rules: Option<crate::worker::sandbox::Rules>) -> Settings {
        self.sandbox = rules;
        self
    }

    /// One criterion's command, with `PRDLOOP_CRITERION` set for it.
    pub fn job(&self, id: &str, command: &str, log: PathBuf) -> Job {
        let mut settings = self.clone();
        settings
            .env
            .push((crate::env::WORKER_CRITERION.into(), id.to_string()));
        Job {
            id: id.to_string(),
            command: command.to_string(),
            settings,
            log,
        }
    }
}

/// Why `command` cannot run in `workdir` on this machine, if it cannot: a program it starts
/// is not installed (not on `PATH`, or a path that is not there). Checked before running, the
/// same way in `run`, `verify` and `plan`, so that "not installed" is never read as a failed
/// (or, behind `|| true`, a passed) check. Each step of a `&&`/`||`/`;`/`|` chain is looked
/// at; a step whose program is a shell builtin, or is written with quotes or `$` (the shell
/// decides), is taken as runnable.
pub fn cannot_run_here(command: &str, workdir: &Path) -> Option<String> {
    const BUILTINS: [&str; 40] = [
        "!", "[", "[[", "{", "}", "(", ")", ".", ":", "alias", "bg", "break", "case", "cd",
        "command", "continue", "do", "done", "echo", "elif", "else", "esac", "eval", "exec",
        "exit", "export", "false", "fi", "for", "if", "printf", "pwd", "read", "return", "set",
        "source", "test", "then", "true", "while",
    ];
    let path = std::env::var_os("PATH");
    for step in command.split(['&', '|', ';', '\n']) {
        let mut words = step
            .split_whitespace()
            .map(|w| w.trim_start_matches(['(', '{']));
        let program = loop {
            match words.next() {
                // `VAR=value cmd`: the assignment is not the program.
                Some(w) if w.contains('=') && !w.starts_with('=') => continue,
                Some("") => continue,
                Some(w) => break Some(w),
                None => break None,
            }
        };
        let Some(program) = program else { continue };
        if BUILTINS.contains(&program)
            || program.contains(['\'', '"', '$', '`', '*', '?', '<', '>'])
            || program.chars().all(|c| c.is_ascii_digit())
        {
            continue;
        }
        let found = if program.contains('/') {
            let p = workdir.join(program);
            p.is_file()
        } else {
            which::which_in(program, path.as_ref(), workdir).is_ok()
        };
        if !found {
            return Some(format!(
                "`{program}` is not installed here (not found on PATH): the check cannot run here"
            ));
        }
    }
    None
}

/// Lines of output kept in a failure reason.
const TAIL_LINES: usize = 20;

/// Runs one command to its end. `Err` when `sh` itself cannot be started.
pub async fn check(
    command: &str,
    settings: &Settings,
    log: &Path,
    cancel: watch::Receiver<Cancel>,
) -> Result<Check, worker::SpawnError> {
    let spec = Spec {
        program: "sh".into(),
        args: vec!["-c".into(), command.into()],
        cwd: settings.workdir.clone(),
        env: settings.env.clone(),
        env_remove: vec![crate::env::CLAUDECODE.into()],
        stdin: Vec::new(),
        log_path: log.to_path_buf(),
        timeout: settings.timeout,
        kill_grace: settings.kill_grace,
        format: OutputFormat::Text,
        // A check runs the worker's code (its scripts, its build): under a worker's rules,
        // writing only in the tree it checks and its own TMPDIR.
        sandbox: settings.sandbox.clone(),
        // A command has no tool calls to watch.
        stuck: crate::backend::stuck::StuckAfter::OFF,
    };
    let f = worker::start(spec)?.wait(cancel).await;
    let mut all = f.outcome.final_text.unwrap_or_default();
    if !f.stderr_tail.is_empty() {
        if !all.is_empty() && !all.ends_with('\n') {
            all.push('\n');
        }
        all.push_str(&f.stderr_tail);
    }
    let lines: Vec<&str> = all.lines().collect();
    let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
    let ran_no_test = if f.exit == (Exit::Code { code: 0 }) {
        runners_ran_nothing(log)
    } else {
        None
    };
    Ok(Check {
        command: command.to_string(),
        exit: f.exit,
        tail,
        duration: f.duration,
        log: log.to_path_buf(),
        ran_no_test,
        refused: f.refusals.net,
    })
}

/// One command to check: the criterion id, its command, its settings and its log file.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: String,
    pub command: String,
    pub settings: Settings,
    pub log: PathBuf,
}

/// Runs many checks, at most `limit` at once; results in the order of `jobs`.
pub async fn check_many(
    jobs: Vec<Job>,
    limit: usize,
    cancel: watch::Receiver<Cancel>,
) -> Vec<(String, Result<Check, worker::SpawnError>)> {
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(limit.max(1)));
    let mut set = tokio::task::JoinSet::new();
    let order: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
    for job in jobs {
        let sem = std::sync::Arc::clone(&sem);
        let rx = cancel.clone();
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let r = check(&job.command, &job.settings, &job.log, rx).await;
            (job.id, r)
        });
    }
    let mut out = Vec::new();
    while let Some(joined) = set.join_next().await {
        if let Ok(r) = joined {
            out.push(r);
        }
    }
    out.sort_by_key(|(id, _)| order.iter().position(|o| o == id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path) -> Settings {
        Settings {
            workdir: dir.to_path_buf(),
            timeout: Duration::from_secs(30),
            kill_grace: Duration::from_secs(1),
            env: vec![],
            sandbox: None,
        }
    }

    #[test]
    fn programs_not_installed_cannot_run() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            cannot_run_here("sh -c 'exit 0' && test -f x", dir.path()),
            None
        );
        assert_eq!(
            cannot_run_here("FOO=1 true; echo $? | cat", dir.path()),
            None
        );
        let why = cannot_run_here("golangci-lint-not-here run", dir.path()).unwrap();
        assert!(
            why.contains("`golangci-lint-not-here` is not installed"),
            "{why}"
        );
        assert!(cannot_run_here("true && ./missing.sh", dir.path()).is_some());
        std::fs::write(dir.path().join("here.sh"), "").unwrap();
        assert_eq!(cannot_run_here("./here.sh", dir.path()), None);
    }

    #[tokio::test]
    async fn pass_fail_and_reason() {
        let dir = tempfile::tempdir().unwrap();
        let (_tx, rx) = watch::channel(Cancel::None);
        let s = settings(dir.path());
        let ok = check(
            "printf 'a|b' | grep -q '|'",
            &s,
            &dir.path().join("1.log"),
            rx.clone(),
        )
        .await
        .unwrap();
        assert!(ok.passed());
        let bad = check(
            "echo checking; echo boom >&2; exit 3",
            &s,
            &dir.path().join("2.log"),
            rx,
        )
        .await
        .unwrap();
        assert!(!bad.passed());
        let r = bad.reason();
        assert!(r.contains("exited with status 3"), "{r}");
        assert!(r.contains("checking") && r.contains("boom"), "{r}");
    }

    #[tokio::test]
    async fn a_check_whose_runner_ran_no_test_did_not_pass() {
        let dir = tempfile::tempdir().unwrap();
        let (_tx, rx) = watch::channel(Cancel::None);
        let s = settings(dir.path());
        // jest says so on stderr, and exits 0 with --passWithNoTests.
        let none = check(
            "echo 'No tests found, exiting with code 0' >&2",
            &s,
            &dir.path().join("1.log"),
            rx.clone(),
        )
        .await
        .unwrap();
        assert!(!none.passed());
        let r = none.reason();
        assert!(
            r.contains("ran no test: the test runner found no tests"),
            "{r}"
        );
        let some = check(
            "echo 'Tests:       2 passed, 2 total'",
            &s,
            &dir.path().join("2.log"),
            rx,
        )
        .await
        .unwrap();
        assert!(some.passed(), "{}", some.reason());
    }
}
