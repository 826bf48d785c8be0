//! One worker: a child process in its own process group, the prompt on stdin, stdout and
//! stderr drained concurrently into a log file, a bounded tail and the backend's parser, a
//! deadline, and a kill sequence (SIGTERM to the group, grace, SIGKILL to the group). A
//! sandboxed worker ([`sandbox`]) also gets a temp folder of its own (its `TMPDIR`, removed
//! when it ends), and its output is watched for writes the sandbox refused.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::watch;

use crate::backend::Activity;
use crate::backend::stuck;
use crate::backend::verdict::Exit;
use crate::backend::{Outcome, OutputFormat, StreamParser};
use crate::platform as unix;

#[cfg(target_os = "linux")]
pub mod connects;
pub mod home;
pub mod network;
pub mod output_log;
pub mod reaper;
pub mod sandbox;
#[cfg(target_os = "linux")]
mod seccomp_notify;
pub mod secrets;
pub mod trampoline;

use sandbox::{Refusals, Rules};

/// How hard the runner asks workers to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cancel {
    None,
    /// SIGTERM, the grace period, then SIGKILL.
    Graceful,
    /// SIGKILL now.
    Kill,
}

/// Everything needed to run one worker.
#[derive(Debug, Clone)]
pub struct Spec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub env_remove: Vec<String>,
    pub stdin: Vec<u8>,
    pub log_path: PathBuf,
    pub timeout: Duration,
    pub kill_grace: Duration,
    pub format: OutputFormat,
    /// The kernel sandbox's rules (`None`: not sandboxed). The worker's own temp folder is
    /// added to them by [`start`].
    pub sandbox: Option<Rules>,
    /// `--stuck-after`: when a worker giving no new tool input is ended.
    pub stuck: stuck::StuckAfter,
}

/// A worker that ran.
#[derive(Debug, Clone)]
pub struct Finished {
    pub exit: Exit,
    pub outcome: Outcome,
    /// The last bytes of stderr (lossy UTF-8), for failure reasons.
    pub stderr_tail: String,
    pub duration: Duration,
    pub pid: u32,
    /// Bytes of output seen (stdout + stderr).
    pub output_bytes: u64,
    /// What its output says the sandbox refused (empty when not sandboxed).
    pub refusals: Refusals,
}

/// The worker could not be started.
#[derive(Debug, thiserror::Error)]
#[error("failed to start `{program}`: {source}")]
pub struct SpawnError {
    pub program: String,
    #[source]
    pub source: std::io::Error,
}

/// The longest line kept for parsing: a longer one is parsed cut to this (its start: a
/// `QUESTION:` there is still read), and still goes to the log whole.
const MAX_LINE: usize = 1024 * 1024;
/// Bytes of stderr kept in memory.
const STDERR_TAIL: usize = 8 * 1024;
/// How long pipes are read after the child exits (a grandchild may hold them open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(1);
/// After that, how long a reader told to stop gets to read what is already in its pipe.
const DRAIN_STOP: Duration = Duration::from_millis(100);

mod seen;

use seen::{ErrSeen, OutSeen, RefusalWatch, Sink, lock};

/// A worker that has been started.
pub struct Running {
    child: tokio::process::Child,
    pid: u32,
    started: Instant,
    timeout: Duration,
    kill_grace: Duration,
    log: Arc<StdMutex<Option<output_log::LogOut>>>,
    stdin_task: Option<tokio::task::JoinHandle<()>>,
    format: OutputFormat,
    out: Arc<StdMutex<OutSeen>>,
    err: Arc<StdMutex<ErrSeen>>,
    /// Tells the readers to stop once their pipe has nothing more to read right now.
    stop_readers: watch::Sender<bool>,
    out_task: tokio::task::JoinHandle<()>,
    err_task: tokio::task::JoinHandle<()>,
    /// A sandboxed worker's own temp folder, removed once it has ended.
    tmp: Option<tempfile::TempDir>,
    /// A sandboxed worker's private agent home, removed once it has ended.
    home: Option<home::PrivateHome>,
    /// In the environment of the worker and all it starts: how what it leaves is found.
    token: String,
    /// Known as a worker to the search for other workers' leftovers until waited for.
    known: Option<reaper::Started>,
    refused: Option<Arc<StdMutex<RefusalWatch>>>,
    /// A sandboxed worker's own network proxy (`--network agent`), stopped once it ended.
    proxy: Option<network::Proxy>,
    /// What the kernel refuses it over TCP, counted while it runs (rules that limit TCP).
    #[cfg(target_os = "linux")]
    counter: Option<connects::Counter>,
}

/// What starts each line of a worker's stderr in its log.
pub const STDERR_MARK: &str = "[stderr] ";

/// Starts one worker: spawns it in its own process group, writes the prompt to its stdin in
/// the background, and starts draining its output. Must be called inside a tokio runtime.
pub fn start(spec: Spec) -> Result<Running, SpawnError> {
    let started = Instant::now();
    let log = match output_log::LogOut::create(&spec.log_path) {
        Ok(out) => Some(out),
        Err(e) => {
            tracing::warn!(
                "cannot write the worker log `{}`: {e}",
                spec.log_path.display()
            );
            None
        }
    };
    let log = Arc::new(StdMutex::new(log));
    let spawn_error = |source| SpawnError {
        program: spec.program.clone(),
        source,
    };

    let walls = walls(&spec).map_err(spawn_error)?;
    let refused = walls.rules.as_ref().map(|r| {
        Arc::new(StdMutex::new(RefusalWatch {
            rules: r.clone(),
            seen: Refusals::default(),
        }))
    });

    let token = reaper::new_token();
    let mut cmd = command(&spec, &walls, &token).map_err(spawn_error)?;
    let Walls {
        rules,
        tmp,
        home,
        proxy,
        #[cfg(target_os = "linux")]
        watch,
    } = walls;
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let pid = child.id().unwrap_or(0);
    let known = child.id().map(|pid| reaper::Started::new(pid, &token));
    #[cfg(target_os = "linux")]
    let counter = watch.map(|w| {
        let ports = rules
            .as_ref()
            .and_then(|r| r.connect.clone())
            .unwrap_or_default();
        w.start(pid, ports)
    });

    // The prompt on stdin, then EOF. A child that never reads it must not block us.
    let stdin_task = child.stdin.take().map(|mut stdin| {
        let data = spec.stdin;
        tokio::spawn(async move {
            let _ = stdin.write_all(&data).await;
            let _ = stdin.shutdown().await;
        })
    });

    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let format = spec.format;
    let (stop_readers, stop) = watch::channel(false);
    let out = Arc::new(StdMutex::new(OutSeen {
        parser: StreamParser::new(format),
        bytes: 0,
        activity: watch::Sender::new(Activity::default()),
        refused: refused.clone(),
        // Output without tool calls has nothing to watch: only the deadline applies.
        stuck: stuck::StuckWatch::new(
            if format.streams_tool_calls() {
                spec.stuck
            } else {
                stuck::StuckAfter::OFF
            },
            tokio::time::Instant::now(),
        ),
        stuck_news: watch::Sender::new(None),
    }));
    let err = Arc::new(StdMutex::new(ErrSeen {
        refused: refused.clone(),
        ..ErrSeen::default()
    }));
    let out_task = tokio::spawn({
        let (log, out, stop) = (Arc::clone(&log), Arc::clone(&out), stop.clone());
        async move { drain(stdout, &log, None, stop, &*out).await }
    });
    let err_task = tokio::spawn({
        let (log, err) = (Arc::clone(&log), Arc::clone(&err));
        async move { drain(stderr, &log, Some(STDERR_MARK.as_bytes()), stop, &*err).await }
    });
    Ok(Running {
        child,
        pid,
        started,
        timeout: spec.timeout,
        kill_grace: spec.kill_grace,
        log,
        stdin_task,
        format,
        out,
        err,
        stop_readers,
        out_task,
        err_task,
        tmp,
        home,
        token,
        known,
        refused,
        proxy,
        #[cfg(target_os = "linux")]
        counter,
    })
}

/// What a worker gets of its own before it starts, gone once it has ended: with a sandbox,
/// its rules, a temp folder, a private agent home, a network proxy and (Linux) the watch
/// that counts the TCP connections the kernel refuses it.
struct Walls {
    rules: Option<Rules>,
    tmp: Option<tempfile::TempDir>,
    home: Option<home::PrivateHome>,
    proxy: Option<network::Proxy>,
    #[cfg(target_os = "linux")]
    watch: Option<connects::Watch>,
}

fn walls(spec: &Spec) -> std::io::Result<Walls> {
    // A sandboxed worker: its own temp folder, writable, as its TMPDIR. Only the trampoline
    // can apply the rules: a sandbox asked for without it is an error, never a worker without
    // its sandbox.
    // Its agent gets a private home (writable, the user's real one not), when it has one.
    let (rules, tmp, home, proxy) = match &spec.sandbox {
        Some(rules) => {
            if !trampoline::enabled() {
                return Err(std::io::Error::other(
                    "the sandbox is applied by prdloop's exec trampoline, which is off here",
                ));
            }
            let tmp = tempfile::Builder::new()
                .prefix("prdloop-worker-")
                .tempdir()?;
            let home = rules
                .home
                .as_ref()
                .map(home::PrivateHome::make)
                .transpose()?;
            let mut rules = rules.clone().with(tmp.path());
            if let Some(h) = &home {
                rules = rules.with(h.path());
            }
            // Its network: its own proxy's port only, or no TCP at all, or any.
            let proxy = match &rules.reach {
                network::Reach::Open => None,
                network::Reach::Off => {
                    rules.connect = Some(Vec::new());
                    None
                }
                network::Reach::Hosts(hosts) => {
                    let p = network::Proxy::start(hosts.clone())?;
                    rules.connect = Some(vec![p.port]);
                    Some(p)
                }
            };
            (Some(rules), Some(tmp), home, proxy)
        }
        None => (None, None, None, None),
    };
    // The TCP connections the kernel refuses it, counted (Linux).
    #[cfg(target_os = "linux")]
    let mut rules = rules;
    #[cfg(target_os = "linux")]
    let watch = match rules.as_mut() {
        Some(r) if r.connect.is_some() => {
            let w = connects::Watch::bind()?;
            r.count_connects = Some(w.name.clone());
            Some(w)
        }
        _ => None,
    };
    Ok(Walls {
        rules,
        tmp,
        home,
        proxy,
        #[cfg(target_os = "linux")]
        watch,
    })
}

/// The worker's command: its program (through the trampoline, which applies the rules), its
/// arguments, folder, pipes, process group and environment (`token` marks all it starts).
fn command(spec: &Spec, walls: &Walls, token: &str) -> std::io::Result<Command> {
    let Walls {
        rules,
        tmp,
        home,
        proxy,
        ..
    } = walls;
    // On Linux the child starts as prdloop's exec trampoline, which sets its parent-death
    // signal and then becomes the program (see `trampoline`): a prdloop killed by SIGKILL
    // takes its workers and Verify commands with it. The signal fires when the spawning
    // *thread* ends: `start` is called from the future `block_on` runs (the main thread) and
    // from tasks on the multi-thread runtime's worker threads, which all live as long as the
    // runtime. Never call it from a short-lived thread (`spawn_blocking`).
    let mut cmd = match trampoline::prefix(rules.as_ref()) {
        Some((exe, args)) => {
            // The trampoline always starts; a program it could not exec would only show as
            // status 127. Look for it first, so that fails to start as it did without it.
            locate(spec)?;
            let mut cmd = Command::new(exe);
            cmd.args(args).arg(&spec.program);
            cmd
        }
        None => Command::new(&spec.program),
    };
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for k in spec
        .env_remove
        .iter()
        .chain(rules.iter().flat_map(|r| &r.env_drop))
    {
        cmd.env_remove(k);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    for (k, v) in proxy.iter().flat_map(|p| p.env()) {
        cmd.env(k, v);
    }
    cmd.env(crate::env::WORKER_TOKEN, token);
    if let Some(tmp) = &tmp {
        for k in ["TMPDIR", "TMP", "TEMP"] {
            cmd.env(k, tmp.path());
        }
    }
    if let Some(h) = &home {
        let (k, v) = h.env();
        cmd.env(k, v);
    }
    Ok(cmd)
}

/// Whether `spec.program` can be executed, as `execvp` in the worker would find it: a path
/// relative to the workdir, or a bare name on the worker's PATH. The error is the one a direct
/// spawn would give (no such file, permission denied).
fn locate(spec: &Spec) -> std::io::Result<()> {
    use nix::errno::Errno;
    let program = spec.program.as_str();
    if program.contains('/') {
        let meta = std::fs::metadata(spec.cwd.join(program))?;
        if !meta.is_file() || !unix::is_executable(&meta) {
            return Err(Errno::EACCES.into());
        }
        return Ok(());
    }
    let path = match spec.env.iter().rev().find(|(k, _)| k == "PATH") {
        Some((_, v)) => Some(std::ffi::OsString::from(v)),
        None if spec.env_remove.iter().any(|k| k == "PATH") => None,
        None => std::env::var_os("PATH"),
    };
    match path {
        Some(path) => which::which_in(program, Some(path), &spec.cwd)
            .map(drop)
            .map_err(|_| Errno::ENOENT.into()),
        // No PATH: the trampoline's own lookup (the system's default) decides.
        None => Ok(()),
    }
}

impl Running {
    /// The worker's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What the agent is doing now, as its output says (display only).
    pub fn activity(&self) -> watch::Receiver<Activity> {
        lock(&self.out).activity.subscribe()
    }

    /// Waits for the worker to end: by itself, at its deadline, or when cancelled.
    pub async fn wait(self, mut cancel: watch::Receiver<Cancel>) -> Finished {
        let Running {
            mut child,
            pid,
            started,
            timeout,
            kill_grace,
            log,
            stdin_task,
            format,
            out,
            err,
            stop_readers,
            mut out_task,
            mut err_task,
            tmp,
            home,
            token,
            known,
            refused,
            proxy,
            #[cfg(target_os = "linux")]
            counter,
        } = self;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut stop: Option<Exit> = None;
        let mut cancel_open = true;
        let mut stuck_news = lock(&out).stuck_news.subscribe();
        // The stuck watch's time limit, looked at again when it runs out (new input may have
        // moved it meanwhile).
        let stuck_at = lock(&out).stuck.deadline();
        let stuck_timer =
            tokio::time::sleep_until(stuck_at.unwrap_or_else(tokio::time::Instant::now));
        tokio::pin!(stuck_timer);
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                _ = &mut stuck_timer, if stop.is_none() && stuck_at.is_some() => {
                    let (found, next) = {
                        let mut seen = lock(&out);
                        let found = seen.stuck.check_time(tokio::time::Instant::now());
                        (found, seen.stuck.deadline())
                    };
                    if let Some(s) = found {
                        stop = Some(Exit::Stuck(s));
                        break terminate(&mut child, pid, kill_grace, &mut cancel).await;
                    }
                    if let Some(d) = next {
                        stuck_timer.as_mut().reset(d);
                    }
                }
                changed = stuck_news.changed(), if stop.is_none() => {
                    let found = changed.ok().and_then(|_| stuck_news.borrow().clone());
                    if let Some(s) = found {
                        stop = Some(Exit::Stuck(s));
                        break terminate(&mut child, pid, kill_grace, &mut cancel).await;
                    }
                }
                _ = &mut deadline, if stop.is_none() => {
                    stop = Some(Exit::TimedOut { after_secs: timeout.as_secs() });
                    break terminate(&mut child, pid, kill_grace, &mut cancel).await;
                }
                changed = cancel.changed(), if stop.is_none() && cancel_open => {
                    cancel_open = changed.is_ok();
                    let level = if cancel_open { *cancel.borrow() } else { Cancel::None };
                    match level {
                        Cancel::None => {}
                        Cancel::Graceful => {
                            stop = Some(Exit::Cancelled);
                            break terminate(&mut child, pid, kill_grace, &mut cancel).await;
                        }
                        Cancel::Kill => {
                            stop = Some(Exit::Cancelled);
                            unix::kill_group(pid);
                            break child.wait().await;
                        }
                    }
                }
            }
        };
        // Waited for: its pid may be another process's from now on.
        drop(known);
        // Whatever the worker left behind in its group goes with it, and so does what it
        // detached (found by its token): asked to stop, given the grace (none when the run is
        // being killed), then killed.
        unix::kill_group(pid);
        let grace = if *cancel.borrow() == Cancel::Kill {
            Duration::ZERO
        } else {
            kill_grace
        };
        reaper::end_leftovers(&token, pid, grace).await;
        if let Some(t) = stdin_task {
            t.abort();
        }

        // Read the pipes to their end, but only for a bounded time: a process that left the
        // group (a new session) may hold them open. Then the readers read what is already in
        // the pipes and stop; one that still does not is aborted. Either way the outcome is
        // built from everything read: the readers share it with us.
        let drain_deadline = tokio::time::sleep(DRAIN_AFTER_EXIT);
        tokio::pin!(drain_deadline);
        let (mut out_done, mut err_done, mut told_to_stop) = (false, false, false);
        while !(out_done && err_done) {
            tokio::select! {
                _ = &mut out_task, if !out_done => out_done = true,
                _ = &mut err_task, if !err_done => err_done = true,
                _ = &mut drain_deadline => {
                    if told_to_stop {
                        tracing::debug!("worker {pid}: a pipe reader did not stop; aborted");
                        break;
                    }
                    told_to_stop = true;
                    let _ = stop_readers.send(true);
                    drain_deadline
                        .as_mut()
                        .reset(tokio::time::Instant::now() + DRAIN_STOP);
                }
            }
        }
        out_task.abort();
        err_task.abort();
        if let Some(w) = lock(&log).as_mut() {
            let _ = w.finish();
        }
        let (outcome, out_bytes) = {
            let mut seen = lock(&out);
            let parser = std::mem::replace(&mut seen.parser, StreamParser::new(format));
            (parser.finish(), seen.bytes)
        };
        let (tail, err_bytes) = {
            let mut seen = lock(&err);
            (std::mem::take(&mut seen.tail), seen.bytes)
        };

        // The worker and all it left are gone: its temp folder and agent home go too.
        drop(tmp);
        drop(home);
        let mut refusals = refused.map_or_else(Refusals::default, |w| lock(&w).seen.clone());
        if let Some(p) = proxy {
            refusals.net = p.stop();
        }
        #[cfg(target_os = "linux")]
        if let Some(c) = counter {
            refusals.net = refusals.net.merged(&c.stop());
        }

        let exit = match stop {
            Some(e) => e,
            None => match status {
                Ok(s) => Exit::of(s),
                Err(_) => Exit::Signal { signal: 9 },
            },
        };
        Finished {
            exit,
            outcome,
            stderr_tail: String::from_utf8_lossy(&tail).into_owned(),
            duration: started.elapsed(),
            pid,
            output_bytes: out_bytes + err_bytes,
            refusals,
        }
    }
}

/// SIGTERM to the group, up to `grace` for the child to exit, then SIGKILL. A second cancel
/// level (`Kill`) during the grace period kills at once.
async fn terminate(
    child: &mut tokio::process::Child,
    pgid: u32,
    grace: Duration,
    cancel: &mut watch::Receiver<Cancel>,
) -> std::io::Result<std::process::ExitStatus> {
    unix::term_group(pgid);
    let grace_timer = tokio::time::sleep(grace);
    tokio::pin!(grace_timer);
    loop {
        tokio::select! {
            s = child.wait() => return s,
            _ = &mut grace_timer => break,
            changed = cancel.changed() => {
                if changed.is_err() || *cancel.borrow() == Cancel::Kill {
                    break;
                }
            }
        }
    }
    unix::kill_group(pgid);
    child.wait().await
}

/// Reads a pipe to its end, or until told to `stop` and nothing more is ready to read: every
/// byte goes to the log, each line (bounded) and the byte count to `sink`.
async fn drain<R: tokio::io::AsyncRead + Unpin>(
    mut r: R,
    log: &StdMutex<Option<output_log::LogOut>>,
    prefix: Option<&[u8]>,
    mut stop: watch::Receiver<bool>,
    sink: &impl Sink,
) {
    // Read into its spare room, never zeroed: most workers' whole output is a few lines, and
    // zeroing (and faulting in) 64 KiB twice per worker was a visible part of a worker's cost.
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut line: Vec<u8> = Vec::new();
    let mut at_line_start = true;
    loop {
        buf.clear();
        let n = tokio::select! {
            // Reading first: what is already in the pipe is read before stopping.
            biased;
            r = r.read_buf(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = stop.wait_for(|s| *s) => break,
        };
        sink.bytes(n);
        let chunk = &buf[..n];
        {
            let mut guard = lock(log);
            if let Some(w) = guard.as_mut() {
                match prefix {
                    None => {
                        let _ = w.write(chunk);
                    }
                    Some(p) => {
                        for piece in chunk.split_inclusive(|&b| b == b'\n') {
                            if at_line_start {
                                let _ = w.write(p);
                            }
                            let _ = w.write(piece);
                            at_line_start = piece.ends_with(b"\n");
                        }
                    }
                }
            }
        }
        let mut rest = chunk;
        // Up to MAX_LINE bytes of a line are kept; the rest of an overlong one is skipped.
        let keep = |line: &mut Vec<u8>, part: &[u8]| {
            let room = MAX_LINE.saturating_sub(line.len());
            line.extend_from_slice(&part[..part.len().min(room)]);
        };
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            keep(&mut line, &rest[..i]);
            sink.line(&line);
            line.clear();
            if line.capacity() > 64 * 1024 {
                line.shrink_to(64 * 1024);
            }
            rest = &rest[i + 1..];
        }
        keep(&mut line, rest);
    }
    // A last line without its newline (at the end, or cut short by `stop`).
    if !line.is_empty() {
        sink.line(&line);
    }
}

#[cfg(test)]
mod tests;
