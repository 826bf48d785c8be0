//! What the workers cost and what they passed, per domain and set-up: the accounts behind
//! `--best-of auto` (each domain's pass rate on each set-up) and the cost per passed criterion
//! in the summary, the state and `--json`. Kept by the ledger; restored on `resume`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::backend::Usage;
use crate::state::{CostPerPass, PerPass, SpendRow};

/// What one finished worker cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spent {
    /// Everything it cost, its verifier's review included.
    pub cost: f64,
    pub usage: Usage,
    pub turns: u64,
    /// Of those, the verifier's share (when one reviewed it).
    pub review: Option<(f64, Usage)>,
    pub time: Duration,
}

/// One worker's verdict as the estimate sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    Passed,
    Failed,
    /// Its work was not judged: its agent failed, or it was ended (a sibling won).
    Not,
}

/// The table: one row per (domain, set-up).
#[derive(Debug, Default)]
pub struct SpendBook {
    rows: BTreeMap<(String, String), SpendRow>,
}

impl SpendBook {
    fn row(&mut self, domain: &str, setup: &str) -> &mut SpendRow {
        self.rows
            .entry((domain.to_string(), setup.to_string()))
            .or_insert_with(|| SpendRow {
                domain: domain.to_string(),
                setup: setup.to_string(),
                ..SpendRow::default()
            })
    }

    /// A worker of `setup` ran for a criterion of `domain`.
    pub fn ran(&mut self, domain: &str, setup: &str, s: &Spent, judged: Judged) {
        let r = self.row(domain, setup);
        r.runs += 1;
        r.time_ms += s.time.as_millis() as u64;
        r.usage.add(&s.usage);
        r.cost_usd += s.cost;
        match judged {
            Judged::Passed => {
                r.judged += 1;
                r.passed_runs += 1;
            }
            Judged::Failed => r.judged += 1,
            Judged::Not => {}
        }
    }

    /// A criterion of `domain` passed, won by a worker of `setup`.
    pub fn passed(&mut self, domain: &str, setup: &str) {
        self.row(domain, setup).passed += 1;
    }

    /// Judged workers of `domain` on any of `setups`: (passed, failed).
    pub fn seen(&self, domain: &str, setups: &[&str]) -> (u32, u32) {
        setups
            .iter()
            .filter_map(|s| self.rows.get(&(domain.to_string(), s.to_string())))
            .fold((0, 0), |(p, f), r| {
                (p + r.passed_runs, f + r.judged - r.passed_runs)
            })
    }

    pub fn rows(&self) -> Vec<SpendRow> {
        self.rows.values().cloned().collect()
    }

    /// An earlier session's accounts (`resume`), in place of this one's.
    pub fn restore(&mut self, rows: &[SpendRow]) {
        self.rows = rows
            .iter()
            .map(|r| ((r.domain.clone(), r.setup.clone()), r.clone()))
            .collect();
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The cost per passed criterion per set-up and per domain, each sorted by name.
    pub fn per_pass(&self) -> CostPerPass {
        let mut by_setup: BTreeMap<&str, SpendRow> = BTreeMap::new();
        let mut by_domain: BTreeMap<&str, SpendRow> = BTreeMap::new();
        for r in self.rows.values() {
            add(by_setup.entry(&r.setup).or_default(), r);
            add(by_domain.entry(&r.domain).or_default(), r);
        }
        let view = |m: BTreeMap<&str, SpendRow>| -> Vec<PerPass> {
            m.into_iter().map(|(name, r)| figures(name, &r)).collect()
        };
        CostPerPass {
            by_setup: view(by_setup),
            by_domain: view(by_domain),
        }
    }
}

fn add(sum: &mut SpendRow, r: &SpendRow) {
    sum.runs += r.runs;
    sum.judged += r.judged;
    sum.passed_runs += r.passed_runs;
    sum.passed += r.passed;
    sum.time_ms += r.time_ms;
    sum.usage.add(&r.usage);
    sum.cost_usd += r.cost_usd;
}

fn figures(name: &str, r: &SpendRow) -> PerPass {
    let tokens = r.usage.input_tokens + r.usage.output_tokens;
    let per = |x: f64| (r.passed > 0).then(|| x / f64::from(r.passed));
    PerPass {
        name: name.to_string(),
        passed: r.passed,
        runs: r.runs,
        time_ms: r.time_ms,
        tokens,
        cost_usd: r.cost_usd,
        runs_per_pass: per(f64::from(r.runs)),
        time_ms_per_pass: per(r.time_ms as f64).map(|t| t.round() as u64),
        tokens_per_pass: per(tokens as f64).map(|t| t.round() as u64),
        cost_usd_per_pass: per(r.cost_usd),
        pass_at_1: (r.judged > 0).then(|| f64::from(r.passed_runs) / f64::from(r.judged)),
        judged: r.judged,
        passed_runs: r.passed_runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn per_pass_figures_add_up_by_set_up_and_by_domain() {
        let mut b = SpendBook::default();
        let s = |cost, ms| Spent {
            cost,
            time: Duration::from_millis(ms),
            usage: crate::backend::Usage {
                input_tokens: 100,
                output_tokens: 20,
                ..Default::default()
            },
            ..Spent::default()
        };
        b.ran("A", "claude:sonnet", &s(0.01, 1000), Judged::Failed);
        b.ran("A", "claude:sonnet", &s(0.01, 1000), Judged::Failed);
        b.ran("A", "claude:opus", &s(0.10, 3000), Judged::Passed);
        b.passed("A", "claude:opus");
        b.ran("B", "claude:sonnet", &s(0.01, 500), Judged::Passed);
        b.ran("B", "claude:sonnet", &s(0.0, 100), Judged::Not);
        b.passed("B", "claude:sonnet");
        let c = b.per_pass();
        let names: Vec<&str> = c.by_setup.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["claude:opus", "claude:sonnet"]);
        let sonnet = &c.by_setup[1];
        assert_eq!((sonnet.passed, sonnet.runs, sonnet.judged), (1, 4, 3));
        assert_eq!(sonnet.runs_per_pass, Some(4.0));
        assert_eq!(sonnet.time_ms_per_pass, Some(2600));
        assert_eq!(sonnet.tokens_per_pass, Some(480));
        assert!((sonnet.cost_usd_per_pass.unwrap() - 0.03).abs() < 1e-12);
        assert!((sonnet.pass_at_1.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        let a = &c.by_domain[0];
        assert_eq!((a.name.as_str(), a.passed, a.runs), ("A", 1, 3));
        assert!((a.cost_usd_per_pass.unwrap() - 0.12).abs() < 1e-12);
        assert_eq!(b.seen("A", &["claude:sonnet"]), (0, 2));
        assert_eq!(b.seen("A", &["claude:sonnet", "claude:opus"]), (1, 2));
        // Nothing passed: no per-pass figure, not a division by zero.
        let mut none = SpendBook::default();
        none.ran("C", "codex", &s(0.5, 10), Judged::Failed);
        let p = &none.per_pass().by_setup[0];
        assert_eq!((p.cost_usd_per_pass, p.runs_per_pass), (None, None));
        assert_eq!(p.pass_at_1, Some(0.0));
        // Restored, the same.
        let mut again = SpendBook::default();
        again.restore(&b.rows());
        assert_eq!(again.per_pass(), b.per_pass());
    }
}
