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

/// A file of /proc, read whole. The kernel gives these a size of 0, so `std::fs::read` would
/// start from a 32-byte buffer and double it, a read each time (8 reads for an environment
/// of 4 KiB, plus a `statx` for the size): a buffer of a page takes most in one read. Read
/// for every worker that ends (its leftovers), so the calls count.
fn read_proc(path: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(4096);
    std::fs::File::open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read_proc`] as text (not UTF-8: an error).
fn read_proc_string(path: &str) -> std::io::Result<String> {
    String::from_utf8(read_proc(path)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Whether a process exists and is not a zombie (Linux reads /proc; elsewhere kill(pid, 0)).
pub fn is_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if let Ok(stat) = read_proc_string(&format!("/proc/{raw}/stat")) {
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
    let stat = read_proc_string(&format!("/proc/{pid}/stat")).ok()?;
    // After the parenthesised command name: the state, then the parent's pid.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether process `pid` is still the worker we started: on Linux, it has `key=value` in its
/// environment; elsewhere (no /proc), it still leads its own process group, as every worker
/// does.
pub fn has_env(pid: u32, key: &str, value: &str) -> bool {
    match read_proc(&format!("/proc/{pid}/environ")) {
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
    read_proc(&format!("/proc/{pid}/environ")).is_ok_and(|environ| {
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

/// The processes this process adopted (orphans re-parented to it, a child subreaper) for which
/// `pick` holds, and every process below them (theirs, and so on); `None` where the kernel
/// does not list children. The kernel gives an orphan to the subreaper's first live thread,
/// its main thread, so only that thread's `/proc/PID/task/PID/children` is read for them
/// (what the other threads list are children this process started itself: the other
/// workers, which carry their own tokens); below, every thread of each process is read, as
/// what a thread starts is listed under it. The subtree of a process not picked is never
/// read (with many workers running, reading all of theirs at each worker's end was most of
/// what the search cost).
pub fn adopted_and_below(pick: impl Fn(u32) -> bool) -> Option<Vec<u32>> {
    let me = std::process::id();
    let listed = |path: String| -> std::io::Result<Vec<u32>> {
        Ok(read_proc_string(&path)?
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
            .collect())
    };
    let children_of = |pid: u32| -> Vec<u32> {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return Vec::new();
        };
        tasks
            .filter_map(|e| e.ok())
            // A thread or process that ended meanwhile lists none.
            .flat_map(|t| {
                listed(t.path().join("children").display().to_string()).unwrap_or_default()
            })
            .collect()
    };
    let mut next: Vec<u32> = match listed(format!("/proc/{me}/task/{me}/children")) {
        Ok(kids) => kids.into_iter().filter(|&p| pick(p)).collect(),
        // The kernel has no such file: none can be listed.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => Vec::new(),
    };
    let mut found = Vec::new();
    while let Some(pid) = next.pop() {
        if !found.contains(&pid) {
            found.push(pid);
            next.extend(children_of(pid));
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
    /// An orphan this process adopted and the process it started are both found; the tree of
    /// one not picked is not.
    #[test]
    fn adopted_and_below_lists_orphans_and_theirs() {
        nix::sys::prctl::set_child_subreaper(true).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (orphan, below) = (dir.path().join("orphan"), dir.path().join("below"));
        // The shell exits at once: its background child is orphaned, and adopted here.
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "sh -c 'sleep 30 & echo $! > {}; wait' & echo $! > {}",
                below.display(),
                orphan.display()
            ))
            .status()
            .unwrap();
        assert!(status.success());
        let read = |p: &std::path::Path| -> u32 {
            for _ in 0..500 {
                if let Some(pid) = std::fs::read_to_string(p)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                {
                    return pid;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            panic!("no pid in {}", p.display())
        };
        let (orphan, grandchild) = (read(&orphan), read(&below));
        let all = super::adopted_and_below(|_| true).expect("this kernel lists children");
        let picked = super::adopted_and_below(|p| p != orphan).expect("this kernel lists children");
        super::kill_pid(grandchild);
        super::kill_pid(orphan);
        for pid in [orphan, grandchild] {
            let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid as i32), None);
        }
        assert!(all.contains(&orphan), "{all:?}");
        assert!(all.contains(&grandchild), "{all:?}");
        assert!(!all.contains(&std::process::id()), "{all:?}");
        assert!(!picked.contains(&orphan), "{picked:?}");
        assert!(!picked.contains(&grandchild), "{picked:?}");
    }
}
