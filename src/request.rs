//! Asking the loop running on a PRD to pause or stop, as `prdloop pause|stop` and the
//! dashboard's buttons do. The request goes two ways: a request file beside the PRD's lock
//! (the loop reads it within a second) and `loopStatus` in the PRD (PAI's cooperative
//! protocol).

use std::path::Path;

use anyhow::Result;

use crate::fsutil::write_atomic;
use crate::prd::Value;
use crate::state;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Pause,
    Stop,
}

impl Ask {
    pub fn word(self) -> &'static str {
        match self {
            Ask::Pause => "pause",
            Ask::Stop => "stop",
        }
    }

    pub fn loop_status(self) -> &'static str {
        match self {
            Ask::Pause => "paused",
            Ask::Stop => "stopped",
        }
    }
}

/// The warning of a request whose `loopStatus` could not be written into the PRD (the
/// request file was).
#[derive(Debug, Clone, PartialEq, Eq)]
struct LoopStatusNotWritten {
    error: String,
}

impl std::fmt::Display for LoopStatusNotWritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`loopStatus` not written: {}", self.error)
    }
}

/// Asks the loop running on the PRD at `path` to pause or stop: the request file, and
/// `loopStatus` in a v3 PRD. `None`, with nothing written, when no loop runs on it. What
/// `prdloop pause|stop` and the dashboard's buttons do.
pub fn send(path: &Path, ask: Ask) -> Result<Option<state::LockInfo>> {
    let Some(holder) = state::lock_holder(path)? else {
        return Ok(None);
    };
    write_atomic(&state::request_path(path), ask.word().as_bytes())?;
    // PAI's way too, for tools that read the PRD (v3 only: v4 has no `loopStatus`).
    // Surgical and atomic; a PRD that does not parse is left alone (the request file is
    // enough).
    if crate::prd::load(path).is_ok_and(|d| d.front.format == crate::prd::Format::V3) {
        let written = crate::prd::write::update(path, |doc| {
            doc.set_front(&[("loopStatus", Value::str(ask.loop_status()))])
                .map_err(|e| anyhow::anyhow!(e.at(path)))
        });
        if let Err(e) = written {
            // The request file is enough for the loop.
            crate::report::warn(LoopStatusNotWritten {
                error: format!("{e:#}"),
            });
        }
    }
    Ok(Some(holder))
}
