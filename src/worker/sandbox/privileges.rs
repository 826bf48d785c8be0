//! The capabilities a sandboxed worker run by root must not keep: those that get past the
//! sandbox's own walls.
//!
//! Landlock keeps a sandboxed process from reading other processes' memory and environment
//! (`/proc/PID/environ`, `maps`: a ptrace "read" check), but the kernel lets a process with
//! `CAP_SYS_ADMIN` or `CAP_PERFMON` read them anyway: a worker running as root read the
//! runner's `GH_TOKEN` and your shell's environment there. `CAP_SYS_PTRACE` is dropped with
//! them, and `CAP_NET_RAW` and `CAP_NET_ADMIN`, with which a root worker could send TCP
//! packets of its own making past Landlock's `connect` rule. A user's process has none of
//! them (its `exec` gains none under `no_new_privs`), so for it this changes nothing; root
//! regains every capability its bounding set holds at each `exec`, so they are dropped from
//! that set too.

use caps::{CapSet, Capability};

/// What a sandboxed worker does not keep.
pub const DROPPED: [Capability; 5] = [
    Capability::CAP_SYS_ADMIN,
    Capability::CAP_PERFMON,
    Capability::CAP_SYS_PTRACE,
    Capability::CAP_NET_RAW,
    Capability::CAP_NET_ADMIN,
];

/// Drops [`DROPPED`] from this process, for good (it and what it `exec`s never have them).
/// `Err` when a capability it holds, or would regain as root, could not be dropped.
pub fn drop_dangerous() -> Result<(), String> {
    let root = nix::unistd::geteuid().is_root() || nix::unistd::getuid().is_root();
    let held = caps::read(None, CapSet::Permitted).map_err(|e| e.to_string())?;
    if !root && DROPPED.iter().all(|c| !held.contains(c)) {
        return Ok(());
    }
    let failed = |what: &str, e: caps::errors::CapsError| format!("cannot drop {what}: {e}");
    for cap in DROPPED {
        // The bounding set first: that needs CAP_SETPCAP, which the others may take away.
        if caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) {
            caps::drop(None, CapSet::Bounding, cap).map_err(|e| failed(&cap.to_string(), e))?;
        }
    }
    for cap in DROPPED {
        for set in [
            CapSet::Ambient,
            CapSet::Inheritable,
            CapSet::Effective,
            CapSet::Permitted,
        ] {
            if caps::has_cap(None, set, cap).unwrap_or(false) {
                caps::drop(None, set, cap).map_err(|e| failed(&cap.to_string(), e))?;
            }
        }
    }
    Ok(())
}
