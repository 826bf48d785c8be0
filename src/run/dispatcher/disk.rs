//! The dispatcher's side of the files: the request file and the PRD read on each tick, the
//! PRD and the state file written (coalesced), the question book read when it changed, the
//! session's name.

use super::*;

impl Dispatcher {
    /// Reads the request file and the PRD: what they say, as events.
    pub(super) async fn poll(&mut self) -> Result<Vec<LoopEvent>> {
        let mut events = Vec::new();
        let path = self.core.own().request.clone();
        if let Ok(text) = tokio::fs::read_to_string(&path).await {
            let _ = tokio::fs::remove_file(&path).await;
            events.extend(request_of(&text).map(LoopEvent::Request));
        }
        if let Some(news) = self.group.as_mut().and_then(|g| g.news()) {
            events.push(LoopEvent::SubLoopNews(news));
        }
        if let Some(book) = self.read_book() {
            events.push(LoopEvent::Questions(book));
        }
        if self.flush_at.is_some() || !self.front.is_empty() || self.dirty {
            // The run's own write waits for its time (the coalescing gap, which grows with
            // what a write costs), unless someone changed the PRD: that is merged now.
            let due = self.flush_at.is_none_or(|at| at <= Instant::now());
            if due || self.writer.outside_news().await {
                events.extend(self.flush().await?);
            }
        } else {
            // Nothing of ours to write: only a look for edits made by others.
            let report = self.writer.sync(&self.core, &[]).await?;
            events.extend(report.and_then(|r| self.synced(r)));
        }
        if self.last_save.elapsed() >= STATE_HEARTBEAT {
            self.save_state();
        }
        if let Some(w) = self.notifier.take_warning() {
            self.say(RunEvent::Warning(w.into()));
        }
        Ok(events)
    }

    /// Writes what changed: the PRD (merging edits made meanwhile) and the state file. What
    /// the PRD on disk showed comes back as an event.
    pub async fn flush(&mut self) -> Result<Option<LoopEvent>> {
        let began = Instant::now();
        self.flush_at = None;
        // Landings whose passes the core has taken (a landing's event reaches the core before
        // any flush, and the attempts log is written as the core hands it out): owed no more
        // once this write of the PRD and the state file is done.
        let owed = self.core.iso().map(|i| i.owed()).unwrap_or_default();
        let mut front = std::mem::take(&mut self.front);
        let (p, t) = self.core.progress();
        front.extend(crate::run::front::progress(self.core.doc(), p, t));
        // What the sync found is taken before the state is saved: the state describes the
        // PRD just written (its hash is of that text).
        let event = match self.writer.sync(&self.core, &front).await {
            Ok(report) => Ok(report.and_then(|r| self.synced(r))),
            Err(e) => Err(e),
        };
        let synced = began.elapsed();
        // The state file is rewritten when the run changed, and at least every 30 s so that
        // PAI's hook never takes a long run for a dead one; also when the PRD could not be
        // written, so that the results are kept somewhere.
        let save = self.dirty || !owed.is_empty() || event.is_err();
        let saved = if save || self.last_save.elapsed() >= STATE_HEARTBEAT {
            self.save_state()
        } else {
            true
        };
        if !owed.is_empty()
            && saved
            && event.is_ok()
            && self.core.broken().is_none()
            && let Some(iso) = self.core.iso().cloned()
        {
            for w in iso.settle(&owed) {
                self.say(RunEvent::Warning(w.into()));
            }
        }
        self.flush_gap = COALESCE.max(began.elapsed() * FLUSH_SHARE);
        tracing::debug!("flush: PRD {synced:?}, total {:?}", began.elapsed());
        event
    }

    /// Takes what a sync of the PRD found: the run's model of the PRD is brought up to date at
    /// once (nothing may read the PRD as it was before the write); what the run must hear
    /// about (warnings, a request, an edit by someone else) comes back as an event.
    pub(super) fn synced(&mut self, mut report: SyncReport) -> Option<LoopEvent> {
        let admitted = std::mem::take(&mut report.admitted);
        self.core.take_sync(
            report.doc.take(),
            &admitted,
            report.broken.take(),
            report.vanished.take(),
        );
        let news =
            !report.warnings.is_empty() || report.request.is_some() || report.changed_on_disk;
        news.then(|| LoopEvent::Disk(Box::new(report)))
    }

    /// The question book, when it changed since it was last read (`None` otherwise).
    pub(super) fn read_book(&mut self) -> Option<crate::questions::Book> {
        let modified = std::fs::metadata(self.core.book_path())
            .and_then(|m| Ok((m.modified()?, m.len())))
            .ok();
        if modified.is_none() || modified == self.book_seen {
            return None;
        }
        self.book_seen = modified;
        Some(crate::questions::load(self.core.book_path()))
    }

    /// Saves the state file; whether it was written.
    pub(super) fn save_state(&mut self) -> bool {
        self.last_save = Instant::now();
        self.dirty = false;
        let doc = self
            .core
            .state_document(self.writer.last_written(), Now::current());
        match self.store.save(&doc) {
            Some(w) => {
                self.say(w);
                false
            }
            None => true,
        }
    }

    pub(super) fn set_name(&mut self, end: Option<End>) {
        let name = self.core.session_name(end);
        if let Some(w) = self.store.set_name(self.core.session(), &name) {
            self.say(w);
        }
    }
}
