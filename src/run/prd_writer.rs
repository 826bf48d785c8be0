//! The one writer of the PRD during a run. It brings the file up to date: reads it, merges
//! edits made by others (by criterion id: their text stays, prdloop's boxes and front matter
//! keys are applied onto it), restores boxes of managed criteria changed by someone else,
//! refuses to write a PRD that no longer parses or lost criteria of the run, and writes
//! atomically only when something changed.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use super::core::Core;
use super::end::End;
use crate::fsutil::write_atomic;
use crate::prd::{Prd, Value};

/// What a sync found on disk that the run must hear about.
#[derive(Debug, Default)]
pub struct SyncReport {
    pub warnings: Vec<String>,
    /// `loopStatus: paused|stopped` set by someone else.
    pub request: Option<End>,
}

pub struct PrdWriter {
    path: PathBuf,
    /// The text as prdloop last wrote or read it.
    last_written: String,
}

/// How often, and how far apart, a PRD that does not parse or lacks criteria is read again
/// before it is taken as it is: another program may be writing it in place right now.
const REREADS: usize = 20;
const REREAD_GAP: Duration = Duration::from_millis(25);

impl PrdWriter {
    pub fn new(path: PathBuf, text: String) -> PrdWriter {
        PrdWriter {
            path,
            last_written: text,
        }
    }

    /// The PRD's text as prdloop last wrote or read it.
    pub fn last_written(&self) -> &str {
        &self.last_written
    }

    /// A cheap look (one `stat`) before workers start: the PRD must still be a file.
    pub fn check_present(&self, core: &mut Core) -> Option<SyncReport> {
        if core.broken.is_some() {
            return None;
        }
        match std::fs::metadata(&self.path) {
            Ok(m) if m.is_file() => None,
            Ok(_) => self.gone(core, "it is not a file any more".into()),
            Err(e) => self.gone(core, e.to_string()),
        }
    }

    fn gone(&self, core: &mut Core, why: String) -> Option<SyncReport> {
        let msg = format!(
            "{} cannot be read any more ({why}): it was deleted, moved or replaced during the run",
            self.path.display()
        );
        if core.broken.as_ref() == Some(&msg) {
            return None;
        }
        core.broken = Some(msg.clone());
        Some(SyncReport {
            warnings: vec![format!("{msg}; no new workers start")],
            request: None,
        })
    }

    /// Brings the PRD on disk up to date with the run and applies `edits` to its front matter.
    /// Returns what the run must hear about when the file had changed on disk.
    pub async fn sync(
        &mut self,
        core: &mut Core,
        edits: &[(&str, Value)],
    ) -> Result<Option<SyncReport>> {
        let path = self.path.clone();
        let (disk, parsed) = match self.read(core).await {
            Ok(r) => r,
            Err(e) => return Ok(self.gone(core, e.to_string())),
        };
        let mut report = None;
        let mut doc = match parsed {
            None => core.doc.clone(),
            Some(Err(msg)) => {
                if core.broken.as_ref() != Some(&msg) {
                    let mut r = SyncReport::default();
                    r.warnings.push(format!(
                        "{msg} — the PRD was edited into a broken state; prdloop will not write it until it parses"
                    ));
                    report = Some(r);
                }
                core.broken = Some(msg);
                return Ok(report);
            }
            Some(Ok(d)) => {
                tracing::info!("{} changed on disk; merging", path.display());
                let missing: Vec<String> = core
                    .doc
                    .criteria
                    .iter()
                    .filter(|c| d.criterion(&c.id).is_none())
                    .map(|c| c.id.clone())
                    .collect();
                if !missing.is_empty() {
                    let report = (core.vanished != missing).then(|| SyncReport {
                        warnings: vec![format!(
                            "{}: {} disappeared from the PRD during the run; prdloop does not write it and starts no new worker",
                            path.display(),
                            missing.join(", ")
                        )],
                        request: None,
                    });
                    core.vanished = missing;
                    return Ok(report);
                }
                core.vanished.clear();
                report = Some(outside_edits(core, &d, &path));
                d
            }
        };
        // New criteria (added by the user) join with their state on disk.
        for c in &doc.criteria {
            core.ledger.admit(&c.id, c.checked);
        }
        let ticks: Vec<(String, bool)> = doc
            .criteria
            .iter()
            .map(|c| (c.id.clone(), core.ledger.passing(&c.id)))
            .collect();
        for (id, checked) in ticks {
            doc.set_checked(&id, checked);
        }
        doc.set_front(edits).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}: {} (after an edit; nothing written)",
                path.display(),
                e.line,
                e.message
            )
        })?;
        if doc.text() != disk {
            write_atomic(&path, doc.text().as_bytes())?;
        }
        self.last_written = doc.text().to_string();
        core.doc = doc;
        core.broken = None;
        Ok(report)
    }

    /// Reads the PRD: `None` when it is as prdloop left it, else its parse. A text that does
    /// not parse, or lacks criteria of the run, is read again a few times first: it may be
    /// half-written by a program that does not write atomically.
    async fn read(&self, core: &Core) -> std::io::Result<(String, Option<Result<Prd, String>>)> {
        let mut last = None;
        for attempt in 0..=REREADS {
            if attempt > 0 {
                tokio::time::sleep(REREAD_GAP).await;
            }
            let text = tokio::fs::read_to_string(&self.path).await?;
            if text == self.last_written {
                return Ok((text, None));
            }
            match Prd::parse(text.clone()) {
                Ok(d)
                    if core
                        .doc
                        .criteria
                        .iter()
                        .all(|c| d.criterion(&c.id).is_some()) =>
                {
                    return Ok((text, Some(Ok(d))));
                }
                Ok(d) => last = Some((text, Ok(d))),
                Err(e) => last = Some((text, Err(e.at(&self.path)))),
            }
        }
        let (text, parsed) = last.expect("read at least once");
        Ok((text, Some(parsed)))
    }
}

/// Warns about boxes changed by someone else and notes pause/stop requests.
fn outside_edits(core: &Core, disk: &Prd, path: &std::path::Path) -> SyncReport {
    let mut r = SyncReport::default();
    for c in &disk.criteria {
        if let Some(known) = core.ledger.get(&c.id).map(|rec| rec.passing)
            && known != c.checked
        {
            r.warnings.push(format!(
                "{}:{}: the box of {} was {} outside prdloop during the run; restored (prdloop alone ticks the boxes it manages)",
                path.display(),
                c.line,
                c.id,
                if c.checked { "ticked" } else { "unticked" }
            ));
        }
    }
    let ours = core.doc.front.loop_status.as_deref();
    let theirs = disk.front.loop_status.as_deref();
    if theirs != ours {
        r.request = match theirs {
            Some("paused") => Some(End::PausedByRequest),
            Some("stopped") => Some(End::StoppedByRequest),
            _ => None,
        };
    }
    r
}
