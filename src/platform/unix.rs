//! Unix: signals to a worker's whole process group, liveness checks, and the signals that
//! interrupt a run (SIGINT, SIGTERM, SIGHUP).

use anyhow::{Context, Result};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

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

/// The parent of process `pid` (Linux, through /proc; elsewhere `None`).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the parenthesised command name: the state, then the parent's pid.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
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

/// Whether process `pid`'s environment was read and has no `key=value` (Linux). A process
/// whose environment cannot be read (one exiting, a zombie, or gone) is not known to lack it.
pub fn known_without_env(pid: u32, key: &str, value: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        let want = format!("{key}={value}");
        !environ.is_empty() && !environ.split(|&b| b == 0).any(|kv| kv == want.as_bytes())
    })
}

/// Every live process whose environment has `key=value` (Linux, through /proc; elsewhere
/// none can be found this way and the list is empty).
pub fn processes_with_env(key: &str, value: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let all = rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok());
    among_with_env(all, key, value)
}

/// Those of `pids` (not this process) whose environment has `key=value`.
pub fn among_with_env(pids: impl IntoIterator<Item = u32>, key: &str, value: &str) -> Vec<u32> {
    pids.into_iter()
        .filter(|&pid| pid != std::process::id() && has_env(pid, key, value))
        .collect()
}

/// The children of this process for which `pick` holds, and every process below them
/// (theirs, and so on), through each thread's `/proc/PID/task/TID/children`; `None` where the
/// kernel does not list them. What one of this process's threads starts is listed under that
/// thread, so every thread of this process is read; the subtree of a child not picked is
/// never read (with many workers running, reading all of theirs at each worker's end was most
/// of what the search cost).
pub fn descendants(pick: impl Fn(u32) -> bool) -> Option<Vec<u32>> {
    let children_of = |pid: u32| -> Option<Vec<u32>> {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        let mut kids: Vec<u32> = Vec::new();
        for t in tasks.filter_map(|e| e.ok()) {
            match std::fs::read_to_string(t.path().join("children")) {
                Ok(text) => kids.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                ),
                // The kernel has no such file: none of them can be listed.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && pid == std::process::id() => {
                    return None;
                }
                // A thread or process that ended meanwhile.
                Err(_) => {}
            }
        }
        Some(kids)
    };
    let mut found = Vec::new();
    let mut next: Vec<u32> = children_of(std::process::id())?
        .into_iter()
        .filter(|&p| pick(p))
        .collect();
    while let Some(pid) = next.pop() {
        if !found.contains(&pid) {
            found.push(pid);
            next.extend(children_of(pid).unwrap_or_default());
        }
    }
    Some(found)
}

/// The signal that ended a child, if one did.
pub fn signal_of(s: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    s.signal()
}

/// Whether a file's mode lets anyone execute it.
pub fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// The signals that interrupt a run: Ctrl-C (SIGINT), SIGTERM (CI cancelling a job), and
/// SIGHUP (the terminal went away). Each is handled the same way.
pub struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts listening. Must be called inside a tokio runtime.
    pub fn listen() -> Result<Signals> {
        let on = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("failed to listen for {name}"))
        };
        Ok(Signals {
            int: on(SignalKind::interrupt(), "SIGINT")?,
            term: on(SignalKind::terminate(), "SIGTERM")?,
            hup: on(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// Waits for the next of them.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
            _ = self.hup.recv() => {}
        }
    }
}

/// Sends SIGKILL to one process. One that is already gone is fine.
pub fn kill_pid(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    if raw > 1 {
        let _ = nix::sys::signal::kill(Pid::from_raw(raw), Signal::SIGKILL);
    }
}

/// The real user id: it names the folder of this user's PRD locks.
pub fn user_id() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// Makes `dir` a private folder of this user: created with mode 0700 unless it exists, and
/// refused when it is not a folder (a symlink, say) or belongs to someone else, since whoever
/// can write in it can fake a lock or a stop request.
pub fn private_dir(dir: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e).with_context(|| format!("failed to create `{}`", dir.display()));
        }
    }
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("failed to read `{}`", dir.display()))?;
    if !meta.is_dir() {
        anyhow::bail!("`{}` is not a folder", dir.display());
    }
    if meta.uid() != user_id() {
        anyhow::bail!("`{}` belongs to another user", dir.display());
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("failed to make `{}` private", dir.display()))?;
    }
    Ok(())
}

/// Whether two metadata are of one file (device and inode).
pub fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// A child and the process it started are both below this one.
    #[test]
    fn descendants_lists_children_and_theirs() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        let below = super::descendants(|_| true).expect("this kernel lists children");
        // A child not picked: neither it nor what it started is listed (nor read).
        let other = child.id();
        let picked = super::descendants(|p| p != other).expect("this kernel lists children");
        super::kill_pid(grandchild);
        let _ = child.kill();
        let _ = child.wait();
        assert!(below.contains(&child.id()), "{below:?}");
        assert!(below.contains(&grandchild), "{below:?}");
        assert!(!below.contains(&std::process::id()), "{below:?}");
        assert!(!picked.contains(&child.id()), "{picked:?}");
        assert!(!picked.contains(&grandchild), "{picked:?}");
    }
}
