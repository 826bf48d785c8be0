//! What the kernel offers the sandbox ([`probe`]: the Landlock ABI, asked without restricting
//! anything) and whether a run's workers are sandboxed ([`decide`]), with what the sandbox
//! gives or lacks here in words, for `doctor` and the run's sandbox line.

use super::{Mode, TEST_UNSUPPORTED_ENV};

/// What the kernel offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock with at least ABI 2; `abi` is the highest of 2 to 6 it has (what prdloop
    /// uses: truncation from 3, TCP ports from 4, the signal and socket scopes from 6).
    Landlock { abi: u8 },
    /// Why there is no sandbox here.
    Unavailable(String),
}

/// What the network rules leave open, on a kernel that has them (for `doctor`; the run's
/// sandbox line says it shorter).
pub const OPEN: &str = "the TCP rule is by port on any address (the proxy's port on another host or 127.0.0.2 is reachable too); not blocked: UDP (DNS included) and other protocols than TCP, and Unix sockets bound to a path (an ssh-agent socket a worker finds by its path answers)";

/// The first Landlock ABI with TCP port rules (Linux 6.7).
pub const TCP_ABI: u8 = 4;

/// The first Landlock ABI that scopes signals and abstract Unix sockets (Linux 6.12).
pub const SCOPES_ABI: u8 = 6;

impl Support {
    /// What the kernel offers, in words (`Landlock ABI 6 or newer`; why there is none).
    pub fn label(&self) -> String {
        match self {
            Support::Landlock { abi: SCOPES_ABI.. } => {
                format!("Landlock ABI {SCOPES_ABI} or newer")
            }
            Support::Landlock { abi } => format!("Landlock ABI {abi}"),
            Support::Unavailable(why) => format!("none ({why})"),
        }
    }

    /// Whether a worker's signals and abstract Unix sockets stay within its own sandbox.
    pub fn scopes(&self) -> bool {
        matches!(self, Support::Landlock { abi: SCOPES_ABI.. })
    }

    /// Whether the kernel can limit a worker's TCP connections to given ports (ABI 4).
    pub fn tcp(&self) -> bool {
        matches!(self, Support::Landlock { abi: TCP_ABI.. })
    }

    /// What the network rules give here, in words (for `doctor`).
    pub fn net_walls(&self) -> String {
        if self.tcp() {
            format!(
                "network: TCP connections are limited (--network agent: only to the worker's proxy; off: none); {OPEN}"
            )
        } else {
            format!(
                "network: this kernel cannot limit TCP connections (Landlock ABI {TCP_ABI}, Linux 6.7): --network agent only sets the proxy variables, off is not enforced"
            )
        }
    }

    /// What the sandbox gives beyond writes, or lacks here, in words: for `doctor` and the
    /// run's sandbox line.
    pub fn walls(&self) -> String {
        if self.scopes() {
            "signals and abstract Unix sockets reach only the worker's own sandbox".into()
        } else {
            format!(
                "signals and abstract Unix sockets are not scoped (Landlock ABI {SCOPES_ABI}, Linux 6.12): a worker may signal your processes"
            )
        }
    }
}

/// What this kernel supports (asking it, without restricting anything).
pub fn probe() -> Support {
    if std::env::var_os(TEST_UNSUPPORTED_ENV).is_some() {
        return Support::Unavailable(format!("{TEST_UNSUPPORTED_ENV} is set"));
    }
    probe_kernel()
}

#[cfg(target_os = "linux")]
fn probe_kernel() -> Support {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope,
    };
    let strict = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    let has = |abi: ABI| {
        strict()
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.create())
            .map(drop)
    };
    let has_net = || {
        strict()
            .handle_access(AccessNet::from_all(ABI::V4))
            .and_then(|r| r.create())
            .is_ok()
    };
    let has_scopes = || {
        strict()
            .scope(Scope::from_all(ABI::V6))
            .and_then(|r| r.create())
            .is_ok()
    };
    if let Err(e) = has(ABI::V1) {
        return Support::Unavailable(format!("the kernel has no Landlock ({e})"));
    }
    if has(ABI::V2).is_err() {
        return Support::Unavailable(
            "the kernel's Landlock is ABI 1 (Linux before 5.19), which cannot allow moving files between folders"
                .into(),
        );
    }
    let abi = if has(ABI::V3).is_err() {
        2
    } else if !has_net() {
        3
    } else if has(ABI::V5).is_err() {
        4
    } else if !has_scopes() {
        5
    } else {
        SCOPES_ABI
    };
    Support::Landlock { abi }
}

#[cfg(not(target_os = "linux"))]
fn probe_kernel() -> Support {
    Support::Unavailable(format!(
        "no kernel sandbox on {} yet (Linux only)",
        std::env::consts::OS
    ))
}

/// Whether workers run sandboxed, from `--sandbox` and what the kernel supports: `Ok(true)`
/// or `Ok(false)` with the run's sandbox line (every run prints one), `Err` with the message
/// when `--sandbox on` cannot be had. `set_by`: where the setting came from, when not from
/// the default or the flag itself (a variable, a config file's line).
pub fn decide(
    mode: Mode,
    support: &Support,
    set_by: Option<&str>,
) -> Result<(bool, Option<String>), String> {
    // Where a setting other than the default came from (the flag itself needs no word).
    let named = set_by.is_some();
    let set_by = set_by.map_or(String::new(), |o| format!(" (set by {o})"));
    const OPEN: &str = "workers may write wherever you may, read your secrets (~/.ssh, ~/.aws, …) and your environment's credentials, and connect anywhere";
    match (mode, support) {
        (Mode::Off, _) => Ok((
            false,
            Some(format!(
                "sandbox: off{}; {OPEN}",
                if named {
                    set_by
                } else {
                    " (--sandbox off)".to_string()
                }
            )),
        )),
        (Mode::Auto | Mode::On, Support::Landlock { abi }) => Ok((
            true,
            Some(format!(
                "sandbox: on ({}){set_by}; workers write only in their lane, their own TMPDIR, their private agent home and the caches, and read none of your secrets (~/.ssh, ~/.aws, …, credentials in the environment); {}",
                match abi {
                    2 => "Landlock ABI 2: truncate(2) outside the lane is not blocked before Linux 6.2".into(),
                    _ => support.label(),
                },
                support.walls()
            )),
        )),
        (Mode::Auto, Support::Unavailable(why)) => Ok((
            false,
            Some(format!("sandbox: off ({why}){set_by}; {OPEN}")),
        )),
        (Mode::On, Support::Unavailable(why)) => Err(format!(
            "--sandbox on{set_by}: no kernel sandbox here: {why}; use --sandbox auto or off to run without it"
        )),
    }
}
