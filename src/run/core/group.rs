//! Another sub-loop's news, applied to this run.

use super::{Core, Now};
use crate::run::event::News;
use crate::run::event::{Effects, Flush, RunEvent};
use crate::run::reason::StopReason;
use crate::worker::Cancel;

impl Core {
    /// Another sub-loop's news: its agent cannot work (this one stops too), or it paused for a
    /// limit (this one waits as long).
    pub(in crate::run) fn group_news(&mut self, news: &News, now: Now) -> Effects {
        let mut r = Effects::default();
        if let Some((prd, what)) = &news.fatal {
            let what = StopReason::AgentFailureElsewhere {
                prd: prd.clone(),
                reason: Box::new(what.clone()),
            };
            let said = format!("{what}; stopping this PRD too");
            if self.brakes.stop_for(what) {
                r.say(RunEvent::Error(said));
                r.cancel(Cancel::Graceful);
            }
        }
        if let Some((until, prd)) = &news.pause
            && *until > now.at
            && let delay = *until - now.at
            && let until_ms = now.ms + delay.as_millis() as u64
            && self.brakes.pause_to(*until, until_ms)
        {
            r.say(RunEvent::Paused {
                label: format!("a rate or usage limit in {prd} (all PRDs wait)"),
                until_ms,
                delay,
            });
            r.flush(Flush::Soon);
        }
        r
    }
}
