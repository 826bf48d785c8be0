//! How a criterion is verified: the ` | Verify: <Type>: <method>` part of its line, and which
//! methods the runner may execute itself. Real PRDs quote patterns, file names and commands in
//! backticks alike, so a code span alone never makes a command: the Type must be one of the
//! command types and the method must be exactly one code span (prose may follow it).

use std::fmt;
use std::str::FromStr;

use pulldown_cmark::{Event, Options, Parser};

/// How a criterion is verified, as written: the `Type` and the method of
/// ` | Verify: <Type>: <method>`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verify {
    /// CLI, Test, Static, Browser, Grep, Read, Custom, or whatever the author wrote; empty when
    /// the method has no `<Type>:`.
    pub kind: String,
    /// Everything after `<Type>:`, trimmed.
    pub method: String,
    /// The content of the method's code span when the method is exactly one code span,
    /// optionally followed by prose. Syntax only: whether it is run depends on `kind` (see
    /// [`Verify::how`]). Serialized as `command`, the name `plan --json` has always used.
    #[serde(rename = "command")]
    pub code: Option<String>,
}

impl Verify {
    /// `Verify: Custom` criteria need a person.
    pub fn is_custom(&self) -> bool {
        self.kind.eq_ignore_ascii_case("custom")
    }

    /// Who verifies this method, given the Types whose single code span is a command.
    pub fn how(&self, types: &VerifyTypes) -> HowVerified<'_> {
        if self.is_custom() {
            return HowVerified::Person;
        }
        if self.kind.is_empty() {
            return HowVerified::agent("the Verify method has no type");
        }
        if !types.contains(&self.kind) {
            return HowVerified::agent(format!("{} is not a command type", self.kind));
        }
        match &self.code {
            Some(code) => HowVerified::Command(code),
            None => HowVerified::agent("the method is not a single code span"),
        }
    }
}

/// Who decides whether a criterion passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HowVerified<'a> {
    /// The runner runs this command; exit status 0 passes.
    Command(&'a str),
    /// The agent checks it; `why` says, for `plan`, why the runner does not.
    Agent { why: String },
    /// A person must check it (`Verify: Custom`).
    Person,
}

impl<'a> HowVerified<'a> {
    fn agent(why: impl Into<String>) -> Self {
        HowVerified::Agent { why: why.into() }
    }

    /// The command, when the runner runs one.
    pub fn command(&self) -> Option<&'a str> {
        match self {
            HowVerified::Command(c) => Some(*c),
            _ => None,
        }
    }
}

/// The Verify types whose method, when it is a single code span, the runner executes.
/// Compared case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyTypes {
    names: Vec<String>,
}

/// The command types by default.
pub const DEFAULT_COMMAND_TYPES: [&str; 7] = [
    "Test",
    "CLI",
    "Command",
    "Run",
    "Build",
    "Lint",
    "Typecheck",
];

impl Default for VerifyTypes {
    fn default() -> Self {
        VerifyTypes {
            names: DEFAULT_COMMAND_TYPES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

/// A malformed list of Verify types.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadVerifyTypes(String);

impl VerifyTypes {
    /// A comma-separated list such as `Test,CLI`; entries are trimmed, and none may be empty.
    pub fn parse(list: &str) -> Result<VerifyTypes, BadVerifyTypes> {
        let mut names: Vec<String> = Vec::new();
        for (i, entry) in list.split(',').enumerate() {
            let name = entry.trim();
            if name.is_empty() {
                return Err(BadVerifyTypes(format!(
                    "entry {} of the Verify type list `{list}` is empty; give names separated by single commas, such as `Test,CLI`",
                    i + 1
                )));
            }
            if !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                names.push(name.to_string());
            }
        }
        Ok(VerifyTypes { names })
    }

    pub fn contains(&self, kind: &str) -> bool {
        self.names.iter().any(|n| n.eq_ignore_ascii_case(kind))
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }
}

impl FromStr for VerifyTypes {
    type Err = BadVerifyTypes;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VerifyTypes::parse(s)
    }
}

impl fmt::Display for VerifyTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names.join(","))
    }
}

/// Splits a criterion's text after its id into the description and the Verify part, at the
/// first ` | Verify:` (a pipe may appear in the description and in the method).
pub fn split_verify(rest: &str) -> (String, Option<Verify>) {
    const SEP: &str = " | Verify:";
    let Some(i) = rest.find(SEP) else {
        return (rest.trim().to_string(), None);
    };
    let description = rest[..i].trim().to_string();
    let after = rest[i + SEP.len()..].trim();
    let (kind, method) = match after.find(':') {
        Some(c) if is_type_name(after[..c].trim()) => {
            (after[..c].trim().to_string(), after[c + 1..].trim())
        }
        // `Verify: Custom` alone: a Type with no method.
        None if is_type_name(after) => (after.to_string(), ""),
        _ => (String::new(), after),
    };
    let code = single_code_span(method);
    let verify = Verify {
        kind,
        method: method.to_string(),
        code,
    };
    (description, Some(verify))
}

/// A Type is one word of letters, digits, `-` or `_` (so `` `a:b` `` is no type).
fn is_type_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
}

/// The content of `method`'s code span when the method starts with one inline code span and
/// holds no other (prose may follow). Read with pulldown-cmark, so backtick runs, escapes and
/// the stripping of one space on each side follow CommonMark.
fn single_code_span(method: &str) -> Option<String> {
    let mut found: Option<String> = None;
    for (event, range) in Parser::new_ext(method, Options::empty()).into_offset_iter() {
        if let Event::Code(code) = event {
            // A second span, or a first one after prose (or inside emphasis, a link, a list
            // item...), is not a command.
            if found.is_some() || range.start != 0 {
                return None;
            }
            found = Some(code.trim().to_string());
        }
    }
    found.filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(method: &str) -> Option<String> {
        single_code_span(method)
    }

    #[test]
    fn single_spans() {
        assert_eq!(
            code("`cargo test auth`").as_deref(),
            Some("cargo test auth")
        );
        assert_eq!(
            code("`cargo test auth` (unit tests)").as_deref(),
            Some("cargo test auth")
        );
        assert_eq!(code("`` a ` b ``").as_deref(), Some("a ` b"));
        assert_eq!(
            code("`printf 'a|b' | grep -q '|'`").as_deref(),
            Some("printf 'a|b' | grep -q '|'")
        );
        assert_eq!(code("`x` and a stray ` backtick").as_deref(), Some("x"));
    }

    #[test]
    fn not_single_spans() {
        for m in [
            "",
            "no code",
            "open ` only",
            "run `cargo test`",
            "`progress.*number` in `Drawer.tsx`",
            "*`x`*",
            "[`x`](http://e.com)",
            "- `x`",
            "`  `",
            r"\`x`",
        ] {
            assert_eq!(code(m), None, "{m:?}");
        }
    }

    #[test]
    fn verify_split_uses_the_first_separator() {
        let (d, v) = split_verify(" A pipe | inside | Verify: CLI: `x | y` | Verify: z");
        assert_eq!(d, "A pipe | inside");
        let v = v.unwrap();
        assert_eq!(v.kind, "CLI");
        assert_eq!(v.method, "`x | y` | Verify: z");
        assert_eq!(v.code.as_deref(), Some("x | y"));
    }

    #[test]
    fn a_colon_inside_code_is_no_type() {
        let (_, v) = split_verify("d | Verify: `a:b`");
        let v = v.unwrap();
        assert_eq!(v.kind, "");
        assert_eq!(v.code.as_deref(), Some("a:b"));
        assert_eq!(
            v.how(&VerifyTypes::default()),
            HowVerified::Agent {
                why: "the Verify method has no type".into()
            }
        );
    }

    #[test]
    fn who_verifies() {
        let how = |s: &str| {
            let (_, v) = split_verify(&format!("d | Verify: {s}"));
            let v = v.unwrap();
            match v.how(&VerifyTypes::default()) {
                HowVerified::Command(c) => format!("run {c}"),
                HowVerified::Agent { why } => format!("agent: {why}"),
                HowVerified::Person => "person".into(),
            }
        };
        assert_eq!(how("Test: `cargo test auth`"), "run cargo test auth");
        assert_eq!(how("test: `cargo test` (unit)"), "run cargo test");
        assert_eq!(how("TYPECHECK: `tsc --noEmit`"), "run tsc --noEmit");
        assert_eq!(how("Grep: `rg x`"), "agent: Grep is not a command type");
        assert_eq!(how("Wibble: `x`"), "agent: Wibble is not a command type");
        assert_eq!(
            how("CLI: run `x` twice"),
            "agent: the method is not a single code span"
        );
        assert_eq!(
            how("Test: npm test"),
            "agent: the method is not a single code span"
        );
        assert_eq!(how("Custom: `x`"), "person");
        assert_eq!(how("custom"), "person");
        assert_eq!(how("Test"), "agent: the method is not a single code span");
        assert_eq!(how("`x`"), "agent: the Verify method has no type");
    }

    #[test]
    fn type_lists() {
        let t = VerifyTypes::parse(" Test , cli,Grep").unwrap();
        assert!(t.contains("test") && t.contains("CLI") && t.contains("grep"));
        assert!(!t.contains("Build"));
        assert_eq!(t.to_string(), "Test,cli,Grep");
        assert_eq!(VerifyTypes::parse("Test,test").unwrap().names(), ["Test"]);
        let e = VerifyTypes::parse("Test,,CLI").unwrap_err();
        assert!(e.to_string().contains("entry 2"), "{e}");
        assert!(VerifyTypes::parse("").is_err());
        assert!(VerifyTypes::parse("Test,").is_err());
        let d = VerifyTypes::default();
        for t in DEFAULT_COMMAND_TYPES {
            assert!(d.contains(t));
        }
        assert!(!d.contains("Grep") && !d.contains("Custom"));
        assert_eq!("Lint".parse::<VerifyTypes>().unwrap().names(), ["Lint"]);
    }
}
