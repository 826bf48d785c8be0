//! The system calls that get past Landlock's TCP rule, refused by a seccomp filter the
//! trampoline installs after the Landlock rules, when they limit TCP (`--network agent`, `off`,
//! `allow:…`).
//!
//! Landlock checks `connect(2)`. Two other ways open a TCP connection without it:
//!
//! - **TCP Fast Open**: `sendto`, `sendmsg` or `sendmmsg` with `MSG_FASTOPEN` on an
//!   unconnected TCP socket connects and sends in one call, and the kernel never asks the
//!   `connect` hook. Those calls fail with `EACCES` when their flags (the call's own argument;
//!   `sendmmsg` sends every message with it, the messages' own `msg_flags` are not read) have
//!   `MSG_FASTOPEN`. Without it they are untouched: UDP, Unix sockets and connected TCP sockets
//!   send as before. (`TCP_FASTOPEN_CONNECT` goes through `connect`, which Landlock checks.)
//! - **io_uring**: its operations (a connect among them) are not system calls, so neither
//!   Landlock's hook for some of them nor any seccomp filter sees them. `io_uring_setup`,
//!   `io_uring_enter` and `io_uring_register` fail with `EACCES`; programs that use io_uring
//!   when they can (libuv) fall back to ordinary calls.
//!
//! The filter checks the architecture first (seccompiler's rule): a system call made through
//! another architecture's entry (32-bit `int 0x80` on x86-64) ends the process instead of
//! being let through unread. seccompiler builds the BPF program from these rules in Rust (no C
//! library: libseccomp's bindings need its headers and library to build, this machine has
//! neither); installing it is its one `unsafe` call, outside this crate.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// `MSG_FASTOPEN` (Linux `include/linux/socket.h`).
pub const MSG_FASTOPEN: u64 = 0x2000_0000;

/// The filter, for this machine's architecture.
fn filter() -> Result<BpfProgram, seccompiler::Error> {
    // The flags' place among each call's arguments (from 0).
    let flagged = [
        (nix::libc::SYS_sendto, 3),
        (nix::libc::SYS_sendmsg, 2),
        (nix::libc::SYS_sendmmsg, 3),
    ];
    let mut rules = std::collections::BTreeMap::new();
    for (call, arg) in flagged {
        let fast_open = SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(MSG_FASTOPEN),
            MSG_FASTOPEN,
        )?;
        rules.insert(call, vec![SeccompRule::new(vec![fast_open])?]);
    }
    for call in [
        nix::libc::SYS_io_uring_setup,
        nix::libc::SYS_io_uring_enter,
        nix::libc::SYS_io_uring_register,
    ] {
        // No rule: the call is refused whatever its arguments.
        rules.insert(call, Vec::new());
    }
    let arch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(nix::libc::EACCES as u32),
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// Installs the filter on this process (and so on everything it starts). `Err` when it could
/// not be built or the kernel refused it.
pub fn refuse_tcp_bypasses() -> Result<(), String> {
    let program = filter().map_err(|e| format!("cannot build the seccomp filter: {e}"))?;
    seccompiler::apply_filter(&program)
        .map_err(|e| format!("the kernel refused the seccomp filter: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_filter_builds_for_this_machine() {
        let program = super::filter().unwrap();
        assert!(!program.is_empty());
    }
}
