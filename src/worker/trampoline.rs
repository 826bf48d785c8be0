//! The exec trampoline: how a child learns to die with prdloop without `unsafe` code.
//!
//! On Linux every child (workers and Verify commands) starts as
//! `<prdloop> __prdloop-exec <parent pid> <program> <args…>`. That first process sets its
//! parent-death signal to SIGKILL, checks that its parent is still the prdloop that spawned
//! it (if prdloop already died it exits at once), and then replaces itself with the real
//! program by `exec`: same pid, process group, stdin/stdout/stderr, working directory and
//! environment. So when prdloop is killed, even by SIGKILL, its children are killed by the
//! kernel instead of running on without a deadline. A program that cannot be executed is
//! reported on stderr with exit status 127.
//!
//! The parent-death signal fires when the *thread* that spawned the child exits, not the
//! process. prdloop spawns from its async runtime: the future given to `block_on` runs on the
//! main thread and tasks run on the multi-thread runtime's worker threads, all of which live as
//! long as the runtime (prdloop never uses `block_in_place`, which would hand a worker thread's
//! place to another). A child spawned from a short-lived thread (`spawn_blocking`, a scoped
//! thread) would be killed when that thread ends: do not spawn workers from one.
//!
//! Elsewhere (macOS has no parent-death signal) the program is spawned directly; the workers of
//! a runner killed by SIGKILL are ended by the next run's takeover of its lock.
//!
//! With `--sandbox` the parent pid is followed by the worker's sandbox rules
//! (`--sandbox --write PATH … --`, see [`super::sandbox::Rules`]): the trampoline binds
//! itself to them last, just before the `exec`, so the program and everything it starts are
//! bound too. Rules it cannot apply stop it (status 127): the program never runs unsandboxed.
//!
//! The trampoline is used only by the `prdloop` binary ([`enable`] is called by
//! [`crate::main`]); a test harness that uses the library spawns programs directly.

use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, Ordering};

use super::sandbox::Rules;

/// The hidden first argument that makes prdloop a trampoline. Handled before the command line
/// is parsed, so it never shows in the help.
pub const ARG: &str = "__prdloop-exec";

/// Exit status of a trampoline that could not run its program (as a shell reports it).
const CANNOT_RUN: u8 = 127;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Spawn children through the trampoline from now on (Linux; elsewhere it changes nothing).
pub fn enable() {
    ENABLED.store(cfg!(target_os = "linux"), Ordering::Relaxed);
}

/// Whether children are spawned through the trampoline (the `prdloop` binary on Linux).
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The program to spawn and its arguments before the real program's: the trampoline when it
/// is enabled (with the sandbox `rules`, if any), else nothing (spawn the program itself).
pub(crate) fn prefix(rules: Option<&Rules>) -> Option<(&'static str, Vec<OsString>)> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    // `/proc/self/exe` in the new child is prdloop's own binary, even when the file was
    // replaced or deleted since prdloop started (an upgrade during a long run).
    let mut args = vec![ARG.into(), std::process::id().to_string().into()];
    if let Some(rules) = rules {
        args.extend(rules.to_args());
    }
    Some(("/proc/self/exe", args))
}

/// When this process was started as a trampoline, runs it: returns only when the program
/// could not be started, with the exit code to end with. `None`: a normal start.
pub fn run_if_asked() -> Option<std::process::ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|a| a != ARG) {
        return None;
    }
    Some(std::process::ExitCode::from(run(args)))
}

fn run(args: impl Iterator<Item = OsString>) -> u8 {
    let mut args = args.peekable();
    let parent = args
        .next()
        .and_then(|p| p.to_str().and_then(|p| p.parse::<i32>().ok()));
    let rules = Rules::take_args(&mut args);
    let Some(program) = args.next() else {
        eprintln!(
            "prdloop: `{ARG}` is internal: {ARG} <parent pid> [--sandbox [--write PATH]… --] <program> [args…]"
        );
        return CANNOT_RUN;
    };
    let failed = |why: &str| {
        eprintln!(
            "prdloop: failed to start `{}`: {why}",
            program.to_string_lossy()
        );
        CANNOT_RUN
    };
    let rules = match rules {
        Ok(r) => r,
        Err(e) => return failed(&format!("bad sandbox rules: {e}")),
    };
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
        // Not fatal: the worker still runs, only without this safety net.
        eprintln!("prdloop: cannot set the parent-death signal: {e}");
    }
    // The parent may have died before the signal was set: then nobody would ever end us.
    if Some(nix::unistd::getppid().as_raw()) != parent {
        return CANNOT_RUN;
    }
    // Last: the sandbox binds this process from here on (and what it execs and starts).
    if let Some(rules) = &rules
        && let Err(e) = rules.apply()
    {
        return failed(&format!("cannot sandbox it: {e}"));
    }
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(&program).args(args).exec();
    eprintln!(
        "prdloop: {}",
        crate::backend::classify::failed_to_start(&program.to_string_lossy(), &err)
    );
    CANNOT_RUN
}
