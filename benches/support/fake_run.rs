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
