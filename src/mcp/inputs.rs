//! The tools' inputs, taken from the command line's own definitions: each tool is a
//! subcommand, and its input schema is that subcommand's flags as clap knows them
//! ([`crate::cli::Cli`]): the long name (`state_dir` is `--state-dir`), the help as the
//! description, the possible values as an `enum`, a switch as a boolean, a repeatable flag as
//! an array, a number where the flag's parser makes one. Beside them, the tool's positional
//! arguments (the PRD, …) and the few inputs only the server has ([`Extra`]). [`Spec::argv`]
//! turns a call's arguments back into the command line the server runs, so the command line's
//! own parsers, config files and rules judge them.

use std::ffi::OsString;
use std::sync::Arc;

use clap::{ArgAction, CommandFactory};
use rmcp::model::JsonObject;
use serde_json::{Map, Value, json};

/// A positional argument of a tool, in the order the command line takes them.
pub struct Positional {
    pub name: &'static str,
    pub description: &'static str,
    pub required: bool,
    /// Several (an array).
    pub many: bool,
}

/// An input only the server has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// `wait` (`run`, `resume`): the call lasts until the run ends.
    Wait,
    /// `args` (`run`, `resume`): more command-line words, as they are.
    Args,
}

impl Extra {
    pub fn name(self) -> &'static str {
        match self {
            Extra::Wait => "wait",
            Extra::Args => "args",
        }
    }
    fn schema(self) -> Value {
        match self {
            Extra::Wait => json!({"type": "boolean", "description":
                "Stay in the call until the run ends and return its `end` event (with a progress \
                 notification per event when the call gives a progressToken); else the call \
                 returns the `start` event at once and the run's events come as log messages."}),
            Extra::Args => json!({"type": "array", "items": {"type": "string"}, "description":
                "More command-line words, as they are (`[\"--best-of\", \"2\"]`)."}),
        }
    }
}

/// One tool's command line.
pub struct Spec {
    /// The subcommand.
    pub command: &'static str,
    /// Whether it is given `--json` (its output then is JSON).
    pub json: bool,
    pub positionals: &'static [Positional],
    pub extras: &'static [Extra],
    /// Flags the tool does not offer (`logs --follow` would never end).
    pub without: &'static [&'static str],
}

const PRD: Positional = Positional {
    name: "prd",
    description: "The PRD: a path, or a PRD id found in PAI's locations.",
    required: true,
    many: false,
};

/// The tools' command lines, by tool name.
pub fn spec(tool: &str) -> Option<Spec> {
    let s = |command, json, positionals, extras, without| Spec {
        command,
        json,
        positionals,
        extras,
        without,
    };
    const RUN: &[Extra] = &[Extra::Wait, Extra::Args];
    Some(match tool {
        "plan" => s("plan", true, &[PRD], &[], &[]),
        "run" => s("run", true, &[PRD], RUN, &[]),
        "resume" => s("resume", true, &[PRD], RUN, &[]),
        "status" => s(
            "status",
            true,
            &[Positional {
                name: "prds",
                description: "PRDs: paths or PRD ids [default: every PRD in PAI's locations].",
                required: false,
                many: true,
            }],
            &[],
            &[],
        ),
        "logs" => s(
            "logs",
            false,
            &[
                PRD,
                Positional {
                    name: "criterion",
                    description: "The criterion [default: the log written last].",
                    required: false,
                    many: false,
                },
            ],
            &[],
            &["follow"],
        ),
        "answer" => s(
            "answer",
            true,
            &[
                PRD,
                Positional {
                    name: "id",
                    description: "The criterion whose question this answers; without it, the open questions are listed.",
                    required: false,
                    many: false,
                },
                Positional {
                    name: "text",
                    description: "The answer.",
                    required: false,
                    many: false,
                },
            ],
            &[],
            &[],
        ),
        // `-p PRD` is PAI's twin of the positional PRD.
        "pause" => s("pause", false, &[PRD], &[], &["prd"]),
        "stop" => s("stop", false, &[PRD], &[], &["prd"]),
        "audit" => s("audit", true, &[PRD], &[], &[]),
        "undo" => s(
            "undo",
            true,
            &[Positional {
                name: "prd",
                description: "Only this PRD's landings [default: any PRD's in this repository].",
                required: false,
                many: false,
            }],
            &[],
            &[],
        ),
        _ => return None,
    })
}

/// The command line's definitions, built (so each flag's action and parser are known).
fn cli() -> Arc<clap::Command> {
    static CLI: std::sync::OnceLock<Arc<clap::Command>> = std::sync::OnceLock::new();
    CLI.get_or_init(|| {
        let mut c = crate::cli::Cli::command();
        c.build();
        Arc::new(c)
    })
    .clone()
}

/// How a flag takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Switch,
    Count,
    One,
    Many,
}

fn kind(a: &clap::Arg) -> Kind {
    match a.get_action() {
        ArgAction::SetTrue | ArgAction::SetFalse => Kind::Switch,
        ArgAction::Count => Kind::Count,
        ArgAction::Append => Kind::Many,
        _ if a.get_num_args().is_some_and(|n| n.max_values() > 1) => Kind::Many,
        _ => Kind::One,
    }
}

/// A flag's value as JSON Schema: a number where its parser makes one, its possible values
/// as an `enum`, else a string.
fn value_schema(a: &clap::Arg) -> Value {
    use std::any::TypeId;
    let t = a.get_value_parser().type_id();
    let ints = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ];
    if ints.iter().any(|i| t == *i) {
        return json!({"type": "integer"});
    }
    if t == TypeId::of::<f64>() || t == TypeId::of::<f32>() {
        return json!({"type": "number"});
    }
    let values: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    if values.is_empty() {
        json!({"type": "string"})
    } else {
        json!({"type": "string", "enum": values})
    }
}

/// A flag's input name: its long name with `_` for `-`.
fn input_name(long: &str) -> String {
    long.replace('-', "_")
}

impl Spec {
    /// The subcommand's flags the tool offers: long, not hidden, not global, not `--json`
    /// (the server gives it), not positional.
    pub fn flags(&self) -> Vec<clap::Arg> {
        let cli = cli();
        let Some(sub) = cli.find_subcommand(self.command) else {
            return Vec::new();
        };
        sub.get_arguments()
            .filter(|a| !a.is_positional() && !a.is_hide_set() && !a.is_global_set())
            .filter(|a| {
                a.get_long().is_some_and(|l| {
                    !["json", "help", "version"].contains(&l) && !self.without.contains(&l)
                })
            })
            .cloned()
            .collect()
    }

    /// The tool's input schema.
    pub fn schema(&self) -> Arc<JsonObject> {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for p in self.positionals {
            let v = if p.many {
                json!({"type": "array", "items": {"type": "string"}, "description": p.description})
            } else {
                json!({"type": "string", "description": p.description})
            };
            properties.insert(p.name.into(), v);
            if p.required {
                required.push(Value::from(p.name));
            }
        }
        for a in self.flags() {
            let long = a.get_long().expect("a long flag");
            let mut v = match kind(&a) {
                Kind::Switch => json!({"type": "boolean"}),
                Kind::Count => json!({"type": "integer", "minimum": 0}),
                Kind::One => value_schema(&a),
                Kind::Many => json!({"type": "array", "items": value_schema(&a)}),
            };
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            v["description"] = Value::from(format!("`--{long}`: {help}").trim_end().to_string());
            properties.insert(input_name(long), v);
        }
        for e in self.extras {
            properties.insert(e.name().into(), e.schema());
        }
        let schema = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        match schema {
            Value::Object(m) => Arc::new(m),
            _ => unreachable!("an object"),
        }
    }

    /// A call's arguments as the command line (without the program), and its extras; an
    /// input that is not the tool's, or of the wrong type, is the error.
    pub fn argv(&self, args: &JsonObject) -> Result<(Vec<OsString>, Given), String> {
        let mut argv: Vec<OsString> = vec![self.command.into()];
        if self.json {
            argv.push("--json".into());
        }
        let flags = self.flags();
        let mut given = Given::default();
        let mut rest = Vec::new();
        for (key, value) in args {
            if value.is_null() {
                continue;
            }
            if let Some(e) = self.extras.iter().find(|e| e.name() == key) {
                match (e, value) {
                    (Extra::Wait, Value::Bool(b)) => given.wait = *b,
                    (Extra::Args, Value::Array(words)) => {
                        for w in words {
                            rest.push(word(key, w)?);
                        }
                    }
                    _ => return Err(format!("`{key}`: {} expected", type_of(e.schema()))),
                }
                continue;
            }
            if self.positionals.iter().any(|p| p.name == key) {
                continue;
            }
            let Some(a) = flags
                .iter()
                .find(|a| a.get_long().map(input_name).as_deref() == Some(key))
            else {
                return Err(format!("unknown field `{key}`"));
            };
            let flag = format!("--{}", a.get_long().expect("a long flag"));
            match (kind(a), value) {
                (Kind::Switch, Value::Bool(true)) => argv.push(flag.into()),
                (Kind::Switch, Value::Bool(false)) => {}
                (Kind::Count, Value::Number(n)) => {
                    let n = n.as_u64().ok_or(format!("`{key}`: a count expected"))?;
                    argv.extend((0..n).map(|_| OsString::from(&flag)));
                }
                (Kind::Many, Value::Array(items)) => {
                    for i in items {
                        argv.push(format!("{flag}={}", word(key, i)?).into());
                    }
                }
                (Kind::Switch, _) => return Err(format!("`{key}`: a boolean expected")),
                (Kind::Count, _) => return Err(format!("`{key}`: a count expected")),
                (_, v) => argv.push(format!("{flag}={}", word(key, v)?).into()),
            }
        }
        argv.extend(rest.into_iter().map(OsString::from));
        argv.push("--".into());
        for p in self.positionals {
            match args.get(p.name) {
                None | Some(Value::Null) if p.required => {
                    return Err(format!("missing field `{}`", p.name));
                }
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) if p.many => {
                    for i in items {
                        argv.push(word(p.name, i)?.into());
                    }
                }
                Some(Value::String(s)) if !p.many => argv.push(s.into()),
                Some(_) => {
                    let what = if p.many { "strings" } else { "a string" };
                    return Err(format!("`{}`: {what} expected", p.name));
                }
            }
        }
        Ok((argv, given))
    }
}

/// What a call gave the server itself.
#[derive(Debug, Default, Clone, Copy)]
pub struct Given {
    pub wait: bool,
}

fn type_of(schema: Value) -> String {
    schema["type"]
        .as_str()
        .unwrap_or("another value")
        .to_string()
}

/// One command-line word from a string or a number.
fn word(key: &str, v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(format!("`{key}`: a string or a number expected, not {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: [&str; 10] = [
        "plan", "run", "status", "logs", "answer", "pause", "stop", "resume", "audit", "undo",
    ];

    fn words(tool: &str, args: Value) -> Result<Vec<String>, String> {
        let Value::Object(args) = args else { panic!() };
        let (argv, _) = spec(tool).unwrap().argv(&args)?;
        Ok(argv.into_iter().map(|w| w.into_string().unwrap()).collect())
    }

    /// Every tool's inputs are its subcommand's long flags (but `--json`, the global ones and
    /// those the tool leaves out), its positional arguments and the server's own: read from
    /// clap here apart from the schema's code, so a flag added to a command is an input.
    #[test]
    fn every_tools_properties_are_its_subcommands_flags() {
        let cli = cli();
        for tool in TOOLS {
            let s = spec(tool).unwrap();
            let sub = cli.find_subcommand(s.command).expect(tool);
            let mut expected: Vec<String> = sub
                .get_arguments()
                .filter(|a| !a.is_positional() && !a.is_hide_set() && !a.is_global_set())
                .filter_map(|a| a.get_long())
                .filter(|l| !["json", "help", "version"].contains(l) && !s.without.contains(l))
                .map(|l| l.replace('-', "_"))
                .chain(s.positionals.iter().map(|p| p.name.to_string()))
                .chain(s.extras.iter().map(|e| e.name().to_string()))
                .collect();
            expected.sort();
            let before = expected.len();
            expected.dedup();
            assert_eq!(before, expected.len(), "{tool}: an input named twice");
            let schema = s.schema();
            let mut got: Vec<String> = schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            got.sort();
            assert_eq!(got, expected, "{tool}");
            // Each of the subcommand's positionals is one of the tool's.
            let positionals = sub.get_arguments().filter(|a| a.is_positional()).count();
            assert_eq!(positionals, s.positionals.len(), "{tool}'s positionals");
        }
        let plan = spec("plan").unwrap().schema();
        for flag in ["agent", "agent_bin", "model", "agent_arg", "verify_types"] {
            assert!(plan["properties"].get(flag).is_some(), "plan lacks {flag}");
        }
        let audit = spec("audit").unwrap().schema();
        for flag in ["verify_timeout", "verify_types", "kill_grace"] {
            assert!(
                audit["properties"].get(flag).is_some(),
                "audit lacks {flag}"
            );
        }
    }

    #[test]
    fn the_schema_has_the_flags_types_values_and_help() {
        let run = spec("run").unwrap().schema();
        let p = &run["properties"];
        assert_eq!(p["agents"]["type"], "integer", "{}", p["agents"]);
        assert_eq!(p["commit"]["type"], "boolean", "{}", p["commit"]);
        assert!(
            p["agent"]["enum"]
                .as_array()
                .unwrap()
                .contains(&json!("codex"))
        );
        assert!(
            p["agents"]["description"]
                .as_str()
                .unwrap()
                .starts_with("`--agents`: Parallel agents"),
            "{}",
            p["agents"]
        );
        assert_eq!(run["required"], json!(["prd"]));
        assert_eq!(run["additionalProperties"], false);
    }

    #[test]
    fn a_prd_that_looks_like_a_flag_stays_the_argument() {
        assert_eq!(
            words("plan", json!({"prd": "--help", "agents": 2})).unwrap(),
            ["plan", "--json", "--agents=2", "--", "--help"]
        );
    }

    #[test]
    fn run_options_come_before_the_prd_and_args_are_passed_as_given() {
        let w = words(
            "resume",
            json!({"prd": "PRD.md", "agents": 3, "commit": true, "args": ["--best-of", "2"]}),
        )
        .unwrap();
        assert_eq!(
            w,
            [
                "resume",
                "--json",
                "--agents=3",
                "--commit",
                "--best-of",
                "2",
                "--",
                "PRD.md"
            ]
        );
        let w = words("status", json!({"prds": ["a.md", "b.md"]})).unwrap();
        assert_eq!(w, ["status", "--json", "--", "a.md", "b.md"]);
    }

    #[test]
    fn an_unknown_field_or_a_wrong_type_is_refused() {
        let e = words("status", json!({"prd": "x"})).unwrap_err();
        assert!(e.contains("unknown field `prd`"), "{e}");
        let e = words("plan", json!({"prd": 5})).unwrap_err();
        assert!(e.contains("`prd`: a string expected"), "{e}");
        let e = words("plan", json!({})).unwrap_err();
        assert!(e.contains("missing field `prd`"), "{e}");
        let e = words("logs", json!({"prd": "x", "follow": true})).unwrap_err();
        assert!(e.contains("unknown field `follow`"), "{e}");
        let e = words("run", json!({"prd": "x", "commit": "yes"})).unwrap_err();
        assert!(e.contains("a boolean expected"), "{e}");
    }
}
