//! What the session store (`run::store`) warns about. Here and not in `store`, which reads
//! the run's core: the run's events carry these.

use std::path::PathBuf;

/// What the session store warns about: a lock taken over, a file of the session that could
/// not be written (the run goes on). Its text is its `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// The PRD's lock, left by a session that ended without releasing it, is taken over.
    TakingOver {
        prd: PathBuf,
        session: String,
        pid: u32,
        host: String,
    },
    /// The PRD says `loopStatus: running` but no live loop holds its lock.
    RunningUnheld {
        prd: PathBuf,
    },
    /// A worker process a crashed session left running is ended.
    EndingWorker {
        pid: u32,
        session: String,
    },
    StateNotWritten {
        error: String,
    },
    AttemptNotRecorded {
        error: String,
    },
    /// ralph's `progress.txt`: the file system's error.
    ProgressNotAppended {
        path: PathBuf,
        error: String,
    },
    NamesNotUpdated {
        error: String,
    },
}

impl Warning {
    /// An attempt that could not be appended to the attempts log.
    pub fn attempt_not_recorded(e: &anyhow::Error) -> Warning {
        Warning::AttemptNotRecorded {
            error: format!("{e:#}"),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::TakingOver {
                prd,
                session,
                pid,
                host,
            } => write!(
                f,
                "taking over {} from session {session} (pid {pid} on {host}), which ended without releasing it",
                prd.display()
            ),
            Warning::RunningUnheld { prd } => write!(
                f,
                "{} says `loopStatus: running` but no live loop holds it (a crash?); taking over",
                prd.display()
            ),
            Warning::EndingWorker { pid, session } => {
                write!(f, "ending worker process {pid} left by session {session}")
            }
            Warning::StateNotWritten { error } => {
                write!(f, "could not write the state file: {error}")
            }
            Warning::AttemptNotRecorded { error } => {
                write!(f, "could not record the attempt: {error}")
            }
            Warning::ProgressNotAppended { path, error } => {
                write!(f, "could not append to {}: {error}", path.display())
            }
            Warning::NamesNotUpdated { error } => {
                write!(f, "could not update the session names: {error}")
            }
        }
    }
}
