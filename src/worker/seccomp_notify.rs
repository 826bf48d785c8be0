//! The raw system calls behind counting a sandboxed worker's refused TCP connections
//! ([`super::connects`]): a seccomp filter that hands every `connect(2)` to a listener, the
//! listener's three ioctls, and the pidfd calls that copy the connecting socket.
//!
//! This is the crate's one module with `unsafe` code. seccompiler (the other filter,
//! [`super::sandbox`]) cannot install a filter with a listener, and libseccomp's bindings need
//! its C library and headers; no well-kept pure-Rust crate offers the listener. Every block
//! below is one system call on plain integer structs from `nix::libc`, each with its SAFETY
//! note.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;

/// The architecture the filter is for (`AUDIT_ARCH_*`, Linux `include/uapi/linux/audit.h`):
/// a call made through another architecture's entry is let through by this filter (the
/// other one, [`super::sandbox`]'s, ends the process).
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7;

/// The filter: native `connect` goes to the listener, everything else is allowed.
fn program() -> [libc::sock_filter; 6] {
    let f = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let ld = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jeq = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let ret = libc::BPF_RET | libc::BPF_K;
    // `struct seccomp_data`: the call's number at offset 0, the architecture at 4.
    [
        f(ld, 0, 0, 4),
        f(jeq, 0, 3, ARCH),
        f(ld, 0, 0, 0),
        f(jeq, 0, 1, libc::SYS_connect as u32),
        f(ret, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        f(ret, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Installs the filter on this process (and what it starts); the listener's fd (close on
/// exec, as the kernel makes it).
pub fn install_listener() -> io::Result<OwnedFd> {
    nix::sys::prctl::set_no_new_privs()?;
    let prog = program();
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, six valid instructions that live across the call;
    // the kernel copies the program and reads nothing else.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new fd, which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// One `connect` waiting for the listener's answer.
#[derive(Debug, Clone, Copy)]
pub struct Notif {
    pub id: u64,
    pub pid: u32,
    pub nr: i64,
    /// `connect`'s arguments: the fd, the address, its length.
    pub args: [u64; 6],
}

/// The next waiting call (blocks when none waits: poll first).
pub fn recv(listener: BorrowedFd) -> io::Result<Notif> {
    // SAFETY: `seccomp_notif` is plain integers, all zero is a valid value (and the kernel
    // wants it zeroed).
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: the ioctl writes one `seccomp_notif` into `n`, which is that size.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            &mut n as *mut libc::seccomp_notif,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Notif {
        id: n.id,
        pid: n.pid,
        nr: i64::from(n.data.nr),
        args: n.data.args,
    })
}

/// Whether call `id` still waits (its process has not died, nor its pid been reused): what
/// was read of it since is its own.
pub fn still_waits(listener: BorrowedFd, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64 from `&id`.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
            &id as *const u64,
        ) == 0
    }
}

/// The listener's answer to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The kernel goes on with the call (Landlock then checks it).
    Continue,
    /// The call fails with this errno.
    Fail(i32),
}

pub fn answer(listener: BorrowedFd, id: u64, a: Answer) -> io::Result<()> {
    let mut resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: 0,
    };
    match a {
        Answer::Continue => resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        Answer::Fail(e) => resp.error = -e,
    }
    // SAFETY: the ioctl reads one `seccomp_notif_resp` from `resp`.
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            &mut resp as *mut libc::seccomp_notif_resp,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A copy of process `pid`'s fd `fd` (pidfd_open, pidfd_getfd; close on exec).
pub fn fd_of(pid: u32, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and returns a new fd or -1.
    let p = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if p < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(p as RawFd) };
    // SAFETY: pidfd_getfd takes three integers and returns a new fd or -1.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// Whether `sock` is a TCP socket (`SO_PROTOCOL` is `IPPROTO_TCP`: what Landlock's rule
/// checks).
pub fn is_tcp(sock: BorrowedFd) -> bool {
    let mut proto: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes (one c_int) into `proto`.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PROTOCOL,
            (&mut proto as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    r == 0 && proto == libc::IPPROTO_TCP
}

/// One fd received on `sock` (`SCM_RIGHTS`, close on exec); `None`: the peer sent none.
/// Any other fds in the message are closed.
pub fn recv_fd(sock: BorrowedFd) -> io::Result<Option<OwnedFd>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut got = Vec::new();
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            // SAFETY: the kernel installed these fds in this process for this message;
            // nothing else owns them.
            got.extend(fds.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
        }
    }
    Ok(got.into_iter().next())
}

/// The listener, watched by tokio's reactor (readable: a call waits, or no process is left).
pub fn async_listener(fd: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd owns `fd`, so it stays open as long as it is registered.
    unsafe { tokio::io::unix::AsyncFd::register(fd) }.map_err(|e| e.into_parts().1)
}
