//! Launching: for each idle lane, its next criterion, when no pause, request, stop or limit
//! forbids it; each becomes a worker `Spec` (the chosen agent's command line and stdin,
//! prdloop's environment) and, for a runnable criterion, the check of a claimed PASS.

use super::{Core, Now};
use crate::config::Select;
use crate::env;
use crate::evidence::verifier::ReviewJob;
use crate::run::event::{Flush, Launch, Response, RunEvent, SampleTag};
use crate::run::limits::{Spending, launch_blocked};
use crate::run::log_name::{LogKind, LogName};
use crate::run::prompt;
use crate::run::reason::Notice;
use crate::state::AgentStatus;
use crate::worker::Spec;

/// Fills the idle lanes.
pub(in crate::run) fn fill(core: &mut Core, now: Now) -> Response {
    let mut r = Response::default();
    let Some(iteration) = core.rounds.open_number() else {
        return r;
    };
    let paused = core.pause_until().is_some_and(|t| t > now.at);
    if !core.may_launch() || paused {
        return r;
    }
    // Workers running now and those this pass starts: their expected cost counts against
    // --max-cost before they have reported it.
    let (sampled_lanes, samples) = core.sampling.running();
    let mut in_flight = (core.schedule.busy_lanes() - sampled_lanes + samples) as u32;
    for lane in core.schedule.idle_lanes() {
        let Some(id) = core.schedule.next_for_lane(lane) else {
            continue;
        };
        let iteration = core.iteration_of(&id).unwrap_or(iteration);
        let Some(c) = core.doc.criterion(&id).cloned() else {
            r.say(RunEvent::Warning(format!(
                "{id} is no longer in the PRD; skipped"
            )));
            core.schedule.forget(lane, &id);
            continue;
        };
        let spending = Spending {
            cost: core.ledger.total_cost,
            workers_done: core.ledger.workers_done,
            worker_time: core.ledger.worker_time,
            elapsed: core.elapsed(now),
            running: in_flight,
        };
        let mean = spending.each();
        if let Some(why) = launch_blocked(core.cfg.max_cost, core.cfg.max_time, &spending) {
            r.say(RunEvent::Notice(Notice::NoNewWorkers(why.clone())));
            core.brakes.stop_for(why);
            core.schedule.requeue(lane, &id, &c.domain);
            break;
        }
        let attempt = core.ledger.next_attempt(&id);
        let previous = core.ledger.get(&id).and_then(|rec| {
            rec.last_failure.clone().map(|text| prompt::Previous {
                text,
                stuck: rec.last_failure_stuck,
            })
        });
        let command = core.command_for(&id).map(String::from);
        // A retry after an agent failure keeps the attempt number: its log gets its own name
        // so that the failed try's log is kept.
        let retry = core
            .ledger
            .get(&id)
            .map_or(0, |r| r.agent_failures_this_attempt);
        // The most samples an attempt runs (each lane has that many worktrees), and this
        // one's: all of them, or under `--best-of auto` what its domain's record says.
        let n = core.cfg.samples.n;
        let (_, want) = core.samples_for(&id, now);
        let count = samples_that_fit(want, core.cfg.max_cost, spending.committed(), mean);
        if count < want {
            r.say(RunEvent::Notice(Notice::SamplesCut {
                id: id.clone(),
                count,
                want,
                max_cost: core.cfg.max_cost.unwrap_or_default(),
                per_worker: mean,
            }));
        }
        in_flight += count;
        core.schedule.set_running(lane, Some(id.clone()));
        core.attempt_started(lane, &id, iteration, now);
        if n > 1 {
            core.sampling
                .start(lane, crate::run::samples::SampleSet::new(&id, count));
        }
        for k in 0..count {
            let setup = core.setup_for(&id, k, now).cloned();
            let label = core.label_of(setup.as_ref());
            core.slot_setup.insert((lane, k), label.clone());
            let sample = (n > 1).then(|| SampleTag {
                k,
                n: count,
                setup: (!core.cfg.samples.mix.is_empty() || core.ladder.is_on())
                    .then(|| label.clone()),
            });
            let slot = if n > 1 {
                lane * n as usize + k as usize
            } else {
                lane
            };
            let dir = core.worker_dir(slot);
            // An isolated worker is given its lane's copy of the PRD, never the user's file.
            let prd_given = core
                .iso
                .as_ref()
                .map_or_else(|| core.cfg.prd_path.clone(), |iso| iso.prd_copy(slot));
            let text = prompt::build(
                &core.doc,
                &prd_given,
                &dir,
                &c,
                previous.as_ref(),
                command.as_deref(),
                core.iso.is_some(),
                &core.questions.answered(&id),
            );
            let log_name = LogName::worker(
                iteration,
                &id,
                attempt,
                retry,
                sample.as_ref().map(|t| t.k + 1),
            );
            let stem = log_name.stem();
            let name = log_name.attempt_name();
            let log_path = core.log_dir.join(log_name.to_string());
            let agent = setup.as_ref().map_or(&core.cfg.agent, |s| &s.agent);
            let run = agent.command(&text);
            let mut env = vec![
                (env::WORKER_SESSION_ID.into(), core.session.clone()),
                (env::WORKER_PRD.into(), prd_given.display().to_string()),
                (env::WORKER_ITERATION.into(), iteration.to_string()),
                (env::WORKER_LANE.into(), (lane + 1).to_string()),
                (env::WORKER_CRITERION.into(), id.clone()),
                (env::WORKER_ATTEMPT.into(), attempt.to_string()),
            ];
            if let Some(t) = &sample {
                env.push((env::WORKER_SAMPLE.into(), (t.k + 1).to_string()));
            }
            let spec = Spec {
                program: run.program,
                args: run.args,
                cwd: dir.clone(),
                env,
                env_remove: std::iter::once(env::CLAUDECODE.into())
                    .chain(core.cfg.sandbox.env_remove(agent.agent))
                    .collect(),
                stdin: run.stdin,
                log_path,
                timeout: core.cfg.timeout,
                kill_grace: core.cfg.kill_grace,
                format: agent.format(),
                sandbox: core.cfg.sandbox.rules(&core.lane_top(slot), agent.agent),
                stuck: core.cfg.stuck_after,
            };
            let check = core.verify_job(
                &id,
                core.log_dir
                    .join(log_name.of_kind(LogKind::Verify).to_string()),
                dir.clone(),
                Some(slot),
            );
            let review = review_job(
                core,
                &c,
                &prd_given,
                &dir,
                (agent, &label),
                &spec.env,
                &log_name,
            );
            let others = if n > 1 && core.cfg.samples.select == Select::Best {
                core.other_checks(&id, &stem, &dir, slot)
            } else {
                Vec::new()
            };
            let lane_setup = core
                .iso
                .as_ref()
                .and(core.cfg.isolation.setup.as_ref())
                .map(|cmd| Spec {
                    program: "sh".into(),
                    args: vec!["-c".into(), cmd.clone()],
                    cwd: dir.clone(),
                    env: Vec::new(),
                    env_remove: vec![env::CLAUDECODE.into()],
                    stdin: Vec::new(),
                    log_path: core
                        .log_dir
                        .join(log_name.of_kind(LogKind::Setup).to_string()),
                    timeout: core.cfg.timeout,
                    kill_grace: core.cfg.kill_grace,
                    format: crate::backend::OutputFormat::Text,
                    sandbox: core.cfg.sandbox.check_rules(&core.lane_top(slot)),
                    stuck: crate::backend::stuck::StuckAfter::OFF,
                });
            r.launch.push(Launch {
                lane,
                setup: lane_setup,
                shared_prd: core.iso.is_none().then(|| core.cfg.prd_path.clone()),
                attempt_name: name,
                id: id.clone(),
                iteration,
                attempt,
                spec,
                check,
                guard: core.guard(&c),
                sample,
                slot,
                others,
                review,
            });
        }
        if let Some(a) = core.pai.agents.get_mut(lane) {
            a.status = AgentStatus::Active;
            a.current_criterion = Some(id.clone());
            a.started_at = Some(now.ms);
            a.finished_at = None;
            a.pid = None;
        }
    }
    if !r.launch.is_empty() {
        r.flush(Flush::Soon);
    }
    r
}

/// The verifier's job for a worker of criterion `c` on `worker`'s set-up (options and
/// label): that set-up reviews unless `--verifier` names another; none with `--verifier none`.
fn review_job(
    core: &Core,
    c: &crate::prd::Criterion,
    prd_given: &std::path::Path,
    dir: &std::path::Path,
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
        id: c.id.clone(),
        sandbox,
        agent,
        setup,
        named,
        prompt: crate::evidence::verifier::prompt(&core.doc, prd_given, dir, c),
        cwd: dir.to_path_buf(),
        env,
        env_remove,
        log_path: core
            .log_dir
            .join(log.of_kind(LogKind::Verifier).to_string()),
        timeout: core.cfg.timeout,
        kill_grace: core.cfg.kill_grace,
    })
}

/// A launched worker got its pid (recorded so that a run taking over after a crash can end
/// it), or none (it could not start): its start is said.
pub(super) fn started(
    core: &mut Core,
    lane: usize,
    id: String,
    (iteration, attempt): (u64, u32),
    sample: Option<SampleTag>,
    pid: Option<u32>,
) -> Response {
    if let Some(a) = core.pai.agents.get_mut(lane) {
        a.pid = pid;
    }
    let setup = (core.ladder.is_on() && sample.is_none())
        .then(|| core.slot_setup.get(&(lane, 0)).cloned())
        .flatten();
    let mut r = Response::default();
    r.say(RunEvent::WorkerStarted {
        iteration,
        lane,
        id,
        attempt,
        pid,
        sample,
        setup,
    });
    r
}

/// How many of an attempt's `n` samples may start under `--max-cost`: those whose expected
/// cost (`each`, the mean per worker so far) still fits on top of `committed` (spent, plus
/// what running workers are expected to cost); at least one (the caller checked that one
/// does).
fn samples_that_fit(n: u32, max_cost: Option<f64>, committed: f64, each: f64) -> u32 {
    let Some(max) = max_cost else {
        return n;
    };
    if each <= 0.0 {
        return n;
    }
    let fit = ((max - committed) / each).floor();
    (fit.max(1.0) as u32).min(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_start_only_while_their_expected_cost_fits() {
        // Nothing known yet: all of them.
        assert_eq!(samples_that_fit(3, Some(1.0), 0.0, 0.0), 3);
        assert_eq!(samples_that_fit(3, None, 5.0, 1.0), 3);
        // $0.10 each, $0.50 committed of $0.75: two more fit.
        assert_eq!(samples_that_fit(3, Some(0.75), 0.5, 0.1), 2);
        assert_eq!(samples_that_fit(3, Some(2.0), 0.5, 0.1), 3);
        // Never zero: the caller stops the run when not even one fits.
        assert_eq!(samples_that_fit(3, Some(0.55), 0.5, 0.1), 1);
    }
}
