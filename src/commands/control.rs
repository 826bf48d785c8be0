//! `prdloop pause` and `prdloop stop`: ask the loop running on a PRD to pause or stop.
//! The request goes two ways: a request file beside the PRD's lock (read within a second)
//! and `loopStatus` in the PRD (PAI's cooperative protocol). The lock and the request file do
//! not live in a state folder, so the loop is reached whatever state folder, HOME or PAI_DIR
//! either side was given.

use std::time::Duration;

use anyhow::Result;

use crate::config::ControlSettings;
use crate::exit::Exit;
pub use crate::request::Ask;
use crate::request::send;
use crate::{exit, outln, report, state};

pub fn request(s: &ControlSettings) -> Result<Exit> {
    let (path, ask, state_dir) = (&s.prd, s.ask, &s.state_dir);
    let Some(holder) = send(path, ask)? else {
        let status = crate::prd::load(path)
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
    if let Some(dir) = holder.other_state_dir(state_dir) {
        outln!(out, "its state folder is `{dir}`");
    }
    report::stdout(&out)?;
    if s.wait {
        while state::lock_holder(path)?.is_some() {
            std::thread::sleep(Duration::from_millis(200));
        }
        let status = crate::prd::load(path)
            .ok()
            .and_then(|p| p.front.loop_status)
            .unwrap_or_else(|| "null".into());
        let mut out = String::new();
        outln!(out, "the loop has ended (loopStatus: {status})");
        report::stdout(&out)?;
    }
    Ok(exit::Exit::Success)
}
