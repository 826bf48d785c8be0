//! A receipt for every tick: what earned it, on which tree, by whom, at what cost. Kept in
//! the state file (`receipt` of each criterion, beside PAI's keys) and in `attempts.jsonl`;
//! `prdloop audit` re-runs the `checked` ones.

use super::Evidence;

/// What earned one tick.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub evidence: Evidence,
    /// `checked`: the command the runner ran, how it ended and a digest of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckReceipt>,
    /// `reviewed`: the verifier's verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewReceipt>,
    /// The attempt's commit (isolated workers): its tree is what was checked; and the base
    /// it was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The worker's agent and model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The worker's tokens (in + out) and cost.
    pub tokens: u64,
    pub cost_usd: f64,
    pub at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReceipt {
    pub command: String,
    /// Its exit, as the attempts log has exits.
    pub exit: serde_json::Value,
    pub duration_ms: u64,
    /// SHA-256 of its log (its whole output), hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_sha256: Option<String>,
    pub log: String,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewReceipt {
    /// The verifier's set-up (`claude`, `codex:o4`).
    pub setup: String,
    /// The user named it (`--verifier`). A review by a `command` worker's own set-up that
    /// the user did not name (receipts of older versions) is the worker's own say-so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub named: bool,
    /// `pass`, `fail`, or `none` (no verdict could be had).
    pub verdict: String,
    /// The evidence it gave, cut short.
    pub evidence: String,
    pub log: String,
    pub tokens: u64,
    pub cost_usd: f64,
}

/// SHA-256 of a file, hex; `None` when it cannot be read.
pub fn digest(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    hex_sha256(|| {
        let n = f.read(&mut buf)?;
        Ok(buf[..n].to_vec())
    })
}

/// The same of a log (kept in its folder's output log, [`crate::worker::output_log`]).
pub fn log_digest(path: &std::path::Path) -> Option<String> {
    let mut log = crate::worker::output_log::Follow::open(path).ok()?;
    hex_sha256(|| log.next(64 * 1024))
}

/// The SHA-256 of the pieces `next` gives until an empty one, in hex.
fn hex_sha256(mut next: impl FnMut() -> std::io::Result<Vec<u8>>) -> Option<String> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    loop {
        let piece = next().ok()?;
        if piece.is_empty() {
            break;
        }
        h.update(&piece);
    }
    Some(
        h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
    )
}

impl ReviewReceipt {
    /// The record of a review.
    pub fn of(r: &crate::evidence::verifier::Review) -> ReviewReceipt {
        use crate::evidence::verifier::ReviewOutcome;
        let (verdict, evidence) = match &r.outcome {
            ReviewOutcome::Agreed { evidence } => ("pass", evidence.clone()),
            ReviewOutcome::Disagreed { reasons } => ("fail", reasons.clone()),
            ReviewOutcome::NoVerdict(why) => ("none", why.clone()),
        };
        ReviewReceipt {
            setup: r.setup.clone(),
            named: r.named,
            verdict: verdict.into(),
            evidence,
            log: r.log.display().to_string(),
            tokens: r.usage.input_tokens + r.usage.output_tokens,
            cost_usd: r.cost,
        }
    }
}

impl Receipt {
    /// The evidence it really is: a review of a `command` worker by its own program (one the
    /// user did not name as `--verifier`) is only the worker's claim.
    pub fn evidence(&self) -> Evidence {
        let own_program = self.agent.as_deref() == Some(crate::backend::Agent::Command.name())
            && self.review.as_ref().is_some_and(|r| !r.named);
        match self.evidence {
            Evidence::Reviewed if own_program => Evidence::Claimed,
            e => e,
        }
    }
}

impl CheckReceipt {
    /// The record of a check that ran.
    pub fn of(c: &crate::verify::Check) -> CheckReceipt {
        CheckReceipt {
            command: c.command.clone(),
            exit: serde_json::to_value(&c.exit).unwrap_or_default(),
            duration_ms: c.duration.as_millis() as u64,
            output_sha256: log_digest(&c.log),
            log: c.log.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_workers_review_by_its_own_program_is_only_a_claim() {
        let review = |named| ReviewReceipt {
            setup: "command".into(),
            named,
            verdict: "pass".into(),
            evidence: String::new(),
            log: "v.log".into(),
            tokens: 0,
            cost_usd: 0.0,
        };
        let receipt = |agent: &str, named| Receipt {
            evidence: Evidence::Reviewed,
            check: None,
            review: Some(review(named)),
            commit: None,
            base: None,
            agent: Some(agent.into()),
            model: None,
            tokens: 0,
            cost_usd: 0.0,
            at_ms: 0,
        };
        // Receipts of older versions: no `named`, the worker's own program reviewed.
        let old: Receipt = serde_json::from_value(serde_json::json!({
            "evidence": "reviewed", "agent": "command", "tokens": 0, "costUsd": 0.0, "atMs": 0,
            "review": {"setup": "command", "verdict": "pass", "evidence": "", "log": "v.log",
                       "tokens": 0, "costUsd": 0.0},
        }))
        .unwrap();
        assert_eq!(old.evidence(), Evidence::Claimed);
        assert_eq!(receipt("command", false).evidence(), Evidence::Claimed);
        assert_eq!(receipt("command", true).evidence(), Evidence::Reviewed);
        assert_eq!(receipt("claude", false).evidence(), Evidence::Reviewed);
    }
}
