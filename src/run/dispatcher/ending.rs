//! How a run ends: the last front matter, state, summary and notification; a run that failed;
//! the third Ctrl-C.

use super::*;

impl Dispatcher {
    /// The run's end: front matter, state, summary, session name, notification.
    pub async fn finish(&mut self, end: End) -> Result<()> {
        let now = Now::current();
        // The summary (and the JSON `end` event) only once the PRD and state say so.
        let summary = self.core.summary(end, now);
        let effects = self.core.finish(end, now);
        self.execute(effects).await?;
        // A line written into the file the last write replaced is brought over.
        for _ in 0..crate::run::prd_writer::SETTLE_ROUNDS {
            let (report, again) = match self.writer.settle_round(&self.core).await? {
                Settled::Done(report) => (report, false),
                Settled::Again(report) => (report, true),
            };
            if let Some(e) = report.and_then(|r| self.synced(r))
                && let LoopEvent::Disk(report) = e
            {
                // The run is over: what someone asked in the PRD now is not acted on.
                for w in report.warnings {
                    self.say(RunEvent::Warning(w));
                }
            }
            if !again {
                break;
            }
        }
        if let Some(g) = &self.group {
            g.keep_summary(&summary);
        }
        self.say(RunEvent::Finished(Box::new(summary)));
        self.set_name(Some(end));
        self.notifier.send(
            Note::new(
                Kind::of_end(end),
                self.core.end_notification(end),
                self.core.progress(),
            )
            .cost(self.core.ledger().total_cost)
            .end(end),
        );
        // Fire and forget, but give the last messages time to leave, up to a bound (less
        // when the user is waiting on Ctrl-C); what is still queued then is dropped, and
        // said.
        let bound = if end == End::Interrupted { 300 } else { 3000 };
        let dropped = self.notifier.finish(Duration::from_millis(bound));
        if let Some(w) = self.notifier.take_warning() {
            self.say(RunEvent::Warning(w.into()));
        }
        if dropped > 0 {
            self.say(RunEvent::Warning(
                crate::run::warning::Warning::NotificationsDropped {
                    dropped,
                    bound_ms: bound,
                },
            ));
        }
        Ok(())
    }

    /// After an error: the PRD and the state say the run failed, as far as they can be written.
    pub async fn fail(&mut self, e: &anyhow::Error) {
        self.front
            .extend(crate::run::front::loop_status(self.core.doc(), "failed"));
        let _ = self.flush().await;
        self.core.failed(e);
        self.save_state();
        self.remove_worktrees().await;
    }

    /// The third Ctrl-C: every worker's group killed, the front matter edits written (the
    /// core's `loopStatus: paused` among them), the JUnit report written, exit now.
    pub(super) async fn exit_now(&mut self) {
        for pid in self.handles.values().filter_map(|h| h.pid) {
            platform::kill_group(pid);
        }
        // The process exits: the other sub-loops' workers go too.
        for pid in self.group.iter().flat_map(|g| g.all_pids()) {
            platform::kill_group(pid);
        }
        let _ = self.flush().await;
        self.core.exiting();
        self.save_state();
        // The run's summary as it stands, for the report only: the state is saved above
        // and is not written again.
        let summary = self.core.summary(End::Interrupted, Now::current());
        self.reporter.exit_now(&summary);
        if let Some(l) = self.lock.take() {
            l.release();
        }
        std::process::exit(i32::from(exit::Exit::Interrupted.code()));
    }
}
