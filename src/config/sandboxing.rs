//! The workers' kernel sandbox as a run's settings: what `--sandbox`, `--sandbox-allow`,
//! `--network` and `--pass-env` ask, and the rules each kind of process gets from them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::backend::Agent;

/// The workers' kernel sandbox: what was asked for, and (once [`Sandboxing::decide`] ran,
/// before any worker starts) whether this run has it.
#[derive(Debug, Clone, Default)]
pub struct Sandboxing {
    pub mode: crate::worker::sandbox::Mode,
    /// Beside each worker's lane: the agents' folders and caches under `$HOME` and the
    /// `--sandbox-allow` paths (absolute).
    pub writable: Vec<PathBuf>,
    /// The state folders of the agents this run uses that have no private home, made when
    /// missing once the sandbox is on (an agent cannot create its own under the sandbox:
    /// `$HOME` is read-only there).
    pub agent_dirs: Vec<PathBuf>,
    /// The user's home, where the agents' real folders are (their private homes copy their
    /// login from there).
    pub home: Option<PathBuf>,
    /// The agents this run uses.
    pub agents: Vec<Agent>,
    /// What sandboxed workers cannot read: the user's secrets under `$HOME`.
    pub hidden: Vec<PathBuf>,
    /// `--pass-env`: variables of the secrets list sandboxed workers still get.
    pub pass_env: Vec<String>,
    /// `--network`: what sandboxed workers may reach.
    pub network: crate::worker::network::Network,
    /// `--check-allow`: what the runner's checks may reach besides.
    pub check_allow: Vec<crate::worker::network::Host>,
    /// Workers run sandboxed.
    pub on: bool,
    /// What to tell the user about it.
    pub notice: Option<String>,
    /// Where `--sandbox`'s value came from, when it is worth saying (a variable, a config
    /// file's line; not the default or the flag itself).
    pub set_by: Option<String>,
}

impl Sandboxing {
    /// `--sandbox` and `--sandbox-allow` as given (every allowed path must exist), for a run
    /// of these `agents`.
    pub fn new(
        opts: &crate::cli::SandboxOpts,
        agents: impl IntoIterator<Item = Agent>,
    ) -> Result<Sandboxing> {
        let var = |k: &str| std::env::var_os(k);
        let home = std::env::var_os(crate::env::HOME)
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let mut writable = home
            .as_deref()
            .map(|h| crate::worker::sandbox::home_writable(&var, h))
            .unwrap_or_default();
        let agents: Vec<Agent> = agents.into_iter().collect();
        let mut agent_dirs: Vec<PathBuf> = Vec::new();
        if let Some(h) = &home {
            for &a in agents.iter().filter(|a| a.home_layout(&var, h).is_none()) {
                for d in a.backend().state_dirs(&var, h) {
                    if !agent_dirs.contains(&d) {
                        agent_dirs.push(d);
                    }
                }
            }
        }
        let mut allow = Vec::new();
        for p in opts
            .sandbox_allow
            .iter()
            .filter(|p| !p.as_os_str().is_empty())
        {
            let abs = std::path::absolute(p)
                .with_context(|| format!("failed to resolve --sandbox-allow `{}`", p.display()))?;
            if !abs.exists() {
                anyhow::bail!("--sandbox-allow `{}` does not exist", p.display());
            }
            allow.push(abs);
        }
        writable.extend(allow);
        let hidden = home
            .as_deref()
            .map(|h| crate::worker::secrets::secret_paths(&var, h))
            .unwrap_or_default();
        Ok(Sandboxing {
            mode: opts.sandbox.into(),
            writable,
            agent_dirs,
            home,
            agents,
            hidden,
            pass_env: opts.pass_env.clone(),
            network: opts.network.clone(),
            check_allow: opts.check_allow.clone(),
            on: false,
            notice: None,
            set_by: None,
        })
    }

    /// Asks the kernel and settles whether workers are sandboxed: `Err` with the message
    /// when `--sandbox on` cannot be had.
    pub fn decide(&mut self) -> std::result::Result<(), String> {
        use crate::worker::sandbox;
        let support = sandbox::probe();
        let (on, notice) = sandbox::decide(self.mode, &support, self.set_by.as_deref())?;
        self.on = on;
        self.notice = notice;
        if self.mode == sandbox::Mode::Off {
            return Ok(());
        }
        if let (true, Some(n)) = (on, self.notice.as_mut()) {
            n.push_str("; ");
            n.push_str(&crate::worker::network::describe(
                &self.network,
                support.tcp(),
            ));
        }
        let own: Vec<String> = self
            .agents
            .iter()
            .filter(|a| on && !self.confines(**a))
            .map(|a| a.to_string())
            .collect();
        if let (false, Some(n)) = (own.is_empty(), self.notice.as_mut()) {
            n.push_str(&format!(
                "; {} workers keep their agent's own sandbox, which cannot start inside prdloop's (--sandbox on: prdloop's instead): of prdloop's they get only the environment without your secrets; they can read your secret files (~/.ssh, …), their network is their agent's sandbox's (no proxy, nothing refused is counted), and their signals and abstract sockets are not scoped",
                own.join(", ")
            ));
        }
        if on {
            for d in &self.agent_dirs {
                if let Err(e) = std::fs::create_dir_all(d) {
                    tracing::warn!("cannot make the agent's folder `{}`: {e}", d.display());
                }
            }
        }
        Ok(())
    }

    /// Whether prdloop's sandbox binds the workers of `agent`: when it is on, unless `auto`
    /// leaves an agent that sandboxes itself to its own sandbox.
    pub fn confines(&self, agent: Agent) -> bool {
        use crate::worker::sandbox::Mode;
        self.on && !(self.mode == Mode::Auto && agent.sandboxes_itself())
    }

    /// What a worker (or verifier) of `agent` leaves out of its environment beside what every
    /// process does: with the sandbox on, a worker prdloop's sandbox does not bind (`auto`
    /// leaves codex to its own) still gets no secrets in its environment; a bound one's
    /// rules drop them ([`Sandboxing::rules`]).
    pub fn env_remove(&self, agent: Agent) -> Vec<String> {
        if self.on && !self.confines(agent) {
            self.env_drop(agent)
        } else {
            Vec::new()
        }
    }

    /// The rules of a worker of `agent`, given the top of what it may write (its lane):
    /// `None` when prdloop's sandbox does not bind it. Its agent gets a private home.
    pub fn rules(&self, lane: &Path, agent: Agent) -> Option<crate::worker::sandbox::Rules> {
        self.confines(agent).then(|| {
            crate::worker::sandbox::Rules::for_worker(lane, &self.writable)
                .with_home(self.home_layout(agent))
                .hiding(&self.hidden, self.env_drop(agent))
                .reaching(self.reach(agent))
        })
    }

    /// The rules a check runs under in the tree at `top` (a lane, a fresh copy, or the run's
    /// folder without isolation): a worker's own, whatever the agent: its writes, its hidden
    /// secrets and environment, and the network policy (`None`: the sandbox is off).
    pub fn check_rules(&self, top: &Path) -> Option<crate::worker::sandbox::Rules> {
        self.on.then(|| {
            crate::worker::sandbox::Rules::for_worker(top, &self.writable)
                .hiding(&self.hidden, self.env_drop(Agent::Command))
                .reaching(self.check_reach())
        })
    }

    /// What a check may reach: the network policy's own hosts (`--network allow:…`) and
    /// `--check-allow`'s, no agent's API (a check talks to no model).
    fn check_reach(&self) -> crate::worker::network::Reach {
        use crate::worker::network::{Network, Reach};
        match &self.network {
            Network::Open => Reach::Open,
            Network::Off if self.check_allow.is_empty() => Reach::Off,
            Network::Off => Reach::Hosts(self.check_allow.clone()),
            Network::Agent { allow } => {
                Reach::Hosts(allow.iter().chain(&self.check_allow).cloned().collect())
            }
        }
    }

    /// A verifier's rules: it may write nothing of the lane it reviews (its agent gets a
    /// private home of its own too).
    pub fn verifier_rules(&self, agent: Agent) -> Option<crate::worker::sandbox::Rules> {
        self.confines(agent).then(|| {
            crate::worker::sandbox::Rules::read_only(&self.writable)
                .with_home(self.home_layout(agent))
                .hiding(&self.hidden, self.env_drop(agent))
                .reaching(self.reach(agent))
        })
    }

    fn home_layout(&self, agent: Agent) -> Option<crate::backend::agents::HomeLayout> {
        let var = |k: &str| std::env::var_os(k);
        agent.home_layout(&var, self.home.as_deref()?)
    }

    /// With the sandbox on: `Err` naming the rule when a sandboxed worker could write
    /// prdloop's own state folder `state_dir` (its state, lanes, logs, question book):
    /// a `--sandbox-allow` path holding it or inside it, a shared folder it was put in, or
    /// one of `shared` (folders every worker writes: the run's folder without lanes).
    pub fn check_own(
        &self,
        state_dir: &Path,
        shared: &[PathBuf],
    ) -> std::result::Result<(), String> {
        if !self.on {
            return Ok(());
        }
        let writable: Vec<PathBuf> = self.writable.iter().chain(shared).cloned().collect();
        match crate::worker::sandbox::overlap(state_dir, &writable) {
            None => Ok(()),
            Some(w) => Err(format!(
                "the state folder `{}` (prdloop's state, lanes, logs and question book) overlaps `{}`, which sandboxed workers may write (an agent's folder, a cache, --sandbox-allow, or the run's folder without lanes); give --state-dir a folder outside it, or leave that path out of --sandbox-allow",
                state_dir.display(),
                w.display()
            )),
        }
    }

    /// What a sandboxed worker of `agent` may reach over the network.
    fn reach(&self, agent: Agent) -> crate::worker::network::Reach {
        crate::worker::network::reach(&self.network, agent, &|k| std::env::var(k).ok())
    }

    /// The variables of this environment a sandboxed worker of `agent` does not get: the
    /// secrets list's, but its agent's key and login variables and `--pass-env`'s.
    fn env_drop(&self, agent: Agent) -> Vec<String> {
        let keep: Vec<&str> = agent
            .key_vars()
            .iter()
            .chain(agent.secrets_needed())
            .copied()
            .chain(self.pass_env.iter().map(String::as_str))
            .collect();
        crate::worker::secrets::env_to_drop(std::env::vars_os(), &keep)
    }
}
