//! What the dashboard shows, read from disk: the state files in the state folders, each
//! session's attempts log and worker logs, the PRD's lock (whether its loop is live). Nothing
//! here writes.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Serialize;

use crate::state::{
    self, AgentStatus, AttemptRecord, AttemptVerdict, CriterionStatus, SessionState,
};

/// The most of a worker log shown (its end).
const LOG_MAX: u64 = 512 * 1024;
/// The most of a landed diff shown.
const DIFF_MAX: usize = 512 * 1024;

/// A session in the list.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub id: String,
    pub title: String,
    pub prd: String,
    pub state_dir: String,
    /// Its loop holds the PRD's lock now.
    pub live: bool,
    pub phase: String,
    pub iteration: u64,
    pub passing: usize,
    pub total: usize,
    pub cost_usd: f64,
    pub max_cost_usd: Option<f64>,
    pub tokens: u64,
    /// Epoch ms until which no worker starts (a usage or rate limit).
    pub paused_until: Option<u64>,
    pub stop_reason: Option<String>,
    pub summary: Option<String>,
    pub started_at: u64,
    pub completed_at: Option<u64>,
    pub agent: Option<String>,
    /// Questions of its PRD waiting for an answer.
    pub questions: usize,
}

/// A criterion of a session.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CriterionView {
    pub id: String,
    pub description: String,
    pub status: CriterionStatus,
    /// How its tick was earned (`command`, `agent`, `before`).
    pub verified_by: Option<state::Evidence>,
    pub attempts: u32,
    pub regressions: u32,
    pub last_failure: Option<String>,
    pub cost_usd: f64,
    /// Its open question: it is parked until a person answers.
    pub question: Option<String>,
}

/// A lane and what its agent is doing now.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaneView {
    pub lane: usize,
    pub criterion: Option<String>,
    pub started_at: Option<u64>,
    pub doing: String,
    pub tokens: Option<u64>,
}

/// One worker attempt.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    pub criterion: String,
    pub lane: usize,
    pub iteration: u64,
    pub started_at: u64,
    pub finished_at: u64,
    pub verdict: AttemptVerdict,
    pub reason: Option<String>,
    pub cost_usd: f64,
    /// Its log's file name in the session's log folder.
    pub log: String,
    /// The files its work changed in the checkout, when it landed.
    pub landed: Option<Vec<String>>,
    /// The connections the network policy refused it.
    pub refused_connections: Vec<crate::state::RefusedConnection>,
}

/// Everything about one session.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Detail {
    pub session: SessionView,
    pub criteria: Vec<CriterionView>,
    pub lanes: Vec<LaneView>,
    pub attempts: Vec<AttemptView>,
    /// The PRD's questions (open and answered), from its question book.
    pub questions: Vec<crate::questions::Question>,
}

/// A state file found, with the folder it is in.
pub struct Found {
    pub state: Arc<SessionState>,
    pub dir: PathBuf,
}

/// State files read before, by path, with the modification time and size they had: the
/// session list is made every half second per open page, and a state folder keeps every
/// past session, so only the files that changed are read again.
#[derive(Default)]
pub struct Cache(Mutex<HashMap<PathBuf, Seen>>);

/// A state file as read: its modification time and size then, and its content.
struct Seen {
    modified: SystemTime,
    len: u64,
    state: Arc<SessionState>,
}

impl Cache {
    fn load(&self, path: &Path) -> Option<Arc<SessionState>> {
        let meta = std::fs::metadata(path).ok()?;
        let (modified, len) = (meta.modified().ok()?, meta.len());
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = seen.get(path)
            && (r.modified, r.len) == (modified, len)
        {
            return Some(Arc::clone(&r.state));
        }
        let state = Arc::new(SessionState::load(path).ok()?);
        seen.insert(
            path.to_path_buf(),
            Seen {
                modified,
                len,
                state: Arc::clone(&state),
            },
        );
        Some(state)
    }

    /// Forgets the files that are gone.
    fn keep(&self, present: &HashSet<PathBuf>) {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|p, _| present.contains(p));
    }
}

/// Every session in the folders, newest first. Files that are not state files are skipped.
pub fn sessions(dirs: &[PathBuf], cache: &Cache) -> Vec<Found> {
    let mut present = HashSet::new();
    let mut all: Vec<Found> = Vec::new();
    for dir in dirs {
        for path in std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
        {
            if let Some(state) = cache.load(&path) {
                all.push(Found {
                    state,
                    dir: dir.clone(),
                });
            }
            present.insert(path);
        }
    }
    cache.keep(&present);
    all.sort_by(|a, b| {
        b.state
            .algorithm_started_at
            .cmp(&a.state.algorithm_started_at)
            .then_with(|| a.state.session_id.cmp(&b.state.session_id))
    });
    all
}

/// The session with this id.
pub fn find(dirs: &[PathBuf], id: &str) -> Option<Found> {
    // A session id names a file: nothing that could leave the folder.
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    dirs.iter().find_map(|dir| {
        let state = SessionState::load(&SessionState::path(dir, id)).ok()?;
        Some(Found {
            state: Arc::new(state),
            dir: dir.clone(),
        })
    })
}

/// Whether the session's loop holds its PRD's lock now.
pub fn is_live(s: &SessionState) -> bool {
    state::lock_holder(Path::new(&s.prd_path))
        .ok()
        .flatten()
        .is_some_and(|h| h.session_id == s.session_id)
}

pub fn view(f: &Found) -> SessionView {
    let s = &f.state;
    SessionView {
        id: s.session_id.clone(),
        title: s.task_description.clone(),
        prd: s.prd_path.clone(),
        state_dir: f.dir.display().to_string(),
        live: is_live(s),
        phase: s.current_phase.clone(),
        iteration: s.loop_iteration,
        passing: s
            .criteria
            .iter()
            .filter(|c| c.status == CriterionStatus::Completed)
            .count(),
        total: s.criteria.len(),
        cost_usd: s.total_cost_usd,
        max_cost_usd: s.max_cost_usd,
        tokens: s.usage.total(),
        paused_until: s.paused_until,
        stop_reason: s.stop_reason.clone(),
        summary: s.summary.clone(),
        started_at: s.algorithm_started_at,
        completed_at: s.completed_at,
        agent: s.worker_agent.map(|a| a.to_string()),
        // The book is read only for a session that left open questions (an answer given
        // since closes them).
        questions: if s.questions.iter().any(|q| q.open()) {
            book(f).open_questions().count()
        } else {
            0
        },
    }
}

/// The question book of a session's PRD: the running loop's, else the one in the session's
/// state folder.
pub fn book(f: &Found) -> crate::questions::Book {
    crate::questions::book_of(Path::new(&f.state.prd_path), &f.dir)
        .map(|(p, _)| crate::questions::load(&p))
        .unwrap_or_default()
}

pub fn detail(f: &Found) -> Detail {
    let s = &f.state;
    let mut session = view(f);
    // The PRD's own title where it can be read (the state has PAI's task line).
    if let Some(title) = crate::prd::load(Path::new(&s.prd_path))
        .ok()
        .and_then(|d| d.title)
    {
        session.title = title;
    }
    let log_dir = PathBuf::from(&s.log_dir);
    let lanes = s
        .agents
        .iter()
        .enumerate()
        .map(|(lane, a)| {
            let running =
                session.live && a.status == AgentStatus::Active && a.current_criterion.is_some();
            let criterion = running.then(|| a.current_criterion.clone()).flatten();
            // The published activity of the worker on it now (not a previous one's).
            let (doing, tokens) = super::publish::read(&log_dir, lane, 0)
                .filter(|a| criterion.as_deref() == Some(a.criterion.as_str()))
                .map(|a| (a.doing, a.tokens))
                .unwrap_or_default();
            LaneView {
                lane,
                started_at: criterion.as_ref().and(a.started_at),
                criterion,
                doing,
                tokens,
            }
        })
        .collect();
    let attempts = state::read_attempts(Path::new(&s.attempts_log))
        .into_iter()
        .map(attempt_view)
        .collect();
    let book = book(f);
    session.questions = book.open_questions().count();
    Detail {
        criteria: s
            .criteria
            .iter()
            .map(|c| CriterionView {
                id: c.id.clone(),
                description: c.description.clone(),
                status: c.status,
                verified_by: c.verified_by,
                attempts: c.attempts,
                regressions: c.regressions,
                last_failure: c.last_failure.clone(),
                cost_usd: c.cost_usd,
                question: book.open(&c.id).map(|q| crate::text::visible(&q.question)),
            })
            .collect(),
        session,
        lanes,
        attempts,
        // A worker's words, with bidirectional controls shown, not obeyed, by the page.
        questions: book
            .questions
            .into_iter()
            .map(|mut q| {
                q.question = crate::text::visible(&q.question);
                q.answer = q.answer.as_deref().map(crate::text::visible);
                q
            })
            .collect(),
    }
}

fn attempt_view(r: AttemptRecord) -> AttemptView {
    let landed = match &r.landing {
        Some(crate::isolation::Landing::Merged { files, .. }) => Some(files.clone()),
        _ => None,
    };
    AttemptView {
        log: Path::new(&r.log)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        criterion: r.criterion,
        // The attempts log numbers lanes from 1 (`agent-1`), the page from 0 as the state's
        // `agents` list does.
        lane: r.agent.saturating_sub(1),
        iteration: r.iteration,
        started_at: r.started_at,
        finished_at: r.finished_at,
        verdict: r.verdict,
        reason: r.reason,
        cost_usd: r.cost_usd,
        landed,
        refused_connections: r.refused_connections,
    }
}

/// A worker log of the session, rendered as `prdloop logs` shows it (without colour); its end
/// when long. `name` is a file name in the session's log folder, nothing else.
pub fn log(f: &Found, name: &str) -> Option<String> {
    if name.is_empty() || name.contains('/') || name.contains('\\') || name.starts_with('.') {
        return None;
    }
    let path = Path::new(&f.state.log_dir).join(name);
    let bytes = crate::worker::output_log::tail(&path, LOG_MAX)
        .ok()?
        .from_line_start();
    let text = String::from_utf8_lossy(&bytes);
    let agent = f.state.log_agent(name);
    Some(anstream::adapter::strip_str(&crate::backend::render::render(agent, &text)).to_string())
}

/// The diff a criterion's attempt landed: its pinned commit against its base (`git show`).
pub fn diff(f: &Found, log_name: &str) -> Option<String> {
    let rec = state::read_attempts(Path::new(&f.state.attempts_log))
        .into_iter()
        .find(|r| Path::new(&r.log).file_name().is_some_and(|n| n == log_name))?;
    if !matches!(rec.landing, Some(crate::isolation::Landing::Merged { .. })) {
        return None;
    }
    let attempt = crate::run::log_name::LogName::parse(log_name)?.attempt_name();
    let refname = format!(
        "refs/prdloop/{}/{}/{attempt}",
        f.state.session_id,
        crate::text::file_safe(&rec.criterion)
    );
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&f.state.workdir)
        .args([
            "show",
            "--no-color",
            "--format=",
            "--patch",
            "--stat",
            &refname,
            "--",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = crate::text::cut_to(
        String::from_utf8_lossy(&out.stdout).into_owned(),
        DIFF_MAX,
        "\n… (cut)\n",
    );
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_list_reads_again_what_changed_and_forgets_what_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = [dir.path().to_path_buf()];
        let cache = Cache::default();
        let mut s = SessionState {
            session_id: "s-1".into(),
            total_cost_usd: 0.5,
            ..SessionState::default()
        };
        s.save(dir.path()).unwrap();
        std::fs::write(dir.path().join("not-a-state.json"), "[]").unwrap();
        let first = sessions(&dirs, &cache);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].state.total_cost_usd, 0.5);
        // Unchanged: the same value, not read again.
        assert!(Arc::ptr_eq(
            &first[0].state,
            &sessions(&dirs, &cache)[0].state
        ));
        s.total_cost_usd = 1.25;
        s.save(dir.path()).unwrap();
        assert_eq!(sessions(&dirs, &cache)[0].state.total_cost_usd, 1.25);
        std::fs::remove_file(SessionState::path(dir.path(), "s-1")).unwrap();
        assert!(sessions(&dirs, &cache).is_empty());
        assert!(cache.0.lock().unwrap().is_empty());
    }
}
