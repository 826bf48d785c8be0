//! prdloop on a pseudo-terminal: its stderr is a terminal of a chosen size, as in a person's
//! shell, and everything it draws there is kept to be read back.

use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::pty::{Winsize, openpty};

pub struct Pty {
    pub child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

fn cloexec(fd: &OwnedFd) {
    fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).expect("FD_CLOEXEC");
}

impl Pty {
    /// Spawns `cmd` with its stderr on a new terminal of `rows` × `cols` (stdin and stdout
    /// as `cmd` has them, but never piped-and-unread: stdout is discarded).
    pub fn spawn(mut cmd: Command, rows: u16, cols: u16) -> Pty {
        let size = Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = openpty(Some(&size), None).expect("openpty");
        // Only prdloop's stderr holds the terminal: not its workers, nor this process's other
        // children, so that reading ends when prdloop has gone.
        cloexec(&pty.master);
        cloexec(&pty.slave);
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::from(pty.slave))
            .spawn()
            .expect("spawn prdloop on a terminal");
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&out);
        let mut master = std::fs::File::from(pty.master);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Linux answers EIO once no process holds the terminal's other side.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            child,
            out,
            reader: Some(reader),
        }
    }

    /// Everything drawn so far, escapes included.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits until the terminal shows `needle` (a safety limit of 60 s).
    pub fn wait_for(&self, needle: &str) {
        let t = Instant::now();
        while !self.text().contains(needle) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "never drew `{needle}`: {:?}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for prdloop to end (a safety limit of 180 s): its exit code and all it drew.
    pub fn finish(mut self) -> (i32, String) {
        let t = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > Duration::from_secs(180) {
                let _ = self.child.kill();
                panic!("prdloop did not finish: {:?}", self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        (status.code().unwrap_or(-1), self.text())
    }
}
