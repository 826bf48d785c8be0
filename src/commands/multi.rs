//! `prdloop run A.md B.md …` and `run --with-children`: several PRDs as concurrent sub-loops
//! of one process. Each is set up and run exactly as `prdloop run` runs one (its own session,
//! lock, state and `end` event); they share a cap on concurrent workers and their stops and
//! pauses (`run::SubLoops`). At the end: one combined summary, and the worst exit code.
//!
//! With `--with-children`, a PRD's `children:` run first: the PRDs are run in waves, the
//! deepest children first, each wave's PRDs at once; a PRD starts only when all its children
//! completed, and after a wave that was interrupted or whose agent cannot work nothing more
//! starts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::warning::Warning;
use crate::config::Progress;
use crate::config::RunSettings;
use crate::exit::Exit;
use crate::prd::Prd;
use crate::prd::lookup::{self, Locations};
use crate::run::json_event::{End, GroupEnd, GroupPrd, JsonEvent};
use crate::run::{Ended, SubLoops};
use crate::{exit, report};

/// The cap on concurrent workers when several PRDs run and `--max-workers` is not given: as
/// many as one PRD may run lanes (`-a` ≤ 16).
pub const DEFAULT_MAX_WORKERS: usize = crate::config::MAX_AGENTS;

/// One PRD of the run.
struct Node {
    path: PathBuf,
    doc: Prd,
    label: String,
    /// Its children (indexes), when run with `--with-children`.
    children: Vec<usize>,
    /// 0 for a PRD without children to run, else one more than its deepest child's.
    depth: usize,
}

/// How one PRD came out.
struct Outcome {
    code: Exit,
    /// Its loop's summary, when the loop ran to its end.
    ended: Option<Ended>,
    /// Otherwise: the outcome word and what was said.
    early: Option<(&'static str, String)>,
}

/// `opts_for`: a PRD's own options (its `prdloop:` map and its repository's config file
/// under the command line); the run's `opts` decide what all share (the cap, JSON, progress).
pub fn run(
    args: &[String],
    opts: &RunSettings,
    loc: Result<Locations>,
    opts_for: &dyn Fn(&Path) -> Result<RunSettings>,
) -> Result<Exit> {
    let nodes = match loc.and_then(|loc| plan(args, opts.with_children, &loc).map(|n| (n, loc))) {
        Ok(n) => n,
        Err(e) => {
            if opts.json {
                super::run::end_event("error", exit::code_of(&e), &format!("{e:#}"), None);
            }
            return Err(e);
        }
    };
    let (nodes, loc) = nodes;
    let several = nodes.len() > 1;
    if let Some(port) = opts.serve {
        crate::serve::beside(crate::serve::Options {
            state_dirs: vec![crate::config::state_dir(opts.state_dir.as_deref(), &loc)?],
            port,
        })?;
    }
    // One PRD (`--with-children` without children) is capped only when asked, as alone.
    let cap = opts.max_workers.or(several.then_some(DEFAULT_MAX_WORKERS));
    if several {
        report::eline(&format!(
            "{} PRDs as sub-loops, at most {} worker(s) at once: {}",
            nodes.len(),
            cap.unwrap_or(DEFAULT_MAX_WORKERS),
            nodes
                .iter()
                .map(|n| format!("[{}] {}", n.label, n.path.display()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let group = SubLoops::new(cap);
    let rt = super::runtime()?;
    let mut outcomes: Vec<Option<Outcome>> = (0..nodes.len()).map(|_| None).collect();
    let deepest = nodes.iter().map(|n| n.depth).max().unwrap_or(0);
    for depth in 0..=deepest {
        let halted = outcomes
            .iter()
            .flatten()
            .any(|o| o.code == exit::Exit::Interrupted || o.code == exit::Exit::AgentFatal);
        let mut loops = Vec::new();
        for (i, node) in nodes.iter().enumerate().filter(|(_, n)| n.depth == depth) {
            let unfinished: Vec<&str> = node
                .children
                .iter()
                .filter(|c| {
                    outcomes[**c]
                        .as_ref()
                        .is_none_or(|o| o.code != exit::Exit::Success)
                })
                .map(|c| nodes[*c].label.as_str())
                .collect();
            let skipped = if halted {
                Some("not started: an earlier PRD was interrupted or its agent cannot work".into())
            } else if !unfinished.is_empty() {
                Some(format!(
                    "not started: its children are not complete ({})",
                    unfinished.join(", ")
                ))
            } else {
                None
            };
            if let Some(why) = skipped {
                report::eline(&format!("[{}] {why}", node.label));
                if opts.json {
                    let prd = Some(node.path.display().to_string());
                    let end = End::early(prd, "skipped", exit::Exit::Failure, &why, None);
                    JsonEvent::End(end).emit();
                }
                outcomes[i] = Some(Outcome {
                    code: exit::Exit::Failure,
                    ended: None,
                    early: Some(("skipped", why)),
                });
                continue;
            }
            let ready = opts_for(&node.path).and_then(|settings| {
                super::run::ready(&node.path, &settings, 1, None, &loc, || reread(node))
            });
            let (mut run, claim) = match ready {
                Ok(super::run::Ready::Run { run, claim }) => (*run, claim),
                Ok(super::run::Ready::Not(came)) => {
                    outcomes[i] = Some(settle(opts.json, node, Ok(came), None));
                    continue;
                }
                Err(e) => {
                    outcomes[i] = Some(settle(opts.json, node, Err(e), None));
                    continue;
                }
            };
            if several && run.cfg.progress == Progress::Live {
                // Several live views cannot share a terminal.
                run.cfg.progress = Progress::Lines;
            }
            let link = group.link(several.then(|| node.label.clone()));
            let ended = link.ended();
            let state_dir = run.own.state_dir.clone();
            let began = crate::state::now_ms();
            loops.push((
                i,
                state_dir,
                began,
                ended,
                crate::run::execute_in(run, claim, None, Some(link)),
            ));
        }
        let (meta, futures): (Vec<_>, Vec<_>) = loops
            .into_iter()
            .map(|(i, s, b, e, f)| ((i, s, b, e), f))
            .unzip();
        let results = rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            for (k, f) in futures.into_iter().enumerate() {
                set.spawn(async move { (k, f.await) });
            }
            let mut results: Vec<Option<Result<Exit>>> = (0..set.len()).map(|_| None).collect();
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok((k, r)) => results[k] = Some(r),
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                }
            }
            results
        });
        // Nothing the workers detached outlives the run.
        crate::worker::reaper::end_adopted(opts.kill_grace);
        for ((i, state_dir, began, ended), result) in meta.into_iter().zip(results) {
            let node = &nodes[i];
            let result = result.unwrap_or_else(|| Err(anyhow::anyhow!("the sub-loop was lost")));
            let progress = super::run::progress_of(&node.doc);
            let came = super::run::came_of(result, &node.path, &state_dir, began, progress);
            outcomes[i] = Some(settle(opts.json, node, Ok(came), ended()));
        }
    }
    let outcomes: Vec<Outcome> = outcomes.into_iter().flatten().collect();
    let code = exit::worst(outcomes.iter().map(|o| o.code));
    if several {
        for line in summary(&nodes, &outcomes, code) {
            report::eline(&line);
        }
        if opts.json {
            group_event(&nodes, &outcomes, code).emit();
        }
    }
    Ok(code)
}

fn settle(
    json: bool,
    node: &Node,
    came: Result<super::run::Came>,
    ended: Option<Ended>,
) -> Outcome {
    let (code, early) = super::run::settle(json, &node.path, &node.label, came);
    Outcome {
        code,
        ended: if early.is_none() { ended } else { None },
        early,
    }
}

/// A PRD as it is now, for its loop (read under its lock): the plan's reading of it while the
/// file still holds what the plan read (it was read for its `children:` and its label), else
/// read again.
fn reread(node: &Node) -> Result<Prd> {
    match std::fs::read(&node.path) {
        Ok(bytes) if bytes == node.doc.text().as_bytes() => Ok(node.doc.clone()),
        _ => super::read_prd(&node.path),
    }
}

/// The PRDs to run, each once, with their labels, children and depths.
fn plan(args: &[String], with_children: bool, loc: &Locations) -> Result<Vec<Node>> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut index: HashMap<PathBuf, usize> = HashMap::new();
    for arg in args {
        let path = lookup::resolve(arg, loc)?;
        if index.contains_key(&path) {
            report::warn(Warning::GivenTwice { prd: path });
            continue;
        }
        visit(
            path,
            with_children,
            loc,
            &mut nodes,
            &mut index,
            &mut Vec::new(),
        )?;
    }
    label(&mut nodes);
    Ok(nodes)
}

/// Adds a PRD (and with `--with-children` its children, first); returns its index.
fn visit(
    path: PathBuf,
    with_children: bool,
    loc: &Locations,
    nodes: &mut Vec<Node>,
    index: &mut HashMap<PathBuf, usize>,
    stack: &mut Vec<PathBuf>,
) -> Result<usize> {
    if let Some(i) = stack.iter().position(|p| *p == path) {
        let cycle: Vec<String> = stack[i..]
            .iter()
            .chain([&path])
            .map(|p| p.display().to_string())
            .collect();
        bail!("the PRDs' `children:` make a cycle: {}", cycle.join(" → "));
    }
    if let Some(&i) = index.get(&path) {
        return Ok(i);
    }
    let doc = super::load_prd(&path)?;
    let mut children = Vec::new();
    if with_children {
        stack.push(path.clone());
        for child in &doc.front.children {
            let p = resolve_child(child, &path, loc)?;
            children.push(visit(p, with_children, loc, nodes, index, stack)?);
        }
        stack.pop();
    }
    let depth = children
        .iter()
        .map(|c| nodes[*c].depth + 1)
        .max()
        .unwrap_or(0);
    nodes.push(Node {
        path: path.clone(),
        doc,
        label: String::new(),
        children,
        depth,
    });
    index.insert(path, nodes.len() - 1);
    Ok(nodes.len() - 1)
}

/// A `children:` entry: a path relative to the parent's folder, or a PRD id.
fn resolve_child(child: &str, parent: &Path, loc: &Locations) -> Result<PathBuf> {
    let near = parent.parent().unwrap_or(Path::new(".")).join(child);
    let arg = if near.is_file() {
        near.display().to_string()
    } else {
        child.to_string()
    };
    lookup::resolve(&arg, loc).map_err(|e| {
        anyhow::anyhow!(
            "{}: child `{child}` (in `children:`): {e:#}",
            parent.display()
        )
    })
}

/// Short labels for the lines: the file's stem, or the PRD's id when files share a stem,
/// numbered when still not unique.
fn label(nodes: &mut [Node]) {
    let stem = |n: &Node| {
        n.path
            .file_stem()
            .map_or_else(|| "prd".into(), |s| s.to_string_lossy().to_string())
    };
    let mut count: HashMap<String, usize> = HashMap::new();
    for n in nodes.iter() {
        *count.entry(stem(n)).or_default() += 1;
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for n in nodes.iter_mut() {
        let s = stem(n);
        let base = match n.doc.id() {
            Some(id) if count[&s] > 1 => id.to_string(),
            _ => s,
        };
        let k = seen.entry(base.clone()).or_default();
        *k += 1;
        n.label = if *k > 1 { format!("{base}#{k}") } else { base };
    }
}

/// The combined summary: a line per PRD, then the totals.
fn summary(nodes: &[Node], outcomes: &[Outcome], code: Exit) -> Vec<String> {
    let width = nodes.iter().map(|n| n.label.len()).max().unwrap_or(0) + 2;
    let mut out = vec![
        String::new(),
        report::bold(&format!("{} PRDs (exit {code}):", nodes.len())),
    ];
    let (mut passing, mut total, mut cost, mut input, mut output) = (0, 0, 0.0, 0, 0);
    for (node, o) in nodes.iter().zip(outcomes) {
        let tag = format!("[{}]", node.label);
        let line = match (&o.ended, &o.early) {
            (Some(e), _) => {
                passing += e.passing;
                total += e.total;
                cost += e.cost;
                input += e.input_tokens;
                output += e.output_tokens;
                let reason = e
                    .reason
                    .as_ref()
                    .map(|r| format!(" — {}", crate::text::one_line(&r.to_string(), 120)))
                    .unwrap_or_default();
                format!(
                    "  {tag:<width$} {:<10} {}/{} pass · ${:.4} · tokens {} in, {} out{reason}",
                    e.word, e.passing, e.total, e.cost, e.input_tokens, e.output_tokens
                )
            }
            (None, Some((word, why))) => {
                let passed = node.doc.criteria.iter().filter(|c| c.checked).count();
                passing += passed;
                total += node.doc.criteria.len();
                format!(
                    "  {tag:<width$} {word:<10} {passed}/{} pass — {}",
                    node.doc.criteria.len(),
                    crate::text::one_line(why, 120)
                )
            }
            (None, None) => format!("  {tag:<width$} exit {}", o.code),
        };
        out.push(line);
    }
    out.push(format!(
        "  total: {passing}/{total} pass · ${cost:.4} · tokens {input} in, {output} out"
    ));
    out
}

/// The `--json` event after the sub-loops' own `end` events: each PRD's outcome, the totals
/// and the exit code.
fn group_event(nodes: &[Node], outcomes: &[Outcome], code: Exit) -> JsonEvent {
    let prds: Vec<GroupPrd> = nodes
        .iter()
        .zip(outcomes)
        .map(|(n, o)| {
            let mut v = GroupPrd {
                prd: n.path.display().to_string(),
                label: n.label.clone(),
                exit_code: o.code,
                outcome: None,
                passing: None,
                total: None,
                cost_usd: None,
                input_tokens: None,
                output_tokens: None,
                reason: None,
            };
            if let Some(e) = &o.ended {
                v.outcome = Some(e.word.to_string());
                v.passing = Some(e.passing);
                v.total = Some(e.total);
                v.cost_usd = Some(e.cost);
                v.input_tokens = Some(e.input_tokens);
                v.output_tokens = Some(e.output_tokens);
            } else if let Some((word, why)) = &o.early {
                v.outcome = Some(word.to_string());
                v.reason = Some(why.clone());
            }
            v
        })
        .collect();
    let sum = |f: fn(&Ended) -> f64| {
        outcomes
            .iter()
            .filter_map(|o| o.ended.as_ref())
            .map(f)
            .sum::<f64>()
    };
    JsonEvent::GroupEnd(GroupEnd {
        time: crate::state::now_ms(),
        exit_code: code,
        prds,
        cost_usd: sum(|e| e.cost),
        input_tokens: sum(|e| e.input_tokens as f64) as u64,
        output_tokens: sum(|e| e.output_tokens as f64) as u64,
    })
}
