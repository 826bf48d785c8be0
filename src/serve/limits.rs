//! The dashboard's connections, limited so that serving never takes what the run needs: at
//! most [`MAX_CONNECTIONS`] are open at once (the others wait in the kernel's backlog, where
//! they hold none of the process's file descriptors, which a landing needs), one that sends
//! nothing within [`FIRST_BYTE`] of being taken is closed, and so is one with no traffic
//! either way for [`IDLE`] (an event stream's keep-alive comes every 15 s).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Connections open at once: well below any file-descriptor limit (1,024 at the least).
pub const MAX_CONNECTIONS: usize = 64;
/// How long a new connection may take to send its first byte.
pub const FIRST_BYTE: Duration = Duration::from_secs(1);
/// How long a connection may go without a byte either way.
pub const IDLE: Duration = Duration::from_secs(45);

/// A listener that takes a connection only while fewer than [`MAX_CONNECTIONS`] are open.
pub struct Limited {
    inner: TcpListener,
    permits: Arc<Semaphore>,
}

impl Limited {
    pub fn new(inner: TcpListener) -> Limited {
        Limited {
            inner,
            permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        }
    }
}

impl axum::serve::Listener for Limited {
    type Io = Guarded;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Guarded, SocketAddr) {
        loop {
            let permit = Arc::clone(&self.permits)
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            match self.inner.accept().await {
                Ok((io, addr)) => return (Guarded::new(io, permit), addr),
                // Out of descriptors or a connection reset before it was taken: a little later.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// A connection that ends with an error once its deadline passes without traffic; it holds
/// its place under the cap until it is dropped.
pub struct Guarded {
    io: TcpStream,
    deadline: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl Guarded {
    fn new(io: TcpStream, permit: OwnedSemaphorePermit) -> Guarded {
        Guarded {
            io,
            deadline: Box::pin(tokio::time::sleep(FIRST_BYTE)),
            _permit: permit,
        }
    }

    fn touched(&mut self) {
        self.deadline.as_mut().reset(Instant::now() + IDLE);
    }

    /// `Pending` turned into an error once the deadline has passed (and the task woken then).
    fn idle<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the dashboard's connection was idle",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.touched();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.idle(cx),
        }
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    this.touched();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => this.idle(cx),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    /// A request over a connection of its own, read to its end (the server closes it);
    /// `close`: the client asks for that itself.
    fn get(port: u16, path: &str, close: bool) -> String {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let connection = if close { "close" } else { "keep-alive" };
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: {connection}\r\n\r\n"
        )
        .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn idle_connections_are_closed_and_cannot_starve_the_dashboard() {
        let dir = tempfile::tempdir().unwrap();
        let opts = crate::serve::Options {
            state_dirs: vec![dir.path().to_path_buf()],
            port: 0,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(crate::serve::Server::bind(opts)).unwrap();
        let url = server.url.clone();
        // The session's token, which only the sign-in cookie carries to a browser.
        let token = server.state.token.clone();
        rt.spawn(server.run());
        let port: u16 = url
            .trim_start_matches("http://127.0.0.1:")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        // More idle connections than the cap, none sending a byte.
        let idle: Vec<std::net::TcpStream> = (0..MAX_CONNECTIONS * 2 + 10)
            .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        // A request with the token is still answered (once the idle ones are closed).
        let ok = get(port, &format!("/api/sessions?token={token}"), true);
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        // Every idle one was closed by the server (a read sees the end, not a time-out).
        for mut s in idle {
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let mut buf = [0u8; 16];
            // A signal to this process (another test's child ending) may interrupt the read.
            let n = loop {
                match s.read(&mut buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    r => break r.unwrap(),
                }
            };
            assert_eq!(n, 0);
        }
        // A request without the token is refused and its connection closed (not kept alive).
        let refused = get(port, "/api/sessions", false);
        assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
        assert!(
            refused.to_lowercase().contains("connection: close"),
            "{refused}"
        );
    }
}
