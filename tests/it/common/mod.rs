//! Test harness: a temp sandbox with a PRD, PAI folders, a fake agent plan, and helpers to run
//! the real prdloop binary and inspect what it left behind.
#![allow(dead_code)]

pub mod fake_api;
pub mod fake_gemini;
pub mod fake_github;
pub mod fake_model;
pub mod fake_openai;
pub mod pty;
pub mod snap;

pub(crate) use snap::{shown, shown_as, snapshot, transcript};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const PRDLOOP: &str = env!("CARGO_BIN_EXE_prdloop");
pub const FAKE: &str = env!("CARGO_BIN_EXE_prdloop-fake-agent");

pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new(prd: &str, plan: serde_json::Value) -> Sandbox {
        let dir = tempfile::tempdir().expect("tempdir");
        let sb = Sandbox { dir };
        std::fs::create_dir_all(sb.work()).unwrap();
        std::fs::create_dir_all(sb.records()).unwrap();
        std::fs::create_dir_all(sb.pai()).unwrap();
        std::fs::write(sb.prd(), prd).unwrap();
        sb.set_plan(plan);
        sb
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    pub fn work(&self) -> PathBuf {
        self.root().join("work")
    }
    pub fn prd(&self) -> PathBuf {
        self.work().join("PRD.md")
    }
    pub fn pai(&self) -> PathBuf {
        self.root().join("pai")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.pai().join("MEMORY/STATE/algorithms")
    }
    pub fn records(&self) -> PathBuf {
        self.root().join("records")
    }
    pub fn plan_path(&self) -> PathBuf {
        self.root().join("plan.json")
    }
    pub fn set_plan(&self, plan: serde_json::Value) {
        std::fs::write(self.plan_path(), plan.to_string()).unwrap();
    }
    pub fn prd_text(&self) -> String {
        std::fs::read_to_string(self.prd()).unwrap()
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(PRDLOOP);
        c.args(args)
            .current_dir(self.work())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root())
            .env("PAI_DIR", self.pai())
            .env("PROJECTS_DIR", self.root().join("projects"))
            .env("PRDLOOP_CLAUDE_BIN", FAKE)
            .env("FAKE_AGENT_PLAN", self.plan_path())
            .env("FAKE_AGENT_RECORD", self.records())
            // The fake agent writes its records there, outside its lane: let it, sandboxed.
            .env("PRDLOOP_SANDBOX_ALLOW", self.records())
            .env("NO_COLOR", "1")
            .env("CLAUDECODE", "1")
            // Whatever the machine has above the sandbox (a stray repository in /tmp) is
            // not the test's: prdloop and git look for a repository no higher than it.
            .env(
                "GIT_CEILING_DIRECTORIES",
                self.root().parent().unwrap_or(self.root()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs prdloop to its end (a safety limit, not a speed assertion, kills it at 180 s).
    pub fn run(&self, args: &[&str]) -> Output {
        let child = self.command(args).spawn().expect("spawn prdloop");
        wait_output(child, Duration::from_secs(180))
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).spawn().expect("spawn prdloop")
    }

    /// Every record the fake agent wrote as a worker.
    pub fn worker_records(&self) -> Vec<serde_json::Value> {
        self.records_where(|r| r["role"] != "verifier")
    }

    /// Every record the fake agent wrote as a verifier.
    pub fn verifier_records(&self) -> Vec<serde_json::Value> {
        self.records_where(|r| r["role"] == "verifier")
    }

    /// The fake agent's records that `keep` keeps, oldest first.
    fn records_where(&self, keep: impl Fn(&serde_json::Value) -> bool) -> Vec<serde_json::Value> {
        let mut v: Vec<serde_json::Value> = std::fs::read_dir(self.records())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .filter(|r| keep(r))
            .collect();
        v.sort_by_key(|r| r["start"].as_u64().unwrap_or(0));
        v
    }

    /// Waits until the fake agent has started `n` workers (a safety limit of 60 s).
    pub fn wait_for_workers(&self, n: usize) {
        let t = Instant::now();
        while self.worker_records().len() < n {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "workers did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every pid the fake agent recorded (workers and their children).
    pub fn recorded_pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        for r in self.worker_records() {
            pids.push(r["pid"].as_u64().unwrap() as u32);
            for c in r["children"].as_array().into_iter().flatten() {
                pids.push(c.as_u64().unwrap() as u32);
            }
        }
        pids
    }

    /// Asserts that no process prdloop started is alive (waits briefly for reaping).
    pub fn assert_no_process_left(&self) {
        let pids = self.recorded_pids();
        assert!(!pids.is_empty(), "no worker ran");
        let t = Instant::now();
        loop {
            let alive: Vec<u32> = pids
                .iter()
                .copied()
                .filter(|p| prdloop::platform::is_alive(*p))
                .collect();
            if alive.is_empty() {
                return;
            }
            if t.elapsed() > Duration::from_secs(10) {
                for p in &alive {
                    let _ = Command::new("kill").args(["-9", &p.to_string()]).status();
                }
                panic!("processes left alive: {alive:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The one state file of the last session.
    pub fn state(&self) -> serde_json::Value {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.state_dir())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        let last = files.last().expect("a state file");
        serde_json::from_str(&std::fs::read_to_string(last).unwrap()).unwrap()
    }

    pub fn state_count(&self) -> usize {
        std::fs::read_dir(self.state_dir())
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0)
    }
}

pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    let t = Instant::now();
    // Drain pipes in threads so a chatty child cannot block.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
        v
    });
    let e = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut v);
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("prdloop did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A PRD with the given criteria lines under a criteria heading.
pub fn prd_with(criteria: &[&str]) -> String {
    format!(
        "---\nprd: true\nid: PRD-20261130-test\nstatus: IN_PROGRESS\nmode: loop\neffort_level: Standard\ncreated: 2026-11-30\nupdated: 2026-11-30\niteration: 0\nmaxIterations: 128\nloopStatus: null\nlast_phase: null\nfailing_criteria: []\nverification_summary: \"0/{n}\"\nparent: null\nchildren: []\n---\n\n# Test PRD\n\n## CONTEXT\n\nThe context says: use integer cents.\n\n## IDEAL STATE CRITERIA (Verification Criteria)\n\n{body}\n\n## LOG\n\n",
        n = criteria.len(),
        body = criteria.join("\n")
    )
}

pub fn send_signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// The attempts log named by a state file.
/// A log of a run, by the path the state names it by (kept in its folder's output log).
pub fn worker_log(path: &str) -> String {
    let bytes = prdloop::worker::output_log::head(Path::new(path), u64::MAX)
        .unwrap_or_else(|e| panic!("the log {path}: {e}"));
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn attempts(state: &serde_json::Value) -> Vec<serde_json::Value> {
    let path = state["attemptsLog"].as_str().expect("attemptsLog");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A fixture PRD's text (`tests/fixtures/prds/<name>`).
pub fn fixture_prd(name: &str) -> String {
    let path = format!("{}/tests/fixtures/prds/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

impl Sandbox {
    /// Waits until the PRD on disk contains `needle` (a safety limit of 30 s).
    pub fn wait_for_prd(&self, needle: &str) {
        let t = Instant::now();
        while !self.prd_text().contains(needle) {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the PRD never got `{needle}`"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// git in `dir` with an identity and no user or system configuration; its stdout. Panics
/// when git fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Author")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "Author")
        .env("GIT_COMMITTER_EMAIL", "author@example.com")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A sandbox whose workers' folder is a git repository (branch `main`) with one commit
/// holding the PRD and `files`.
pub fn repo(criteria: &[&str], plan: serde_json::Value, files: &[(&str, &str)]) -> Sandbox {
    let sb = Sandbox::new(&prd_with(criteria), plan);
    let w = sb.work();
    git(&w, &["init", "-q", "-b", "main"]);
    for (name, text) in files {
        if let Some(parent) = Path::new(name).parent() {
            std::fs::create_dir_all(w.join(parent)).unwrap();
        }
        std::fs::write(w.join(name), text).unwrap();
    }
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-q", "-m", "initial"]);
    sb
}

/// The user's repository as git sees it: every ref but prdloop's, the config, the hooks,
/// the index and HEAD.
pub fn repository_state(w: &Path) -> String {
    let refs: Vec<String> = git(w, &["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .filter(|l| !l.starts_with("refs/prdloop/") && !l.starts_with("refs/prdloop-undo/"))
        .map(String::from)
        .collect();
    let hooks: Vec<String> = std::fs::read_dir(w.join(".git/hooks"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    format!(
        "refs:\n{}\nHEAD: {}config:\n{}\nhooks: {hooks:?}\nindex:\n{}",
        refs.join("\n"),
        git(w, &["rev-parse", "HEAD"]),
        std::fs::read_to_string(w.join(".git/config")).unwrap(),
        git(w, &["ls-files", "-s"]),
    )
}

/// `prdloop run PRD.md --agent command --agent-bin AGENT EXTRA…`.
pub fn run_command_agent(sb: &Sandbox, agent: &Path, extra: &[&str]) -> std::process::Output {
    sb.run(&command_agent_args(agent, extra))
}

/// The arguments of `prdloop run PRD.md --agent command --agent-bin AGENT EXTRA…`.
pub fn command_agent_args<'a>(agent: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "PRD.md",
        "--agent",
        "command",
        "--agent-bin",
        agent.to_str().unwrap(),
    ];
    args.extend(extra);
    args
}

/// Serves `app` on a free port of 127.0.0.1 from a runtime of its own (kept alive by the
/// caller as long as the server is needed).
pub fn serve_local(app: axum::Router) -> (std::net::SocketAddr, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        addr
    });
    (addr, rt)
}

/// `line 1\n` … `line n\n`.
pub fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

/// The temporary files of a landing (`.prdloop-landing-*`) at the top of `dir`.
pub fn landing_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".prdloop-landing"))
        .collect()
}
