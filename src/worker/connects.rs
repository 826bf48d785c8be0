//! Counting the TCP connections the kernel refuses a sandboxed worker (Landlock's TCP rule:
//! a direct `connect` to anything but its proxy's port), beside those its proxy refuses
//! ([`super::network::Proxy`]).
//!
//! When the rules limit TCP, the runner listens on an abstract Unix socket ([`Watch`]) whose
//! name goes to the trampoline with the rules. The trampoline connects to it before Landlock
//! binds it (the abstract-socket scope would refuse that after), then installs a seccomp
//! filter that hands every `connect(2)` to a listener, sends the listener's fd over the
//! socket and execs (the fd is close on exec: the worker's program never holds it). The
//! runner takes it only from the worker's own pid, and answers each call: a TCP connect by
//! IPv4 or IPv6 to a port the rules do not allow fails with EACCES, as Landlock would fail
//! it, and is counted (`address:port`); every other call (Unix sockets, UDP, the proxy's
//! port) goes on, and Landlock stays the wall: what a worker changes in its address between
//! the read and the kernel's own check changes only the count. If the runner is gone the
//! kernel fails every `connect` with ENOSYS.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::sync::{Arc, Mutex};

use super::network::NetRefusals;
use super::seccomp_notify as sys;

/// The runner's end, before the worker is spawned.
pub struct Watch {
    listener: std::os::unix::net::UnixListener,
    /// The abstract socket's name (for the trampoline's `--count-connects`).
    pub name: String,
}

/// The trampoline's end: connects to the runner's socket (before Landlock).
pub fn reach_runner(name: &str) -> std::io::Result<std::os::unix::net::UnixStream> {
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    std::os::unix::net::UnixStream::connect_addr(&addr)
}

/// The trampoline's end, after Landlock: installs the filter and sends its listener on
/// `runner`.
pub fn hand_over(runner: std::os::unix::net::UnixStream) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let listener = sys::install_listener()?;
    let fds = [listener.as_raw_fd()];
    sendmsg::<()>(
        runner.as_raw_fd(),
        &[std::io::IoSlice::new(b"L")],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )?;
    Ok(())
}

impl Watch {
    pub fn bind() -> std::io::Result<Watch> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!(
            "prdloop-connects-{}-{n}-{}",
            std::process::id(),
            crate::worker::reaper::new_token()
        );
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&name)?;
        let listener = std::os::unix::net::UnixListener::bind_addr(&addr)?;
        listener.set_nonblocking(true)?;
        Ok(Watch { listener, name })
    }

    /// Answers the calls of worker `child` (its pid), which may connect by TCP to `ports`
    /// only (in a tokio runtime).
    pub fn start(self, child: u32, ports: Vec<u16>) -> Counter {
        let refused = Arc::new(Mutex::new(NetRefusals::default()));
        let task = tokio::spawn({
            let refused = Arc::clone(&refused);
            async move {
                let _ = serve(self.listener, child, &ports, &refused).await;
            }
        });
        Counter { refused, task }
    }
}

/// What the kernel refused one worker, counted while it runs.
pub struct Counter {
    refused: Arc<Mutex<NetRefusals>>,
    task: tokio::task::JoinHandle<()>,
}

impl Counter {
    pub fn stop(self) -> NetRefusals {
        self.task.abort();
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: std::os::unix::net::UnixListener,
    child: u32,
    ports: &[u16],
    refused: &Mutex<NetRefusals>,
) -> std::io::Result<()> {
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let fd = loop {
        let (s, _) = listener.accept().await?;
        // Only the worker's own trampoline (the same pid before its exec) hands a listener.
        if s.peer_cred().ok().and_then(|c| c.pid()) != Some(child as i32) {
            continue;
        }
        let got = s
            .async_io(tokio::io::Interest::READABLE, || sys::recv_fd(s.as_fd()))
            .await?;
        match got {
            Some(fd) => break fd,
            None => return Ok(()),
        }
    };
    drop(listener);
    let fd = sys::async_listener(fd)?;
    loop {
        let mut ready = fd.readable().await?;
        loop {
            use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
            let mut p = [PollFd::new(fd.get_ref().as_fd(), PollFlags::POLLIN)];
            poll(&mut p, PollTimeout::ZERO)?;
            let got = p[0].revents().unwrap_or(PollFlags::empty());
            if got.contains(PollFlags::POLLIN) {
                one(fd.get_ref(), ports, refused);
            } else if got.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
                // No process left under the filter.
                return Ok(());
            } else {
                ready.clear_ready();
                break;
            }
        }
    }
}

/// Answers one call.
fn one(listener: &OwnedFd, ports: &[u16], refused: &Mutex<NetRefusals>) {
    let Ok(n) = sys::recv(listener.as_fd()) else {
        return;
    };
    let refuse = judge(&n, ports);
    if !sys::still_waits(listener.as_fd(), n.id) {
        return;
    }
    let answer = match refuse {
        Some(addr) => {
            if let Ok(mut r) = refused.lock() {
                r.add(addr.to_string());
            }
            sys::Answer::Fail(nix::libc::EACCES)
        }
        None => sys::Answer::Continue,
    };
    let _ = sys::answer(listener.as_fd(), n.id, answer);
}

/// The address of a TCP connect the rules refuse; `None`: let the kernel go on.
fn judge(n: &sys::Notif, ports: &[u16]) -> Option<SocketAddr> {
    if n.nr != nix::libc::SYS_connect {
        return None;
    }
    let mut buf = [0u8; 128];
    let len = usize::try_from(n.args[2]).ok()?.min(buf.len());
    let remote = [nix::sys::uio::RemoteIoVec {
        base: usize::try_from(n.args[1]).ok()?,
        len,
    }];
    let read = nix::sys::uio::process_vm_readv(
        nix::unistd::Pid::from_raw(i32::try_from(n.pid).ok()?),
        &mut [std::io::IoSliceMut::new(&mut buf[..len])],
        &remote,
    )
    .ok()?;
    let addr = sockaddr(&buf[..read])?;
    if ports.contains(&addr.port()) {
        return None;
    }
    let sock = sys::fd_of(n.pid, i32::try_from(n.args[0]).ok()?).ok()?;
    sys::is_tcp(sock.as_fd()).then_some(addr)
}

/// An IPv4 or IPv6 `struct sockaddr` (family in the machine's order, port in the network's).
fn sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
    let ip = match family {
        nix::libc::AF_INET => IpAddr::from(<[u8; 4]>::try_from(b.get(4..8)?).ok()?),
        nix::libc::AF_INET6 => IpAddr::from(<[u8; 16]>::try_from(b.get(8..24)?).ok()?),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    #[test]
    fn socket_addresses_are_read_as_the_kernel_lays_them_out() {
        let mut v4 = vec![0u8; 16];
        v4[0..2].copy_from_slice(&(nix::libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&8080u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(super::sockaddr(&v4).unwrap().to_string(), "127.0.0.1:8080");
        let mut v6 = vec![0u8; 28];
        v6[0..2].copy_from_slice(&(nix::libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&9u16.to_be_bytes());
        v6[23] = 1;
        assert_eq!(super::sockaddr(&v6).unwrap().to_string(), "[::1]:9");
        assert_eq!(super::sockaddr(&v4[..6]), None);
        v4[0..2].copy_from_slice(&(nix::libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(super::sockaddr(&v4), None);
    }
}
