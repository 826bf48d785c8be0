//! What a worker leaves behind: processes it detached (`setsid`, a double fork, `nohup … &`)
//! are ended when it ends, and at the end of the run nothing prdloop's workers started is
//! left running (Linux).
//!
//! - prdloop makes itself a *child subreaper* ([`adopt_orphans`]): a process whose parent
//!   exits is re-parented to prdloop instead of to init, so it stays prdloop's to reap.
//! - Every worker and Verify command gets its own `PRDLOOP_WORKER_TOKEN` in its environment,
//!   which everything it starts inherits. When it ends (after the SIGKILL to its process
//!   group), every process whose environment (`/proc/PID/environ`) holds that token gets
//!   SIGTERM, then SIGKILL after the kill grace ([`end_leftovers`]); those re-parented to
//!   prdloop are reaped.
//! - A process that dropped the token (started with a cleared environment) is not found that
//!   way; at the end of the run every process still a child of prdloop is one prdloop did not
//!   start itself (its own children have all been waited for), so each gets SIGTERM, the grace,
//!   SIGKILL, and is reaped ([`end_adopted`]). Zombies of re-parented processes that ended by
//!   themselves are reaped there too.
//!
//! Elsewhere (macOS has no subreaper) only the process-group kill applies. A prdloop killed
//! by SIGKILL ends nothing: its workers die by their parent-death signal (see `trampoline`),
//! but what they detached is re-parented to init.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::platform as unix;

/// How often the leftovers are looked at while they are given time to exit.
const POLL: Duration = Duration::from_millis(20);
/// How long killed processes get to become reapable zombies.
const REAP_WAIT: Duration = Duration::from_secs(2);
/// Rounds of SIGKILL for processes that keep forking new ones.
const KILL_ROUNDS: usize = 5;

/// Makes prdloop the parent of the processes its workers orphan (Linux; elsewhere nothing).
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!(
            "cannot adopt the processes workers leave behind (PR_SET_CHILD_SUBREAPER): {e}"
        );
    }
}

/// Leaves the processes orphaned below this one to init again (`prdloop mcp`, which runs
/// no workers itself: each run it starts adopts its own).
pub fn leave_orphans() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_child_subreaper(false) {
        tracing::debug!("PR_SET_CHILD_SUBREAPER off: {e}");
    }
}

/// A new token for one worker or Verify command.
pub fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The workers prdloop started and has not waited for yet: pid, and the token it was given.
static STARTED: Mutex<BTreeMap<u32, String>> = Mutex::new(BTreeMap::new());

/// A worker prdloop started, known as such until this is dropped (drop it once the worker has
/// been waited for: its pid may then be another process's). The search for another worker's
/// leftovers passes it and its tree by without reading them: what a worker orphans goes to
/// prdloop (the subreaper), never below a sibling, and the worker itself carries its own token.
pub struct Started {
    pid: u32,
    token: String,
}

impl Started {
    pub fn new(pid: u32, token: &str) -> Started {
        started().insert(pid, token.to_string());
        Started {
            pid,
            token: token.to_string(),
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let mut all = started();
        // Not a later worker's entry under a pid used again.
        if all.get(&self.pid) == Some(&self.token) {
            all.remove(&self.pid);
        }
    }
}

fn started() -> std::sync::MutexGuard<'static, BTreeMap<u32, String>> {
    STARTED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `pid` is a worker prdloop started (and has not waited for) with another token.
fn started_with_another(pid: u32, token: &str) -> bool {
    started().get(&pid).is_some_and(|t| t != token)
}

/// Ends every process that carries `token` in its environment: SIGTERM, up to `grace` for
/// them to exit, SIGKILL for the rest (and for any they started meanwhile); those prdloop
/// adopted are reaped. `worker` (the worker's own pid, already waited for) is never touched.
/// Returns how many processes were found.
pub async fn end_leftovers(token: &str, worker: u32, grace: Duration) -> usize {
    let find = || -> Vec<u32> {
        leftovers_with(token)
            .into_iter()
            .filter(|&p| p != worker)
            .collect()
    };
    let mut all = find();
    if all.is_empty() {
        return 0;
    }
    tracing::debug!("worker {worker} left {} process(es): {all:?}", all.len());
    for &p in &all {
        signal(p, Signal::SIGTERM);
    }
    let t = Instant::now();
    while all.iter().any(|&p| unix::is_alive(p)) && t.elapsed() < grace {
        tokio::time::sleep(POLL).await;
    }
    for _ in 0..KILL_ROUNDS {
        let now = find();
        if now.is_empty() {
            break;
        }
        for &p in &now {
            signal(p, Signal::SIGKILL);
            if !all.contains(&p) {
                all.push(p);
            }
        }
        tokio::time::sleep(POLL).await;
    }
    let t = Instant::now();
    loop {
        all.retain(|&p| !reap(p));
        if all.is_empty() || t.elapsed() > REAP_WAIT {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    all.len()
}

/// The processes carrying `token`. While prdloop is a subreaper, everything a worker started
/// is below prdloop: once the worker has ended, what it left was re-parented to prdloop (an
/// orphan of prdloop's, adopted), so each of its leftovers is an orphan prdloop adopted
/// carrying the token, or below one. So only those orphans that may carry it, and what is
/// below them, are read: not the trees of the workers running meanwhile (children prdloop
/// started itself, not adopted; and an adopted one prdloop knows to have been started as a
/// worker with another token, see [`Started`], is passed without a look), nor every process
/// of the machine. (A process below one that dropped the token, set back on purpose, is not
/// found here; [`end_adopted`] ends it with its parent at the end of the run.) Otherwise, or
/// where the kernel does not list children, every process is looked at.
fn leftovers_with(token: &str) -> Vec<u32> {
    let key = crate::env::WORKER_TOKEN;
    let may_carry =
        |pid: u32| !started_with_another(pid, token) && !unix::known_without_env(pid, key, token);
    match is_subreaper()
        .then(|| unix::adopted_and_below(may_carry))
        .flatten()
    {
        Some(below) => unix::among_with_env(below, key, token),
        None => unix::processes_with_env(key, token),
    }
}

/// Whether prdloop adopts the processes orphaned below it ([`adopt_orphans`] took effect).
fn is_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    return nix::sys::prctl::get_child_subreaper().unwrap_or(false);
    #[cfg(not(target_os = "linux"))]
    false
}

/// At the end of the run: every process still a child of prdloop (adopted; prdloop's own have
/// all been waited for) gets SIGTERM, up to `grace`, then SIGKILL, and is reaped, zombies
/// included. Returns how many were alive. Blocking; call it when no worker runs.
pub fn end_adopted(grace: Duration) -> usize {
    let alive: Vec<u32> = children()
        .into_iter()
        .filter(|&p| unix::is_alive(p))
        .collect();
    if !alive.is_empty() {
        tracing::debug!(
            "ending {} process(es) left to prdloop: {alive:?}",
            alive.len()
        );
    }
    for &p in &alive {
        signal(p, Signal::SIGTERM);
    }
    let t = Instant::now();
    while alive.iter().any(|&p| unix::is_alive(p)) && t.elapsed() < grace {
        std::thread::sleep(POLL);
    }
    for _ in 0..KILL_ROUNDS {
        let now: Vec<u32> = children()
            .into_iter()
            .filter(|&p| unix::is_alive(p))
            .collect();
        if now.is_empty() {
            break;
        }
        for p in now {
            signal(p, Signal::SIGKILL);
        }
        std::thread::sleep(POLL);
    }
    let t = Instant::now();
    loop {
        let left: Vec<u32> = children().into_iter().filter(|&p| !reap(p)).collect();
        if left.is_empty() || t.elapsed() > REAP_WAIT {
            break;
        }
        std::thread::sleep(POLL);
    }
    alive.len()
}

/// The pids whose parent is prdloop (Linux, through /proc; elsewhere none).
fn children() -> Vec<u32> {
    let me = std::process::id();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| unix::parent_of(pid) == Some(me))
        .collect()
}

fn signal(pid: u32, sig: Signal) {
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    if raw > 1 && pid != std::process::id() {
        let _ = nix::sys::signal::kill(Pid::from_raw(raw), sig);
    }
}

/// Reaps `pid` if it is a child of prdloop that has exited. Whether it is gone for good
/// (reaped now, or not prdloop's child to reap).
fn reap(pid: u32) -> bool {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let Ok(raw) = i32::try_from(pid) else {
        return true;
    };
    match waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) => true,
        // ECHILD: not ours (never adopted, or already reaped).
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_worker_is_known_until_dropped_and_a_later_one_under_its_pid_stays() {
        let pid = u32::MAX - 7;
        let a = Started::new(pid, "a");
        assert!(started_with_another(pid, "b"));
        assert!(
            !started_with_another(pid, "a"),
            "its own token is not another"
        );
        // Its pid used again by a later worker before the first's entry went.
        let b = Started::new(pid, "b");
        drop(a);
        assert!(started_with_another(pid, "c"), "the later one's entry went");
        drop(b);
        assert!(!started_with_another(pid, "c"));
    }
}
