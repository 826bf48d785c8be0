//! prdloop's own paths of a run on one PRD: the one place a run asks where its PRD, its state,
//! its session names, its pause/stop request, its question book and its session's logs are,
//! and which of them workers may not write.
//!
//! The request file and the question book are laid out by the modules that keep them
//! (`state::request_path`: beside the PRD's lock; `questions::book_path`: in the state
//! folder), which `pause`, `stop`, `answer` and `--pr` also ask without a run; those sit
//! below this module, so it asks them and not the other way round.

use std::path::{Path, PathBuf};

/// Where prdloop's own files of a run on one PRD are. Made once from the run's settings
/// (before its lock is taken: the lock and the request file are found by the PRD).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnPaths {
    /// The PRD the run works on.
    pub prd: PathBuf,
    /// The state folder: the sessions' state files and logs, the question books.
    pub state_dir: PathBuf,
    /// `session-names.json`.
    pub session_names: PathBuf,
    /// The file through which `prdloop pause|stop` asks the loop to pause or stop.
    pub request: PathBuf,
    /// The PRD's question book.
    pub book: PathBuf,
}

impl OwnPaths {
    pub fn new(prd: &Path, state_dir: PathBuf) -> OwnPaths {
        OwnPaths {
            prd: prd.to_path_buf(),
            session_names: session_names_beside(&state_dir),
            request: crate::state::request_path(prd),
            book: crate::questions::book_path(&state_dir, prd),
            state_dir,
        }
    }

    /// The folder of a session's logs.
    pub fn logs(&self, session: &str) -> PathBuf {
        self.state_dir.join(format!("{session}.logs"))
    }

    /// What of prdloop's is in reach of the workers, the PRD first: its state folder,
    /// `session-names.json` and that file's lock. A lane never carries them, landing and
    /// bundles leave them out, and workers may not write them. The one list of them.
    pub fn unwritable(&self) -> Vec<PathBuf> {
        vec![
            self.prd.clone(),
            self.state_dir.clone(),
            self.session_names.clone(),
            crate::state::session_names_lock(&self.session_names),
        ]
    }
}

/// `session-names.json` of a state folder: beside it (the algorithms folder), as in PAI; in
/// it when the state folder is `/`.
pub fn session_names_beside(state_dir: &Path) -> PathBuf {
    state_dir
        .parent()
        .unwrap_or(state_dir)
        .join("session-names.json")
}
