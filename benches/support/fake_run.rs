//! What the benchmarks that run prdloop against the fake agent share: the command line in a
//! fresh folder holding the PRD and the plan, and the attempts log the run left.

use std::path::Path;
use std::process::{Command, Stdio};

/// `prdloop run PRD.md <args>` in `dir` (made anew, with `text` as PRD.md and `plan` as the
/// fake agent's plan), its state beside it ([`state_dir`]: never in the run's folder, which
/// workers may write), its output discarded.
pub fn command(prdloop: &str, dir: &Path, text: &str, plan: &serde_json::Value) -> Command {
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(state_dir(dir));
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("PRD.md"), text).unwrap();
    std::fs::write(dir.join("plan.json"), plan.to_string()).unwrap();
    let mut c = Command::new(prdloop);
    c.args(["run", "PRD.md"])
        .arg("--state-dir")
        .arg(state_dir(dir))
        .current_dir(dir)
        .env(
            "PRDLOOP_CLAUDE_BIN",
            env!("CARGO_BIN_EXE_prdloop-fake-agent"),
        )
        .env("FAKE_AGENT_PLAN", dir.join("plan.json"))
        .env("NO_COLOR", "1")
        .env("PAI_DIR", dir.join("pai"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// Makes `dir` (as [`command`] left it) a git repository of its files plus `files` (each
/// holding one line), committed, so that the run's lanes are isolated copies whose work is
/// merged back, and two attempts that append to one file conflict as in a real repository;
/// `cmd` (the run) gets the same empty git configuration.
pub fn repository(dir: &Path, files: &[String], cmd: &mut Command) {
    for f in files {
        let path = dir.join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "base\n").unwrap();
    }
    // The state folder outside the repository's tracked files.
    std::fs::write(dir.join(".gitignore"), "state/\npai/\nplan.json\n").unwrap();
    let base: [&[&str]; 3] = [
        &["init", "-q", "-b", "main"],
        &["add", "-A"],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@x",
            "commit",
            "-qm",
            "base",
        ],
    ];
    for args in base {
        let st = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .unwrap();
        assert!(st.success());
    }
    cmd.env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
}

/// Where the state of the run in `dir` is kept: `dir.state`, beside it.
pub fn state_dir(dir: &Path) -> std::path::PathBuf {
    dir.with_extension("state")
}

/// Every attempt of the run in `dir`, from its attempts log.
pub fn attempts(dir: &Path) -> Vec<serde_json::Value> {
    let file = std::fs::read_dir(state_dir(dir))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    std::fs::read_to_string(state["attemptsLog"].as_str().unwrap())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
