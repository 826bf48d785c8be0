//! The state file of a merge: the shards' histories side by side as one run's, and each
//! criterion's outcome with the evidence its tick rests on.

use super::*;
use crate::state;

/// The shards' iterations side by side: the i-th iterations of all shards ran at the same
/// time, so they make one iteration, their attempts, costs and tokens summed.
pub(super) fn merged_history(
    bundles: &[Bundle],
    base_passing: usize,
    total: usize,
) -> Vec<LoopEntry> {
    let n = bundles
        .iter()
        .map(|b| b.manifest.iterations.len())
        .max()
        .unwrap_or(0);
    (0..n)
        .map(|i| {
            let mut e = LoopEntry {
                criteria_passing: base_passing,
                criteria_total: total,
                ..LoopEntry::default()
            };
            let mut first = true;
            for b in bundles {
                let its = &b.manifest.iterations;
                // A shard that had finished still holds what it gained.
                let Some(x) = its.get(i).or(its.last()) else {
                    continue;
                };
                e.criteria_passing += x.criteria_passing.saturating_sub(base_passing);
                if its.get(i).is_none() {
                    continue;
                }
                if first {
                    e.iteration = x.iteration;
                    e.started_at = x.started_at;
                    first = false;
                }
                e.started_at = e.started_at.min(x.started_at);
                e.completed_at = e.completed_at.max(x.completed_at);
                e.cost_usd += x.cost_usd;
                e.usage.add(&x.usage);
                e.attempts += x.attempts;
            }
            e.criteria_passing = e.criteria_passing.min(total);
            e
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(super) fn merged_state(
    session: &str,
    path: &Path,
    now: &Prd,
    before: &Prd,
    bundles: &[Bundle],
    results: &[Result1],
    workdir: &Path,
    log_dir: &Path,
    end: End,
    iterations: usize,
    warnings: &mut Warnings,
) -> SessionState {
    // The shards' logs, kept with the merged session.
    for b in bundles.iter().filter(|b| !b.logs.is_empty()) {
        let to = log_dir.join(format!("shard-{}", b.manifest.shard.index));
        if let Err(e) = b.copy_logs(&to) {
            warnings.say(Warning::LogsNotKept {
                bundle: b.dir.clone(),
                error: format!("{e:#}"),
            });
        }
    }
    let by_id: HashMap<&str, &Result1> = results.iter().map(|r| (r.id.as_str(), r)).collect();
    let criteria = now
        .criteria
        .iter()
        .map(|c| match by_id.get(c.id.as_str()) {
            Some(r) => {
                let mut st = r.state.clone();
                // What the PRD says of it is the PRD's; the bundle's words are made fit to show.
                st.description = c.description.clone();
                st.kind = if c.anti {
                    "anti-criterion"
                } else {
                    "criterion"
                }
                .into();
                st.created_in_phase = shown(&st.created_in_phase);
                st.last_agent_failure = st.last_agent_failure.as_deref().map(shown);
                // Its log, where the shard's logs are kept now.
                st.last_log = st.last_log.as_ref().map(|l| {
                    let rel = Path::new(l)
                        .strip_prefix(crate::bundle::LOGS)
                        .unwrap_or(Path::new(l));
                    log_dir
                        .join(format!("shard-{}", r.index))
                        .join(rel)
                        .display()
                        .to_string()
                });
                if let Some(evidence) = r.pass {
                    st.status = CriterionStatus::Completed;
                    // Checked: re-checked here; else it rests on a verdict from elsewhere.
                    st.verified_by = Some(evidence);
                } else {
                    st.status = if st.attempts > 0 || r.reason.is_some() {
                        CriterionStatus::Failed
                    } else {
                        CriterionStatus::Pending
                    };
                    st.verified_by = None;
                    st.last_failure = r.reason.clone().or(st.last_failure);
                }
                st
            }
            None => CriterionState {
                id: c.id.clone(),
                description: c.description.clone(),
                kind: if c.anti {
                    "anti-criterion"
                } else {
                    "criterion"
                }
                .into(),
                status: if c.checked {
                    CriterionStatus::Completed
                } else {
                    CriterionStatus::Pending
                },
                created_in_phase: "OBSERVE".into(),
                verified_by: c.checked.then_some(Evidence::Before),
                ..CriterionState::default()
            },
        })
        .collect();
    let (p, t) = now.progress();
    let mut usage = crate::backend::Usage::default();
    for b in bundles {
        usage.add(&b.manifest.usage);
    }
    let started = bundles
        .iter()
        .map(|b| b.manifest.started_at)
        .min()
        .unwrap_or(0);
    let now_ms = state::now_ms();
    let prd_path = path.display().to_string();
    let history = merged_history(bundles, before.progress().0, t);
    SessionState {
        active: false,
        session_id: session.to_string(),
        task_description: format!(
            "Loop: {} [{p}/{t} merged from {} shards]",
            now.id().or(now.display_title()).unwrap_or("PRD"),
            bundles.len()
        ),
        current_phase: end.phase().into(),
        phase_started_at: now_ms,
        algorithm_started_at: started,
        completed_at: Some(now_ms),
        sla: now.front.effort_level.clone(),
        effort_level: now.front.effort_level.clone(),
        criteria,
        capabilities: ["Task Tool", "SDK", "Loop Runner"]
            .map(String::from)
            .to_vec(),
        prd_path: prd_path.clone(),
        loop_prd_path: prd_path,
        loop_mode: true,
        mode: "loop".into(),
        loop_iteration: crate::run::front::next_iteration(before) - 1 + iterations as u64,
        loop_max_iterations: 0,
        loop_prd_id: now.id().unwrap_or_default().to_string(),
        loop_history: history,
        parallel_agents: bundles.len(),
        summary: Some(format!(
            "{}: {p}/{t} criteria in {iterations} iterations (merged from {} shards)",
            end.word(),
            bundles.len()
        )),
        prdloop_version: state::STATE_VERSION,
        total_cost_usd: bundles.iter().map(|b| b.manifest.cost_usd).sum(),
        usage,
        log_dir: log_dir.display().to_string(),
        workdir: workdir.display().to_string(),
        ..SessionState::default()
    }
}
