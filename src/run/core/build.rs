//! Building what the core decided: an [`Assignment`]'s worker per sample, with everything it
//! is given (its prompt, environment, log names, command line and sandbox, the check of a
//! claimed pass, the independent verifier, `--setup`). No decision is made here, and nothing
//! of the run changes: the same assignment builds the same workers.

use std::path::PathBuf;

use super::Core;
use crate::config::Select;
use crate::env;
use crate::evidence::verifier::ReviewJob;
use crate::run::event::{Launch, SampleTag};
use crate::run::log_name::{LogKind, LogName};
use crate::run::prompt;
use crate::worker::Spec;

/// What the core decided for a lane: its criterion's attempt, built into one worker per
/// sample by [`launch`].
pub(super) struct Assignment {
    pub lane: usize,
    pub criterion: crate::prd::Criterion,
    pub iteration: u64,
    /// Its number among the criterion's attempts, and how many times in a row an agent
    /// failure made it again (its log gets its own name, so the failed try's is kept).
    pub attempt: u32,
    pub retry: u32,
    /// What the last failed attempt said, for the prompt.
    pub previous: Option<prompt::Previous>,
    /// The Verify command the runner checks a claimed pass with.
    pub command: Option<String>,
}

/// One of an assignment's workers: the `k`-th of `of` samples (one without best-of-N), on
/// its set-up (`None`: the run's agent) and named by its label.
pub(super) struct Sample {
    pub k: u32,
    pub of: u32,
    pub setup: Option<crate::config::Setup>,
    pub label: String,
}

/// Where a worker works and what it is given.
struct Place {
    slot: usize,
    dir: PathBuf,
    /// The PRD it is given: with lanes, its lane's copy, never the user's file.
    prd: PathBuf,
}

/// The worker of `a`'s sample `s`.
pub(super) fn launch(core: &Core, a: &Assignment, s: &Sample) -> Launch {
    let best_of = core.cfg.samples.n > 1;
    let id = &a.criterion.id;
    let tag = best_of.then(|| SampleTag {
        k: s.k,
        n: s.of,
        setup: (!core.cfg.samples.mix.is_empty() || core.ladder.is_on()).then(|| s.label.clone()),
    });
    let slot = if best_of {
        a.lane * core.cfg.samples.n as usize + s.k as usize
    } else {
        a.lane
    };
    let place = Place {
        slot,
        dir: core.worker_dir(slot),
        prd: core
            .iso
            .as_ref()
            .map_or_else(|| core.cfg.prd_path.clone(), |iso| iso.prd_copy(slot)),
    };
    let log = LogName::worker(
        a.iteration,
        id,
        a.attempt,
        a.retry,
        tag.as_ref().map(|t| t.k + 1),
    );
    let agent = s.setup.as_ref().map_or(&core.cfg.agent, |s| &s.agent);
    let spec = worker_spec(core, a, &place, &log, agent, tag.as_ref());
    let check = core.verify_job(
        id,
        core.log_dir.join(log.of_kind(LogKind::Verify).to_string()),
        place.dir.clone(),
        Some(slot),
    );
    let review = review_job(core, a, &place, (agent, &s.label), &spec.env, &log);
    let others = if best_of && core.cfg.samples.select == Select::Best {
        core.other_checks(id, &log.stem(), &place.dir, slot)
    } else {
        Vec::new()
    };
    Launch {
        lane: a.lane,
        setup: setup_spec(core, &place, &log),
        shared_prd: core.iso.is_none().then(|| core.cfg.prd_path.clone()),
        attempt_name: log.attempt_name(),
        id: id.clone(),
        iteration: a.iteration,
        attempt: a.attempt,
        spec,
        check,
        guard: core.guard(&a.criterion),
        sample: tag,
        slot,
        others,
        review,
    }
}

/// The agent's process: its command line and stdin from the prompt, prdloop's environment,
/// the sandbox of its lane.
fn worker_spec(
    core: &Core,
    a: &Assignment,
    place: &Place,
    log: &LogName,
    agent: &crate::backend::AgentOptions,
    tag: Option<&SampleTag>,
) -> Spec {
    let c = &a.criterion;
    let text = prompt::build(
        &core.doc,
        &place.prd,
        &place.dir,
        c,
        a.previous.as_ref(),
        a.command.as_deref(),
        core.iso.is_some(),
        &core.questions.answered(&c.id),
    );
    let run = agent.command(&text);
    let mut env = vec![
        (env::WORKER_SESSION_ID.into(), core.session.clone()),
        (env::WORKER_PRD.into(), place.prd.display().to_string()),
        (env::WORKER_ITERATION.into(), a.iteration.to_string()),
        (env::WORKER_LANE.into(), (a.lane + 1).to_string()),
        (env::WORKER_CRITERION.into(), c.id.clone()),
        (env::WORKER_ATTEMPT.into(), a.attempt.to_string()),
    ];
    if let Some(t) = tag {
        env.push((env::WORKER_SAMPLE.into(), (t.k + 1).to_string()));
    }
    Spec {
        program: run.program,
        args: run.args,
        cwd: place.dir.clone(),
        env,
        env_remove: std::iter::once(env::CLAUDECODE.into())
            .chain(core.cfg.sandbox.env_remove(agent.agent))
            .collect(),
        stdin: run.stdin,
        log_path: core.log_dir.join(log.to_string()),
        timeout: core.cfg.timeout,
        kill_grace: core.cfg.kill_grace,
        format: agent.format(),
        sandbox: core
            .cfg
            .sandbox
            .rules(&core.lane_top(place.slot), agent.agent),
        stuck: core.cfg.stuck_after,
    }
}

/// `--setup`, run in a lane made anew (only with lanes): `sh -c` under a check's rules.
fn setup_spec(core: &Core, place: &Place, log: &LogName) -> Option<Spec> {
    let cmd = core.iso.as_ref().and(core.cfg.isolation.setup.as_ref())?;
    Some(Spec {
        program: "sh".into(),
        args: vec!["-c".into(), cmd.clone()],
        cwd: place.dir.clone(),
        env: Vec::new(),
        env_remove: vec![env::CLAUDECODE.into()],
        stdin: Vec::new(),
        log_path: core.log_dir.join(log.of_kind(LogKind::Setup).to_string()),
        timeout: core.cfg.timeout,
        kill_grace: core.cfg.kill_grace,
        format: crate::backend::OutputFormat::Text,
        sandbox: core.cfg.sandbox.check_rules(&core.lane_top(place.slot)),
        stuck: crate::backend::stuck::StuckAfter::OFF,
    })
}

/// The verifier's job for the worker on `worker`'s set-up (options and label): that set-up
/// reviews unless `--verifier` names another; none with `--verifier none`.
fn review_job(
    core: &Core,
    a: &Assignment,
    place: &Place,
    worker: (&crate::backend::AgentOptions, &str),
    worker_env: &[(String, String)],
    log: &LogName,
) -> Option<ReviewJob> {
    let (agent, setup, named) = core.cfg.verifier.for_worker(worker)?;
    let mut env = worker_env.to_vec();
    env.push((env::WORKER_ROLE.into(), "verifier".into()));
    let sandbox = core.cfg.sandbox.verifier_rules(agent.agent);
    let env_remove = std::iter::once(env::CLAUDECODE.into())
        .chain(core.cfg.sandbox.env_remove(agent.agent))
        .collect();
    Some(ReviewJob {
        id: a.criterion.id.clone(),
        sandbox,
        agent,
        setup,
        named,
        prompt: crate::evidence::verifier::prompt(&core.doc, &place.prd, &place.dir, &a.criterion),
        cwd: place.dir.clone(),
        env,
        env_remove,
        log_path: core
            .log_dir
            .join(log.of_kind(LogKind::Verifier).to_string()),
        timeout: core.cfg.timeout,
        kill_grace: core.cfg.kill_grace,
    })
}
