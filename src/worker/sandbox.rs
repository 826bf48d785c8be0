//! The kernel sandbox of a worker (`--sandbox`): on Linux, Landlock rules that let the worker
//! and everything it starts write only in its lane, its own temp folder, the agents' state and
//! cache folders, a few devices and the `--sandbox-allow` paths. Reading and executing stay
//! allowed everywhere but the user's secrets ([`super::secrets`]); signals and abstract Unix
//! sockets reach only its own sandbox (ABI 6), and TCP connections only the ports it is given
//! (ABI 4: its network proxy's, [`super::network`]; a seccomp filter refuses the calls that
//! connect without asking Landlock, [`syscalls`]).
//!
//! The runner decides ([`decide`]) before any worker starts whether the sandbox applies, from
//! `--sandbox` and what the kernel supports ([`probe`]); each sandboxed worker's [`Rules`] go
//! to the exec trampoline on its command line ([`Rules::to_args`]), which applies them to
//! itself ([`Rules::apply`]) just before it becomes the worker's program: Landlock's
//! restrictions are inherited across `fork` and `exec` and cannot be lifted, so the whole
//! process tree of the worker is bound by them. A write outside the rules fails with EACCES
//! ("Permission denied"). The kernel keeps no log of those a normal user can read, so what
//! prdloop can tell of them comes from the worker's own output ([`Refusals`]).
//!
//! Landlock needs ABI 2 (Linux 5.19): ABI 1 cannot allow renaming a file into another folder
//! (git does that in its object store), so there the sandbox is unavailable. With ABI 2
//! (Linux 5.19–6.1) `truncate(2)` on a path is not restricted (opening for writing is);
//! ABI 3 (Linux 6.2) and later restrict it too.

mod apply;
mod args;
mod folders;
#[cfg(target_os = "linux")]
mod privileges;
mod refusals;
mod rules;
mod support;
#[cfg(target_os = "linux")]
mod syscalls;
pub use folders::{DEVICES, HOME_SHARED, home_writable, overlap};
pub use refusals::{MAX_PATHS, Refusals, Refused};
pub use rules::Rules;
pub use support::{SCOPES_ABI, Support, TCP_ABI, decide, probe};

/// `--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// On where the kernel supports it, else off (with a notice saying why).
    #[default]
    Auto,
    /// On, or the run fails before any worker starts.
    On,
    /// Workers may write wherever their user may.
    Off,
}

/// Test seam: when set (to anything), [`probe`] reports that the kernel has no Landlock, so
/// tests can see `--sandbox auto` and `--sandbox on` on a machine that cannot be sandboxed.
/// Only prdloop's own tests set it.
pub const TEST_UNSUPPORTED_ENV: &str = "PRDLOOP_TEST_SANDBOX_UNSUPPORTED";

#[cfg(test)]
mod tests;
