//! `prdloop run` (and PAI's `-m loop -p`): validate everything, then hand over to the loop.
//!
//! With `--json` every run prints one `end` event on stdout: the loop's own, or, when the
//! run ends before or outside the loop (a bad PRD, a missing agent, a busy lock, nothing to
//! do), one made here, so a script always gets an `end` line.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::warning::Warning;
use crate::config::{RunConfig, RunSettings};
use crate::config_file::SessionSettings;
use crate::exit::Exit;
use crate::prd::lookup::{self, Locations};
use crate::run::json_event::{self, JsonEvent};
use crate::{exit, report};

/// How a `run` or `resume` came out.
pub(crate) enum Came {
    /// The loop ran and printed its own `end` event.
    Loop(Exit),
    /// It ended before (or instead of) the loop.
    Early(Early),
    /// The loop failed. `ended`: it had printed its `end` event first (the run had ended
    /// when the last write failed).
    Failed { error: anyhow::Error, ended: bool },
}

/// A run that ended before the loop: what to say and the exit code.
pub(crate) struct Early {
    /// The `end` event's `outcome`: `error`, `locked`, `already_complete`.
    outcome: &'static str,
    code: Exit,
    message: String,
    /// The message is already on stderr.
    shown: bool,
    /// The PRD's progress, when it was read: (passing, total, failing ids).
    progress: Option<(usize, usize, Vec<String>)>,
}

impl Early {
    fn error(code: Exit, message: String) -> Came {
        Came::Early(early_error(code, message))
    }
}

pub fn run(prd_arg: &str, opts: &RunSettings, loc: Result<Locations>) -> Result<Exit> {
    ended(opts.json, || {
        let loc = loc?;
        let path = lookup::resolve(prd_arg, &loc)?;
        start(path, opts, 1, None, &loc)
    })
}

/// `prdloop resume`: the PRD's latest session, with its id, state file, attempt history and
/// (unless `-a` is given) its agent count.
/// `resume`: the latest session of the PRD, continued. `agent_given`: the command line, the
/// environment or a config file named an agent or its program; else the session's own agent
/// runs again.
/// How a `resume` makes its settings: from the session's recorded ones (and the state file
/// they are in), its own command line over them.
pub type ResumeSettings<'a> = dyn Fn(&Path, &SessionSettings, &Path) -> Result<RunSettings> + 'a;

pub fn resume(
    prd_arg: &str,
    opts: &RunSettings,
    over_session: &ResumeSettings,
    loc: Result<Locations>,
) -> Result<Exit> {
    ended(opts.json, || {
        let loc = loc?;
        let path = lookup::resolve(prd_arg, &loc)?;
        // What to resume is settled before the PRD is read (under the session's lock).
        if opts.shard.is_some() {
            return Ok(Early::error(
                exit::Exit::Usage,
                "--shard works with `run`, not `resume`: the criteria still failing would split differently; run the shard again from the commit the fan-out began at".to_string(),
            ));
        }
        let paths = opts.paths(&path, &loc)?;
        let Some(prev) = crate::state::SessionState::latest(&paths.state_dir, &path) else {
            return Ok(Early::error(
                exit::Exit::Usage,
                format!(
                    "no earlier session of {} in {}; start one with `prdloop run`",
                    path.display(),
                    paths.state_dir.display()
                ),
            ));
        };
        let agents = i64::try_from(prev.parallel_agents).unwrap_or(1);
        // A state file from before the settings were kept gives none.
        let opts = match &prev.run_settings {
            Some(session) if !session.is_empty() => {
                let file = crate::state::SessionState::path(&paths.state_dir, &prev.session_id);
                over_session(&path, session, &file)?
            }
            _ => opts.clone(),
        };
        start(path, &opts, agents, Some(prev), &loc)
    })
}

/// Runs `body`; says how a run that did not reach the loop ended (on stderr, and with `--json`
/// as an `end` event on stdout) and returns the exit code.
fn ended(json: bool, body: impl FnOnce() -> Result<Came>) -> Result<Exit> {
    match body() {
        Ok(Came::Loop(code)) => Ok(code),
        Ok(Came::Failed { error, ended }) => {
            if json && !ended {
                end_event("error", exit::code_of(&error), &format!("{error:#}"), None);
            }
            Err(error)
        }
        Ok(Came::Early(e)) => {
            if !e.shown {
                report::error(&e.message);
            }
            if json {
                end_event(e.outcome, e.code, &e.message, e.progress.as_ref());
            }
            Ok(e.code)
        }
        Err(e) => {
            // `main` reports the error itself.
            if json {
                end_event("error", exit::code_of(&e), &format!("{e:#}"), None);
            }
            Err(e)
        }
    }
}

/// How one sub-loop of several came out (`prdloop run A.md B.md`), said as [`ended`] says a
/// run's, the PRD named in errors (`[label]`) and `end` events (`prd`): its exit code, and
/// for a run that did not reach its loop's end, its outcome word and message.
pub(crate) fn settle(
    json: bool,
    prd: &std::path::Path,
    label: &str,
    came: Result<Came>,
) -> (Exit, Option<(&'static str, String)>) {
    let prd_field = Some(prd);
    let error = |e: &anyhow::Error, event: bool| {
        let code = exit::code_of(e);
        report::error(format!("[{label}] {e:#}"));
        if json && event {
            end_event_for(prd_field, "error", code, &format!("{e:#}"), None);
        }
        (code, Some(("error", format!("{e:#}"))))
    };
    match came {
        Ok(Came::Loop(code)) => (code, None),
        Ok(Came::Failed { error: e, ended }) => error(&e, !ended),
        Err(e) => error(&e, true),
        Ok(Came::Early(e)) => {
            if !e.shown {
                report::error(format!("[{label}] {}", e.message));
            }
            if json {
                end_event_for(
                    prd_field,
                    e.outcome,
                    e.code,
                    &e.message,
                    e.progress.as_ref(),
                );
            }
            (e.code, Some((e.outcome, e.message)))
        }
    }
}

/// The `end` event of a run that ended before its loop, in the shape of the loop's own.
pub(crate) fn end_event(
    outcome: &str,
    code: Exit,
    message: &str,
    progress: Option<&(usize, usize, Vec<String>)>,
) {
    end_event_for(None, outcome, code, message, progress)
}

/// [`end_event`], for one PRD of several (`prd`: its path).
fn end_event_for(
    prd: Option<&std::path::Path>,
    outcome: &str,
    code: Exit,
    message: &str,
    progress: Option<&(usize, usize, Vec<String>)>,
) {
    let prd = prd.map(|p| p.display().to_string());
    JsonEvent::End(json_event::End::early(
        prd, outcome, code, message, progress,
    ))
    .emit();
}

fn start(
    path: std::path::PathBuf,
    opts: &RunSettings,
    default_agents: i64,
    resume: Option<crate::state::SessionState>,
    loc: &Locations,
) -> Result<Came> {
    let (mut run, claim) = match ready(&path, opts, default_agents, resume.as_ref(), loc, || {
        crate::commands::load_prd(&path)
    })? {
        Ready::Run { run, claim } => (*run, claim),
        Ready::Not(came) => return Ok(came),
    };
    let shard = match begin_shard(&mut run, opts)? {
        Ok(shard) => shard,
        Err(empty) => return Ok(empty),
    };
    let rt = super::runtime()?;
    let state_dir = run.own.state_dir.clone();
    if let Some(port) = opts.serve {
        crate::serve::beside(crate::serve::Options {
            state_dirs: vec![state_dir.clone()],
            port,
        })?;
    }
    let began = crate::state::now_ms();
    let resumed = resume.as_ref().map(|s| s.session_id.clone());
    // A single PRD is capped only when --max-workers is given.
    let link = opts
        .max_workers
        .map(|n| crate::run::SubLoops::new(Some(n)).link(None));
    let progress = progress_of(&run.doc);
    let result = rt.block_on(crate::run::execute_in(run, claim, resume, link));
    // Nothing the workers detached outlives the run.
    crate::worker::reaper::end_adopted(opts.kill_grace);
    if let Some(shard) = shard
        && !matches!(result, Ok(exit::Exit::Locked))
    {
        let state = crate::state::SessionState::latest(&state_dir, &path)
            .filter(|s| s.algorithm_started_at >= began || Some(&s.session_id) == resumed.as_ref());
        let code = match &result {
            Ok(c) => *c,
            Err(e) => exit::code_of(e),
        };
        match shard.finish(state.as_ref(), code) {
            Ok(dir) => report::eline(&format!("bundle written to {}", dir.display())),
            Err(error) => {
                let error = error.context("the shard's bundle could not be written");
                return Ok(match result {
                    Ok(_) => Came::Failed { error, ended: true },
                    Err(e) => Came::Failed {
                        error: e.context(format!("{error:#}")),
                        ended: false,
                    },
                });
            }
        }
    }
    Ok(came_of(result, &path, &state_dir, began, progress))
}

/// A run ready for its loop, with its claim on the PRD's lock; or how it ended before it.
pub(crate) enum Ready {
    Run {
        run: Box<crate::run::Prepared>,
        claim: crate::run::Claim,
    },
    Not(Came),
}

/// Makes the run on the PRD at `path` ready, in this order: its own paths from the settings,
/// its PRD's lock (none for `--dry-run`, which only reads), the PRD read (`read`: once, under
/// the lock), then every check of [`prepare`].
///
/// Which error wins when another run holds the lock: the PRD's and the settings'. A PRD that
/// is malformed, has nothing to run or fails a check ends with that error (and exit code),
/// as it did when the lock was taken after the checks; the busy lock is said only by the loop
/// ([`crate::run::execute_in`]: exit 3, `locked`), for a run that would otherwise have
/// started. A PRD read without its lock serves only those checks and the `end` event's
/// progress, never a loop (the loop holding it replaces the file whole, so it is read whole).
/// `resume` settles its session (`--shard`, no earlier session, its settings) before the lock,
/// which it needs: those errors now come before the PRD's.
pub(crate) fn ready(
    path: &std::path::Path,
    opts: &RunSettings,
    default_agents: i64,
    resume: Option<&crate::state::SessionState>,
    loc: &Locations,
    read: impl FnOnce() -> Result<crate::prd::Prd>,
) -> Result<Ready> {
    let own = opts.own_paths(path, loc)?;
    let claim = match opts.dry_run {
        true => None,
        false => Some(crate::run::claim(&own, resume)?),
    };
    let run = match prepare(own, read()?, opts, default_agents)? {
        Checked::Run(run) => run,
        Checked::Not(came) => return Ok(Ready::Not(came)),
    };
    let Some(claim) = claim else {
        anyhow::bail!("a dry run got past its plan (this is a bug)");
    };
    Ok(Ready::Run { run, claim })
}

/// What the checks before the loop found: a run to start, or how it ended.
enum Checked {
    Run(Box<crate::run::Prepared>),
    Not(Came),
}

/// Everything before the loop: criteria, an already complete PRD, the settings, `--dry-run`,
/// the graph, the agent program, the sandbox.
fn prepare(
    own: crate::config::OwnPaths,
    doc: crate::prd::Prd,
    opts: &RunSettings,
    default_agents: i64,
) -> Result<Checked> {
    let path = own.prd.as_path();
    if doc.criteria.is_empty() {
        return Ok(Checked::Not(Early::error(
            exit::Exit::Usage,
            super::no_criteria_message(path, &doc),
        )));
    }
    let progress = progress_of(&doc);
    if doc.front.is_complete() && !opts.force {
        let message = already_complete(path, &doc);
        return Ok(Checked::Not(Came::Early(Early {
            outcome: "already_complete",
            code: exit::Exit::Success,
            message,
            shown: true,
            progress: Some(progress),
        })));
    }
    let (mut cfg, warnings) = opts.config(&own, default_agents)?;
    for w in warnings {
        report::warn(w);
    }
    if doc.front.format == crate::prd::Format::V3
        && doc.has_front_matter()
        && !crate::run::front::summary_is_ours(&doc)
    {
        report::warn(Warning::SummaryNotCounted {
            prd: path.to_path_buf(),
        });
    }
    // The plan refuses a cycle or an unknown id in `(after: …)` itself (its graph is the one
    // build of it a dry run makes).
    if opts.dry_run {
        let settings = crate::config::PlanSettings {
            prd: path.to_path_buf(),
            agents: cfg.agents,
            agent: cfg.agent.clone(),
            workdir: cfg.workdir.clone(),
            verify_types: cfg.verify_types.clone(),
            json: opts.json,
            shards: None,
        };
        super::plan::print(path, &doc, &settings)?;
        return Ok(Checked::Not(Came::Loop(exit::Exit::Success)));
    }
    // A cycle or an unknown id in `(after: …)` is refused before anything is written.
    let graph = crate::graph::Graph::checked(&doc, path)?;
    if let Err(msg) = workers_can_start(&mut cfg) {
        return Ok(Checked::Not(Came::Early(Early {
            progress: Some(progress),
            ..early_error(exit::Exit::Usage, msg)
        })));
    }
    Ok(Checked::Run(Box::new(crate::run::Prepared {
        cfg,
        own,
        doc,
        graph,
    })))
}

/// Whether the run's workers can start: the agent programs are found, the sandbox can be had
/// and leaves prdloop's state alone (settled in `cfg`). `Err`: what to say.
fn workers_can_start(cfg: &mut RunConfig) -> std::result::Result<(), String> {
    // A missing or non-executable agent is found before anything is written.
    let flag = if cfg.agent.agent == crate::backend::Agent::Claude {
        "--claude-bin (PRDLOOP_CLAUDE_BIN) or --agent-bin (PRDLOOP_AGENT_BIN)"
    } else {
        "--agent-bin (PRDLOOP_AGENT_BIN)"
    };
    crate::platform::find_program(&cfg.agent.bin, flag)?;
    let setups = (cfg.samples.mix.iter().map(|s| ("--mix", s))).chain(
        cfg.samples
            .escalate
            .setups
            .iter()
            .map(|s| ("--escalate", s)),
    );
    for (flag, setup) in setups {
        crate::platform::find_program(&setup.agent.bin, flag)
            .map_err(|msg| format!("{flag} `{}`: {msg}", setup.label))?;
    }
    // `--sandbox on` where it cannot be had fails here, before any worker starts.
    cfg.sandbox.decide()?;
    // Nothing of prdloop's may be where a sandboxed worker can write.
    cfg.sandbox.check_own(&cfg.state_dir, &[])?;
    cfg.agent.in_prdloop_sandbox = cfg.sandbox.confines(cfg.agent.agent);
    for setup in cfg
        .samples
        .mix
        .iter_mut()
        .chain(cfg.samples.escalate.setups.iter_mut())
    {
        setup.agent.in_prdloop_sandbox = cfg.sandbox.confines(setup.agent.agent);
    }
    Ok(())
}

/// The PRD's progress before the run: (passing, total, failing ids).
pub(crate) fn progress_of(doc: &crate::prd::Prd) -> (usize, usize, Vec<String>) {
    let failing: Vec<String> = doc.failing().map(|c| c.id.clone()).collect();
    (
        doc.criteria.len() - failing.len(),
        doc.criteria.len(),
        failing,
    )
}

/// How a loop that was started came out. `began`: when it started (epoch ms).
pub(crate) fn came_of(
    result: Result<Exit>,
    path: &std::path::Path,
    state_dir: &std::path::Path,
    began: u64,
    progress: (usize, usize, Vec<String>),
) -> Came {
    let code = match result {
        Ok(code) => code,
        Err(error) => {
            // A run that reached its end (its state says when) printed its `end` event.
            let ended = crate::state::SessionState::latest(state_dir, path)
                .and_then(|s| s.completed_at)
                .is_some_and(|at| at >= began);
            return Came::Failed { error, ended };
        }
    };
    if code == exit::Exit::Locked {
        // The loop never started (it never ends with this code): another one holds the PRD.
        // The lock's holder, for scripts; the message is on stderr already.
        let holder = crate::state::lock_holder(path).ok().flatten();
        return Came::Early(Early {
            outcome: "locked",
            code,
            message: format!(
                "{} is already being run by {}",
                path.display(),
                crate::state::LockInfo::describe(holder.as_ref())
            ),
            shown: true,
            progress: Some(progress),
        });
    }
    Came::Loop(code)
}

fn early_error(code: Exit, message: String) -> Early {
    Early {
        outcome: "error",
        code,
        message,
        shown: false,
        progress: None,
    }
}

/// A PRD that says its work is done is left as it is (PAI answers the same way). Returns the
/// first line said.
fn already_complete(path: &std::path::Path, doc: &crate::prd::Prd) -> String {
    let said = match (doc.front.terminal_status(), doc.front.format) {
        (Some(s), _) => format!("status: {s}"),
        (None, crate::prd::Format::V3) => "status: COMPLETE".into(),
        (None, _) => "phase: complete".into(),
    };
    let message = format!(
        "{} is already complete ({said}); nothing changed. `--force` runs it anyway.",
        path.display()
    );
    report::eline(&message);
    let open: Vec<String> = doc
        .failing()
        .map(|c| format!("  {} {}", c.id, c.description))
        .collect();
    if !open.is_empty() {
        report::eline(&format!(
            "{} box(es) left open, as the author left them:",
            open.len()
        ));
        for line in open {
            report::eline(&line);
        }
    }
    message
}

/// `--shard I/N --bundle DIR`: the run's scope is the shard's criteria, and the checkout is
/// taken as it is now, for the bundle. `Err`: the shard has nothing to work; its (empty)
/// bundle is written and the run ends there.
fn begin_shard(
    prepared: &mut crate::run::Prepared,
    opts: &RunSettings,
) -> Result<Result<Option<crate::bundle::ShardRun>, Came>> {
    let (Some(shard), Some(dir)) = (opts.shard, opts.bundle.as_ref()) else {
        return Ok(Ok(None));
    };
    let (doc, own) = (&prepared.doc, &prepared.own);
    let items = crate::shard::items(doc);
    // By count, as `plan --shards` splits: the same on every machine whatever its history.
    let expected = std::collections::HashMap::new();
    let ids = crate::shard::ids_of(&crate::shard::split(doc, shard.count, &expected), shard);
    prepared.cfg.scope = Some(ids.iter().cloned().collect());
    let unwritable = own.unwritable();
    let unwritable: Vec<&std::path::Path> = unwritable.iter().map(PathBuf::as_path).collect();
    let workdir = &prepared.cfg.workdir;
    let run = crate::bundle::ShardRun::begin(shard, ids, dir, &own.prd, doc, workdir, &unwritable)?;
    report::eline(&format!(
        "shard {shard}: {} of {} failing criteria{}",
        run.ids.len(),
        items.len(),
        if run.ids.is_empty() {
            String::new()
        } else {
            format!(" ({})", run.ids.join(", "))
        }
    ));
    if !run.ids.is_empty() {
        return Ok(Ok(Some(run)));
    }
    let dir = run.finish(None, exit::Exit::Success)?;
    let message = format!(
        "shard {shard} has no criteria to work (fewer domain groups than shards); empty bundle written to {}",
        dir.display()
    );
    report::eline(&message);
    Ok(Err(Came::Early(Early {
        outcome: "empty_shard",
        code: exit::Exit::Success,
        message,
        shown: true,
        progress: None,
    })))
}
