//! What `merge` prints: per bundle what became of its patch, per criterion its outcome and
//! evidence, and the totals; or the same as one `--json` document. Both are rendered from one
//! [`MergeReport`].

use serde::Serialize;

use super::*;
use crate::backend::Usage;
use crate::report::json::Version;

/// What `merge` did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct MergeReport<'a> {
    prd: &'a Path,
    outcome: &'static str,
    exit_code: Exit,
    passing: usize,
    total: usize,
    failing: Vec<String>,
    bundles: Vec<BundleView<'a>>,
    criteria: Vec<CriterionView<'a>>,
    iterations: usize,
    cost_usd: f64,
    usage: Usage,
    state: &'a Path,
    /// What stderr said as it happened.
    warnings: Vec<Warning>,
    version: Version,
}

/// What became of one bundle's patch.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct BundleView<'a> {
    shard: String,
    dir: &'a Path,
    /// `merged`, `unchanged`, `conflict` or `error`.
    result: &'static str,
    /// The files merged, or in conflict.
    files: &'a [String],
    error: Option<&'a str>,
    /// For the text.
    #[serde(skip)]
    applied: &'a Applied,
}

/// One criterion after the merge.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CriterionView<'a> {
    id: &'a str,
    shard: &'a str,
    passed: bool,
    /// How its pass was earned (`null`: it does not pass).
    evidence: Option<Evidence>,
    /// Why it does not pass.
    reason: Option<&'a str>,
    attempts: u32,
    cost_usd: f64,
}

impl<'a> MergeReport<'a> {
    #[allow(clippy::too_many_arguments)]
    fn of(
        path: &'a Path,
        bundles: &'a [Bundle],
        applied: &'a [Applied],
        results: &'a [Result1],
        now: &Prd,
        end: End,
        state: &SessionState,
        state_path: &'a Path,
        warnings: Warnings,
    ) -> MergeReport<'a> {
        let (passing, total) = now.progress();
        MergeReport {
            prd: path,
            outcome: end.word(),
            exit_code: end.exit(),
            passing,
            total,
            failing: now.failing().map(|c| c.id.clone()).collect(),
            bundles: bundles
                .iter()
                .zip(applied)
                .map(|(b, a)| BundleView {
                    shard: b.manifest.shard.to_string(),
                    dir: &b.dir,
                    result: a.word(),
                    files: match a {
                        Applied::Merged(f) | Applied::Conflict(f) => f,
                        _ => &[],
                    },
                    error: match a {
                        Applied::Error(e) => Some(e),
                        _ => None,
                    },
                    applied: a,
                })
                .collect(),
            criteria: results
                .iter()
                .map(|r| CriterionView {
                    id: &r.id,
                    shard: &r.shard,
                    passed: r.passed(),
                    evidence: r.pass,
                    reason: r.reason.as_deref(),
                    attempts: r.state.attempts,
                    cost_usd: r.state.cost_usd,
                })
                .collect(),
            iterations: state.loop_history.len(),
            cost_usd: state.total_cost_usd,
            usage: state.usage,
            state: state_path,
            warnings: warnings.into_vec(),
            version: Version,
        }
    }

    fn text(&self, out: &mut String) {
        for b in &self.bundles {
            let what = match b.applied {
                Applied::Merged(f) => format!("merged {} file(s)", f.len()),
                Applied::Unchanged => "no changes".into(),
                Applied::Conflict(f) => format!("CONFLICT in {}: not applied", f.join(", ")),
                Applied::Error(e) => format!("NOT APPLIED: {e}"),
            };
            outln!(out, "shard {:<7} {what}  ({})", b.shard, b.dir.display());
        }
        for c in &self.criteria {
            let mark = match c.evidence {
                Some(e) => report::green(&format!("PASS ({})", e.word())),
                None => report::red("FAIL"),
            };
            outln!(
                out,
                "{mark} {:<16} shard {}, {} attempt(s)",
                c.id,
                c.shard,
                c.attempts
            );
            if let Some(why) = c.reason {
                outln!(out, "       {why}");
            }
        }
        outln!(
            out,
            "\n{}: {}/{} criteria passing after merging {} shard(s); {} iteration(s), ${:.2}, {} tokens",
            self.outcome,
            self.passing,
            self.total,
            self.bundles.len(),
            self.iterations,
            self.cost_usd,
            self.usage.total()
        );
        if !self.failing.is_empty() {
            outln!(out, "failing: {}", self.failing.join(", "));
        }
        outln!(out, "state: {}", self.state.display());
    }

    /// The GitHub step summary's section.
    fn step_summary(&self) -> String {
        let mut md = format!(
            "### prdloop merge: {}/{} criteria passing ({})\n\n| shard | result |\n|---|---|\n",
            self.passing, self.total, self.outcome
        );
        for b in &self.bundles {
            md.push_str(&format!("| {} | {} |\n", b.shard, b.result));
        }
        md.push('\n');
        md
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn print_summary(
    path: &Path,
    bundles: &[Bundle],
    applied: &[Applied],
    results: &[Result1],
    now: &Prd,
    end: End,
    state: &SessionState,
    state_path: &Path,
    warnings: Warnings,
    json: bool,
    ci: &crate::config::CiConfig,
) -> Result<()> {
    let report = MergeReport::of(
        path, bundles, applied, results, now, end, state, state_path, warnings,
    );
    let mut out = String::new();
    if json {
        crate::report::json::push_report(&mut out, &report)?;
        return Ok(report::stdout(&out)?);
    }
    report.text(&mut out);
    report::stdout(&out)?;
    if let Some(file) = ci.github.as_ref().and_then(|g| g.step_summary.as_ref()) {
        use std::io::Write;
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(report.step_summary().as_bytes()));
    }
    Ok(())
}
