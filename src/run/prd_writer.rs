//! The one writer of the PRD during a run. It brings the file up to date: reads it, merges
//! edits made by others (by criterion id: their text stays, prdloop's boxes and front matter
//! keys are applied onto it), restores boxes of managed criteria changed by someone else,
//! refuses to write a PRD that no longer parses or lost criteria of the run, and writes
//! atomically only when something changed.
//!
//! It reads the run (`&Core`) and never changes it: what a sync found and did (the PRD as the
//! run now knows it, whether it is broken, criteria that vanished, warnings, a pause or stop
//! asked for) comes back as a [`SyncReport`], which the core applies as a `LoopEvent::Disk`.
//!
//! Writes race with editors and appenders. The window between the last read and the write is
//! closed as far as the platform allows: on Linux the new file is swapped in with
//! `renameat2(RENAME_EXCHANGE)`, which hands back exactly the file it replaced. When that is
//! not the text the merge started from, someone wrote in between: their change is brought
//! onto the run's text and the swap is made again. The replaced file is kept open until the
//! next sync, so that a line written into it by a program that opened it just before the swap
//! is found and carried over too. Elsewhere the file is compared just before the rename.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::core::Core;
use super::end::End;
use super::event::{PrdBroken, SyncReport, Unreadable};
use crate::fsutil::{Staged, write_atomic};
use crate::prd::write::read_back;

mod outside;

use super::warning::prd::{Unmerged, Warning};
use crate::prd::{ParseError, Prd, Value};
use outside::outside_edits;

/// `w` added to the report (the run says it as a `RunEvent::Warning`).
fn warn(report: &mut Option<SyncReport>, w: Warning) {
    report
        .get_or_insert_with(SyncReport::default)
        .warnings
        .push(w.into());
}

/// Box states (bit 1: unticked, bit 2: ticked) a criterion's box has had in a text prdloop
/// read at the start or wrote since: finding one of them on disk is no outside edit (an
/// editor saving a copy it read earlier brings such states back).
const SEEN_UNTICKED: u8 = 1;
const SEEN_TICKED: u8 = 2;

fn bit(checked: bool) -> u8 {
    if checked { SEEN_TICKED } else { SEEN_UNTICKED }
}

pub struct PrdWriter {
    path: PathBuf,
    /// The text as prdloop last wrote or read it.
    last_written: String,
    seen: HashMap<String, u8>,
    /// Files swaps replaced, still open, to find what was written into them late.
    replaced: Vec<Replaced>,
    /// The last texts that were at the PRD's path, newest first.
    known: VecDeque<String>,
    /// Text others wrote that prdloop brought over, recently: an editor saving a copy it read
    /// before it came over would drop it, so it is added again to a text that lacks it.
    carried: VecDeque<(String, Instant)>,
}

/// A file a swap replaced.
struct Replaced {
    file: std::fs::File,
    /// What it held when last read (everything in it up to there is accounted for).
    seen: String,
    /// Replaced during the last sync: read once more at the next one.
    fresh: bool,
}

/// How often, and how far apart, a PRD that does not parse or lacks criteria is read again
/// before it is taken as it is: another program may be writing it in place right now.
const REREADS: usize = 20;
const REREAD_GAP: Duration = Duration::from_millis(25);
/// How many times a write is made again because the file changed under it.
const LAPS: usize = 2;
/// How long, and how many times, the end of a run waits for late writes.
const SETTLE_WAIT: Duration = Duration::from_millis(20);
pub(super) const SETTLE_ROUNDS: usize = 10;
/// Texts remembered to recognise an editor's copy of one of them.
const KNOWN: usize = 4;
/// How many pieces of brought-over text, for how long, are added again when a save drops them.
const CARRIED: usize = 64;
const CARRIED_FOR: Duration = Duration::from_secs(10);

impl PrdWriter {
    pub fn new(path: PathBuf, text: String) -> PrdWriter {
        let seen = crate::prd::parse_file(&path, text.clone())
            .map(|d| {
                d.criteria
                    .iter()
                    .map(|c| (c.id.clone(), bit(c.checked)))
                    .collect()
            })
            .unwrap_or_default();
        PrdWriter {
            path,
            last_written: text,
            seen,
            replaced: Vec::new(),
            known: VecDeque::new(),
            carried: VecDeque::new(),
        }
    }

    /// The PRD's text as prdloop last wrote or read it.
    pub fn last_written(&self) -> &str {
        &self.last_written
    }

    /// A cheap look (one `stat`) before workers start: the PRD must still be a file.
    pub fn check_present(&self, core: &Core) -> Option<SyncReport> {
        if core.broken().is_some() {
            return None;
        }
        match std::fs::metadata(&self.path) {
            Ok(m) if m.is_file() => None,
            Ok(_) => self.gone(core, Unreadable::NotAFile),
            Err(e) => self.gone(core, Unreadable::from(&e)),
        }
    }

    fn gone(&self, core: &Core, why: Unreadable) -> Option<SyncReport> {
        let broken = PrdBroken::Gone {
            path: self.path.clone(),
            why,
        };
        if core.broken() == Some(&broken) {
            return None;
        }
        Some(SyncReport {
            warnings: vec![Warning::Broken(broken.clone()).into()],
            broken: Some(Some(broken)),
            ..SyncReport::default()
        })
    }

    /// Whether something other than prdloop changed the PRD since prdloop last read or wrote
    /// it: the file is not the text left there, or a file a swap replaced was written into
    /// since. A look (a read, no parse) for a tick at which the run's own write is not due
    /// yet: an edit is merged at once, the run's ticks wait for their write.
    pub async fn outside_news(&mut self) -> bool {
        let moved = tokio::fs::read(&self.path)
            .await
            .map_or(true, |now| now != self.last_written.as_bytes());
        moved
            || self
                .replaced
                .iter_mut()
                .any(|r| read_back(&mut r.file).is_some_and(|now| now != r.seen))
    }

    /// Brings the PRD on disk up to date with the run and applies `edits` to its front matter.
    /// Returns what the run must hear about when the file had changed on disk, and the PRD as
    /// the run knows it now (`doc`) when it was read or written.
    pub async fn sync(
        &mut self,
        core: &Core,
        edits: &[(&str, Value)],
    ) -> Result<Option<SyncReport>> {
        let path = self.path.clone();
        let mut report = None;
        // What was written into files earlier swaps replaced, after they were read.
        let late = self.replaced_writes(&mut report);
        let (disk, src, parsed) = match self.read(core, &late).await {
            Ok(r) => r,
            Err(e) => {
                if !late.is_empty() {
                    warn(&mut report, self.keep_aside(&late, Unmerged::NotAdded));
                }
                let gone = self.gone(core, Unreadable::from(&e));
                return Ok(merge_reports(report, gone));
            }
        };
        self.remember(&disk);
        let doc = match parsed {
            None => core.doc().clone(),
            Some(Err(error)) => {
                if !late.is_empty() {
                    warn(&mut report, self.keep_aside(&late, Unmerged::NotAdded));
                }
                let broken = PrdBroken::Unparsable {
                    path: self.path.clone(),
                    error,
                };
                if core.broken() != Some(&broken) {
                    warn(&mut report, Warning::Broken(broken.clone()));
                }
                report.get_or_insert_with(SyncReport::default).broken = Some(Some(broken));
                return Ok(report);
            }
            Some(Ok(d)) => {
                tracing::info!("{} changed on disk; merging", path.display());
                if let Some(said) = self.vanished(core, &d, &path) {
                    return Ok(merge_reports(report, Some(said)));
                }
                let r = outside_edits(core, &d, &path, &self.seen);
                report = merge_reports(report, Some(r));
                d
            }
        };
        let mut admitted = new_boxes(core, &doc);
        let mut doc = self.apply(core, doc, edits)?;
        // Write, and bring over what others wrote meanwhile: nothing of theirs is lost.
        let mut src = src;
        let mut base = disk;
        for lap in 0..=LAPS {
            if doc.text() == base {
                break;
            }
            let staged = Staged::new(&path, doc.text().as_bytes())?;
            let added = match staged.exchange() {
                Ok(old) => {
                    // `old` is exactly the file ours replaced: it should hold `base`.
                    if let Some(f) = old {
                        self.replaced.push(Replaced {
                            file: f,
                            seen: base.clone(),
                            fresh: true,
                        });
                    }
                    self.remember(doc.text());
                    base = doc.text().to_string();
                    if lap == LAPS {
                        // Still changing: the rest comes over at the next sync.
                        break;
                    }
                    self.replaced_writes(&mut report)
                }
                Err(staged) => {
                    // No exchange here: compare just before the rename.
                    match std::fs::read_to_string(&path) {
                        Ok(now) if now != base => {
                            drop(staged);
                            if lap == LAPS {
                                // Theirs stays; the next sync merges onto it.
                                self.last_written = String::new();
                                return Ok(merge_reports(report, Some(written(doc, admitted))));
                            }
                            // Theirs is taken whole: the by-id merge keeps their text.
                            self.remember(&now);
                            base = now.clone();
                            src = String::new();
                            now
                        }
                        _ => {
                            staged.persist()?;
                            self.remember(doc.text());
                            break;
                        }
                    }
                }
            };
            if added.is_empty() {
                break;
            }
            tracing::info!(
                "{} changed while it was written; merging again",
                path.display()
            );
            let next = format!("{src}{added}");
            match core.doc().reparse(next.clone()) {
                Ok(d) if self.vanished(core, &d, &path).is_none() => {
                    let r = outside_edits(core, &d, &path, &self.seen);
                    report = merge_reports(report, Some(r));
                    admitted = new_boxes(core, &d);
                    doc = self.apply(core, d, edits)?;
                    src = next;
                }
                _ => {
                    warn(&mut report, self.keep_aside(&added, Unmerged::NotAdded));
                    break;
                }
            }
        }
        self.last_written = doc.text().to_string();
        Ok(merge_reports(report, Some(written(doc, admitted))))
    }

    /// After the last sync: a program that opened the PRD just before a swap may write into
    /// the replaced file a moment later, and an editor that read the PRD before the last write
    /// may save over it. Waits a moment, a few times ([`SETTLE_ROUNDS`], each round a call of
    /// this): late lines, and lines brought over that a save dropped, are appended to the PRD
    /// in place (no further swap, so this ends); a save over the PRD gets the boxes again.
    /// What a round found is for the core to apply before the next round.
    pub async fn settle_round(&mut self, core: &Core) -> Result<Settled> {
        let mut report = None;
        {
            tokio::time::sleep(SETTLE_WAIT).await;
            self.replaced_writes(&mut report);
            let Ok(text) = std::fs::read_to_string(&self.path) else {
                return Ok(Settled::Done(report));
            };
            if text != self.last_written && !text.starts_with(&self.last_written) {
                // Saved over by someone: merge as during the run.
                let r = self.sync(core, &[]).await?;
                return Ok(Settled::Again(merge_reports(report, r)));
            }
            let missing: String = self
                .carried
                .iter()
                .filter(|(piece, _)| !text.contains(piece.as_str()))
                .map(|(piece, _)| piece.as_str())
                .collect();
            if missing.is_empty() {
                self.last_written = text;
                if self.replaced.is_empty() {
                    return Ok(Settled::Done(report));
                }
                return Ok(Settled::Again(report));
            }
            let appended = std::fs::OpenOptions::new()
                .append(true)
                .open(&self.path)
                .and_then(|mut f| {
                    f.write_all(missing.as_bytes())?;
                    f.sync_all()
                });
            match appended {
                Ok(()) => self.last_written = format!("{text}{missing}"),
                Err(e) => {
                    tracing::debug!("could not append to {}: {e}", self.path.display());
                    warn(&mut report, self.keep_aside(&missing, Unmerged::NotAdded));
                    return Ok(Settled::Done(report));
                }
            }
        }
        Ok(Settled::Again(report))
    }

    /// Criteria of the run missing from `d`: `None` when none is; else the report naming them
    /// (warned about once per set of missing ids). A loss seen earlier that is over is said by
    /// the report of the write that follows.
    fn vanished(&self, core: &Core, d: &Prd, path: &std::path::Path) -> Option<SyncReport> {
        let missing: Vec<String> = core
            .doc()
            .criteria
            .iter()
            // A claim its author dropped (a tombstone now) has not vanished: it leaves the run.
            .filter(|c| d.criterion(&c.id).is_none() && !d.is_tombstone(&c.id))
            .map(|c| c.id.clone())
            .collect();
        if missing.is_empty() {
            return None;
        }
        let warnings = if core.vanished() == missing {
            Vec::new()
        } else {
            vec![
                Warning::Vanished {
                    path: path.to_path_buf(),
                    ids: missing.clone(),
                }
                .into(),
            ]
        };
        Some(SyncReport {
            warnings,
            vanished: Some(missing),
            ..SyncReport::default()
        })
    }

    /// The run's boxes and the front matter `edits` applied onto `doc`. New criteria (added by
    /// the user) join with their state on disk (the core admits them when it applies the
    /// report).
    fn apply(&mut self, core: &Core, mut doc: Prd, edits: &[(&str, Value)]) -> Result<Prd> {
        for c in &doc.criteria {
            if !self.seen.contains_key(&c.id) {
                self.seen.insert(c.id.clone(), bit(c.checked));
            }
        }
        let boxes = core.boxes_for(&doc);
        let ticks: Vec<(String, bool)> = doc
            .criteria
            .iter()
            // A parent its author ticked passes in the ledger (it was admitted so, and only the
            // run's own tick is taken back when a leaf fails): it stays ticked while its
            // leaves are worked on; one the run ticked opens again.
            .filter(|c| boxes(&c.id) != c.checked)
            .map(|c| (c.id.clone(), !c.checked))
            .collect();
        for (id, checked) in ticks {
            doc.set_checked(&id, checked);
            if let Some(s) = self.seen.get_mut(&id) {
                *s |= bit(checked);
            }
        }
        // The file as it is now (edits by others included) decides whether it may be marked
        // complete: with a box open, the completing edits are left out (set_front would
        // refuse them).
        let kept: Vec<(&str, Value)>;
        let edits = if doc.open_boxes().is_empty() && doc.fog.is_empty() {
            edits
        } else {
            kept = edits
                .iter()
                .filter(|(k, v)| !crate::prd::marks_complete(k, v))
                .cloned()
                .collect();
            &kept[..]
        };
        doc.set_front(edits).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}: {} (after an edit; nothing written)",
                self.path.display(),
                e.line,
                e.message
            )
        })?;
        Ok(doc)
    }

    /// What was written into files that swaps replaced since they were last read: lines to
    /// add to the PRD. Each is read once more at the sync after the one that replaced it (a
    /// program that opened it just before the swap may write a moment later), then let go.
    fn replaced_writes(&mut self, report: &mut Option<SyncReport>) -> String {
        let mut added = String::new();
        let mut held = std::mem::take(&mut self.replaced);
        for r in &mut held {
            let Some(now) = read_back(&mut r.file) else {
                continue;
            };
            if now != r.seen {
                let seen = std::mem::replace(&mut r.seen, now.clone());
                added.push_str(&self.added(&now, &seen, report));
                self.remember(&now);
            }
        }
        self.replaced = held
            .into_iter()
            .filter_map(|mut r| std::mem::take(&mut r.fresh).then_some(r))
            .collect();
        added
    }

    /// What `theirs` (a text found where `was` was expected) adds: when it extends `was` or
    /// another text prdloop knew (an append, or an editor saving a copy plus new lines), the
    /// lines added; any other change is kept beside the PRD with a warning (nothing lost).
    fn added(&mut self, theirs: &str, was: &str, report: &mut Option<SyncReport>) -> String {
        let from = std::iter::once(was)
            .chain(self.known.iter().map(String::as_str))
            .filter(|k| !k.is_empty() && theirs.starts_with(k))
            .map(str::len)
            .max();
        let added = match from {
            Some(n) => theirs[n..].to_string(),
            None => {
                warn(report, self.keep_aside(theirs, Unmerged::Conflicting));
                return String::new();
            }
        };
        if !added.is_empty() {
            self.carried.push_back((added.clone(), Instant::now()));
            while self.carried.len() > CARRIED
                || self
                    .carried
                    .front()
                    .is_some_and(|(_, at)| at.elapsed() > CARRIED_FOR)
            {
                self.carried.pop_front();
            }
        }
        added
    }

    /// A text that was at the PRD's path, for recognising copies of it.
    fn remember(&mut self, text: &str) {
        if self.known.front().is_some_and(|k| k == text) {
            return;
        }
        self.known.push_front(text.to_string());
        self.known.truncate(KNOWN);
    }

    /// Keeps a text someone wrote beside the PRD (nothing is lost); the warning to give.
    fn keep_aside(&self, text: &str, edit: Unmerged) -> Warning {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".prdloop-kept-{stamp}"));
        let aside = self.path.with_file_name(name);
        match write_atomic(&aside, text.as_bytes()) {
            Ok(()) => Warning::KeptAside {
                path: self.path.clone(),
                edit,
                aside,
            },
            Err(e) => Warning::NotKeptAside {
                path: self.path.clone(),
                edit,
                error: format!("{e:#}"),
                text: text.to_string(),
            },
        }
    }

    /// Reads the PRD: the text on disk, the text to merge onto (with `late` lines appended),
    /// and `None` when it is as prdloop left it, else its parse. A text that does not parse,
    /// or lacks criteria of the run, is read again a few times first: it may be half-written
    /// by a program that does not write atomically.
    async fn read(
        &self,
        core: &Core,
        late: &str,
    ) -> std::io::Result<(String, String, Option<Result<Prd, ParseError>>)> {
        let mut last = None;
        for attempt in 0..=REREADS {
            if attempt > 0 {
                tokio::time::sleep(REREAD_GAP).await;
            }
            let text = tokio::fs::read_to_string(&self.path).await?;
            if late.is_empty() && text == self.last_written {
                return Ok((text.clone(), text, None));
            }
            let mut src = text.clone();
            if text == self.last_written {
                src.push_str(late);
            } else {
                // Someone saved the file: what they saved may hold late lines already (an
                // editor read them before the swap), or drop text prdloop brought over a
                // moment ago (it read a copy from before): each piece is added once.
                for piece in late.split_inclusive('\n') {
                    if !src.contains(piece) {
                        src.push_str(piece);
                    }
                }
                for (piece, _) in &self.carried {
                    if !src.contains(piece.as_str()) {
                        src.push_str(piece);
                    }
                }
            }
            match core.doc().reparse(src.clone()) {
                Ok(d)
                    if core
                        .doc()
                        .criteria
                        .iter()
                        .all(|c| d.criterion(&c.id).is_some() || d.is_tombstone(&c.id)) =>
                {
                    return Ok((text, src, Some(Ok(d))));
                }
                Ok(d) => last = Some((text, src, Ok(d))),
                Err(e) => last = Some((text, src, Err(e))),
            }
        }
        let (text, src, parsed) = last.expect("read at least once");
        Ok((text, src, Some(parsed)))
    }
}

/// What one round of [`PrdWriter::settle_round`] came to.
pub enum Settled {
    /// Nothing more to wait for.
    Done(Option<SyncReport>),
    /// Another round is due (after the core applied this).
    Again(Option<SyncReport>),
}

/// The criteria of `doc` (a text read, before the run's boxes are applied to it) that the run
/// has not admitted yet, with their boxes as read: the core admits them so, not as written (a
/// parent added over passing leaves is ticked by the run, not by its author).
fn new_boxes(core: &Core, doc: &Prd) -> Vec<(String, bool)> {
    doc.criteria
        .iter()
        .filter(|c| core.ledger().get(&c.id).is_none())
        .map(|c| (c.id.clone(), c.checked))
        .collect()
}

/// The report of a write (or a merge read from disk) of `doc`: the run's PRD now, readable;
/// `admitted`: its criteria new to the run, with their boxes as read.
fn written(doc: Prd, admitted: Vec<(String, bool)>) -> SyncReport {
    SyncReport {
        doc: Some(doc),
        admitted,
        broken: Some(None),
        vanished: Some(Vec::new()),
        ..SyncReport::default()
    }
}

fn merge_reports(a: Option<SyncReport>, b: Option<SyncReport>) -> Option<SyncReport> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            a.warnings.extend(b.warnings);
            a.request = a.request.or(b.request);
            a.changed_on_disk |= b.changed_on_disk;
            if b.doc.is_some() {
                a.admitted = b.admitted;
            }
            a.doc = b.doc.or(a.doc);
            a.broken = b.broken.or(a.broken);
            a.vanished = b.vanished.or(a.vanished);
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn outside_news_is_a_change_someone_else_made_to_the_prd() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("PRD.md");
        let text = "# T\n\n## CRITERIA\n\n- [ ] ISC-A-1: a\n";
        std::fs::write(&path, text).unwrap();
        let mut w = PrdWriter::new(path.clone(), text.to_string());
        // As prdloop left it: nothing to merge, the run's own write can wait.
        assert!(!w.outside_news().await);
        // An edit of the same size, an append, the file gone: each is news.
        std::fs::write(&path, text.replace("- [ ]", "- [x]")).unwrap();
        assert!(w.outside_news().await);
        std::fs::write(&path, format!("{text}- [ ] ISC-A-2: b\n")).unwrap();
        assert!(w.outside_news().await);
        std::fs::remove_file(&path).unwrap();
        assert!(w.outside_news().await);
    }
}
