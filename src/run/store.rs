//! The session store: the run's lock on its PRD (and taking over from a crashed run), the PAI
//! state JSON (saved whole, atomically, at most every coalescing window), the append-only
//! attempts log, and the display name in `session-names.json`.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::core::Core;
use super::event::RunEvent;
use crate::state::{self, AttemptRecord, LockInfo, PrdLock, SessionState};
use crate::{env, platform};

pub use super::warning::store::Warning;

impl Warning {
    /// As the run says it.
    pub fn said(self) -> RunEvent {
        RunEvent::Warning(self.into())
    }
}

/// How taking the PRD's lock went.
pub enum Locked {
    Held(PrdLock, Vec<RunEvent>),
    /// Another live loop holds it: the message to show.
    Busy(String),
}

/// Takes the PRD's loop lock (one per PRD for this user, whatever the state folder: see
/// [`state::lock_dir`]). A lock left by a run that ended without releasing it (a crash,
/// SIGKILL) is taken over: that session's state, in the state folder its lock record names, is
/// marked inactive and its workers are ended.
pub fn lock(state_dir: &Path, prd: &Path, session: &str) -> Result<Locked> {
    let info = LockInfo::new(session, prd, state_dir);
    match PrdLock::acquire(prd, &info)? {
        state::LockOutcome::Busy(holder) => Ok(Locked::Busy(format!(
            "{} is already being run by {}{}; stop it first (`prdloop stop`), or wait",
            prd.display(),
            LockInfo::describe(holder.as_ref()),
            holder
                .as_ref()
                .and_then(|h| h.other_state_dir(state_dir))
                .map(|d| format!(" with its state in `{d}`"))
                .unwrap_or_default()
        ))),
        state::LockOutcome::Acquired { lock, stale } => {
            let mut said = Vec::new();
            if let Some(s) = stale.filter(|s| !s.session_id.is_empty()) {
                said.push(
                    Warning::TakingOver {
                        prd: prd.to_path_buf(),
                        session: s.session_id.clone(),
                        pid: s.pid,
                        host: s.host.clone(),
                    }
                    .said(),
                );
                // A record from before the lock left the state folder names none: ours.
                let its_dir = if s.state_dir.is_empty() {
                    state_dir.to_path_buf()
                } else {
                    PathBuf::from(&s.state_dir)
                };
                said.extend(mark_crashed(&its_dir, &s.session_id));
            }
            Ok(Locked::Held(lock, said))
        }
    }
}

/// Marks a crashed session's state file inactive and ends the workers it left running (found
/// by the session id in their environment, so a reused pid is never hit).
fn mark_crashed(dir: &Path, session: &str) -> Vec<RunEvent> {
    let mut said = Vec::new();
    let path = SessionState::path(dir, session);
    let saved = SessionState::load(&path).ok();
    let mut pids: Vec<u32> = saved
        .iter()
        .flat_map(|s| s.agents.iter().filter_map(|a| a.pid))
        .filter(|&pid| platform::has_env(pid, env::WORKER_SESSION_ID, session))
        .collect();
    pids.extend(platform::processes_with_env(
        env::WORKER_SESSION_ID,
        session,
    ));
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        said.push(
            Warning::EndingWorker {
                pid,
                session: session.to_string(),
            }
            .said(),
        );
        platform::kill_group(pid);
        platform::kill_pid(pid);
    }
    if let Some(mut s) = saved
        && s.active
    {
        s.active = false;
        s.summary.get_or_insert_with(|| {
            "failed: the runner ended without saving (crash or SIGKILL)".into()
        });
        let _ = s.save(dir);
    }
    said
}

pub struct SessionStore {
    dir: PathBuf,
    names: PathBuf,
    attempts: state::AttemptsLog,
    /// The state file's last JSON: its room is reused by the next save.
    json: Vec<u8>,
    /// ralph's `progress.txt` beside a `prd.json`: each attempt is appended to it too.
    progress: Option<crate::prd::format::ProgressLog>,
}

impl SessionStore {
    pub fn new(core: &Core) -> SessionStore {
        SessionStore {
            dir: core.cfg().state_dir.clone(),
            names: core.cfg().session_names.clone(),
            attempts: state::AttemptsLog::new(core.attempts_log()),
            json: Vec::new(),
            progress: crate::prd::format::ProgressLog::beside(
                core.doc().list_format(),
                &core.cfg().prd_path,
            ),
        }
    }

    /// Saves the state file (PAI's document, as `Core::state_document` builds it).
    pub fn save(&mut self, doc: &SessionState) -> Option<RunEvent> {
        doc.save_with(&self.dir, &mut self.json).err().map(|e| {
            Warning::StateNotWritten {
                error: format!("{e:#}"),
            }
            .said()
        })
    }

    pub fn append(&mut self, records: &[AttemptRecord]) -> Option<RunEvent> {
        for rec in records {
            if let Err(e) = self.attempts.append(rec) {
                return Some(Warning::attempt_not_recorded(&e).said());
            }
            if let Some(log) = &self.progress
                && rec.verdict != state::AttemptVerdict::Sibling
                && let Err(e) = log.append(&rec.criterion, rec.finished_at, &progress_lines(rec))
            {
                return Some(
                    Warning::ProgressNotAppended {
                        path: log.path().to_path_buf(),
                        error: e.to_string(),
                    }
                    .said(),
                );
            }
        }
        None
    }

    pub fn set_name(&self, session: &str, name: &str) -> Option<RunEvent> {
        state::set_session_name(&self.names, session, name)
            .err()
            .map(|e| {
                Warning::NamesNotUpdated {
                    error: format!("{e:#}"),
                }
                .said()
            })
    }
}

/// An attempt as bullets of ralph's progress log: what became of it, and why.
fn progress_lines(rec: &AttemptRecord) -> Vec<String> {
    let verdict = serde_json::to_value(rec.verdict)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let agent = rec.agent_name.map(|a| format!(", {a}")).unwrap_or_default();
    let mut lines = vec![format!(
        "prdloop attempt: {verdict} (iteration {}, lane {}{agent})",
        rec.iteration, rec.agent
    )];
    lines.extend(rec.reason.clone().filter(|r| !r.trim().is_empty()));
    lines
}

/// Removes the `<uuid>.logs` folders of sessions whose state file is gone (PAI's hook deletes
/// state files after 24 hours but never the logs beside them). Returns how many went.
pub fn sweep_logs(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in rd.filter_map(|e| e.ok()) {
        let name = entry.file_name();
        let Some(session) = name.to_str().and_then(|n| n.strip_suffix(".logs")) else {
            continue;
        };
        if uuid::Uuid::parse_str(session).is_err() || !entry.path().is_dir() {
            continue;
        }
        if !SessionState::path(dir, session).exists()
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are the ones runs have always said.
    #[test]
    fn each_says_what_it_always_said() {
        let said = [
            Warning::TakingOver {
                prd: "/w/PRD.md".into(),
                session: "s-1".into(),
                pid: 42,
                host: "box".into(),
            },
            Warning::RunningUnheld {
                prd: "/w/PRD.md".into(),
            },
            Warning::EndingWorker {
                pid: 7,
                session: "s-1".into(),
            },
            Warning::attempt_not_recorded(&anyhow::anyhow!("disk full")),
            Warning::ProgressNotAppended {
                path: "/w/progress.txt".into(),
                error: "read-only".into(),
            },
        ]
        .map(|w| w.to_string());
        assert_eq!(
            said,
            [
                "taking over /w/PRD.md from session s-1 (pid 42 on box), which ended without releasing it",
                "/w/PRD.md says `loopStatus: running` but no live loop holds it (a crash?); taking over",
                "ending worker process 7 left by session s-1",
                "could not record the attempt: disk full",
                "could not append to /w/progress.txt: read-only",
            ]
        );
    }
}
