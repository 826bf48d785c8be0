//! `prdloop pause` and `prdloop stop`: ask the loop running on a PRD to pause or stop.
//! The request goes two ways: a request file beside the PRD's lock (read within a second)
//! and `loopStatus` in the PRD (PAI's cooperative protocol). The lock and the request file do
//! not live in a state folder, so the loop is reached whatever state folder, HOME or PAI_DIR
//! either side was given.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::cli::ControlArgs;
use crate::exit::Exit;
use crate::fsutil::write_atomic;
use crate::prd::Value;
use crate::prd::lookup::{self, Locations};
use crate::{exit, outln, report, state};

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

    pub fn parse(s: &str) -> Option<Ask> {
        match s.trim() {
            "pause" => Some(Ask::Pause),
            "stop" => Some(Ask::Stop),
            _ => None,
        }
    }
}

pub fn request(args: &ControlArgs, ask: Ask, loc: &Locations) -> Result<Exit> {
    let path = lookup::resolve(args.prd(), loc)?;
    let state_dir = crate::config::state_dir(args.state_dir.as_deref(), loc)?;
    let Some(holder) = send(&path, ask)? else {
        let status = crate::prd::load(&path)
            .ok()
            .and_then(|p| p.front.loop_status)
            .unwrap_or_else(|| "null".into());
        report::error(format!(
            "no loop is running on {} (loopStatus: {status}); nothing changed",
            path.display()
        ));
        return Ok(exit::Exit::Failure);
    };
    let mut out = String::new();
    outln!(
        out,
        "asked session {} (pid {}) to {}: {}",
        holder.session_id,
        holder.pid,
        ask.word(),
        match ask {
            Ask::Pause => "its running workers finish and count, then it ends paused",
            Ask::Stop => "its workers are ended, then it ends stopped",
        }
    );
    if let Some(dir) = holder.other_state_dir(&state_dir) {
        outln!(out, "its state folder is `{dir}`");
    }
    report::stdout(&out)?;
    if args.wait {
        while state::lock_holder(&path)?.is_some() {
            std::thread::sleep(Duration::from_millis(200));
        }
        let status = crate::prd::load(&path)
            .ok()
            .and_then(|p| p.front.loop_status)
            .unwrap_or_else(|| "null".into());
        let mut out = String::new();
        outln!(out, "the loop has ended (loopStatus: {status})");
        report::stdout(&out)?;
    }
    Ok(exit::Exit::Success)
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
            crate::report::warn(format!("`loopStatus` not written: {e:#}"));
        }
    }
    Ok(Some(holder))
}
