//! What a run was given, setting by setting: a flag's value as the command line takes it, the
//! settings a run's command line and `PRDLOOP_*` variables gave (kept in its state file as
//! `runSettings`), and, for a `resume`, those it took from its session. Plain data: the config
//! files' reading ([`crate::config_file`]) makes and layers them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A setting's value as the command line takes it (in a state file's `runSettings`: `true`,
/// `"30m"`, `["--flag"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
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
        // Bare when TOML reads it back as that number (`4`, `2.5`; not `007` or `.5`).
        fn one(s: &str) -> String {
            let number = toml::from_str::<toml::Table>(&format!("v = {s}"))
                .is_ok_and(|t| t["v"].is_integer() || t["v"].is_float());
            if number {
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

/// A run's settings as its command line and environment gave them, by key, relative paths
/// made absolute (a `resume` may start in another folder).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionSettings(BTreeMap<String, Value>);

impl SessionSettings {
    pub fn from_map(settings: BTreeMap<String, Value>) -> SessionSettings {
        SessionSettings(settings)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// These settings, with those of `below` that they do not give.
    pub fn over(mut self, below: &SessionSettings) -> SessionSettings {
        for (k, v) in &below.0 {
            self.0.entry(k.clone()).or_insert_with(|| v.clone());
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
    }
}

/// What a run was given: by its own command line and environment, and, for a `resume`, by
/// the session it resumes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Given {
    pub here: SessionSettings,
    /// The resumed session's settings this run took ([`SessionSettings::taken_by`]).
    pub from_session: SessionSettings,
}

impl Given {
    /// What the run's state file records, for the next `resume`.
    pub fn recorded(&self) -> SessionSettings {
        self.here.clone().over(&self.from_session)
    }
}

/// As a command line would give them: `--agent command --timeout 30m --agent-arg=-x`.
impl std::fmt::Display for SessionSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut words: Vec<String> = Vec::new();
        for (key, value) in &self.0 {
            match value {
                Value::Flag(true) => words.push(format!("--{key}")),
                Value::Flag(false) => words.push(format!("--{key}=false")),
                Value::One(v) => words.push(format!("--{key} {}", quoted(v))),
                Value::Many(vs) => {
                    words.extend(vs.iter().map(|v| format!("--{key}={}", quoted(v))))
                }
            }
        }
        f.write_str(&words.join(" "))
    }
}

/// `v` as a shell would need it to be one word.
fn quoted(v: &str) -> String {
    let plain = !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain {
        v.to_string()
    } else {
        format!("'{}'", v.replace('\'', r"'\''"))
    }
}
