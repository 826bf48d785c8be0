//! The tools' inputs: one small struct per command, each field a flag (or the argument) of
//! that command's command line, named as the flag is (`state_dir` is `--state-dir`). Their
//! JSON schemas are the tools' input schemas; [`Input::argv`] turns one into the command line
//! the server runs, so the command line's own parsers, config files and rules judge it.

use std::ffi::OsString;
use std::path::PathBuf;

use rmcp::schemars::JsonSchema;
use serde::Deserialize;

/// A tool's input: the command line it stands for (without the program).
pub trait Input {
    fn argv(&self) -> Vec<OsString>;
}

/// Builds a command line: the subcommand, its arguments, then each flag given.
struct Argv(Vec<OsString>);

impl Argv {
    fn new(words: &[&str]) -> Argv {
        Argv(words.iter().map(OsString::from).collect())
    }
    fn arg(mut self, value: impl Into<OsString>) -> Argv {
        self.0.push(value.into());
        self
    }
    fn opt<T: ToString>(self, flag: &str, value: Option<&T>) -> Argv {
        match value {
            Some(v) => self.arg(flag).arg(v.to_string()),
            None => self,
        }
    }
    fn path(self, flag: &str, value: Option<&PathBuf>) -> Argv {
        match value {
            Some(v) => self.arg(flag).arg(v.as_os_str()),
            None => self,
        }
    }
    fn switch(self, flag: &str, on: bool) -> Argv {
        if on { self.arg(flag) } else { self }
    }
    /// Further words as they are (flags the caller gives as on the command line).
    fn words(mut self, more: &[String]) -> Argv {
        self.0.extend(more.iter().map(OsString::from));
        self
    }
}

/// `plan`: what the next iteration would do.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct PlanInput {
    /// The PRD: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    /// `--agents`: parallel agents (lanes), at least 1.
    pub agents: Option<i64>,
    /// `--workdir`: the workers' working directory.
    pub workdir: Option<PathBuf>,
    /// `--shards`: split the failing criteria into N shards (1 to 256).
    pub shards: Option<u16>,
    /// `--state-dir`: where the session state is.
    pub state_dir: Option<PathBuf>,
}

impl Input for PlanInput {
    fn argv(&self) -> Vec<OsString> {
        Argv::new(&["plan", "--json"])
            .opt("--agents", self.agents.as_ref())
            .path("--workdir", self.workdir.as_ref())
            .opt("--shards", self.shards.as_ref())
            .path("--state-dir", self.state_dir.as_ref())
            .arg("--")
            .arg(&self.prd)
            .0
    }
}

/// `run` and `resume`: start the loop in the background.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct RunInput {
    /// The PRD: a path, or a PRD id found in PAI's locations.
    pub prd: String,
    /// `--agents`: parallel agents (lanes), at least 1.
    pub agents: Option<i64>,
    /// `--agent`: the coding agent (claude, codex, gemini, opencode, cursor, amp, command).
    pub agent: Option<String>,
    /// `--agent-bin`: the agent's program.
    pub agent_bin: Option<String>,
    /// `--max-iterations`: the most iterations.
    pub max_iterations: Option<u64>,
    /// `--timeout`: one worker's time limit (`30m`, `1h`).
    pub timeout: Option<String>,
    /// `--max-cost`: stop starting workers past this many US dollars.
    pub max_cost: Option<f64>,
    /// `--workdir`: the workers' working directory.
    pub workdir: Option<PathBuf>,
    /// `--state-dir`: where the session state and logs are written.
    pub state_dir: Option<PathBuf>,
    /// `--isolation`: how each lane gets its copy of the repository.
    pub isolation: Option<String>,
    /// `--sandbox`: on, off or auto.
    pub sandbox: Option<String>,
    /// `--commit`: commit each landing.
    #[serde(default)]
    pub commit: bool,
    /// More of `run`'s options, as on the command line (`["--best-of", "2"]`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Stay in the call until the run ends, with progress notifications, and return its
    /// `end` event; else the call returns the session at once and the run's events come as
    /// log messages.
    #[serde(default)]
    pub wait: bool,
}

impl RunInput {
    /// `run` or `resume`'s command line, with `--json` for its events.
    pub fn argv_for(&self, command: &str) -> Vec<OsString> {
        Argv::new(&[command, "--json"])
            .opt("--agents", self.agents.as_ref())
            .opt("--agent", self.agent.as_ref())
            .opt("--agent-bin", self.agent_bin.as_ref())
            .opt("--max-iterations", self.max_iterations.as_ref())
            .opt("--timeout", self.timeout.as_ref())
            .opt("--max-cost", self.max_cost.as_ref())
            .path("--workdir", self.workdir.as_ref())
            .path("--state-dir", self.state_dir.as_ref())
            .opt("--isolation", self.isolation.as_ref())
            .opt("--sandbox", self.sandbox.as_ref())
            .switch("--commit", self.commit)
            .words(&self.args)
            .arg("--")
            .arg(&self.prd)
            .0
    }
}

/// `status`: each PRD's progress.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct StatusInput {
    /// PRDs: paths or PRD ids [default: every PRD in PAI's locations].
    #[serde(default)]
    pub prds: Vec<String>,
    /// `--state-dir`: your state folder.
    pub state_dir: Option<PathBuf>,
}

impl Input for StatusInput {
    fn argv(&self) -> Vec<OsString> {
        let mut a = Argv::new(&["status", "--json"])
            .path("--state-dir", self.state_dir.as_ref())
            .arg("--");
        for p in &self.prds {
            a = a.arg(p);
        }
        a.0
    }
}

/// `logs`: a worker's log for people (the latest attempt by default).
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct LogsInput {
    /// The PRD: a path, or a PRD id.
    pub prd: String,
    /// The criterion [default: the log written last].
    pub criterion: Option<String>,
    /// `--attempt`: which attempt of the criterion [default: the latest].
    pub attempt: Option<u32>,
    /// `--raw`: the log as written.
    #[serde(default)]
    pub raw: bool,
    /// `--state-dir`: where the session's state and logs are.
    pub state_dir: Option<PathBuf>,
}

impl Input for LogsInput {
    fn argv(&self) -> Vec<OsString> {
        let a = Argv::new(&["logs"])
            .opt("--attempt", self.attempt.as_ref())
            .switch("--raw", self.raw)
            .path("--state-dir", self.state_dir.as_ref())
            .arg("--")
            .arg(&self.prd);
        match &self.criterion {
            Some(c) => a.arg(c).0,
            None => a.0,
        }
    }
}

/// `answer`: answer a worker's question; without `id`, list the open questions.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct AnswerInput {
    /// The PRD: a path, or a PRD id.
    pub prd: String,
    /// The criterion whose question this answers.
    pub id: Option<String>,
    /// The answer.
    pub text: Option<String>,
    /// `--state-dir`: your state folder.
    pub state_dir: Option<PathBuf>,
}

impl Input for AnswerInput {
    fn argv(&self) -> Vec<OsString> {
        let mut a = Argv::new(&["answer", "--json"])
            .path("--state-dir", self.state_dir.as_ref())
            .arg("--")
            .arg(&self.prd);
        for word in [&self.id, &self.text].into_iter().flatten() {
            a = a.arg(word);
        }
        a.0
    }
}

/// `pause` and `stop`: ask the loop running on a PRD to end.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct ControlInput {
    /// The PRD: a path, or a PRD id.
    pub prd: String,
    /// `--state-dir`: your state folder.
    pub state_dir: Option<PathBuf>,
    /// `--wait`: return once the loop has ended.
    #[serde(default)]
    pub wait: bool,
}

impl ControlInput {
    pub fn argv_for(&self, command: &str) -> Vec<OsString> {
        Argv::new(&[command])
            .path("--state-dir", self.state_dir.as_ref())
            .switch("--wait", self.wait)
            .arg("--")
            .arg(&self.prd)
            .0
    }
}

/// `audit`: re-run the commands that earned each `checked` tick.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct AuditInput {
    /// The PRD: a path, or a PRD id.
    pub prd: String,
    /// `--workdir`: the checkout [default: the git top level holding the PRD].
    pub workdir: Option<PathBuf>,
    /// `--state-dir`: where the session state is.
    pub state_dir: Option<PathBuf>,
}

impl Input for AuditInput {
    fn argv(&self) -> Vec<OsString> {
        Argv::new(&["audit", "--json"])
            .path("--workdir", self.workdir.as_ref())
            .path("--state-dir", self.state_dir.as_ref())
            .arg("--")
            .arg(&self.prd)
            .0
    }
}

/// `undo`: put back the files the newest landing changed (in the server's folder).
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct UndoInput {
    /// Only this PRD's landings [default: any PRD's in this repository].
    pub prd: Option<PathBuf>,
    /// `--to`: undo the newest N landings (1 = the last).
    pub to: Option<u64>,
    /// `--all`: undo every landing listed.
    #[serde(default)]
    pub all: bool,
    /// `--list`: list the undo points instead of undoing.
    #[serde(default)]
    pub list: bool,
}

impl Input for UndoInput {
    fn argv(&self) -> Vec<OsString> {
        let a = Argv::new(&["undo", "--json"])
            .opt("--to", self.to.as_ref())
            .switch("--all", self.all)
            .switch("--list", self.list)
            .arg("--");
        match &self.prd {
            Some(p) => a.arg(p.as_os_str()).0,
            None => a.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|w| w.into_string().unwrap()).collect()
    }

    #[test]
    fn a_prd_that_looks_like_a_flag_stays_the_argument() {
        let i = PlanInput {
            prd: "--help".into(),
            agents: Some(2),
            workdir: None,
            shards: None,
            state_dir: None,
        };
        assert_eq!(
            words(i.argv()),
            ["plan", "--json", "--agents", "2", "--", "--help"]
        );
    }

    #[test]
    fn run_options_come_before_the_prd_and_args_are_passed_as_given() {
        let i: RunInput = serde_json::from_value(serde_json::json!({
            "prd": "PRD.md", "agents": 3, "commit": true, "args": ["--best-of", "2"]
        }))
        .unwrap();
        assert_eq!(
            words(i.argv_for("resume")),
            [
                "resume",
                "--json",
                "--agents",
                "3",
                "--commit",
                "--best-of",
                "2",
                "--",
                "PRD.md"
            ]
        );
    }

    #[test]
    fn an_unknown_field_is_refused() {
        let e = serde_json::from_value::<StatusInput>(serde_json::json!({"prd": "x"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `prd`"), "{e}");
    }
}
