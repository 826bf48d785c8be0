//! Binding the trampoline to its rules ([`Rules::apply`]): the dangerous capabilities
//! dropped ([`super::privileges`]), the Landlock ruleset made and enforced, then the seccomp
//! filter ([`super::syscalls`]) when the rules limit TCP.

#[cfg(target_os = "linux")]
use std::path::Path;

use super::rules::Rules;
#[cfg(target_os = "linux")]
use super::{privileges, syscalls};

impl Rules {
    /// Binds this process, and everything it starts from now on, to the rules: reading and
    /// executing anywhere but the hidden paths (listing folders everywhere), writing only
    /// where they allow. Paths that do not exist are left out. `Err` when the kernel did not
    /// enforce them.
    #[cfg(target_os = "linux")]
    pub fn apply(&self) -> Result<(), String> {
        use landlock::{
            Access, AccessFs, AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr,
            RulesetError, RulesetStatus, Scope, path_beneath_rules,
        };
        let abi = HANDLED;
        // Root's capabilities that read other processes' environment or get past the
        // network rules.
        privileges::drop_dangerous()?;
        // Signals and abstract Unix sockets: only within the worker's own sandbox, where the
        // kernel has the scopes (ABI 6); an older one ignores them (best effort).
        // TCP connections: only to the allowed ports, where the kernel has network rules
        // (ABI 4); an older one ignores them (the run's sandbox line says so).
        let ports = self.connect.clone();
        // Reached now: Landlock's abstract-socket scope would refuse it below. Counting is
        // not the wall: a trampoline that cannot set it up says so and goes on.
        let runner = match (&ports, &self.count_connects) {
            (Some(_), Some(name)) => crate::worker::connects::reach_runner(name)
                .map_err(|e| eprintln!("prdloop: refused connections will not be counted: {e}"))
                .ok(),
            _ => None,
        };
        let status = Ruleset::default()
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| match &ports {
                Some(_) => r.handle_access(AccessNet::ConnectTcp),
                None => Ok(r),
            })
            .and_then(|r| r.scope(Scope::from_all(landlock::ABI::V6)))
            .and_then(|r| r.create())
            .and_then(|r| {
                let read = AccessFs::from_read(abi);
                if self.hidden.is_empty() {
                    return r.add_rules(path_beneath_rules(["/"], read));
                }
                let readable =
                    crate::worker::secrets::readable_beneath(Path::new("/"), &self.hidden);
                r.add_rules(path_beneath_rules(["/"], AccessFs::ReadDir))?
                    .add_rules(path_beneath_rules(readable, read))
            })
            .and_then(|r| r.add_rules(path_beneath_rules(&self.writable, AccessFs::from_all(abi))))
            .and_then(|r| {
                r.add_rules(
                    ports
                        .iter()
                        .flatten()
                        .map(|p| Ok::<_, RulesetError>(NetPort::new(*p, AccessNet::ConnectTcp))),
                )
            })
            .and_then(|r| r.restrict_self())
            .map_err(|e| e.to_string())?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err("the kernel did not enforce the rules".into());
        }
        // TCP Fast Open and io_uring connect without the `connect` Landlock checks.
        if ports.is_some() {
            syscalls::refuse_tcp_bypasses()?;
        }
        if let Some(runner) = runner
            && let Err(e) = crate::worker::connects::hand_over(runner)
        {
            eprintln!("prdloop: refused connections will not be counted: {e}");
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    pub fn apply(&self) -> Result<(), String> {
        Err("no kernel sandbox on this system".into())
    }
}

/// The file-system rights the sandbox handles: those of Landlock ABI 3 (writes, moves between
/// folders, truncation). Later ABIs' rights (ioctl on devices, connecting to Unix sockets)
/// are not about writing files and stay allowed.
#[cfg(target_os = "linux")]
const HANDLED: landlock::ABI = landlock::ABI::V3;
