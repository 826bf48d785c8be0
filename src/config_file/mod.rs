//! Config files: defaults for the command line's flags, read from `prdloop.toml` at the
//! repository root (or `.config/prdloop.toml`), the user's
//! `$XDG_CONFIG_HOME/prdloop/config.toml`, and a `prdloop:` map in a PRD's own front matter.
//!
//! The keys are the long flag names (`timeout = "30m"`, `agent = "codex"`, `best-of = 2`),
//! taken from the clap definitions, so a new flag is a key at once. A key applies to every
//! command that has that flag. Precedence: flag > `PRDLOOP_*` variable > the PRD's map > the
//! project's file > the user's file > the built-in default. This is clap's own order, with
//! the files' values set as the flags' defaults. In each file, `[profile.NAME]` (chosen with
//! `--profile NAME`; `profile.ci` when `CI` is set and no profile is named) overrides that
//! file's top-level keys.
//!
//! Every key of every file is checked when it is read, in the profiles not chosen too: an
//! unknown key, a value of the wrong type or one the flag would refuse is an error naming
//! the file and the line.

mod keys;
mod origin;
mod read;
mod session;
pub mod trust;
mod untrusted;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Command, CommandFactory, FromArgMatches};

use keys::UNCONFIGURED_COMMANDS;
pub use keys::{Key, Keys, Value};
pub use origin::Origin;
use origin::origins;
use read::{Entries, Tree, prd_tree, toml_tree};
pub use session::{AGENT_KEYS, Given, SessionSettings};
use trust::TrustStore;
pub use untrusted::{Ignored, Trustable, Untrusted, trustable};

use crate::cli::{Cli, Command as Sub};
use crate::env;

/// The name of the project's file, at the repository root or in its `.config/` folder (the
/// landing guard holds a worker's change to either: [`crate::isolation::guard::CONFIG_FILES`]).
pub const PROJECT_FILE: &str = "prdloop.toml";

/// Where a config layer comes from, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    User,
    Project,
    Prd,
    /// The settings a resumed session's run was given ([`SessionSettings`]), from its state
    /// file.
    Session,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Prd => "prd",
            Scope::Session => "session",
        }
    }
}

/// The file and line a setting was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub scope: Scope,
    pub file: PathBuf,
    pub line: usize,
    /// The profile table it is in, if any.
    pub profile: Option<String>,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.scope.name(), self.file.display())?;
        // A state file's settings have no line.
        if self.scope != Scope::Session {
            write!(f, ":{}", self.line)?;
        }
        if let Some(p) = &self.profile {
            write!(f, " [profile.{p}]")?;
        }
        Ok(())
    }
}

/// One setting of a file, checked.
#[derive(Debug, Clone)]
struct Setting {
    key: String,
    value: Value,
    line: usize,
}

/// One file's settings, checked.
#[derive(Debug, Clone)]
struct Layer {
    scope: Scope,
    file: PathBuf,
    base: Vec<Setting>,
    profiles: BTreeMap<String, Vec<Setting>>,
}

impl Layer {
    /// Checks a file's tree: top-level keys and `profile.NAME` tables of keys.
    fn new(
        keys: &Keys,
        scope: Scope,
        file: &Path,
        base_dir: &Path,
        entries: Entries,
    ) -> Result<Layer> {
        let at = |line: usize, msg: String| anyhow::anyhow!("{}:{line}: {msg}", file.display());
        let settings = |entries: Entries, within: &str| -> Result<Vec<Setting>> {
            entries
                .into_iter()
                .map(|(key, line, tree)| match tree {
                    Tree::Value(raw) => keys
                        .check(&key, &raw, base_dir)
                        .map(|value| Setting { key, value, line })
                        .map_err(|m| at(line, m)),
                    Tree::Map(_) => Err(at(
                        line,
                        format!(
                            "`{within}{key}` is a table: settings are `key = value`, profiles \
                             `[profile.NAME]`"
                        ),
                    )),
                })
                .collect()
        };
        let mut base = Vec::new();
        let mut profiles = BTreeMap::new();
        for (key, line, tree) in entries {
            if key != "profile" {
                base.extend(settings(vec![(key, line, tree)], "")?);
                continue;
            }
            let Tree::Map(named) = tree else {
                return Err(at(
                    line,
                    "`profile` holds profiles: `[profile.NAME]` tables of settings".into(),
                ));
            };
            for (name, line, tree) in named {
                let Tree::Map(entries) = tree else {
                    return Err(at(
                        line,
                        format!("`profile.{name}` must be a table of settings"),
                    ));
                };
                profiles.insert(
                    name.clone(),
                    settings(entries, &format!("profile.{name}."))?,
                );
            }
        }
        Ok(Layer {
            scope,
            file: file.to_path_buf(),
            base,
            profiles,
        })
    }
}

/// Which profile is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Profile {
    /// `--profile NAME`: a file must define it.
    Required(String),
    /// Applied where a file defines it: `ci` when `CI` is set.
    IfDefined(String),
    None,
}

impl Profile {
    /// From `--profile` (or `PRDLOOP_PROFILE`) and whether this is CI.
    pub fn choose(named: Option<&str>, ci: bool) -> Profile {
        match named.filter(|n| !n.is_empty()) {
            Some(n) => Profile::Required(n.to_string()),
            None if ci => Profile::IfDefined("ci".to_string()),
            None => Profile::None,
        }
    }

    fn name(&self) -> Option<&str> {
        match self {
            Profile::Required(n) | Profile::IfDefined(n) => Some(n),
            Profile::None => None,
        }
    }

    /// The same profile where the command was checked already: another PRD's files, or a
    /// second reading of the same ones, need not define it.
    fn if_defined(&self) -> Profile {
        match self {
            Profile::Required(n) => Profile::IfDefined(n.clone()),
            p => p.clone(),
        }
    }
}

/// The files to read.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The user's file (read when it exists).
    pub user: Option<PathBuf>,
    /// The project's folder (the repository root): `prdloop.toml` or `.config/prdloop.toml`.
    pub project_dir: Option<PathBuf>,
    /// The PRD whose `prdloop:` map applies.
    pub prd: Option<PathBuf>,
}

impl Sources {
    /// `$XDG_CONFIG_HOME/prdloop/config.toml`, else `$HOME/.config/prdloop/config.toml`.
    pub fn user_file() -> Option<PathBuf> {
        let var = |n: &str| {
            std::env::var_os(n)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        var(env::XDG_CONFIG_HOME)
            .or_else(|| var(env::HOME).map(|h| h.join(".config")))
            .map(|d| d.join("prdloop").join("config.toml"))
    }

    /// For a command on `prd` (if any), from the current folder: the project is the git top
    /// level holding the PRD, else its folder; without a PRD, the git top level holding the
    /// current folder, else the current folder.
    pub fn find(prd: Option<&Path>) -> Sources {
        let cwd = std::env::current_dir().ok();
        let prd = prd.and_then(|p| std::path::absolute(p).ok());
        let project_dir = match &prd {
            Some(p) => Some(crate::config::default_workdir(p)),
            None => cwd.map(|c| crate::config::repo_top_holding(&c).unwrap_or(c)),
        };
        Sources {
            user: Sources::user_file(),
            project_dir,
            prd,
        }
    }
}

/// The settings the files give, each with where it came from.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub values: BTreeMap<String, (Value, Place)>,
    /// The files read, lowest precedence first.
    pub files: Vec<(Scope, PathBuf)>,
    /// Settings left out because their file is not trusted ([`trust`]), in file order.
    pub ignored: Vec<Ignored>,
    /// Where each flag of the command got its value, for those it did not get by default
    /// (filled by [`parse`]).
    pub origins: BTreeMap<String, Origin>,
    /// What the command line and the environment give a run, for its state file (filled by
    /// [`parse`]).
    pub given: SessionSettings,
}

fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("failed to read `{}`", path.display())),
    }
}

impl Settings {
    /// Reads and checks the files, and merges them for `profile`; the guarded keys of a
    /// repository's file and a PRD's map only where `trusted` trusts them.
    pub fn load(
        keys: &Keys,
        sources: &Sources,
        profile: &Profile,
        trusted: &TrustStore,
    ) -> Result<Settings> {
        let mut layers = Vec::new();
        if let Some(user) = &sources.user
            && let Some(text) = read(user)?
        {
            let dir = user.parent().unwrap_or(Path::new("/"));
            layers.push(Layer::new(
                keys,
                Scope::User,
                user,
                dir,
                toml_tree(&text, user)?,
            )?);
        }
        if let Some(dir) = &sources.project_dir {
            let candidates = [
                dir.join(PROJECT_FILE),
                dir.join(".config").join(PROJECT_FILE),
            ];
            let found: Vec<&PathBuf> = candidates.iter().filter(|p| p.is_file()).collect();
            if let [a, b] = found[..] {
                bail!(
                    "both `{}` and `{}` exist: keep one of them",
                    a.display(),
                    b.display()
                );
            }
            if let Some(file) = found.first()
                && let Some(text) = read(file)?
            {
                layers.push(Layer::new(
                    keys,
                    Scope::Project,
                    file,
                    dir,
                    toml_tree(&text, file)?,
                )?);
            }
        }
        // A PRD that cannot be read, or is not UTF-8, has no map here: the command's own
        // reading of it says what is wrong, as without config files.
        if let Some(prd) = &sources.prd
            && let Ok(text) = std::fs::read_to_string(prd)
            && let Some(entries) = prd_tree(&text, prd)?
        {
            let dir = prd.parent().unwrap_or(Path::new("/"));
            layers.push(Layer::new(keys, Scope::Prd, prd, dir, entries)?);
        }
        if let Profile::Required(name) = profile
            && !layers.iter().any(|l| l.profiles.contains_key(name))
        {
            let looked: Vec<String> = layers
                .iter()
                .map(|l| format!("`{}`", l.file.display()))
                .collect();
            bail!(
                "--profile {name}: no config file has a [profile.{name}] table{}",
                if looked.is_empty() {
                    " (none was found)".to_string()
                } else {
                    format!(" (read: {})", looked.join(", "))
                }
            );
        }
        let mut settings = Settings::default();
        for mut layer in layers {
            let left_out = layer.untrusted_part(trusted);
            let place = |s: &Setting, profile: Option<&str>| Place {
                scope: layer.scope,
                file: layer.file.clone(),
                line: s.line,
                profile: profile.map(str::to_string),
            };
            for s in &layer.base {
                settings
                    .values
                    .insert(s.key.clone(), (s.value.clone(), place(s, None)));
            }
            if let Some(name) = profile.name()
                && let Some(ps) = layer.profiles.get(name)
            {
                for s in ps {
                    settings
                        .values
                        .insert(s.key.clone(), (s.value.clone(), place(s, Some(name))));
                }
            }
            if let Some((changed, base, profiles)) = left_out {
                let chosen = profile.name().and_then(|n| profiles.get(n).map(|s| (n, s)));
                let all = base.iter().map(|s| (s, None)).chain(
                    chosen
                        .into_iter()
                        .flat_map(|(n, ss)| ss.iter().map(move |s| (s, Some(n)))),
                );
                for (s, p) in all {
                    // A trusted layer below may have set it: that value stands.
                    settings.ignored.push(Ignored {
                        key: s.key.clone(),
                        value: s.value.clone(),
                        place: place(s, p),
                        changed,
                    });
                }
            }
            settings.files.push((layer.scope, layer.file));
        }
        Ok(settings)
    }

    /// `cmd` with the settings as its flags' defaults (in every subcommand that has them),
    /// so that the command line and the environment still win.
    pub fn apply(&self, cmd: Command) -> Command {
        if self.values.is_empty() {
            return cmd;
        }
        let cmd = cmd.mut_args(|a| {
            let Some((value, _)) = a.get_long().and_then(|l| self.values.get(l)) else {
                return a;
            };
            match value {
                Value::Flag(b) => a.default_value(if *b { "true" } else { "false" }),
                Value::One(v) => a.default_value(v.clone()),
                Value::Many(vs) => a.default_values(vs.clone()),
            }
        });
        cmd.mut_subcommands(|sub| {
            if UNCONFIGURED_COMMANDS.contains(&sub.get_name()) {
                sub
            } else {
                self.apply(sub)
            }
        })
    }
}

/// Why the command line could not be read.
#[derive(Debug)]
pub enum Failure {
    /// clap's: a bad flag, or help and version.
    Clap(clap::Error),
    /// A config file's.
    Config(anyhow::Error),
}

/// The command line, read with the config files' settings as defaults.
#[derive(Debug)]
pub struct Parsed {
    pub cli: Cli,
    pub settings: Settings,
    pub again: Reparse,
}

/// The command line again, for another PRD's settings (`run A.md B.md`: each PRD's own map
/// and its repository's file).
#[derive(Debug, Clone)]
pub struct Reparse {
    args: Vec<OsString>,
    profile: Profile,
}

impl Reparse {
    /// `run`'s options for `prd`, one of the PRDs of this run.
    pub fn run_opts_for(&self, prd: &Path) -> Result<crate::cli::RunOpts> {
        let settings = Settings::load(
            &Keys::new(),
            &Sources::find(Some(prd)),
            &self.profile.if_defined(),
            &TrustStore::load_default()?,
        )?;
        settings
            .ignored_warnings()
            .into_iter()
            .for_each(crate::report::warn);
        let cli = Cli::try_parse_from_cmd(settings.apply(cli_command()), &self.args)
            .map_err(|e| anyhow::anyhow!("{}: {}", prd.display(), e.render()))?;
        match cli.command {
            Some(Sub::Run { opts, .. }) => Ok(opts),
            _ => bail!("the command line is not `run` (this is a bug)"),
        }
    }
}

impl Reparse {
    /// `resume`'s options for `prd`: its command line again, over the settings its session's
    /// run was given (`session`, read from the state file `state_file`). Those sit above the
    /// config files and below `resume`'s own flags and variables ([`SessionSettings`]).
    pub fn resume_opts(
        &self,
        prd: &Path,
        session: &SessionSettings,
        state_file: &Path,
    ) -> Result<Resumed> {
        let keys = Keys::new();
        let mut settings = Settings::load(
            &keys,
            &Sources::find(Some(prd)),
            &self.profile.if_defined(),
            &TrustStore::load_default()?,
        )?;
        let own = origins(settings.apply(cli_command()), &self.args, &settings);
        let taken = session::taken_by(session, &own);
        for (key, value) in taken.iter() {
            settings
                .values
                .insert(key.clone(), (value.clone(), session::place(state_file)));
        }
        let cmd = settings.apply(cli_command());
        let cli = Cli::try_parse_from_cmd(cmd.clone(), &self.args).map_err(|e| {
            anyhow::anyhow!(
                "the settings {} recorded: {}",
                state_file.display(),
                e.render()
            )
        })?;
        let sandbox_set_by = origins(cmd, &self.args, &settings)
            .get("sandbox")
            .and_then(Origin::named);
        match cli.command {
            Some(Sub::Resume { opts, .. }) => Ok(Resumed {
                opts,
                taken,
                sandbox_set_by,
            }),
            _ => bail!("the command line is not `resume` (this is a bug)"),
        }
    }
}

/// `resume`'s options, its session's settings under them.
#[derive(Debug)]
pub struct Resumed {
    pub opts: crate::cli::RunOpts,
    /// The session's settings it took (those its own command line left to the session).
    pub taken: SessionSettings,
    /// Where `--sandbox`'s value came from, when it is worth saying.
    pub sandbox_set_by: Option<String>,
}

/// The PRD a command works on, for its `prdloop:` map and its repository's file (one PRD
/// only; `run A.md B.md` reads each PRD's own for its sub-loop). `logs`, `status`, `pause`
/// and `stop` read them too, for the `state-dir` the PRD's run was given. Every command is
/// named, so that a new one is decided on.
fn prd_of(cli: &Cli) -> Option<&str> {
    match &cli.command {
        Some(Sub::Run { prds, .. } | Sub::Status(crate::cli::StatusArgs { prds, .. })) => {
            (prds.len() == 1).then(|| prds[0].as_str())
        }
        Some(Sub::Resume { prd, .. }) => Some(prd),
        Some(Sub::Plan(a)) => Some(&a.prd),
        Some(Sub::Verify(a)) => Some(&a.prd),
        Some(Sub::Merge(a)) => Some(&a.prd),
        Some(Sub::Audit(a)) => Some(&a.prd),
        Some(Sub::Interactive(a)) => Some(&a.prd),
        Some(Sub::Logs(a)) => Some(&a.prd),
        Some(Sub::Answer(a)) => Some(&a.prd),
        Some(Sub::Pause(args) | Sub::Stop(args)) => Some(args.prd()),
        Some(Sub::Config { prd, .. }) => prd.as_deref(),
        Some(Sub::Undo(a)) => a.prd.as_ref().and_then(|p| p.to_str()),
        // No PRD.
        Some(
            Sub::New(_)
            | Sub::Import(_)
            | Sub::Doctor(_)
            | Sub::Clean(_)
            | Sub::Completions { .. }
            | Sub::Man { .. }
            | Sub::Trust(_)
            | Sub::Serve(_)
            | Sub::Mcp,
        ) => None,
        None => cli.prd.as_deref(),
    }
}

/// The path of a PRD argument (a path, or an id looked up in PAI's folders); `None` when it
/// cannot be found (the command itself then says so).
pub fn prd_path(arg: &str) -> Option<PathBuf> {
    if crate::config::is_prd_path(arg) {
        return Some(PathBuf::from(arg)).filter(|p| p.is_file());
    }
    let loc = crate::config::locations()?;
    crate::prd::lookup::resolve(arg, &loc).ok()
}

/// The command line's definitions, a `PRDLOOP_*` variable set to the empty string read as
/// unset (`PRDLOOP_SANDBOX=` leaves `--sandbox` at its default, as an unset one does).
fn cli_command() -> Command {
    fn unset_empty(cmd: Command) -> Command {
        cmd.mut_args(|a| {
            let empty = a
                .get_env()
                .and_then(std::env::var_os)
                .is_some_and(|v| v.is_empty());
            if empty { a.env(None) } else { a }
        })
        .mut_subcommands(unset_empty)
    }
    unset_empty(Cli::command())
}

/// clap's error, or, when it is about a flag whose `PRDLOOP_*` variable holds a value the
/// flag refuses, an error naming the variable and its value.
fn named(e: clap::Error) -> Failure {
    use clap::error::{ContextKind, ContextValue};
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => return Failure::Clap(e),
    };
    let keys = Keys::new();
    let bad = keys.env_errors().into_iter().find(|(key, _)| {
        flag.strip_prefix("--")
            .and_then(|f| f.split([' ', '=']).next())
            .is_some_and(|f| f == *key)
    });
    match bad {
        Some((_, message)) => Failure::Config(anyhow::anyhow!(message)),
        None => Failure::Clap(e),
    }
}

/// Parses the command line, reading the config files that apply to it.
pub fn parse(args: &[OsString]) -> Result<Parsed, Failure> {
    let first = Cli::try_parse_from_cmd(cli_command(), args).map_err(named)?;
    let prd = prd_of(&first).and_then(prd_path);
    let sources = Sources::find(prd.as_deref());
    let profile = Profile::choose(first.global.profile.as_deref(), crate::config::in_ci());
    let trusted = TrustStore::load_default().map_err(Failure::Config)?;
    let keys = Keys::new();
    let settings = Settings::load(&keys, &sources, &profile, &trusted).map_err(Failure::Config)?;
    let again = Reparse {
        args: args.to_vec(),
        profile,
    };
    let cmd = settings.apply(cli_command());
    let mut settings = settings;
    settings.given = session::given_by(&cmd, args, &keys);
    let cli = if settings.values.is_empty() {
        settings.origins = origins(cli_command(), args, &settings);
        first
    } else {
        let cli = Cli::try_parse_from_cmd(cmd.clone(), args).map_err(named)?;
        settings.origins = origins(cmd, args, &settings);
        cli
    };
    Ok(Parsed {
        cli,
        settings,
        again,
    })
}

impl Cli {
    fn try_parse_from_cmd(cmd: Command, args: &[OsString]) -> Result<Cli, clap::Error> {
        let mut cmd = cmd;
        let matches = cmd.try_get_matches_from_mut(args)?;
        Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut cmd))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[test]
fn the_landing_guard_holds_both_places_of_the_projects_file() {
    assert_eq!(
        crate::isolation::guard::CONFIG_FILES,
        [PROJECT_FILE.to_string(), format!(".config/{PROJECT_FILE}")]
    );
}
