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

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Arg, ArgAction, Command, CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command as Sub};
use crate::env;

/// Flags that are not settings: what to do now rather than how.
const NOT_KEYS: &[&str] = &["help", "version", "mode", "prd", "profile"];
/// Commands whose own flags are not settings (what to do now, not how): a key is a flag of
/// the commands that run or check work. A key still applies to every command that has its
/// flag (`state-dir` to `status` too).
const NOT_SETTINGS_COMMANDS: &[&str] = &[
    "config",
    "completions",
    "man",
    "clean",
    "logs",
    "new",
    "pause",
    "stop",
    "status",
];
/// Commands the settings do not apply to: they print what the command line is.
const UNCONFIGURED_COMMANDS: &[&str] = &["config", "completions", "man"];

/// The name of the project's file, at the repository root or in its `.config/` folder.
pub const PROJECT_FILE: &str = "prdloop.toml";

/// Where a config layer comes from, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    User,
    Project,
    Prd,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Prd => "prd",
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
        write!(
            f,
            "{}:{}:{}",
            self.scope.name(),
            self.file.display(),
            self.line
        )?;
        if let Some(p) = &self.profile {
            write!(f, " [profile.{p}]")?;
        }
        Ok(())
    }
}

/// A setting's value as the command line takes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A flag without a value (`--force`).
    Flag(bool),
    /// One value (`--timeout 30m`), or a count (`-vv` is 2).
    One(String),
    /// A repeatable flag's values (`--agent-arg`).
    Many(Vec<String>),
}

impl Value {
    /// As TOML would write it (numbers bare, text quoted).
    pub fn to_toml(&self) -> String {
        fn one(s: &str) -> String {
            if s.parse::<i64>().is_ok() || (s.parse::<f64>().is_ok_and(f64::is_finite)) {
                s.to_string()
            } else {
                toml::Value::String(s.to_string()).to_string()
            }
        }
        match self {
            Value::Flag(b) => b.to_string(),
            Value::One(s) => one(s),
            Value::Many(v) => format!(
                "[{}]",
                v.iter()
                    .map(|s| toml::Value::String(s.clone()).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Flag,
    Count,
    One,
    Many,
}

/// One key: a long flag of some command.
#[derive(Debug, Clone)]
pub struct Key {
    kind: Kind,
    /// The first definition of the flag (its value parser checks the values).
    arg: Arg,
    /// Its `PRDLOOP_*` twin.
    pub env: Option<String>,
    /// Its built-in default, if any.
    pub default: Option<Value>,
}

impl Key {
    /// Whether a relative value is a path to resolve against the file's folder.
    fn is_path(&self, value: &str) -> bool {
        match self.arg.get_value_names().and_then(|n| n.first()) {
            Some(n) if n == "DIR" || n == "FILE" => true,
            // A program: a name is looked up on PATH, `./bin/agent` is a path.
            Some(n) if n == "PATH" => value.contains('/'),
            _ => false,
        }
    }
}

/// Every key, by name: the long flags of every command, from the clap definitions.
#[derive(Debug, Clone)]
pub struct Keys {
    pub keys: BTreeMap<String, Key>,
}

impl Keys {
    pub fn new() -> Keys {
        let mut root = Cli::command();
        root.build();
        let mut keys = BTreeMap::new();
        fn walk(cmd: &Command, keys: &mut BTreeMap<String, Key>) {
            for arg in cmd.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if NOT_KEYS.contains(&long) || keys.contains_key(long) {
                    continue;
                }
                let kind = match arg.get_action() {
                    ArgAction::SetTrue | ArgAction::SetFalse => Kind::Flag,
                    ArgAction::Count => Kind::Count,
                    ArgAction::Append => Kind::Many,
                    ArgAction::Set => Kind::One,
                    _ => continue,
                };
                let defaults: Vec<String> = arg
                    .get_default_values()
                    .iter()
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect();
                let default = match (kind, defaults.as_slice()) {
                    (_, []) => None,
                    (Kind::Flag, [d]) => Some(Value::Flag(d == "true")),
                    (Kind::Many, d) => Some(Value::Many(d.to_vec())),
                    (_, [d, ..]) => Some(Value::One(d.clone())),
                };
                keys.insert(
                    long.to_string(),
                    Key {
                        kind,
                        arg: arg.clone(),
                        env: arg.get_env().map(|e| e.to_string_lossy().into_owned()),
                        default,
                    },
                );
            }
            for sub in cmd.get_subcommands() {
                if !NOT_SETTINGS_COMMANDS.contains(&sub.get_name()) {
                    walk(sub, keys);
                }
            }
        }
        walk(&root, &mut keys);
        Keys { keys }
    }

    /// The value of `raw` for `key`, checked as the flag checks it. Errors are the message
    /// after `file:line: `.
    fn check(&self, key: &str, raw: &Raw, base: &Path) -> Result<Value, String> {
        let Some(k) = self.keys.get(key) else {
            let dashed = key.replace('_', "-");
            return Err(if self.keys.contains_key(&dashed) {
                format!("unknown key `{key}`: the keys are the long flag names, `{dashed}`")
            } else if NOT_KEYS.contains(&key) {
                format!("`{key}` cannot be set in a config file")
            } else {
                format!(
                    "unknown key `{key}`: the keys are the long flag names (`timeout` for \
                     --timeout); `prdloop config` lists the settings"
                )
            });
        };
        let one = |raw: &Raw| -> Result<String, String> {
            match raw {
                Raw::Str(s) => Ok(s.clone()),
                Raw::Int(n) => Ok(n.to_string()),
                Raw::Float(f) => Ok(f.to_string()),
                other => Err(format!("`{key}` takes a value, not {}", other.what())),
            }
        };
        let value = match (k.kind, raw) {
            (Kind::Flag, Raw::Bool(b)) => Value::Flag(*b),
            (Kind::Flag, other) => {
                return Err(format!("`{key}` takes true or false, not {}", other.what()));
            }
            (Kind::Count, Raw::Int(n)) if (0..=255).contains(n) => Value::One(n.to_string()),
            (Kind::Count, other) => {
                return Err(format!(
                    "`{key}` takes a whole number from 0 to 255, not {}",
                    other.what()
                ));
            }
            (Kind::Many, Raw::List(items)) => {
                Value::Many(items.iter().map(one).collect::<Result<_, _>>()?)
            }
            (Kind::Many, other) => Value::Many(vec![one(other)?]),
            (Kind::One, Raw::List(_)) => {
                return Err(format!("`{key}` takes one value, not a list"));
            }
            (Kind::One, other) => Value::One(one(other)?),
        };
        let resolve = |v: String| -> String {
            if k.is_path(&v) && Path::new(&v).is_relative() && !v.is_empty() {
                base.join(&v).to_string_lossy().into_owned()
            } else {
                v
            }
        };
        let value = match value {
            Value::One(v) if k.kind == Kind::One => Value::One(resolve(v)),
            Value::Many(vs) => Value::Many(vs.into_iter().map(resolve).collect()),
            v => v,
        };
        let values: Vec<&str> = match &value {
            Value::One(v) if k.kind == Kind::One => vec![v],
            Value::Many(vs) => vs.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        };
        for v in values {
            // The flag alone, with its value parser: as the command line would check it.
            let mut alone = Arg::new("value")
                .long(key.to_string())
                .action(ArgAction::Set)
                .allow_hyphen_values(true)
                .value_parser(k.arg.get_value_parser().clone());
            if let Some(name) = k.arg.get_value_names().and_then(|n| n.first()) {
                alone = alone.value_name(name.clone());
            }
            let check = Command::new("prdloop")
                .no_binary_name(true)
                .arg(alone)
                .try_get_matches_from([OsString::from(format!("--{key}")), OsString::from(v)]);
            if let Err(e) = check {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or_default();
                return Err(format!(
                    "`{key}`: {}",
                    first.strip_prefix("error: ").unwrap_or(first)
                ));
            }
        }
        Ok(value)
    }
}

impl Default for Keys {
    fn default() -> Keys {
        Keys::new()
    }
}

/// A value as a file wrote it (TOML or YAML).
#[derive(Debug, Clone)]
enum Raw {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Raw>),
    /// Anything else, described (`a table`, `a date`, `null`).
    Other(&'static str),
}

impl Raw {
    fn what(&self) -> String {
        match self {
            Raw::Bool(b) => format!("`{b}`"),
            Raw::Int(n) => format!("the number {n}"),
            Raw::Float(f) => format!("the number {f}"),
            Raw::Str(s) => format!("the text {}", toml::Value::String(s.clone())),
            Raw::List(_) => "a list".to_string(),
            Raw::Other(w) => w.to_string(),
        }
    }
}

/// A file's contents before checking: `key = value` lines and tables, with their lines.
#[derive(Debug)]
enum Tree {
    Value(Raw),
    Map(Entries),
}

/// A table's keys, each with its line and value, in the file's order.
type Entries = Vec<(String, usize, Tree)>;

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

/// 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A TOML file's tree.
fn toml_tree(text: &str, file: &Path) -> Result<Entries> {
    use toml::de::{DeTable, DeValue};
    let table = DeTable::parse(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_at(text, s.start));
        anyhow::anyhow!(
            "{}:{line}: not valid TOML: {}",
            file.display(),
            e.message().trim()
        )
    })?;
    fn value(text: &str, v: &DeValue<'_>) -> Tree {
        match v {
            DeValue::String(s) => Tree::Value(Raw::Str(s.to_string())),
            DeValue::Integer(n) => Tree::Value(
                i64::from_str_radix(n.as_str(), n.radix())
                    .map_or(Raw::Other("a number too large"), Raw::Int),
            ),
            DeValue::Float(f) => Tree::Value(
                f.as_str()
                    .parse()
                    .map_or(Raw::Other("a number"), Raw::Float),
            ),
            DeValue::Boolean(b) => Tree::Value(Raw::Bool(*b)),
            DeValue::Datetime(_) => Tree::Value(Raw::Other("a date")),
            DeValue::Array(items) => Tree::Value(Raw::List(
                items
                    .iter()
                    .map(|i| match value(text, i.get_ref()) {
                        Tree::Value(r) => r,
                        Tree::Map(_) => Raw::Other("a table"),
                    })
                    .collect(),
            )),
            DeValue::Table(t) => Tree::Map(entries(text, t)),
        }
    }
    // In the file's order (the table is sorted by key), so that the first error is reported.
    fn entries(text: &str, t: &DeTable<'_>) -> Entries {
        let mut entries: Vec<(usize, String, usize, Tree)> = t
            .iter()
            .map(|(k, v)| {
                (
                    k.span().start,
                    k.get_ref().to_string(),
                    line_at(text, k.span().start),
                    value(text, v.get_ref()),
                )
            })
            .collect();
        entries.sort_by_key(|e| e.0);
        entries.into_iter().map(|(_, k, l, t)| (k, l, t)).collect()
    }
    Ok(entries(text, table.get_ref()))
}

/// A YAML value of a PRD's `prdloop:` map, with the line of each key.
#[derive(Debug)]
struct Yaml(Tree);

impl<'de> serde::Deserialize<'de> for Yaml {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Yaml, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Yaml;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Bool(b))))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Int(n))))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(
                    i64::try_from(n).map_or(Raw::Other("a number too large"), Raw::Int),
                )))
            }
            fn visit_f64<E>(self, f: f64) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Float(f))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Str(s.to_string()))))
            }
            fn visit_unit<E>(self) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Other("null (no value)"))))
            }
            fn visit_none<E>(self) -> Result<Yaml, E> {
                Ok(Yaml(Tree::Value(Raw::Other("null (no value)"))))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Yaml, A::Error> {
                let mut items = Vec::new();
                while let Some(Yaml(t)) = seq.next_element::<Yaml>()? {
                    items.push(match t {
                        Tree::Value(r) => r,
                        Tree::Map(_) => Raw::Other("a map"),
                    });
                }
                Ok(Yaml(Tree::Value(Raw::List(items))))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Yaml, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<serde_saphyr::Spanned<String>>()? {
                    let Yaml(value) = map.next_value::<Yaml>()?;
                    entries.push((key.value, key.referenced.line() as usize, value));
                }
                Ok(Yaml(Tree::Map(entries)))
            }
        }
        d.deserialize_any(V)
    }
}

/// The `prdloop:` map of a PRD's front matter (`None` without one), with lines in the file.
fn prd_tree(text: &str, file: &Path) -> Result<Option<Entries>> {
    #[derive(serde::Deserialize)]
    struct Front {
        prdloop: Option<serde_saphyr::Spanned<Yaml>>,
    }
    let Ok(Some(span)) = crate::prd::frontmatter::locate(text) else {
        return Ok(None);
    };
    let yaml = &text[span.content.clone()];
    // Only a front matter with the key is read here: the PRD's own reader reports the rest.
    if !yaml.lines().any(|l| {
        l.strip_prefix("prdloop")
            .is_some_and(|r| r.trim_start().starts_with(':'))
    }) {
        return Ok(None);
    }
    let offset = line_at(text, span.content.start) - 1;
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    let front: Front = serde_saphyr::from_str_with_options(yaml, options).map_err(|e| {
        let line = e.location().map_or(1, |l| l.line() as usize) + offset;
        // Its first line, without the `error: line N column M: ` that the line above says.
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        let first = first.strip_prefix("error: ").unwrap_or(first);
        let first = match first.split_once(": ") {
            Some((at, rest)) if at.starts_with("line ") => rest,
            _ => first,
        };
        anyhow::anyhow!(
            "{}:{line}: the front matter's `prdloop:` map cannot be read: {first}",
            file.display()
        )
    })?;
    let Some(map) = front.prdloop else {
        return Ok(None);
    };
    let line = map.referenced.line() as usize + offset;
    let Tree::Map(entries) = map.value.0 else {
        bail!(
            "{}:{line}: `prdloop:` must be a map of settings (`timeout: 30m`)",
            file.display()
        );
    };
    fn shift(entries: Entries, by: usize) -> Entries {
        entries
            .into_iter()
            .map(|(k, l, t)| {
                let t = match t {
                    Tree::Map(m) => Tree::Map(shift(m, by)),
                    v => v,
                };
                (k, l + by, t)
            })
            .collect()
    }
    Ok(Some(shift(entries, offset)))
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
            None => cwd.map(|c| {
                c.ancestors()
                    .find(|d| d.join(".git").exists())
                    .map_or_else(|| c.clone(), Path::to_path_buf)
            }),
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
}

fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("failed to read `{}`", path.display())),
    }
}

impl Settings {
    /// Reads and checks the files, and merges them for `profile`.
    pub fn load(keys: &Keys, sources: &Sources, profile: &Profile) -> Result<Settings> {
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
        if let Some(prd) = &sources.prd
            && let Some(text) = read(prd)?
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
        for layer in layers {
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
            // A number in PRDLOOP_AGENT (a worker's lane) counts as unset: the file decides.
            let a = if a.get_env() == Some(OsStr::new(env::AGENT_CHOICE)) && lane_in_agent_var() {
                a.env(None::<&str>)
            } else {
                a
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

/// Whether `PRDLOOP_AGENT` holds a number: the lane prdloop gives its own workers, not a
/// choice of agent (`--agent` takes it as unset).
pub fn lane_in_agent_var() -> bool {
    std::env::var(env::AGENT_CHOICE)
        .is_ok_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
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
        // The profile was checked for the run already; a PRD's files need not define it.
        let profile = match &self.profile {
            Profile::Required(n) => Profile::IfDefined(n.clone()),
            p => p.clone(),
        };
        let settings = Settings::load(&Keys::new(), &Sources::find(Some(prd)), &profile)?;
        let cli = Cli::try_parse_from_cmd(settings.apply(Cli::command()), &self.args)
            .map_err(|e| anyhow::anyhow!("{}: {}", prd.display(), e.render()))?;
        match cli.command {
            Some(Sub::Run { opts, .. }) => Ok(opts),
            _ => bail!("the command line is not `run` (this is a bug)"),
        }
    }
}

/// The PRD a command works on, for its `prdloop:` map (one PRD only).
fn prd_of(cli: &Cli) -> Option<&str> {
    match &cli.command {
        Some(Sub::Run { prds, .. }) if prds.len() == 1 => Some(&prds[0]),
        Some(
            Sub::Resume { prd, .. }
            | Sub::Plan { prd, .. }
            | Sub::Verify { prd, .. }
            | Sub::Merge { prd, .. }
            | Sub::Interactive { prd, .. },
        ) => Some(prd),
        Some(Sub::Config { prd, .. }) => prd.as_deref(),
        Some(_) => None,
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

/// Parses the command line, reading the config files that apply to it.
pub fn parse(args: &[OsString]) -> Result<Parsed, Failure> {
    let first = Cli::try_parse_from_cmd(Cli::command(), args).map_err(Failure::Clap)?;
    let prd = prd_of(&first).and_then(prd_path);
    let sources = Sources::find(prd.as_deref());
    let profile = Profile::choose(first.global.profile.as_deref(), crate::config::in_ci());
    let settings = Settings::load(&Keys::new(), &sources, &profile).map_err(Failure::Config)?;
    let again = Reparse {
        args: args.to_vec(),
        profile,
    };
    if settings.values.is_empty() {
        return Ok(Parsed {
            cli: first,
            settings,
            again,
        });
    }
    let cli =
        Cli::try_parse_from_cmd(settings.apply(Cli::command()), args).map_err(Failure::Clap)?;
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
mod tests {
    use super::*;

    fn keys() -> Keys {
        Keys::new()
    }

    fn layer(text: &str) -> Result<Layer> {
        let file = Path::new("/repo/prdloop.toml");
        Layer::new(
            &keys(),
            Scope::Project,
            file,
            Path::new("/repo"),
            toml_tree(text, file)?,
        )
    }

    #[test]
    fn keys_are_the_long_flags() {
        let k = keys();
        for name in [
            "timeout",
            "agent",
            "best-of",
            "verify-types",
            "setup",
            "agent-arg",
        ] {
            assert!(k.keys.contains_key(name), "{name}");
        }
        for name in ["help", "version", "profile", "show-origin", "prd", "mode"] {
            assert!(!k.keys.contains_key(name), "{name}");
        }
    }

    #[test]
    fn values_are_checked_and_errors_name_the_line() {
        let l = layer("timeout = \"30m\"\nbest-of = 2\nforce = true\nagent-arg = [\"-x\", 1]\n")
            .unwrap();
        let got: Vec<_> = l.base.iter().map(|s| (s.key.as_str(), s.line)).collect();
        assert_eq!(
            got,
            [
                ("timeout", 1),
                ("best-of", 2),
                ("force", 3),
                ("agent-arg", 4)
            ]
        );
        assert_eq!(l.base[3].value, Value::Many(vec!["-x".into(), "1".into()]));
        let err = |t: &str| layer(t).unwrap_err().to_string();
        assert_eq!(
            err("# a comment\n\ntimeuot = \"5m\"\n"),
            "/repo/prdloop.toml:3: unknown key `timeuot`: the keys are the long flag names \
             (`timeout` for --timeout); `prdloop config` lists the settings"
        );
        assert_eq!(
            err("max_cost = 5\n"),
            "/repo/prdloop.toml:1: unknown key `max_cost`: the keys are the long flag names, \
             `max-cost`"
        );
        assert_eq!(
            err("a = 1\nforce = \"yes\"\n").lines().next().unwrap(),
            "/repo/prdloop.toml:1: unknown key `a`: the keys are the long flag names \
             (`timeout` for --timeout); `prdloop config` lists the settings"
        );
        assert_eq!(
            err("force = \"yes\"\n"),
            "/repo/prdloop.toml:1: `force` takes true or false, not the text \"yes\""
        );
        assert!(
            err("\n\ntimeout = \"soon\"\n").starts_with(
                "/repo/prdloop.toml:3: `timeout`: invalid value 'soon' for '--timeout <DUR>'"
            ),
            "{}",
            err("\n\ntimeout = \"soon\"\n")
        );
        assert!(
            err("best-of = 9\n").starts_with("/repo/prdloop.toml:1: `best-of`: invalid value '9'")
        );
        assert_eq!(
            err("timeout = [\"1m\"]\n"),
            "/repo/prdloop.toml:1: `timeout` takes one value, not a list"
        );
        assert_eq!(
            err("[agent]\nx = 1\n"),
            "/repo/prdloop.toml:1: `agent` is a table: settings are `key = value`, profiles \
             `[profile.NAME]`"
        );
        assert_eq!(
            err("[profile.ci]\nstal = 1\n"),
            "/repo/prdloop.toml:2: unknown key `stal`: the keys are the long flag names \
             (`timeout` for --timeout); `prdloop config` lists the settings"
        );
        assert!(err("timeout = \n").starts_with("/repo/prdloop.toml:1: not valid TOML:"));
    }

    #[test]
    fn relative_paths_are_the_files_folder() {
        let l =
            layer("state-dir = \"state\"\nagent-bin = \"./bin/agent\"\nclaude-bin = \"claude\"\n")
                .unwrap();
        let v: Vec<_> = l.base.iter().map(|s| s.value.clone()).collect();
        assert_eq!(
            v,
            [
                Value::One("/repo/state".into()),
                Value::One("/repo/./bin/agent".into()),
                Value::One("claude".into()),
            ]
        );
    }

    #[test]
    fn a_prds_map_has_the_files_lines() {
        let text = "---\nid: PRD-1\nprdloop:\n  timeout: 30m\n  agent-arg:\n    - -x\n  profile:\n    ci:\n      best-of: 2\n---\n# Body\n";
        let entries = prd_tree(text, Path::new("/p/PRD.md")).unwrap().unwrap();
        let l = Layer::new(
            &keys(),
            Scope::Prd,
            Path::new("/p/PRD.md"),
            Path::new("/p"),
            entries,
        )
        .unwrap();
        let got: Vec<_> = l.base.iter().map(|s| (s.key.as_str(), s.line)).collect();
        assert_eq!(got, [("timeout", 4), ("agent-arg", 5)]);
        assert_eq!(l.profiles["ci"][0].line, 9);
        assert!(
            prd_tree("---\nid: x\n---\n", Path::new("p"))
                .unwrap()
                .is_none()
        );
        let bad = "---\nid: x\nprdloop:\n  best-of: many\n---\n";
        let broken = "---\nid: x\nprdloop:\n  timeout: 5m\n  agents: [1\n---\n";
        let e = prd_tree(broken, Path::new("/p/PRD.md"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/p/PRD.md:5: the front matter's `prdloop:` map cannot be read: unclosed bracket '['"
        );
        let e = Layer::new(
            &keys(),
            Scope::Prd,
            Path::new("/p/PRD.md"),
            Path::new("/p"),
            prd_tree(bad, Path::new("/p/PRD.md")).unwrap().unwrap(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("/p/PRD.md:4: `best-of`: invalid value 'many'"),
            "{e}"
        );
    }

    #[test]
    fn settings_are_defaults_that_the_command_line_overrides() {
        let place = Place {
            scope: Scope::Project,
            file: PathBuf::from("/repo/prdloop.toml"),
            line: 1,
            profile: None,
        };
        let mut settings = Settings::default();
        for (k, v) in [
            ("verbose", Value::One("2".into())),
            ("force", Value::Flag(true)),
            ("timeout", Value::One("30m".into())),
            ("agent-arg", Value::Many(vec!["--a".into(), "--b".into()])),
            ("stall", Value::One("9".into())),
        ] {
            settings.values.insert(k.into(), (v, place.clone()));
        }
        let parse = |args: &[&str]| {
            let args: Vec<OsString> = args.iter().map(OsString::from).collect();
            Cli::try_parse_from_cmd(settings.apply(Cli::command()), &args).unwrap()
        };
        let run_opts = |cli: Cli| match cli.command {
            Some(Sub::Run { opts, .. }) => opts,
            other => panic!("{other:?}"),
        };
        let cli = parse(&["prdloop", "run", "X.md"]);
        assert_eq!(cli.global.verbose, 2);
        let opts = run_opts(cli);
        assert!(opts.force);
        assert_eq!(opts.timeout, std::time::Duration::from_secs(1800));
        assert_eq!(opts.worker.agent_args, ["--a", "--b"]);
        assert_eq!(opts.stall, 9);
        let cli = parse(&[
            "prdloop",
            "run",
            "X.md",
            "-v",
            "--timeout",
            "1m",
            "--agent-arg",
            "--c",
        ]);
        assert_eq!(cli.global.verbose, 1);
        let opts = run_opts(cli);
        assert_eq!(opts.timeout, std::time::Duration::from_secs(60));
        assert_eq!(opts.worker.agent_args, ["--c"]);
        // PAI's form has the same flags at the top level.
        let cli = parse(&["prdloop", "-m", "loop", "-p", "X.md"]);
        assert_eq!(cli.run.stall, 9);
    }
}
