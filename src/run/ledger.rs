//! The ledger: the one place where the run's accounts are kept. Per criterion: whether it
//! passes (the tick state, held only here), its attempts, failures, cost, tokens and time;
//! for the run: totals. Every change to them goes through its methods.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::backend::{AgentFailure, Usage};
use crate::state::{CriterionState, Evidence, SessionState};

/// What the run knows of one criterion.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Whether its box is (to be) ticked: the tick state prdloop manages.
    pub passing: bool,
    /// Attempts that counted (agent failures do not).
    pub attempts: u32,
    pub last_failure: Option<String>,
    /// The last counted failure had a worker ended by `--stuck-after`: the next prompt says
    /// not to repeat its calls. Set with `last_failure`, by [`Ledger::attempt_failed`] only.
    pub last_failure_stuck: bool,
    pub last_log: Option<PathBuf>,
    pub cost: f64,
    pub usage: Usage,
    pub turns: u64,
    /// Time its workers ran, summed.
    pub time: Duration,
    /// Passed in this run, by a worker.
    pub passed_in_run: bool,
    /// Ticked during this run (by a worker or a check): its regressions are the run's to find.
    pub ticked_in_run: bool,
    /// How the current tick was established (`None`: ticked before the run).
    pub verified_by: Option<Evidence>,
    pub regressions: u32,
    pub last_agent_failure: Option<String>,
    pub agent_failures: u32,
    /// Agent failures since the last attempt that counted (the tries of the next attempt).
    pub agent_failures_this_attempt: u32,
    /// Failure reasons of the attempts that counted, oldest first.
    pub failures: Vec<String>,
    /// Workers that ran for it (in this session and, on `resume`, the ones before) and their
    /// time: what its next worker is expected to take.
    pub ran: u32,
    pub ran_for: Duration,
    /// With isolated workers: what became of its last passing attempt's work.
    pub landing: Option<crate::isolation::Landing>,
    /// Best-of-N: the sample that won it.
    pub won_by: Option<String>,
    /// What earned its current tick in this run.
    pub receipt: Option<crate::evidence::receipt::Receipt>,
}

pub use super::spend::Spent;

/// Why a counted attempt failed, as the ledger keeps it: its text (in the state file, the
/// summary and the next prompt) and whether a worker of it was ended as stuck.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Failure {
    pub text: String,
    pub stuck: bool,
}

impl Failure {
    pub fn of(reason: &super::reason::FailReason) -> Failure {
        Failure {
            text: reason.to_string(),
            stuck: reason.is_stuck(),
        }
    }

    /// The failures of one attempt's samples, as one: their texts joined, stuck if one was.
    pub fn joined(parts: &[Failure]) -> Failure {
        Failure {
            text: parts
                .iter()
                .map(|f| f.text.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            stuck: parts.iter().any(|f| f.stuck),
        }
    }
}

/// The run's accounts.
#[derive(Debug, Default)]
pub struct Ledger {
    records: HashMap<String, Record>,
    pub total_cost: f64,
    pub usage: Usage,
    /// Workers that ran to an end (not cancelled), for estimating the next one.
    pub workers_done: u32,
    pub worker_time: Duration,
    /// The verifier's runs and what they cost, apart from the workers'.
    pub reviews: u32,
    pub review_cost: f64,
    pub review_usage: Usage,
    /// What the workers cost and passed, per domain and set-up.
    pub spend: super::spend::SpendBook,
}

impl Ledger {
    /// A criterion the run has not seen yet joins with the state of its box on disk.
    pub fn admit(&mut self, id: &str, checked: bool) {
        if !self.records.contains_key(id) {
            self.records.insert(
                id.to_string(),
                Record {
                    passing: checked,
                    ..Record::default()
                },
            );
        }
    }

    pub fn get(&self, id: &str) -> Option<&Record> {
        self.records.get(id)
    }

    /// What became of a passing attempt's work (isolated workers).
    pub fn landed(&mut self, id: &str, landing: crate::isolation::Landing) {
        self.rec(id).landing = Some(landing);
    }

    /// Best-of-N: which sample won it.
    pub fn won_by(&mut self, id: &str, sample: String) {
        self.rec(id).won_by = Some(sample);
    }

    fn rec(&mut self, id: &str) -> &mut Record {
        self.records.entry(id.to_string()).or_default()
    }

    pub fn passing(&self, id: &str) -> bool {
        self.records.get(id).is_some_and(|r| r.passing)
    }

    /// The attempt number the next worker for `id` gets.
    pub fn next_attempt(&self, id: &str) -> u32 {
        self.records.get(id).map_or(1, |r| r.attempts + 1)
    }

    /// Money, tokens and time of a worker that ran, whatever its verdict.
    pub fn spend(&mut self, id: &str, s: Spent) {
        self.total_cost += s.cost;
        self.usage.add(&s.usage);
        if let Some((cost, usage)) = s.review {
            self.reviews += 1;
            self.review_cost += cost;
            self.review_usage.add(&usage);
        }
        let r = self.rec(id);
        r.cost += s.cost;
        r.usage.add(&s.usage);
        r.turns += s.turns;
        r.time += s.time;
        r.ran += 1;
        r.ran_for += s.time;
    }

    /// A worker that ran to its end counts towards the estimates of the next one's cost and
    /// time.
    pub fn worker_ran(&mut self, time: Duration) {
        self.workers_done += 1;
        self.worker_time += time;
    }

    /// What earned a pass's tick.
    pub fn set_receipt(&mut self, id: &str, receipt: crate::evidence::receipt::Receipt) {
        self.rec(id).receipt = Some(receipt);
    }

    /// A counted attempt that passed.
    pub fn attempt_passed(&mut self, id: &str, by: Evidence, log: PathBuf) {
        let r = self.rec(id);
        r.attempts += 1;
        r.agent_failures_this_attempt = 0;
        r.last_failure = None;
        r.last_failure_stuck = false;
        r.last_log = Some(log);
        r.passed_in_run = true;
        r.ticked_in_run = true;
        r.verified_by = Some(by);
        r.passing = true;
    }

    /// A pass an earlier session of this run recorded (for `resume`).
    pub fn recorded_pass(&mut self, id: &str, by: Evidence) {
        let r = self.rec(id);
        r.passing = true;
        r.ticked_in_run = true;
        r.verified_by = Some(by);
    }

    /// The log of its last worker (one that did not count as an attempt: a question).
    pub fn set_last_log(&mut self, id: &str, log: PathBuf) {
        self.rec(id).last_log = Some(log);
    }

    /// A counted attempt that failed.
    pub fn attempt_failed(&mut self, id: &str, failure: Failure, log: Option<PathBuf>) {
        let r = self.rec(id);
        r.attempts += 1;
        r.agent_failures_this_attempt = 0;
        r.failures.push(failure.text.clone());
        r.last_failure = Some(failure.text);
        r.last_failure_stuck = failure.stuck;
        if log.is_some() {
            r.last_log = log;
        }
    }

    /// An agent failure: no attempt counted; `text` is its one-line description.
    pub fn agent_failed(&mut self, id: &str, failure: &AgentFailure, text: String, log: PathBuf) {
        let r = self.rec(id);
        r.agent_failures += 1;
        r.agent_failures_this_attempt += 1;
        r.last_agent_failure = Some(text.clone());
        r.last_log = Some(log);
        if !failure.kind.is_transient() {
            // Why the last try came to nothing helps the next prompt.
            r.last_failure = Some(text);
            r.last_failure_stuck = false;
        }
    }

    /// A Verify command run by the runner passed: the box is ticked, checked.
    pub fn check_passed(&mut self, id: &str) {
        let r = self.rec(id);
        r.ticked_in_run |= !r.passing;
        r.passing = true;
        r.verified_by = Some(Evidence::Checked);
    }

    /// A parent of split ids whose leaves all pass: it passes with them (no worker, no check).
    pub fn leaves_passed(&mut self, id: &str) {
        let r = self.rec(id);
        r.ticked_in_run |= !r.passing;
        r.passing = true;
    }

    /// A parent the run ticked whose leaves no longer all pass (one regressed): open again.
    pub fn leaves_failed(&mut self, id: &str) {
        let r = self.rec(id);
        r.passing = false;
        r.ticked_in_run = false;
    }

    /// A check failed on a box the author ticked: the tick stays, but it is not "checked".
    pub fn check_disputed(&mut self, id: &str) {
        self.rec(id).verified_by = None;
    }

    /// A Verify command run by the runner failed. `regressed` when it unticks a ticked box.
    pub fn check_failed(&mut self, id: &str, reason: String, regressed: bool) {
        let r = self.rec(id);
        if regressed {
            r.regressions += 1;
        }
        r.last_failure = Some(reason);
        r.last_failure_stuck = false;
        r.verified_by = None;
        r.passing = false;
    }

    /// Takes over an earlier session's history (attempts, reasons, cost) for `resume`.
    pub fn restore(&mut self, prev: &SessionState) {
        for c in &prev.criteria {
            let r = self.rec(&c.id);
            r.attempts = c.attempts;
            r.last_failure = c.last_failure.clone();
            r.last_log = c.last_log.as_ref().map(PathBuf::from);
            r.cost = c.cost_usd;
            r.usage = c.usage;
            r.turns = c.turns;
            r.verified_by = c.verified_by.filter(|v| *v != Evidence::Before);
            // A tick the earlier session of this run made is the run's, not the author's:
            // its regressions are still the run's to find.
            r.ticked_in_run =
                c.status == crate::state::CriterionStatus::Completed && r.verified_by.is_some();
            r.regressions = c.regressions;
            r.last_agent_failure = c.last_agent_failure.clone();
            r.agent_failures = c.agent_failures;
        }
        self.spend.restore(&prev.spend);
        self.total_cost = prev.total_cost_usd;
        self.usage = prev.usage;
        self.reviews = prev.reviews;
        self.review_cost = prev.review_cost_usd;
        self.learn_durations(prev);
    }

    /// What each attempt of an earlier session took (its attempts log), for scheduling the
    /// longest work first: a fresh run of the PRD learns from its last session this way, a
    /// resumed one from the session it continues. Nothing else of that session is taken.
    pub fn learn_durations(&mut self, earlier: &SessionState) {
        if earlier.attempts_log.is_empty() {
            return;
        }
        for a in crate::state::read_attempts(std::path::Path::new(&earlier.attempts_log)) {
            let r = self.rec(&a.criterion);
            r.ran += 1;
            r.ran_for += Duration::from_millis(a.finished_at.saturating_sub(a.started_at));
        }
    }

    /// Expected duration in ms of the next worker of each criterion in `items` (id, domain),
    /// from what ran: the larger of its own mean and its domain's mean (an attempt that failed
    /// at once says little about the one that will work), else the run's mean. Empty when
    /// nothing ran yet: then every criterion weighs the same.
    pub fn expected_ms(&self, items: &[(&str, &str)]) -> HashMap<String, u64> {
        let mean = |t: Duration, n: u32| (n > 0).then(|| t.as_millis() as u64 / u64::from(n));
        let mut domains: HashMap<&str, (Duration, u32)> = HashMap::new();
        let (mut all_t, mut all_n) = (Duration::ZERO, 0u32);
        for (id, domain) in items {
            if let Some(r) = self.records.get(*id).filter(|r| r.ran > 0) {
                let d = domains.entry(domain).or_default();
                d.0 += r.ran_for;
                d.1 += r.ran;
                all_t += r.ran_for;
                all_n += r.ran;
            }
        }
        let Some(overall) = mean(all_t, all_n) else {
            return HashMap::new();
        };
        items
            .iter()
            .map(|(id, domain)| {
                let own = self.records.get(*id).and_then(|r| mean(r.ran_for, r.ran));
                let dom = domains.get(domain).and_then(|(t, n)| mean(*t, *n));
                let ms = match (own, dom) {
                    (Some(o), Some(d)) => o.max(d),
                    (o, d) => o.or(d).unwrap_or(overall),
                };
                (id.to_string(), ms.max(1))
            })
            .collect()
    }

    /// Attempts that counted, over every criterion.
    pub fn attempts(&self) -> u32 {
        self.records.values().map(|r| r.attempts).sum()
    }

    pub fn passed_in_run(&self) -> usize {
        self.records.values().filter(|r| r.passed_in_run).count()
    }

    /// The state file's view of one criterion.
    pub fn criterion_state(&self, c: &crate::prd::Criterion, running: bool) -> CriterionState {
        use crate::state::CriterionStatus as S;
        let none = Record::default();
        let rec = self.records.get(&c.id).unwrap_or(&none);
        let status = if running {
            S::InProgress
        } else if rec.passing {
            S::Completed
        } else if rec.attempts > 0 {
            S::Failed
        } else {
            S::Pending
        };
        CriterionState {
            id: c.id.clone(),
            description: c.description.clone(),
            kind: if c.anti {
                "anti-criterion"
            } else {
                "criterion"
            }
            .into(),
            status,
            created_in_phase: "OBSERVE".into(),
            attempts: rec.attempts,
            last_failure: rec.last_failure.clone(),
            last_log: rec.last_log.as_ref().map(|p| p.display().to_string()),
            cost_usd: rec.cost,
            usage: rec.usage,
            turns: rec.turns,
            verified_by: rec
                .passing
                .then(|| rec.verified_by.unwrap_or(Evidence::Before)),
            regressions: rec.regressions,
            last_agent_failure: rec.last_agent_failure.clone(),
            agent_failures: rec.agent_failures,
            receipt: rec.passing.then(|| rec.receipt.clone()).flatten(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_costs_and_ticks_add_up_in_one_place() {
        let mut l = Ledger::default();
        l.admit("ISC-A-1", false);
        l.admit("ISC-A-1", true); // a second admission changes nothing
        assert!(!l.passing("ISC-A-1"));
        assert_eq!(l.next_attempt("ISC-A-1"), 1);
        let s = Spent {
            cost: 0.5,
            turns: 3,
            ..Spent::default()
        };
        l.spend("ISC-A-1", s);
        l.attempt_failed(
            "ISC-A-1",
            Failure {
                text: "red".into(),
                stuck: false,
            },
            None,
        );
        l.spend("ISC-A-1", s);
        l.attempt_passed("ISC-A-1", Evidence::Checked, "x.log".into());
        let r = l.get("ISC-A-1").unwrap();
        assert_eq!((r.attempts, r.turns, r.passing), (2, 6, true));
        assert_eq!(r.failures, ["red"]);
        assert!(r.last_failure.is_none());
        assert!((l.total_cost - 1.0).abs() < 1e-12);
        l.check_failed("ISC-A-1", "regression: boom".into(), true);
        let r = l.get("ISC-A-1").unwrap();
        assert_eq!((r.passing, r.regressions, r.verified_by), (false, 1, None));
        assert_eq!(l.next_attempt("ISC-A-1"), 3);
    }

    #[test]
    fn expected_durations_from_what_ran() {
        let mut l = Ledger::default();
        let ran = |ms| Spent {
            time: Duration::from_millis(ms),
            ..Spent::default()
        };
        assert!(l.expected_ms(&[("ISC-A-1", "A")]).is_empty());
        l.spend("ISC-A-1", ran(10)); // failed at once
        l.spend("ISC-A-2", ran(990));
        l.spend("ISC-B-1", ran(100));
        let e = l.expected_ms(&[
            ("ISC-A-1", "A"),
            ("ISC-A-2", "A"),
            ("ISC-B-1", "B"),
            ("ISC-C-1", "C"),
        ]);
        assert_eq!(
            e["ISC-A-1"], 500,
            "its domain's mean, not its instant failure"
        );
        assert_eq!(e["ISC-A-2"], 990);
        assert_eq!(e["ISC-B-1"], 100);
        assert_eq!(e["ISC-C-1"], 366, "nothing known: the run's mean");
    }
}
