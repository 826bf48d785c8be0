//! The keys: the long flags of the commands that run or check work, from the clap
//! definitions, and how a file's value for one is checked.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use clap::{Arg, ArgAction, Command, CommandFactory};

use super::read::Raw;
use crate::cli::Cli;
pub use crate::given::Value;

/// Flags that are not settings: what to do now rather than how. `shard` and `bundle` are one
/// CI job's, and need each other, which clap checks for the command line only, not for
/// defaults.
const NOT_KEYS: &[&str] = &[
    "help", "version", "mode", "prd", "profile", "shard", "bundle",
];
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
    "undo",
    "audit",
    "serve",
    "answer",
    "trust",
];
/// Commands the settings do not apply to: they print what the command line is.
pub(super) const UNCONFIGURED_COMMANDS: &[&str] = &["config", "completions", "man", "trust"];

/// How a flag takes its value, so what a file's value must be.
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
    /// `v` as the flag `--key` would check it, alone with its value parser; the error is
    /// clap's first line without its `error: `.
    fn validate(&self, key: &str, v: &str) -> Result<(), String> {
        let mut alone = Arg::new("value")
            .long(key.to_string())
            .action(ArgAction::Set)
            .allow_hyphen_values(true)
            .value_parser(self.arg.get_value_parser().clone());
        if let Some(name) = self.arg.get_value_names().and_then(|n| n.first()) {
            alone = alone.value_name(name.clone());
        }
        let check = Command::new("prdloop")
            .no_binary_name(true)
            .arg(alone)
            .try_get_matches_from([OsString::from(format!("--{key}")), OsString::from(v)]);
        match check {
            Ok(_) => Ok(()),
            Err(e) => {
                let text = e.to_string();
                let first = text.lines().next().unwrap_or_default();
                Err(first.strip_prefix("error: ").unwrap_or(first).to_string())
            }
        }
    }

    /// The value the flag `id` was read with in `m`, as a file would give it, its relative
    /// paths resolved against `cwd` (as a file's are against its folder).
    pub(super) fn given(&self, m: &clap::ArgMatches, id: &str, cwd: &Path) -> Option<Value> {
        let text = |v: &std::ffi::OsStr| {
            let v = v.to_string_lossy().into_owned();
            if self.is_path(&v) && Path::new(&v).is_relative() {
                cwd.join(&v).display().to_string()
            } else {
                v
            }
        };
        let raw = || m.get_raw(id).into_iter().flatten();
        Some(match self.kind {
            Kind::Flag => Value::Flag(m.get_flag(id)),
            Kind::Count => Value::One(m.get_count(id).to_string()),
            Kind::One => Value::One(text(raw().next()?)),
            Kind::Many => Value::Many(raw().map(text).collect()),
        })
    }

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

/// Every key, by name: the long flags of the commands that run or check work (and the
/// global ones), from the clap definitions.
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
    pub(super) fn check(&self, key: &str, raw: &Raw, base: &Path) -> Result<Value, String> {
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
            k.validate(key, v)
                .map_err(|why| format!("`{key}`: {why}"))?;
        }
        Ok(value)
    }

    /// The `PRDLOOP_*` variables set to a value their flag refuses (an empty one is unset),
    /// each with its flag's key and the message naming the variable and its value:
    /// `PRDLOOP_SANDBOX='bogus': invalid value 'bogus' for '--sandbox <WHEN>'`.
    pub fn env_errors(&self) -> Vec<(&str, String)> {
        let mut out = Vec::new();
        for (key, k) in &self.keys {
            if !matches!(k.kind, Kind::One | Kind::Many) {
                continue;
            }
            let Some(var) = k.env.as_deref() else {
                continue;
            };
            let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
                continue;
            };
            let v = v.to_string_lossy();
            if let Err(why) = k.validate(key, &v) {
                out.push((key.as_str(), format!("{var}={v:?}: {why}")));
            }
        }
        out
    }
}

impl Default for Keys {
    fn default() -> Keys {
        Keys::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_toml_that_reads_back() {
        let cases = [
            (Value::One("4".into()), "4"),
            (Value::One("2.5".into()), "2.5"),
            (Value::One("007".into()), "\"007\""),
            (Value::One(".5".into()), "\".5\""),
            (Value::One("30m".into()), "\"30m\""),
            (Value::Flag(true), "true"),
            (
                Value::Many(vec!["-x".into(), "a \"b\"".into()]),
                "[\"-x\", 'a \"b\"']",
            ),
        ];
        for (value, want) in cases {
            assert_eq!(value.to_toml(), want);
            toml::from_str::<toml::Table>(&format!("v = {want}")).unwrap();
        }
    }
}
