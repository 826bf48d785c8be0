//! What the folders are: those a sandboxed worker may write under the user's home
//! ([`home_writable`]), the devices, and whether one of them holds a folder of prdloop's own
//! ([`overlap`]).

use std::path::{Path, PathBuf};

use crate::backend::Agent;

/// Beside the folders of the agents without a private home ([`Agent::state_dirs`]): the
/// caches and package stores the tools agents run use, under `$HOME`. Nothing of prdloop's
/// is kept in any of them (the run checks its state folder: [`overlap`]).
pub const HOME_SHARED: &[&str] = &[
    ".cache",
    ".local/state",
    ".npm",
    ".cargo/registry",
    ".cargo/git",
];

/// What a sandboxed worker may write under the user's `home`, beside its own private agent
/// home ([`Rules::home`]): the state folders of the agents that have no private home
/// (opencode, cursor, amp; [`Agent::home_layout`]) and [`HOME_SHARED`], where the environment
/// (`var`) moves them (`XDG_CACHE_HOME`, `XDG_STATE_HOME`, …). The user's real `~/.claude`,
/// `~/.codex` and `~/.gemini` are not in it. Only those that exist when a worker starts count.
pub fn home_writable(
    var: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    home: &Path,
) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Agent::ALL
        .iter()
        .filter(|a| a.home_layout(var, home).is_none())
        .flat_map(|a| a.backend().state_dirs(var, home))
        .collect();
    v.extend(HOME_SHARED.iter().map(|p| home.join(p)));
    for k in ["XDG_CACHE_HOME", "XDG_STATE_HOME"] {
        v.extend(var(k).filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    v
}

/// The first of `writable` that holds `own` (a folder of prdloop's own: its state, its
/// lanes) or lies inside it, compared as the kernel resolves them (links followed, so a
/// rule through a link is caught too). `None`: no worker can write any of it.
pub fn overlap<'a>(own: &Path, writable: &'a [PathBuf]) -> Option<&'a PathBuf> {
    let real = |p: &Path| resolved(p);
    let own = real(own);
    writable.iter().find(|w| {
        let w = real(w);
        own.starts_with(&w) || w.starts_with(&own)
    })
}

/// A path with the links in the part of it that exists resolved (the rest as it is).
fn resolved(p: &Path) -> PathBuf {
    let mut have = p.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&have) {
            return rest.iter().rev().fold(c, |acc, part| acc.join(part));
        }
        match (have.file_name().map(|n| n.to_os_string()), have.parent()) {
            (Some(n), Some(up)) => {
                rest.push(n);
                have = up.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// The devices programs write to (or open read-write).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];
