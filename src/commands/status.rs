//! `prdloop status`: each PRD's progress, as a [`PrdStatus`] report per PRD that renders both
//! the text and `--json`.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Serialize;

use crate::evidence::Evidence;
use crate::exit::Exit;
use crate::outln;
use crate::report;
use crate::report::json::Version;

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
    let mut reports = Vec::new();
    let mut code = crate::exit::Exit::Success;
    for path in paths {
        match PrdStatus::of(path, state_dir) {
            Ok(r) => reports.push(r),
            Err(e) => {
                // One broken PRD does not hide the others.
                report::error(format!("{e:#}"));
                code = crate::exit::Exit::Usage;
            }
        }
    }
    if json {
        crate::report::json::push_report(&mut out, &reports)?;
    } else {
        for r in &reports {
            r.text(&mut out);
        }
    }
    crate::report::stdout(&out)?;
    Ok(code)
}

/// One PRD's progress, as `status` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrdStatus {
    live_loop: Option<LiveLoop>,
    path: PathBuf,
    id: Option<String>,
    title: Option<String>,
    format: &'static str,
    front_matter: bool,
    phase: Option<String>,
    status: String,
    loop_status: Option<String>,
    iteration: u64,
    max_iterations: u64,
    passing: usize,
    total: usize,
    failing: Vec<String>,
    /// Each criterion, and how its tick was earned.
    criteria: Vec<CriterionTick>,
    parked: Vec<String>,
    questions: Vec<QuestionView>,
    last_session: Option<LastSession>,
    version: Version,
    /// For the text: the PRD's format, whose front matter says different things.
    #[serde(skip)]
    kind: crate::prd::Format,
}

/// The loop that holds the PRD's lock now.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LiveLoop {
    session: String,
    pid: u32,
    state_dir: Option<String>,
    /// For the text: its state folder when it is not this one.
    #[serde(skip)]
    elsewhere: Option<String>,
}

/// A criterion and how its tick was earned (`checked`, `reviewed`, `claimed`, `before`);
/// `earned` is null for an open box, and for a tick no session of this state folder recorded.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CriterionTick {
    id: String,
    ticked: bool,
    earned: Option<Evidence>,
}

/// A question a worker asked.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct QuestionView {
    criterion: String,
    question: String,
    asked_at: u64,
    session: String,
    open: bool,
    answer: Option<String>,
    answered_at: Option<u64>,
}

impl PrdStatus {
    /// The progress of the PRD at `path`, with what this state folder knows of it.
    fn of(path: &Path, state_dir: &Path) -> Result<PrdStatus> {
        let prd = crate::prd::load(path)?;
        let (passing, total) = prd.progress();
        let failing: Vec<String> = prd.failing().map(|c| c.id.clone()).collect();
        // The PRD's lock is found whatever state folder its loop was given.
        let live_loop = crate::state::lock_holder(path)
            .ok()
            .flatten()
            .map(|h| LiveLoop {
                elsewhere: h.other_state_dir(state_dir).map(String::from),
                session: h.session_id,
                pid: h.pid,
                state_dir: (!h.state_dir.is_empty()).then_some(h.state_dir),
            });
        let state = crate::state::SessionState::latest(state_dir, path);
        let earned = |id: &str| {
            let c = state.as_ref()?.criteria.iter().find(|c| c.id == id)?;
            c.receipt.as_ref().map(|r| r.evidence).or(c.verified_by)
        };
        let criteria = prd
            .criteria
            .iter()
            .map(|c| CriterionTick {
                id: c.id.clone(),
                ticked: c.checked,
                earned: if c.checked { earned(&c.id) } else { None },
            })
            .collect();
        // The questions workers asked: the running loop's book, else this state folder's.
        let mut book = crate::questions::book_of(path, state_dir)
            .map(|(p, _)| crate::questions::load(&p))
            .unwrap_or_default();
        // Only criteria still open can wait (one ticked since, or gone, does not).
        book.questions
            .retain(|q| !q.open() || failing.contains(&q.criterion));
        Ok(PrdStatus {
            live_loop,
            path: path.to_path_buf(),
            id: prd.id().map(String::from),
            title: prd.display_title().map(String::from),
            format: prd.format_name(),
            front_matter: prd.has_front_matter(),
            phase: prd.front.phase.clone(),
            status: prd.front.status.clone(),
            loop_status: prd.front.loop_status.clone(),
            iteration: prd.front.iteration,
            max_iterations: prd.front.max_iterations,
            passing,
            total,
            failing,
            criteria,
            parked: book.open_questions().map(|q| q.criterion.clone()).collect(),
            questions: book
                .questions
                .iter()
                .map(|q| QuestionView {
                    criterion: q.criterion.clone(),
                    question: q.question.clone(),
                    asked_at: q.asked_at,
                    session: q.session.clone(),
                    open: q.open(),
                    answer: q.answer.clone(),
                    answered_at: q.answered_at,
                })
                .collect(),
            last_session: state.map(|st| last_session(state_dir, st)),
            version: Version,
            kind: prd.front.format,
        })
    }

    /// The report as people read it.
    fn text(&self, out: &mut String) {
        outln!(
            out,
            "{}  {}",
            report::bold(self.id.as_deref().unwrap_or("(no id)")),
            self.title.as_deref().unwrap_or("")
        );
        outln!(out, "  {}", self.path.display());
        match self.kind {
            _ if !self.front_matter => outln!(
                out,
                "  no front matter: prdloop writes only its boxes (the rest is in the state file)"
            ),
            crate::prd::Format::V3 => outln!(
                out,
                "  status {} · loop {} · iteration {}/{}",
                self.status,
                self.loop_status.as_deref().unwrap_or("-"),
                self.iteration,
                self.max_iterations
            ),
            crate::prd::Format::V4 | crate::prd::Format::Isa => outln!(
                out,
                "  phase {} · iteration {}",
                self.phase.as_deref().unwrap_or("-"),
                self.iteration.max(1)
            ),
        }
        match &self.live_loop {
            Some(h) => outln!(
                out,
                "  running now: session {} (pid {}){}",
                h.session,
                h.pid,
                h.elsewhere
                    .as_ref()
                    .map(|d| format!(", state in {d}"))
                    .unwrap_or_default()
            ),
            _ if self.loop_status.as_deref() == Some("running") => outln!(
                out,
                "  no live loop holds it (a crash?); `prdloop resume` continues it"
            ),
            _ => {}
        }
        outln!(
            out,
            "  {} {}/{}",
            report::bar(self.passing, self.total, 20),
            self.passing,
            self.total
        );
        let ticks: Vec<String> = self
            .criteria
            .iter()
            .filter(|c| c.ticked)
            .map(|c| {
                format!(
                    "{} {}",
                    c.id,
                    c.earned.map_or("(no receipt)", Evidence::word)
                )
            })
            .collect();
        if !ticks.is_empty() {
            outln!(out, "  ticked: {}", ticks.join(", "));
        }
        if !self.failing.is_empty() {
            outln!(out, "  failing: {}", self.failing.join(", "));
        }
        for q in self.questions.iter().filter(|q| q.open) {
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
                crate::backend::claude::shell_quote(&self.path.display().to_string()),
                q.criterion
            );
        }
        if let Some(l) = &self.last_session {
            l.text(out);
        }
    }
}

/// The PRD's latest session as `status` shows it: which agent its workers ran, and how many
/// attempts each agent made (attempts logged before agents could be chosen were claude's).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LastSession {
    /// Attempts ended as stuck.
    #[serde(rename = "stuckAttempts")]
    stuck: usize,
    session: String,
    agent: crate::backend::Agent,
    #[serde(rename = "attemptsByAgent")]
    by_agent: std::collections::BTreeMap<String, usize>,
    /// Attempts that passed but conflicted with the checkout.
    unmerged: Vec<Unmerged>,
    /// Its lanes still on disk (a crash, `--keep-worktrees`).
    lanes: Vec<PathBuf>,
}

/// A passing attempt that conflicted with the checkout, and the ref that keeps it.
#[derive(Debug, Serialize)]
struct Unmerged {
    criterion: String,
    #[serde(rename = "ref")]
    kept: String,
}

impl LastSession {
    fn text(&self, out: &mut String) {
        let by: Vec<String> = self
            .by_agent
            .iter()
            .map(|(a, n)| format!("{n} by {a}"))
            .collect();
        outln!(
            out,
            "  last session {}: agent {}{}",
            self.session,
            self.agent,
            if by.is_empty() {
                String::new()
            } else {
                format!(" · attempts: {}", by.join(", "))
            }
        );
        if self.stuck > 0 {
            outln!(
                out,
                "  stuck: {} attempt(s) ended for repeating themselves (--stuck-after)",
                self.stuck
            );
        }
        for Unmerged {
            criterion: c,
            kept: r,
        } in &self.unmerged
        {
            outln!(
                out,
                "  unmerged: {c}'s passing attempt conflicted; kept as {r} (`git diff {r}^ {r}` shows it)"
            );
        }
        if !self.lanes.is_empty() {
            outln!(
                out,
                "  lanes: {} left in {} (`prdloop clean` removes them)",
                self.lanes.len(),
                self.lanes[0]
                    .parent()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
        }
    }
}

fn last_session(state_dir: &Path, st: crate::state::SessionState) -> LastSession {
    let mut by_agent = std::collections::BTreeMap::new();
    let mut unmerged = Vec::new();
    let mut stuck = 0;
    if !st.attempts_log.is_empty() {
        for a in crate::state::read_attempts(Path::new(&st.attempts_log)) {
            stuck += usize::from(a.verdict == crate::state::AttemptVerdict::Stuck);
            let name = a.agent_name.unwrap_or_default().to_string();
            *by_agent.entry(name).or_insert(0) += 1;
            if let Some(
                crate::isolation::Landing::Conflict { kept, .. }
                | crate::isolation::Landing::Refused { kept, .. },
            ) = a.landing
            {
                unmerged.push(Unmerged {
                    criterion: a.criterion,
                    kept,
                });
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
    LastSession {
        session: st.session_id,
        agent: st.worker_agent.unwrap_or_default(),
        by_agent,
        unmerged,
        lanes,
        stuck,
    }
}
