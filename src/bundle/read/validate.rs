//! The manifest's own consistency, before the PRD is looked at: its format, shard, criteria,
//! outcomes, paths and numbers all in range.

use super::*;

/// The manifest's own consistency, without the PRD: its format, its shard, its criteria and
/// outcomes, its paths and numbers.
pub(super) fn validate(file: &Path, m: &Manifest, logs: &[LogFile]) -> Result<(), Refused> {
    let bad = |field: String, why: String| Err(refused(file, Some(field), why));
    if m.version > VERSION {
        return bad(
            "version".into(),
            format!(
                "written by a newer prdloop (bundle format {}); upgrade prdloop",
                m.version
            ),
        );
    }
    if m.version == 0 {
        return bad("version".into(), "0 is no bundle format".into());
    }
    let Shard { index, count } = m.shard;
    if count == 0 || count > MAX_SHARDS {
        return bad(
            "shard.count".into(),
            format!("{count} is not a shard count (1 to {MAX_SHARDS})"),
        );
    }
    if index == 0 || index > count {
        return bad(
            "shard.index".into(),
            format!("{index} is not a shard of {count} (1 to {count})"),
        );
    }
    let mut ids = HashSet::new();
    for (i, id) in m.criteria.iter().enumerate() {
        if let Err(why) = check_id(id) {
            return bad(format!("criteria[{i}]"), why);
        }
        if !ids.insert(id.as_str()) {
            return bad(format!("criteria[{i}]"), format!("{id} is listed twice"));
        }
    }
    let mut seen = HashSet::new();
    let log_paths: HashSet<&Path> = logs.iter().map(|l| l.rel.as_path()).collect();
    for (i, o) in m.outcomes.iter().enumerate() {
        if !ids.contains(o.id.as_str()) {
            return bad(
                format!("outcomes[{i}].id"),
                format!(
                    "{} is not one of the bundle's criteria ({}): a bundle speaks only of its own",
                    shown(&o.id),
                    list(&m.criteria)
                ),
            );
        }
        if !seen.insert(o.id.as_str()) {
            return bad(
                format!("outcomes[{i}].id"),
                format!("a second outcome of {}", o.id),
            );
        }
        if let Some(log) = &o.state.last_log {
            let inside = Path::new(log)
                .strip_prefix(LOGS)
                .ok()
                .filter(|rel| rel.components().all(|c| matches!(c, Component::Normal(_))));
            if !inside.is_some_and(|rel| log_paths.contains(rel)) {
                return bad(
                    format!("outcomes[{i}].state.lastLog"),
                    format!("{} is not one of the files under {LOGS}/", shown(log)),
                );
            }
        }
        let s = &o.state;
        let at = |f: &str| Some(format!("outcomes[{i}].state.{f}"));
        count_in_range(file, at("attempts"), s.attempts.into())?;
        count_in_range(file, at("regressions"), s.regressions.into())?;
        count_in_range(file, at("agentFailures"), s.agent_failures.into())?;
        count_in_range(file, at("turns"), s.turns)?;
        cost_in_range(file, at("costUsd"), s.cost_usd)?;
        usage_in_range(file, at("usage"), &s.usage)?;
    }
    let mut files = HashSet::new();
    for (i, f) in m.files.iter().enumerate() {
        if f.is_empty() || !files.insert(f.as_str()) {
            return bad(format!("files[{i}]"), "empty or listed twice".into());
        }
    }
    for (i, e) in m.iterations.iter().enumerate() {
        let at = |f: &str| Some(format!("iterations[{i}].{f}"));
        count_in_range(file, at("attempts"), e.attempts.into())?;
        count_in_range(file, at("criteriaTotal"), e.criteria_total as u64)?;
        if e.criteria_passing > e.criteria_total {
            return Err(refused(
                file,
                at("criteriaPassing"),
                format!(
                    "{} is more than criteriaTotal ({})",
                    e.criteria_passing, e.criteria_total
                ),
            ));
        }
        cost_in_range(file, at("costUsd"), e.cost_usd)?;
        usage_in_range(file, at("usage"), &e.usage)?;
    }
    cost_in_range(file, Some("costUsd".into()), m.cost_usd)?;
    usage_in_range(file, Some("usage".into()), &m.usage)?;
    Ok(())
}

/// An id as a PRD's parser makes them: not empty, short, without control characters.
pub(super) fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.chars().count() > ID_MAX || id.chars().any(char::is_control) {
        return Err(format!("`{}` is not a criterion id", shown(id)));
    }
    Ok(())
}

pub(super) fn count_in_range(file: &Path, field: Option<String>, n: u64) -> Result<(), Refused> {
    if n > COUNT_MAX {
        return Err(refused(
            file,
            field,
            format!("{n} is out of range (at most {COUNT_MAX})"),
        ));
    }
    Ok(())
}

pub(super) fn cost_in_range(file: &Path, field: Option<String>, usd: f64) -> Result<(), Refused> {
    if !(0.0..=COST_MAX).contains(&usd) {
        return Err(refused(
            file,
            field,
            format!("{usd} is not a cost in USD (0 to {COST_MAX})"),
        ));
    }
    Ok(())
}

pub(super) fn usage_in_range(
    file: &Path,
    field: Option<String>,
    u: &crate::backend::Usage,
) -> Result<(), Refused> {
    let most = [
        u.input_tokens,
        u.output_tokens,
        u.cache_creation_input_tokens,
        u.cache_read_input_tokens,
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    if most > TOKENS_MAX {
        return Err(refused(
            file,
            field,
            format!("{most} tokens is out of range (at most {TOKENS_MAX})"),
        ));
    }
    Ok(())
}
