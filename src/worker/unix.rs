//! Process-group control on Unix: signals to a worker's whole group.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Sends SIGTERM to the process group `pgid`. A group that is already gone is fine.
pub fn term_group(pgid: u32) {
    signal_group(pgid, Signal::SIGTERM);
}

/// Sends SIGKILL to the process group `pgid`. A group that is already gone is fine.
pub fn kill_group(pgid: u32) {
    signal_group(pgid, Signal::SIGKILL);
}

fn signal_group(pgid: u32, sig: Signal) {
    let Ok(raw) = i32::try_from(pgid) else {
        return;
    };
    if raw <= 1 {
        return; // never signal init or our own group by accident
    }
    match killpg(Pid::from_raw(raw), sig) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => tracing::debug!("signal {sig} to process group {pgid}: {e}"),
    }
}

/// Whether a process exists and is not a zombie (Linux reads /proc; elsewhere kill(pid, 0)).
pub fn is_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{raw}/stat")) {
        // The state follows the parenthesised command name.
        return stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|s| s != "Z" && s != "X");
    }
    nix::sys::signal::kill(Pid::from_raw(raw), None).is_ok()
}

/// Whether process `pid` is still the worker we started: on Linux, it has `key=value` in its
/// environment; elsewhere (no /proc), it still leads its own process group, as every worker
/// does.
pub fn has_env(pid: u32, key: &str, value: &str) -> bool {
    match std::fs::read(format!("/proc/{pid}/environ")) {
        Ok(environ) => {
            let want = format!("{key}={value}");
            environ.split(|&b| b == 0).any(|kv| kv == want.as_bytes())
        }
        Err(_) if !std::path::Path::new("/proc/self").exists() => {
            let Ok(raw) = i32::try_from(pid) else {
                return false;
            };
            raw > 1
                && nix::unistd::getpgid(Some(Pid::from_raw(raw))).is_ok_and(|g| g.as_raw() == raw)
        }
        Err(_) => false,
    }
}
