//! `prdloop status`: each PRD's progress.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;

use crate::exit::Exit;
use crate::outln;
use crate::report;

pub fn status(s: &crate::config::StatusSettings) -> Result<Exit> {
    let (state_dir, paths, json) = (&s.state_dir, &s.prds, s.json);
    let mut out = String::new();
    if paths.is_empty() && !json {
        outln!(
            out,
            "no PRDs found in {} (PAI's and LifeOS's folders); name one: `prdloop status path/to/PRD.md`",
            s.searched
        );
        crate::report::stdout(&out)?;
        return Ok(crate::exit::Exit::Success);
    }
    let mut out_json = Vec::new();
    let mut code = crate::exit::Exit::Success;
    for path in paths {
        let prd = match crate::prd::load(path) {
            Ok(p) => p,
            Err(e) => {
                // One broken PRD does not hide the others.
                report::error(format!("{e:#}"));
                code = crate::exit::Exit::Usage;
                continue;
            }
        };
        let (passing, total) = prd.progress();
        let failing: Vec<&str> = prd.failing().map(|c| c.id.as_str()).collect();
        // The PRD's lock is found whatever state folder its loop was given.
        let holder = crate::state::lock_holder(path).ok().flatten();
        let last = last_session(state_dir, path);
        // The questions workers asked: the running loop's book, else this state folder's.
        let mut book = crate::questions::book_of(path, state_dir)
            .map(|(p, _)| crate::questions::load(&p))
            .unwrap_or_default();
        // Only criteria still open can wait (one ticked since, or gone, does not).
        book.questions
            .retain(|q| !q.open() || failing.contains(&q.criterion.as_str()));
        if json {
            out_json.push(json!({
                "liveLoop": holder.as_ref().map(|h| json!({
                    "session": h.session_id,
                    "pid": h.pid,
                    "stateDir": (!h.state_dir.is_empty()).then_some(&h.state_dir),
                })),
                "path": path,
                "id": prd.id(),
                "title": prd.display_title(),
                "format": prd.format_name(),
                "frontMatter": prd.has_front_matter(),
                "phase": prd.front.phase,
                "status": prd.front.status,
                "loopStatus": prd.front.loop_status,
                "iteration": prd.front.iteration,
                "maxIterations": prd.front.max_iterations,
                "passing": passing,
                "total": total,
                "failing": failing,
                "parked": book.open_questions().map(|q| q.criterion.clone()).collect::<Vec<_>>(),
                "questions": book.questions.iter().map(|q| json!({
                    "criterion": q.criterion, "question": q.question, "askedAt": q.asked_at,
                    "session": q.session, "open": q.open(), "answer": q.answer,
                    "answeredAt": q.answered_at,
                })).collect::<Vec<_>>(),
                "lastSession": last.as_ref().map(|l| json!({
                    "stuckAttempts": l.stuck,
                    "session": l.session,
                    "agent": l.agent,
                    "attemptsByAgent": l.by_agent,
                    "unmerged": l.unmerged.iter().map(|(c, r)| json!({"criterion": c, "ref": r})).collect::<Vec<_>>(),
                    "lanes": l.lanes,
                })),
            }));
            continue;
        }
        outln!(
            out,
            "{}  {}",
            report::bold(prd.id().unwrap_or("(no id)")),
            prd.display_title().unwrap_or("")
        );
        outln!(out, "  {}", path.display());
        match prd.front.format {
            _ if !prd.has_front_matter() => outln!(
                out,
                "  no front matter: prdloop writes only its boxes (the rest is in the state file)"
            ),
            crate::prd::Format::V3 => outln!(
                out,
                "  status {} · loop {} · iteration {}/{}",
                prd.front.status,
                prd.front.loop_status.as_deref().unwrap_or("-"),
                prd.front.iteration,
                prd.front.max_iterations
            ),
            crate::prd::Format::V4 | crate::prd::Format::Isa => outln!(
                out,
                "  phase {} · iteration {}",
                prd.front.phase.as_deref().unwrap_or("-"),
                prd.front.iteration.max(1)
            ),
        }
        match holder {
            Some(h) => outln!(
                out,
                "  running now: session {} (pid {}){}",
                h.session_id,
                h.pid,
                h.other_state_dir(state_dir)
                    .map(|d| format!(", state in {d}"))
                    .unwrap_or_default()
            ),
            _ if prd.front.loop_status.as_deref() == Some("running") => outln!(
                out,
                "  no live loop holds it (a crash?); `prdloop resume` continues it"
            ),
            _ => {}
        }
        outln!(
            out,
            "  {} {passing}/{total}",
            report::bar(passing, total, 20)
        );
        if !failing.is_empty() {
            outln!(out, "  failing: {}", failing.join(", "));
        }
        for q in book.open_questions() {
            outln!(
                out,
                "  {} {} asks: {}",
                report::yellow("waits for an answer:"),
                q.criterion,
                crate::text::one_line(&q.question, 300)
            );
            outln!(
                out,
                "    prdloop answer {} {} \"<answer>\"",
                crate::backend::claude::shell_quote(&path.display().to_string()),
                q.criterion
            );
        }
        if let Some(l) = &last {
            let by: Vec<String> = l
                .by_agent
                .iter()
                .map(|(a, n)| format!("{n} by {a}"))
                .collect();
            outln!(
                out,
                "  last session {}: agent {}{}",
                l.session,
                l.agent,
                if by.is_empty() {
                    String::new()
                } else {
                    format!(" · attempts: {}", by.join(", "))
                }
            );
            if l.stuck > 0 {
                outln!(
                    out,
                    "  stuck: {} attempt(s) ended for repeating themselves (--stuck-after)",
                    l.stuck
                );
            }
        }
        if let Some(l) = &last {
            for (c, r) in &l.unmerged {
                outln!(
                    out,
                    "  unmerged: {c}'s passing attempt conflicted; kept as {r} (`git diff {r}^ {r}` shows it)"
                );
            }
            if !l.lanes.is_empty() {
                outln!(
                    out,
                    "  lanes: {} left in {} (`prdloop clean` removes them)",
                    l.lanes.len(),
                    l.lanes[0]
                        .parent()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                );
            }
        }
    }
    if json {
        crate::report::json::push_document(&mut out, out_json.into())?;
    }
    crate::report::stdout(&out)?;
    Ok(code)
}

/// The PRD's latest session as `status` shows it: which agent its workers ran, and how many
/// attempts each agent made (attempts logged before agents could be chosen were claude's).
struct LastSession {
    session: String,
    agent: crate::backend::Agent,
    by_agent: std::collections::BTreeMap<String, usize>,
    /// Attempts that passed but conflicted with the checkout: (criterion, the ref keeping it).
    unmerged: Vec<(String, String)>,
    /// Its lanes still on disk (a crash, `--keep-worktrees`).
    lanes: Vec<PathBuf>,
    /// Attempts ended as stuck.
    stuck: usize,
}

fn last_session(state_dir: &std::path::Path, prd: &std::path::Path) -> Option<LastSession> {
    let st = crate::state::SessionState::latest(state_dir, prd)?;
    let mut by_agent = std::collections::BTreeMap::new();
    let mut unmerged = Vec::new();
    let mut stuck = 0;
    if !st.attempts_log.is_empty() {
        for a in crate::state::read_attempts(std::path::Path::new(&st.attempts_log)) {
            stuck += usize::from(a.verdict == crate::state::AttemptVerdict::Stuck);
            let name = a.agent_name.unwrap_or_default().to_string();
            *by_agent.entry(name).or_insert(0) += 1;
            if let Some(
                crate::isolation::Landing::Conflict { kept, .. }
                | crate::isolation::Landing::Refused { kept, .. },
            ) = a.landing
            {
                unmerged.push((a.criterion, kept));
            }
        }
    }
    let mut lanes: Vec<PathBuf> = std::fs::read_dir(state_dir.join("lanes").join(&st.session_id))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .filter(|p| {
                    p.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        n.starts_with("lane-") && !n.ends_with(".prd")
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    lanes.sort();
    Some(LastSession {
        session: st.session_id,
        agent: st.worker_agent.unwrap_or_default(),
        by_agent,
        unmerged,
        lanes,
        stuck,
    })
}
