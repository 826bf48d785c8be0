//! A pass's bookkeeping kept with its landing: the record made before the work lands (the
//! attempt, its receipt), which the landing's journal carries ([`crate::isolation::owed`]);
//! and, after a crash that came between the landing and the writing of that bookkeeping, the
//! pass credited from it, once: the ledger (the state file and the PRD's tick follow it), and
//! the attempts log unless it holds the attempt already.

use crate::run::warning::Warning;
use std::path::PathBuf;

use super::{Core, Now};
use crate::isolation::owed::Recovered;
use crate::run::event::{Ending, RunEvent, WorkerDone};
use crate::run::judge::Judgement;
use crate::run::reason::Notice;
use crate::state::{AttemptRecord, AttemptVerdict, Evidence};

/// The run's record of a pass whose work is landing.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PassRecord {
    /// The session whose worker passed, and its attempts log.
    session: String,
    attempts_log: PathBuf,
    evidence: Evidence,
    /// The attempt as the attempts log keeps it, with its receipt.
    attempt: AttemptRecord,
}

/// What crediting a recovered pass comes to: what to tell, and the attempt to append to an
/// attempts log (which does not hold it yet).
pub(in crate::run) struct Credited {
    pub said: Vec<RunEvent>,
    pub append: Option<(PathBuf, AttemptRecord)>,
}

impl Core {
    /// The record of `d`'s pass, for its landing to keep until the pass is written (`None`
    /// for an attempt that does not pass).
    pub(in crate::run) fn credit_of(&self, d: &WorkerDone, now: Now) -> Option<serde_json::Value> {
        let by = match &d.judgement {
            Judgement::Pass(by) => *by,
            Judgement::PassUnverifiable(_) => Evidence::Claimed,
            _ => return None,
        };
        let ran = d.ran.as_ref().ok()?;
        let (spent, _) = super::apply::spent_of(d);
        let attempt = self.record(d, &Ending::Pass(by), &spent, &ran.finished, now);
        serde_json::to_value(PassRecord {
            session: self.session.clone(),
            attempts_log: self.attempts_log(),
            evidence: by,
            attempt,
        })
        .ok()
    }

    /// A pass whose work landed before a crash, and whose bookkeeping may not have been
    /// written, credited now: counted as its session's attempt when this run continues that
    /// session and neither the PRD's box nor the restored state has it yet, else as a pass
    /// recorded before. (What the attempt cost is in its attempts log, not in this run's
    /// totals.)
    pub(in crate::run) fn credit_recovered(&mut self, r: Recovered) -> Credited {
        let mut said = Vec::new();
        let p: PassRecord = match serde_json::from_value(r.record) {
            Ok(p) => p,
            Err(e) => {
                said.push(RunEvent::Warning(Warning::RecoveredUnreadable {
                    label: r.label,
                    error: e.to_string(),
                }));
                return Credited { said, append: None };
            }
        };
        let id = p.attempt.criterion.clone();
        let Some(ticked) = self.doc.criterion(&id).map(|c| c.checked) else {
            said.push(RunEvent::Warning(Warning::RecoveredGone { id }));
            return Credited { said, append: None };
        };
        let log = PathBuf::from(&p.attempt.log);
        self.ledger.landed(&id, r.landing.clone());
        if let Some(receipt) = p.attempt.receipt.clone() {
            self.ledger.set_receipt(&id, receipt);
        }
        // Counted once: not when the PRD or the restored state has it already.
        if p.session == self.session && !ticked && !self.ledger.passing(&id) {
            self.ledger.attempt_passed(&id, p.evidence, log);
        } else {
            self.ledger.recorded_pass(&id, p.evidence);
            self.ledger.set_last_log(&id, log);
        }
        let brief = r.landing.brief();
        let mut attempt = p.attempt;
        attempt.landing = Some(r.landing);
        let held = crate::state::read_attempts(&p.attempts_log)
            .iter()
            .any(|a| a.log == attempt.log && a.verdict == AttemptVerdict::Pass);
        said.push(RunEvent::Notice(Notice::Said(format!(
            "{id}'s work landed before the run was cut short ({}); its pass is credited now",
            brief
        ))));
        Credited {
            said,
            append: (!held).then_some((p.attempts_log, attempt)),
        }
    }
}
