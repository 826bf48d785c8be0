//! A worker's [`Rules`]: where it may write, what it may not read, what it may reach; made
//! by the runner, written on the trampoline's command line and read back there
//! ([`Rules::to_args`], [`Rules::take_args`]), and applied ([`Rules::apply`]).

use std::path::{Path, PathBuf};

use super::folders::DEVICES;
use crate::worker::network::Reach;

/// Where a worker may write: every path here, and everything beneath a folder here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub writable: Vec<PathBuf>,
    /// The private agent home the worker gets when it starts (made, and added to
    /// `writable`, by `worker::start`; not on the trampoline's command line).
    pub home: Option<crate::backend::agents::HomeLayout>,
    /// What it may not read (the user's secrets, [`crate::worker::secrets::secret_paths`]): empty,
    /// it reads everywhere; else everything but these ([`crate::worker::secrets::readable_beneath`]).
    pub hidden: Vec<PathBuf>,
    /// Not on the trampoline's line: the variables the runner leaves out of the worker's
    /// environment when it spawns it ([`crate::worker::secrets::env_to_drop`]).
    pub env_drop: Vec<String>,
    /// Not on the trampoline's line: what the worker may reach over the network; the runner
    /// turns it into `connect` (and a proxy) when it starts the worker.
    pub reach: Reach,
    /// The only TCP ports it may connect to (`None`: any; empty: none).
    pub connect: Option<Vec<u16>>,
    /// The runner's socket that counts the TCP connections the kernel refuses
    /// ([`crate::worker::connects`]; with `connect` only).
    pub count_connects: Option<String>,
}

impl Rules {
    /// A worker's rules: its lane (`lane`, the top of its copy, or the run's folder without
    /// isolation), the devices, and `also` (the agents' folders, the `--sandbox-allow`
    /// paths). Its own temp folder is added when it starts ([`Rules::with`]).
    pub fn for_worker(lane: &Path, also: &[PathBuf]) -> Rules {
        let mut writable = vec![lane.to_path_buf()];
        writable.extend(DEVICES.iter().map(PathBuf::from));
        writable.extend(also.iter().cloned());
        Rules {
            writable,
            ..Rules::default()
        }
    }

    /// A verifier's rules: nothing of the lane it reviews, only the devices and `also` (the
    /// agents' folders, the `--sandbox-allow` paths), and its own temp folder: it reads the
    /// attempt and may not change it.
    pub fn read_only(also: &[PathBuf]) -> Rules {
        let mut writable: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
        writable.extend(also.iter().cloned());
        Rules {
            writable,
            ..Rules::default()
        }
    }

    /// The same rules, the worker given a private agent home after `layout`.
    pub fn with_home(mut self, layout: Option<crate::backend::agents::HomeLayout>) -> Rules {
        self.home = layout;
        self
    }

    /// The same rules with one more writable path.
    pub fn with(mut self, path: &Path) -> Rules {
        self.writable.push(path.to_path_buf());
        self
    }

    /// The same rules, keeping the user's secrets from the worker: the `hidden` paths cannot
    /// be read, the `env_drop` variables are not in its environment.
    pub fn hiding(mut self, hidden: &[PathBuf], env_drop: Vec<String>) -> Rules {
        self.hidden.extend(hidden.iter().cloned());
        self.env_drop = env_drop;
        self
    }

    /// The same rules, with what the worker may reach over the network.
    pub fn reaching(mut self, reach: Reach) -> Rules {
        self.reach = reach;
        self
    }

    /// Whether the rules let a worker write `path` (an absolute path; `..` and symbolic links
    /// are not resolved, so this is what the path says, as a worker's message shows it).
    pub fn allows(&self, path: &Path) -> bool {
        self.writable.iter().any(|w| path.starts_with(w))
    }
}
