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

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::network::Reach;
use crate::backend::Agent;

#[cfg(target_os = "linux")]
mod privileges;
mod support;
#[cfg(target_os = "linux")]
mod syscalls;
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

/// Where a worker may write: every path here, and everything beneath a folder here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub writable: Vec<PathBuf>,
    /// The private agent home the worker gets when it starts (made, and added to
    /// `writable`, by `worker::start`; not on the trampoline's command line).
    pub home: Option<crate::backend::agents::HomeLayout>,
    /// What it may not read (the user's secrets, [`super::secrets::secret_paths`]): empty,
    /// it reads everywhere; else everything but these ([`super::secrets::readable_beneath`]).
    pub hidden: Vec<PathBuf>,
    /// Not on the trampoline's line: the variables the runner leaves out of the worker's
    /// environment when it spawns it ([`super::secrets::env_to_drop`]).
    pub env_drop: Vec<String>,
    /// Not on the trampoline's line: what the worker may reach over the network; the runner
    /// turns it into `connect` (and a proxy) when it starts the worker.
    pub reach: Reach,
    /// The only TCP ports it may connect to (`None`: any; empty: none).
    pub connect: Option<Vec<u16>>,
    /// The runner's socket that counts the TCP connections the kernel refuses
    /// ([`super::connects`]; with `connect` only).
    pub count_connects: Option<String>,
}

/// The flag that starts the rules on the trampoline's command line, and the ones each path
/// follows; `--` ends them.
const RULES_ARG: &str = "--sandbox";
const WRITE_ARG: &str = "--write";
const HIDE_ARG: &str = "--hide";
const CONNECT_ARG: &str = "--connect";
const NO_TCP_ARG: &str = "--no-tcp";
const COUNT_ARG: &str = "--count-connects";
const END_ARG: &str = "--";

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

    /// The rules as the trampoline reads them: `--sandbox --write P … --hide P …
    /// [--no-tcp | --connect PORT …] --`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = vec![OsString::from(RULES_ARG)];
        for p in &self.writable {
            args.push(WRITE_ARG.into());
            args.push(p.into());
        }
        for p in &self.hidden {
            args.push(HIDE_ARG.into());
            args.push(p.into());
        }
        // Fail closed: rules that limit the network but were never given their proxy's port
        // (spawned some other way than `worker::start`) allow no TCP at all.
        let connect = match (&self.connect, &self.reach) {
            (None, Reach::Open) => None,
            (None, _) => Some(&[][..]),
            (Some(ports), _) => Some(&ports[..]),
        };
        match connect {
            None => {}
            Some([]) => args.push(NO_TCP_ARG.into()),
            Some(ports) => {
                for p in ports {
                    args.push(CONNECT_ARG.into());
                    args.push(p.to_string().into());
                }
            }
        }
        if connect.is_some()
            && let Some(name) = &self.count_connects
        {
            args.push(COUNT_ARG.into());
            args.push(name.into());
        }
        args.push(END_ARG.into());
        args
    }

    /// Reads rules from the front of the trampoline's arguments when they are there; the
    /// arguments after them are left in `args`. `Err`: they start but are malformed.
    pub fn take_args(
        args: &mut std::iter::Peekable<impl Iterator<Item = OsString>>,
    ) -> Result<Option<Rules>, String> {
        if args.peek().is_none_or(|a| a != RULES_ARG) {
            return Ok(None);
        }
        args.next();
        let mut rules = Rules::default();
        loop {
            match args.next() {
                Some(a) if a == END_ARG => return Ok(Some(rules)),
                Some(a) if a == NO_TCP_ARG => rules.connect = Some(Vec::new()),
                Some(a) if a == CONNECT_ARG => {
                    let port = args.next().and_then(|p| p.to_str()?.parse::<u16>().ok());
                    let Some(port) = port else {
                        return Err(format!("{CONNECT_ARG} needs a port"));
                    };
                    rules.connect.get_or_insert_with(Vec::new).push(port);
                }
                Some(a) if a == COUNT_ARG => {
                    let Some(name) = args.next().and_then(|n| n.into_string().ok()) else {
                        return Err(format!("{COUNT_ARG} needs a name"));
                    };
                    rules.count_connects = Some(name);
                }
                Some(a) if a == WRITE_ARG || a == HIDE_ARG => {
                    let Some(p) = args.next() else {
                        return Err(format!("{} needs a path", a.to_string_lossy()));
                    };
                    let to = if a == WRITE_ARG {
                        &mut rules.writable
                    } else {
                        &mut rules.hidden
                    };
                    to.push(PathBuf::from(p));
                }
                Some(a) => {
                    return Err(format!(
                        "unexpected `{}` in the sandbox rules",
                        a.to_string_lossy()
                    ));
                }
                None => return Err(format!("the sandbox rules do not end with `{END_ARG}`")),
            }
        }
    }

    /// Whether the rules let a worker write `path` (an absolute path; `..` and symbolic links
    /// are not resolved, so this is what the path says, as a worker's message shows it).
    pub fn allows(&self, path: &Path) -> bool {
        self.writable.iter().any(|w| path.starts_with(w))
    }

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
            (Some(_), Some(name)) => super::connects::reach_runner(name)
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
                let readable = super::secrets::readable_beneath(Path::new("/"), &self.hidden);
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
            && let Err(e) = super::connects::hand_over(runner)
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

/// Refused writes a sandboxed worker's output tells of: lines that say "Permission denied",
/// `EACCES`, `os error 13` or "Read-only file system" and name an absolute path outside the
/// worker's writable set. A heuristic: a program that fails silently is not seen, and a
/// denial for another reason (a file's own permissions) that names such a path is counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refusals {
    /// Lines seen.
    pub lines: u32,
    /// The paths they name, first seen first, each once (at most [`MAX_PATHS`]).
    pub paths: Vec<String>,
    /// The connections its proxy refused (`--network agent`).
    pub net: super::network::NetRefusals,
}

/// The most paths [`Refusals`] keeps.
pub const MAX_PATHS: usize = 8;

const DENIED: &[&str] = &[
    "permission denied",
    "eacces",
    "os error 13",
    "read-only file system",
];

impl Refusals {
    /// Looks at one line of output.
    pub fn see(&mut self, rules: &Rules, line: &[u8]) {
        if line.len() > 64 * 1024 {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let lower = text.to_ascii_lowercase();
        if !DENIED.iter().any(|d| lower.contains(d)) {
            return;
        }
        let outside: Vec<&str> = paths_in(&text)
            .filter(|p| !rules.allows(Path::new(p)))
            .collect();
        if outside.is_empty() {
            return;
        }
        self.lines += 1;
        for p in outside {
            if self.paths.len() < MAX_PATHS && !self.paths.iter().any(|q| q == p) {
                self.paths.push(p.to_string());
            }
        }
    }

    /// The warning for the attempt, when there were any.
    pub fn warning(&self, id: &str) -> Option<Refused> {
        (self.lines > 0).then(|| Refused {
            id: id.to_string(),
            lines: self.lines,
            paths: self.paths.clone(),
        })
    }
}

/// The warning that the sandbox refused criterion `id`'s worker writes outside its lane: how
/// many lines of its output say so, and the paths they name. Its text is its `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub id: String,
    pub lines: u32,
    pub paths: Vec<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the sandbox refused {}'s worker writes outside its lane ({} line(s) of its output say so: {})",
            self.id,
            self.lines,
            self.paths.join(", ")
        )
    }
}

/// The absolute paths a line of text names: runs of path characters that start with `/`
/// (quotes, backquotes, colons, commas, brackets, whitespace and JSON escapes end them).
fn paths_in(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\''
                    | '`'
                    | ':'
                    | ','
                    | '('
                    | ')'
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '\\'
                    | '<'
                    | '>'
                    | ';'
                    | '='
            )
    })
    .filter(|t| t.starts_with('/') && t.len() > 1)
    .map(|t| t.trim_end_matches(['.', '!', '?']))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Rules {
        let home = home_writable(&|_| None, Path::new("/home/u"));
        let also: Vec<PathBuf> = home
            .into_iter()
            .chain([PathBuf::from("/opt/extra")])
            .collect();
        Rules::for_worker(Path::new("/lanes/1"), &also)
            .with(Path::new("/tmp/prdloop-w1"))
            .hiding(&[PathBuf::from("/home/u/.ssh")], Vec::new())
    }

    #[test]
    fn rules_that_limit_the_network_without_a_proxy_port_allow_no_tcp() {
        let r = rules().reaching(Reach::Hosts(Vec::new()));
        let mut it = r.to_args().into_iter().peekable();
        let back = Rules::take_args(&mut it).unwrap().unwrap();
        assert_eq!(back.connect, Some(Vec::new()));
    }

    #[test]
    fn the_tcp_ports_cross_the_trampolines_command_line() {
        for connect in [None, Some(vec![]), Some(vec![4242, 80])] {
            let r = Rules {
                connect: connect.clone(),
                ..rules()
            };
            let mut it = r.to_args().into_iter().peekable();
            assert_eq!(Rules::take_args(&mut it), Ok(Some(r)), "{connect:?}");
        }
    }

    #[test]
    fn rules_cross_the_trampolines_command_line_unchanged() {
        let r = rules();
        let mut args = r.to_args();
        args.push("prog".into());
        args.push("--write".into());
        let mut it = args.into_iter().peekable();
        assert_eq!(Rules::take_args(&mut it), Ok(Some(r)));
        let rest: Vec<OsString> = it.collect();
        assert_eq!(rest, vec![OsString::from("prog"), "--write".into()]);
        // No rules: nothing taken.
        let mut it = vec![OsString::from("prog")].into_iter().peekable();
        assert_eq!(Rules::take_args(&mut it), Ok(None));
        assert_eq!(it.next(), Some("prog".into()));
        // Cut short: an error, not a sandbox with fewer rules.
        let mut it = vec![OsString::from("--sandbox"), "--write".into(), "/a".into()]
            .into_iter()
            .peekable();
        assert!(Rules::take_args(&mut it).is_err());
    }

    #[test]
    fn the_writable_set_is_the_lane_tmp_the_agents_folders_devices_and_extras() {
        let r = rules();
        for p in [
            "/lanes/1/src/a.rs",
            "/tmp/prdloop-w1/x",
            "/home/u/.config/opencode/x",
            "/home/u/.local/share/amp/x",
            "/home/u/.cache/pip",
            "/dev/null",
            "/dev/pts/3",
            "/opt/extra/f",
        ] {
            assert!(r.allows(Path::new(p)), "{p}");
        }
        for p in [
            "/lanes/10/a",
            // The agents with a private home: their real folders are not writable, nor
            // what PAI and prdloop keep there.
            "/home/u/.claude/projects/x",
            "/home/u/.claude/MEMORY/WORK/p/PRD.md",
            "/home/u/.claude/MEMORY/STATE/algorithms/s.json",
            "/home/u/.claude.json",
            "/home/u/.codex/sessions/x",
            "/home/u/.gemini/tmp/x",
            "/home/u/notes.txt",
            "/home/u/.claude.json.tmp",
            "/home/u/.config/git/config",
            "/home/u/.ssh/authorized_keys",
            "/tmp/other",
            "/work/checkout/.git/config",
        ] {
            assert!(!r.allows(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn refused_writes_are_read_from_the_output_outside_the_lane_only() {
        let r = rules();
        let mut seen = Refusals::default();
        seen.see(
            &r,
            b"sh: 1: cannot create /work/checkout/a.txt: Permission denied",
        );
        seen.see(
            &r,
            b"touch: cannot touch '/home/u/notes.txt': Permission denied",
        );
        // Inside the lane (some other cause), or no denial, or no path: not counted.
        seen.see(
            &r,
            b"sh: 1: cannot create /lanes/1/a.txt: Permission denied",
        );
        seen.see(&r, b"wrote /home/u/x.txt");
        seen.see(&r, b"Error: Permission denied (os error 13)");
        // Inside a JSON string, as claude's stream shows a tool's output.
        seen.see(
            &r,
            br#"{"type":"user","content":"cp: cannot create regular file '/etc/x': Read-only file system\n"}"#,
        );
        assert_eq!(seen.lines, 3);
        assert_eq!(
            seen.paths,
            vec!["/work/checkout/a.txt", "/home/u/notes.txt", "/etc/x"]
        );
        let w = seen.warning("ISC-A-1").unwrap().to_string();
        assert!(w.contains("3 line(s)") && w.contains("/etc/x"), "{w}");
        assert_eq!(Refusals::default().warning("ISC-A-1"), None);
    }

    #[test]
    fn on_fails_where_there_is_no_sandbox_and_auto_says_why() {
        let none = Support::Unavailable("no Landlock".into());
        assert!(
            decide(Mode::On, &none, None)
                .unwrap_err()
                .contains("no Landlock")
        );
        let (on, notice) = decide(Mode::Auto, &none, None).unwrap();
        assert!(!on && notice.unwrap().contains("no Landlock"));
        let ll = Support::Landlock { abi: 3 };
        assert!(decide(Mode::On, &ll, None).unwrap().0);
        assert!(decide(Mode::Auto, &ll, None).unwrap().0);
        // Off says so, and where it was set.
        let open = "workers may write wherever you may, read your secrets (~/.ssh, ~/.aws, …) and your environment's credentials, and connect anywhere";
        for support in [&none, &ll] {
            let (on, line) = decide(Mode::Off, support, None).unwrap();
            assert!(!on);
            assert_eq!(line, Some(format!("sandbox: off (--sandbox off); {open}")));
        }
        let file = Some("project:/r/prdloop.toml:3");
        let (_, line) = decide(Mode::Off, &ll, file).unwrap();
        assert_eq!(
            line,
            Some(format!(
                "sandbox: off (set by project:/r/prdloop.toml:3); {open}"
            ))
        );
        let (_, line) = decide(Mode::On, &ll, Some("env:PRDLOOP_SANDBOX")).unwrap();
        assert!(line.unwrap().contains("(set by env:PRDLOOP_SANDBOX)"));
    }

    /// prdloop's state folder is refused where a rule holds it or lies in it, also through
    /// a link; beside a rule it is fine.
    #[test]
    fn a_state_folder_under_a_writable_rule_is_found() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        let state = home.join(".claude/MEMORY/STATE/algorithms");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(home.join(".cache")).unwrap();
        let w = home_writable(&|_| None, &home);
        // PAI's default layout: nothing writable holds it any more.
        assert_eq!(overlap(&state, &w), None, "{w:?}");
        // A rule holding it, one inside it, and one through a link to `~/.claude`.
        let claude = home.join(".claude");
        assert_eq!(
            overlap(&state, std::slice::from_ref(&claude)),
            Some(&claude)
        );
        let inside = state.join("lanes");
        assert_eq!(
            overlap(&state, std::slice::from_ref(&inside)),
            Some(&inside)
        );
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&claude, &link).unwrap();
        assert_eq!(overlap(&state, std::slice::from_ref(&link)), Some(&link));
        // A state folder not made yet, under a cache: found too.
        let later = home.join(".cache/prdloop/state");
        assert_eq!(overlap(&later, &w), Some(&home.join(".cache")));
        // Beside: fine.
        let elsewhere = d.path().join("state");
        assert_eq!(overlap(&elsewhere, &w), None);
    }

    /// Where the environment moves an agent's folders, those are writable instead.
    #[test]
    fn the_agents_folders_follow_their_environment_variables() {
        let var = |k: &str| match k {
            "XDG_CONFIG_HOME" => Some("/cfg/u".into()),
            "CODEX_HOME" => Some("/state/codex".into()),
            "XDG_CACHE_HOME" => Some("/var/cache/u".into()),
            _ => None,
        };
        let w = home_writable(&var, Path::new("/home/u"));
        assert!(w.contains(&PathBuf::from("/cfg/u/opencode")), "{w:?}");
        assert!(
            !w.contains(&PathBuf::from("/home/u/.config/opencode")),
            "{w:?}"
        );
        // Codex has a private home: its real folder is not writable, wherever it is.
        assert!(!w.contains(&PathBuf::from("/state/codex")), "{w:?}");
        assert!(w.contains(&PathBuf::from("/var/cache/u")), "{w:?}");
    }
}
