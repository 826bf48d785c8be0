//! Launching: for each idle lane, its next criterion, when no pause, request, stop or limit
//! forbids it; each becomes a worker `Spec` (the chosen agent's command line and stdin,
//! prdloop's environment) and, for a runnable criterion, the check of a claimed PASS.

use super::core::{Core, Now};
use super::event::{Flush, Launch, Response, RunEvent};
use super::limits::{Spending, launch_blocked};
use super::prompt;
use crate::env;
use crate::state::AgentStatus;
use crate::worker::Spec;

/// Fills the idle lanes.
pub(super) fn fill(core: &mut Core, now: Now) -> Response {
    let mut r = Response::default();
    let Some(iteration) = core.iter.as_ref().map(|i| i.number) else {
        return r;
    };
    let paused = core.pause_until.is_some_and(|t| t > now.at);
    if !core.may_launch() || paused {
        return r;
    }
    for lane in core.schedule.idle_lanes() {
        let Some(id) = core.schedule.next_for_lane(lane) else {
            continue;
        };
        let Some(c) = core.doc.criterion(&id).cloned() else {
            r.say(RunEvent::Warning(format!(
                "{id} is no longer in the PRD; skipped"
            )));
            continue;
        };
        let spending = Spending {
            cost: core.ledger.total_cost,
            workers_done: core.ledger.workers_done,
            worker_time: core.ledger.worker_time,
            elapsed: core.elapsed(now),
        };
        if let Some((end, why)) = launch_blocked(core.cfg.max_cost, core.cfg.max_time, &spending) {
            let label = if end == super::end::End::Budget {
                "budget"
            } else {
                "time"
            };
            r.say(RunEvent::Notice(format!("{label}: {why}; no new workers")));
            core.stop = Some((end, why));
            core.schedule.requeue(lane, &id, &c.domain);
            break;
        }
        let attempt = core.ledger.next_attempt(&id);
        let previous = core
            .ledger
            .get(&id)
            .and_then(|rec| rec.last_failure.clone());
        let command = core.command_for(&id).map(String::from);
        let dir = core.worker_dir(lane);
        let text = prompt::build(
            &core.doc,
            &core.cfg.prd_path,
            &dir,
            &c,
            previous.as_deref(),
            command.as_deref(),
            core.iso.is_some(),
        );
        // A retry after an agent failure keeps the attempt number: its log gets its own name
        // so that the failed try's log is kept.
        let retry = core
            .ledger
            .get(&id)
            .map_or(0, |r| r.agent_failures_this_attempt);
        let attempt_name = if retry == 0 {
            attempt.to_string()
        } else {
            format!("{attempt}-retry{retry}")
        };
        let stem = format!("iter{iteration}-{id}-attempt{attempt_name}");
        let log_path = core.log_dir.join(format!("{stem}.log"));
        let agent = &core.cfg.agent;
        let run = agent.command(&text);
        let spec = Spec {
            program: run.program,
            args: run.args,
            cwd: dir.clone(),
            env: vec![
                (env::WORKER_SESSION_ID.into(), core.session.clone()),
                (
                    env::WORKER_PRD.into(),
                    core.cfg.prd_path.display().to_string(),
                ),
                (env::WORKER_ITERATION.into(), iteration.to_string()),
                (env::WORKER_AGENT.into(), (lane + 1).to_string()),
                (env::WORKER_CRITERION.into(), id.clone()),
                (env::WORKER_ATTEMPT.into(), attempt.to_string()),
            ],
            env_remove: vec![env::CLAUDECODE.into()],
            stdin: run.stdin,
            log_path,
            timeout: core.cfg.timeout,
            kill_grace: core.cfg.kill_grace,
            format: agent.format(),
        };
        let check = core.verify_job(&id, core.log_dir.join(format!("{stem}-verify.log")), dir);
        core.schedule.set_running(lane, Some(id.clone()));
        if let Some(a) = core.pai.agents.get_mut(lane) {
            a.status = AgentStatus::Active;
            a.current_criterion = Some(id.clone());
            a.started_at = Some(now.ms);
            a.finished_at = None;
            a.pid = None;
        }
        r.launch.push(Launch {
            lane,
            title: format!("{id}: {}", c.description),
            attempt_name,
            id,
            iteration,
            attempt,
            spec,
            check,
        });
    }
    if !r.launch.is_empty() {
        r.flush(Flush::Soon);
    }
    r
}

/// A launched worker got its pid (recorded so that a run taking over after a crash can end it).
pub(super) fn started(core: &mut Core, l: &Launch, pid: Option<u32>) -> RunEvent {
    if let Some(a) = core.pai.agents.get_mut(l.lane) {
        a.pid = pid;
    }
    RunEvent::WorkerStarted {
        iteration: l.iteration,
        lane: l.lane,
        id: l.id.clone(),
        attempt: l.attempt,
        pid,
    }
}
