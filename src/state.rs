//! PAI's session state JSON (`$PAI_DIR/MEMORY/STATE/algorithms/<session>.json`), the session
//! names map, and the per-PRD lock. Field names follow PAI so its dashboard and hooks read our
//! files; prdloop's own additions sit in extra fields.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::backend::Usage;
use crate::fsutil::write_atomic;

mod attempts;
mod lock;

pub use attempts::*;
pub use lock::*;

/// The version of prdloop's additions to the state file.
pub const STATE_VERSION: u32 = 1;

pub use crate::clock::now_ms;

/// A criterion's status in PAI's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CriterionStatus {
    #[default]
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// One question a worker asked and, once given, its answer (the question book of
/// `questions.rs` keeps them; a session's state lists those of its run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub criterion: String,
    pub question: String,
    /// Epoch ms.
    pub asked_at: u64,
    /// The session whose worker asked.
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<u64>,
}

impl Question {
    /// Waiting for an answer.
    pub fn open(&self) -> bool {
        self.answer.is_none()
    }
}

pub use crate::evidence::Evidence;

/// A lane's status in the state file, as PAI's dashboard schema has it: `active` while its
/// iteration runs (`currentCriterion` says what it works on), `completed` after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    #[default]
    Active,
    Completed,
    Failed,
}

/// What one worker run came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AttemptVerdict {
    Pass,
    #[default]
    Fail,
    /// The agent failed, not the criterion: it did not count as the criterion's attempt.
    AgentFailure,
    /// Best-of-N: ended because a sibling sample won; not an attempt of its own.
    Sibling,
    /// It asked a person (`QUESTION:`): its criterion is parked; not an attempt.
    Question,
    /// Ended by `--stuck-after`: no new tool input (see the record's `stuck`). An attempt.
    Stuck,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct CriterionState {
    pub id: String,
    pub description: String,
    /// `criterion` or `anti-criterion`.
    #[serde(rename = "type")]
    pub kind: String,
    pub status: CriterionStatus,
    pub created_in_phase: String,
    // prdloop's additions.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_log: Option<String>,
    #[serde(default)]
    pub cost_usd: f64,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub turns: u64,
    /// How a passing criterion's tick was established.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<Evidence>,
    /// Times a ticked criterion's command failed again and it was unticked.
    #[serde(default)]
    pub regressions: u32,
    /// The last agent failure (auth, rate limit, timeout, …) while working on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_agent_failure: Option<String>,
    #[serde(default)]
    pub agent_failures: u32,
    /// What earned its tick (prdloop's; `prdloop audit` re-runs a `checked` one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::evidence::receipt::Receipt>,
}

/// The criteria a lane worked on (PAI's `criteriaIds`, a list in its order), each once: a
/// criterion's every attempt looks up whether its lane lists it, in a set, not down the list
/// (a lane of a 10,000-criterion run lists hundreds).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CriteriaIds {
    ids: Vec<String>,
    listed: std::collections::HashSet<String>,
}

impl CriteriaIds {
    /// Lists `id` last unless it is listed already.
    pub fn add(&mut self, id: &str) {
        if !self.listed.contains(id) {
            self.listed.insert(id.to_string());
            self.ids.push(id.to_string());
        }
    }

    pub fn ids(&self) -> &[String] {
        &self.ids
    }
}

impl FromIterator<String> for CriteriaIds {
    fn from_iter<I: IntoIterator<Item = String>>(ids: I) -> CriteriaIds {
        let mut list = CriteriaIds::default();
        for id in ids {
            list.add(&id);
        }
        list
    }
}

impl Serialize for CriteriaIds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.ids.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CriteriaIds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CriteriaIds, D::Error> {
        Ok(Vec::<String>::deserialize(d)?.into_iter().collect())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct AgentState {
    pub name: String,
    pub agent_type: String,
    pub status: AgentStatus,
    pub task: String,
    pub criteria_ids: CriteriaIds,
    pub phase: String,
    // prdloop's additions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_criterion: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PhaseEntry {
    pub phase: String,
    pub started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<u64>,
    pub criteria_count: usize,
    pub agent_count: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct LoopEntry {
    pub iteration: u64,
    pub started_at: u64,
    pub completed_at: u64,
    pub criteria_passing: usize,
    pub criteria_total: usize,
    // prdloop's additions.
    #[serde(default)]
    pub cost_usd: f64,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub attempts: u32,
}

/// The state file. PAI's fields first, then prdloop's.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    pub active: bool,
    pub session_id: String,
    pub task_description: String,
    pub current_phase: String,
    pub phase_started_at: u64,
    pub algorithm_started_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<u64>,
    pub sla: String,
    pub effort_level: String,
    pub criteria: Vec<CriterionState>,
    pub agents: Vec<AgentState>,
    pub capabilities: Vec<String>,
    pub prd_path: String,
    pub loop_prd_path: String,
    pub phase_history: Vec<PhaseEntry>,
    pub loop_mode: bool,
    pub mode: String,
    pub loop_iteration: u64,
    pub loop_max_iterations: u64,
    pub loop_prd_id: String,
    pub loop_history: Vec<LoopEntry>,
    pub parallel_agents: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    // prdloop's additions.
    #[serde(default)]
    pub prdloop_version: u32,
    #[serde(default)]
    pub total_cost_usd: f64,
    /// `--max-cost`, for the dashboard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    #[serde(default)]
    pub usage: Usage,
    /// The independent verifier's runs and what they cost (part of `totalCostUsd`).
    #[serde(default)]
    pub reviews: u32,
    /// Passing work that could not be merged because another lane's changes collided with
    /// it (each cost an attempt), in this run.
    #[serde(default)]
    pub conflicts: u32,
    /// Connections the network policy (`--network`) refused workers and checks, in this run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_connections: Vec<NetRefusal>,
    /// How attempts followed each other: `continuous` or `barrier` (`--rounds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<String>,
    #[serde(default)]
    pub review_cost_usd: f64,
    #[serde(default)]
    pub log_dir: String,
    #[serde(default)]
    pub workdir: String,
    /// Every worker attempt, one JSON object per line (appended, so the state file stays
    /// the size of the criteria list however long the run).
    #[serde(default)]
    pub attempts_log: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Epoch ms until which no worker starts (a rate or usage limit, overload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_until: Option<u64>,
    /// Time spent waiting out limits in this run.
    #[serde(default)]
    pub waited_ms: u64,
    /// Why the run stopped early (budget, time, agent failure), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// A hash of the PRD's text as this session last wrote (or read) it: `resume` applies
    /// passes that never reached the PRD only while the PRD is still that text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prd_text_hash: Option<String>,
    /// The coding agent this run's workers run (`claude`, `codex`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_agent: Option<crate::backend::Agent>,
    /// What the run's command line and `PRDLOOP_*` variables gave it: `resume` runs the
    /// session with them, under its own (`None`: a state file from before they were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_settings: Option<crate::given::SessionSettings>,
    /// Best-of-N: how the winner of each attempt is chosen (`first`, `best`) and how many
    /// samples each attempt runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_of: Option<BestOf>,
    /// The PRD's questions (workers asked, people answered): the open ones park their
    /// criteria. A copy of the PRD's question book (`questionsFile`), which outlives the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<Question>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions_file: Option<String>,
    /// What the workers cost and passed, per domain and set-up (whole run, `resume`d sessions
    /// included): the accounts `--best-of auto` estimates from and the cost per pass is
    /// worked out of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spend: Vec<SpendRow>,
    /// The cost per passed criterion, per set-up and per domain (from `spend`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_pass: Option<CostPerPass>,
    /// `--escalate`: the set-ups, and where each criterion stands on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,
}

/// What the workers of one set-up cost in one domain, and what they passed.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SpendRow {
    pub domain: String,
    /// `claude`, `claude:opus`: the set-up as `--mix`/`--escalate` name it.
    pub setup: String,
    /// Workers that ran (to their end, or ended because a sibling won).
    pub runs: u32,
    /// Of those, the ones whose work was judged (passed or failed its check; not agent
    /// failures, not ended siblings).
    pub judged: u32,
    /// Of the judged, those that passed: `passAt1` = passedRuns / judged.
    pub passed_runs: u32,
    /// Criteria passed (the winning worker's set-up and domain).
    pub passed: u32,
    pub time_ms: u64,
    pub usage: Usage,
    pub cost_usd: f64,
}

/// The cost per passed criterion, per set-up and per domain.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CostPerPass {
    pub by_setup: Vec<PerPass>,
    pub by_domain: Vec<PerPass>,
}

/// One set-up's or domain's spend, and what it came to per passed criterion (`null` while
/// it passed none).
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PerPass {
    /// The set-up or the domain.
    pub name: String,
    pub passed: u32,
    pub runs: u32,
    pub time_ms: u64,
    /// Input and output tokens.
    pub tokens: u64,
    pub cost_usd: f64,
    pub runs_per_pass: Option<f64>,
    pub time_ms_per_pass: Option<u64>,
    pub tokens_per_pass: Option<u64>,
    pub cost_usd_per_pass: Option<f64>,
    /// The share of judged workers that passed (`null` before any was judged).
    pub pass_at_1: Option<f64>,
    pub judged: u32,
    pub passed_runs: u32,
}

/// `--escalate` in the state file.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Escalation {
    pub setups: Vec<String>,
    pub after: u32,
    pub fallback: bool,
    /// Criteria that have left the first set-up or failed on their current one.
    #[serde(default)]
    pub criteria: std::collections::BTreeMap<String, Rung>,
    /// `--fallback`: set-ups out of usage until this epoch ms.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub limited_until: std::collections::BTreeMap<String, u64>,
}

/// Where one criterion stands on the `--escalate` set-ups.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rung {
    /// The set-up its attempts run now.
    pub setup: String,
    /// Its failed attempts on that set-up.
    pub failed: u32,
    /// Failed attempts on each set-up it ran, in order: `{"claude:sonnet": 2}`.
    #[serde(default)]
    pub failed_on: std::collections::BTreeMap<String, u32>,
}

/// Best-of-N in the state file.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BestOf {
    pub samples: u32,
    pub select: String,
    /// The `--mix` set-ups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<String>,
    /// Criteria won, per set-up (or `default` without `--mix`).
    #[serde(default)]
    pub wins: std::collections::BTreeMap<String, u32>,
    /// Which sample won each criterion: `sample 2/3 (claude:opus)`.
    #[serde(default)]
    pub won_by: std::collections::BTreeMap<String, String>,
    /// `--best-of auto`: the samples the next attempt of each domain runs, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<AutoSamples>,
}

/// `--best-of auto` in the state file: the estimate itself is `spend` (passes and fails per
/// domain and set-up); this is what it comes to.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AutoSamples {
    pub max: u32,
    /// `domain · set-up` → its estimate and the samples its next attempt runs.
    pub next: std::collections::BTreeMap<String, AutoEstimate>,
}

#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AutoEstimate {
    /// The posterior mean of pass@1 (Beta prior and the judged workers).
    pub pass_at_1: f64,
    pub samples: u32,
}

impl SessionState {
    pub fn path(dir: &Path, session: &str) -> PathBuf {
        dir.join(format!("{session}.json"))
    }

    pub fn save(&self, dir: &Path) -> Result<()> {
        self.save_with(dir, &mut Vec::new())
    }

    /// [`Self::save`], the JSON made in `buf` (emptied first): its room is kept for the next
    /// save (a large PRD's state file is a megabyte, grown from nothing at each save else).
    pub fn save_with(&self, dir: &Path, buf: &mut Vec<u8>) -> Result<()> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("failed to create the state folder `{}`", dir.display()))?;
        buf.clear();
        serde_json::to_writer_pretty(&mut *buf, self)?;
        buf.push(b'\n');
        write_atomic(&Self::path(dir, &self.session_id), buf)
    }

    /// The state of the PRD's most recent session in `dir`.
    pub fn latest(dir: &Path, prd: &Path) -> Option<SessionState> {
        Self::latest_before(dir, prd, None)
    }

    /// The state of the PRD's most recent session in `dir` other than `this` one. Every run
    /// of a PRD asks, in a folder that may hold many sessions' files (and, in PAI's layout,
    /// files a worker wrote): only regular files are read, and only those that name the PRD
    /// are parsed.
    pub fn latest_before(dir: &Path, prd: &Path, this: Option<&str>) -> Option<SessionState> {
        let want = prd.display().to_string();
        let named = serde_json::to_string(&want).ok()?;
        std::fs::read_dir(dir)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter_map(|p| {
                let text = read_regular(&p).ok()?;
                text.contains(&named)
                    .then(|| SessionState::parse(&p, &text).ok())
                    .flatten()
            })
            .filter(|s| s.prd_path == want && Some(s.session_id.as_str()) != this)
            .max_by_key(|s| s.algorithm_started_at)
    }

    pub fn load(path: &Path) -> Result<SessionState> {
        let text = read_regular(path)
            .with_context(|| format!("failed to read the state file `{}`", path.display()))?;
        Self::parse(path, &text)
    }

    fn parse(path: &Path, text: &str) -> Result<SessionState> {
        let state: SessionState = serde_json::from_str(text)
            .with_context(|| format!("the state file `{}` is not valid", path.display()))?;
        if state.prdloop_version > STATE_VERSION {
            anyhow::bail!(
                "the state file `{}` was written by a newer prdloop (format {}); upgrade prdloop",
                path.display(),
                state.prdloop_version
            );
        }
        Ok(state)
    }
}

/// The largest state file read: a run of 100,000 criteria writes some tens of megabytes.
const STATE_AT_MOST: u64 = 256 << 20;

/// A state file's text (see [`crate::fsutil::read_regular`]: a worker may have planted a
/// FIFO or a huge file where every run looks).
fn read_regular(path: &Path) -> std::io::Result<String> {
    let bytes = crate::fsutil::read_regular(path, STATE_AT_MOST)?;
    String::from_utf8(bytes).map_err(std::io::Error::other)
}

/// The lock file beside `session-names.json` that its writers take.
pub fn session_names_lock(path: &Path) -> PathBuf {
    path.with_extension("json.lock")
}

/// Sets one session's display name in `session-names.json`, under a lock, keeping every
/// other entry. A file that is not a JSON object is left alone (with a warning).
pub fn set_session_name(path: &Path, session: &str, name: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let lock_path = session_names_lock(path);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("failed to open `{}`", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("failed to lock `{}`", lock_path.display()))?;
    let mut names: BTreeMap<String, serde_json::Value> = match std::fs::read_to_string(path) {
        Ok(t) if t.trim().is_empty() => BTreeMap::new(),
        Ok(t) => match serde_json::from_str(&t) {
            Ok(m) => m,
            Err(e) => {
                anyhow::bail!(
                    "`{}` is not a JSON object ({e}); not touching it",
                    path.display()
                )
            }
        },
        Err(_) => BTreeMap::new(),
    };
    names.insert(
        session.to_string(),
        serde_json::Value::String(name.to_string()),
    );
    let mut json = serde_json::to_string_pretty(&names)?;
    json.push('\n');
    let r = write_atomic(path, json.as_bytes());
    let _ = lock.unlock();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lanes_criteria_are_listed_once_each_in_the_order_they_came() {
        let mut ids: CriteriaIds = ["ISC-B-1", "ISC-A-1", "ISC-B-1"]
            .into_iter()
            .map(String::from)
            .collect();
        ids.add("ISC-A-1");
        ids.add("ISC-C-1");
        assert_eq!(ids.ids(), ["ISC-B-1", "ISC-A-1", "ISC-C-1"]);
        // PAI's file holds the plain list; one read back lists the same.
        let json = serde_json::to_string(&ids).unwrap();
        assert_eq!(json, r#"["ISC-B-1","ISC-A-1","ISC-C-1"]"#);
        let back: CriteriaIds = serde_json::from_str(r#"["X","Y","X"]"#).unwrap();
        assert_eq!(back.ids(), ["X", "Y"]);
        let mut back = back;
        back.add("Y");
        assert_eq!(back.ids(), ["X", "Y"]);
    }

    #[test]
    fn the_latest_session_of_a_prd_skips_others_itself_and_what_is_no_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let prd = Path::new("/work/PRD.md");
        let save = |id: &str, path: &str, at: u64| {
            SessionState {
                session_id: id.into(),
                prd_path: path.into(),
                algorithm_started_at: at,
                ..SessionState::default()
            }
            .save(dir.path())
            .unwrap();
        };
        save("old", "/work/PRD.md", 1);
        save("other", "/work/OTHER.md", 3);
        save("this", "/work/PRD.md", 4);
        // What a worker could plant in the state folder (PAI's layout): a FIFO, which would
        // block a read for ever, and a link to a session's file.
        nix::unistd::mkfifo(&dir.path().join("fifo.json"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        save("linked", "/work/PRD.md", 2);
        std::fs::rename(
            dir.path().join("linked.json"),
            dir.path().join("linked.target"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            dir.path().join("linked.target"),
            dir.path().join("linked.json"),
        )
        .unwrap();
        // And a file too large to be a state file (sparse: it takes no room): not read.
        let huge = dir.path().join("huge.json");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(STATE_AT_MOST + 1)
            .unwrap();
        let err = format!("{:#}", SessionState::load(&huge).unwrap_err());
        assert!(
            err.contains(&format!("larger than {STATE_AT_MOST} bytes")),
            "{err}"
        );
        let id = |s: Option<SessionState>| s.map(|s| s.session_id);
        assert_eq!(
            id(SessionState::latest(dir.path(), prd)).as_deref(),
            Some("this")
        );
        assert_eq!(
            id(SessionState::latest_before(dir.path(), prd, Some("this"))).as_deref(),
            Some("old")
        );
        assert_eq!(
            id(SessionState::latest(dir.path(), Path::new("/x.md"))),
            None
        );
    }
}
