//! What `merge` prints: per bundle what became of its patch, per criterion its outcome and
//! evidence, and the totals; or the same as one `--json` document.

use super::*;

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
    json: bool,
    ci: &crate::config::CiConfig,
) -> Result<()> {
    let (p, t) = now.progress();
    let failing: Vec<String> = now.failing().map(|c| c.id.clone()).collect();
    let mut out = String::new();
    if json {
        let v = json!({
            "prd": path,
            "outcome": end.word(),
            "exitCode": end.exit(),
            "passing": p,
            "total": t,
            "failing": failing,
            "bundles": bundles.iter().zip(applied).map(|(b, a)| json!({
                "shard": b.manifest.shard.to_string(),
                "dir": b.dir,
                "result": a.word(),
                "files": match a { Applied::Merged(f) | Applied::Conflict(f) => f.clone(), _ => Vec::new() },
                "error": match a { Applied::Error(e) => Some(e.clone()), _ => None },
            })).collect::<Vec<_>>(),
            "criteria": results.iter().map(|r| json!({
                "id": r.id,
                "shard": r.shard,
                "passed": r.passed(),
                "evidence": r.pass.map(Evidence::word),
                "reason": r.reason,
                "attempts": r.state.attempts,
                "costUsd": r.state.cost_usd,
            })).collect::<Vec<_>>(),
            "iterations": state.loop_history.len(),
            "costUsd": state.total_cost_usd,
            "usage": state.usage,
            "state": state_path,
        });
        crate::report::json::push_document(&mut out, v)?;
        return Ok(report::stdout(&out)?);
    }
    for (b, a) in bundles.iter().zip(applied) {
        let what = match a {
            Applied::Merged(f) => format!("merged {} file(s)", f.len()),
            Applied::Unchanged => "no changes".into(),
            Applied::Conflict(f) => format!("CONFLICT in {}: not applied", f.join(", ")),
            Applied::Error(e) => format!("NOT APPLIED: {e}"),
        };
        outln!(
            out,
            "shard {:<7} {what}  ({})",
            b.manifest.shard.to_string(),
            b.dir.display()
        );
    }
    for r in results {
        let mark = match r.pass {
            Some(e) => report::green(&format!("PASS ({})", e.word())),
            None => report::red("FAIL"),
        };
        outln!(
            out,
            "{mark} {:<16} shard {}, {} attempt(s)",
            r.id,
            r.shard,
            r.state.attempts
        );
        if let Some(why) = &r.reason {
            outln!(out, "       {why}");
        }
    }
    outln!(
        out,
        "\n{}: {p}/{t} criteria passing after merging {} shard(s); {} iteration(s), ${:.2}, {} tokens",
        end.word(),
        bundles.len(),
        state.loop_history.len(),
        state.total_cost_usd,
        state.usage.total()
    );
    if !failing.is_empty() {
        outln!(out, "failing: {}", failing.join(", "));
    }
    outln!(out, "state: {}", state_path.display());
    report::stdout(&out)?;
    if let Some(file) = ci.github.as_ref().and_then(|g| g.step_summary.as_ref()) {
        let mut md = format!(
            "### prdloop merge: {p}/{t} criteria passing ({})\n\n| shard | result |\n|---|---|\n",
            end.word()
        );
        for (b, a) in bundles.iter().zip(applied) {
            md.push_str(&format!("| {} | {} |\n", b.manifest.shard, a.word()));
        }
        md.push('\n');
        use std::io::Write;
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(md.as_bytes()));
    }
    Ok(())
}
