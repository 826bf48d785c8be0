//! How a criterion is verified: the ` | Verify: <Type>: <method>` part of its line, and which
//! methods the runner may execute itself. Real PRDs quote patterns, file names and commands in
//! backticks alike, so a code span alone never makes a command: the Type must be one of the
//! command types, the method must be exactly one code span and nothing else (prose after it
//! changes its meaning: `` `sudo whoami` = root ``), and the span must read as a check
//! ([`not_a_command`]): no placeholder, no line of source code, no discarded exit status.
//! Whether its program is installed is the runner's question (`crate::verify::cannot_run_here`).

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
    /// The content of the method's code span when the method is exactly one code span.
    /// Syntax only: whether it is run depends on `kind` (see [`Verify::how`]). Serialized as
    /// `command`, the name `plan --json` has always used.
    #[serde(rename = "command")]
    pub code: Option<String>,
    /// Why a method that starts with a code span is not a single one (prose follows it).
    #[serde(skip)]
    pub not_single: Option<String>,
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
            Some(code) => match not_a_command(code) {
                None => HowVerified::Command(code),
                Some(why) => HowVerified::agent(why),
            },
            None => HowVerified::agent(
                self.not_single
                    .clone()
                    .unwrap_or_else(|| "the method is not a single code span".into()),
            ),
        }
    }
}

/// Why a code span that is a whole method is still no command the runner may run, if it is
/// not: a placeholder to fill in (`<secrets-dir>`), a line of source code
/// (`import { V } from './types'`), or a check whose exit status is thrown away
/// (`x; echo $?`, `x || true`), which passes whatever happens.
pub fn not_a_command(code: &str) -> Option<String> {
    if let Some(p) = placeholder(code) {
        return Some(format!(
            "`{p}` is a placeholder, not something to run: the command is not complete"
        ));
    }
    if is_source_code(code) {
        return Some("the code span is a line of source code, not a command".into());
    }
    if let Some(tail) = discarded_status(code) {
        return Some(format!(
            "its exit status is discarded (`{tail}`): it passes whatever happens, so it is no check"
        ));
    }
    None
}

/// The first `<name>` outside quotes: `<` then a letter, then letters, digits, `-`, `_` or
/// spaces, then `>` (`grep -q '<div>' x` quotes a tag, it is no placeholder).
fn placeholder(code: &str) -> Option<&str> {
    let bytes = code.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' => quote = Some(b),
            None if b == b'<' => {
                let mut j = i + 1;
                if bytes.get(j).is_some_and(u8::is_ascii_alphabetic) {
                    while bytes.get(j).is_some_and(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b' ')
                    }) {
                        j += 1;
                    }
                    if bytes.get(j) == Some(&b'>') && bytes[j - 1] != b' ' {
                        return Some(&code[i..=j]);
                    }
                }
            }
            None => {}
        }
        i += 1;
    }
    None
}

/// A line that reads as program text: it starts with a declaration keyword of a common
/// language and goes on as that language does. Shell lines that start with the same words
/// (`export FOO=1 && make`, ImageMagick's `import -window root x.png`) are not.
fn is_source_code(code: &str) -> bool {
    let code = code.trim();
    let mut words = code.split_whitespace();
    let first = words.next().unwrap_or("");
    let second = words.next().unwrap_or("");
    let punct = code.contains(['{', '}', '(', ')', '=', ';']);
    match first {
        "import" => {
            code.contains('{')
                || code.contains(" from ")
                || code.ends_with(';')
                || second.starts_with(['\'', '"', '*'])
        }
        "export" => {
            [
                "const",
                "let",
                "var",
                "function",
                "default",
                "class",
                "interface",
                "type",
                "async",
                "enum",
                "{",
                "*",
            ]
            .contains(&second)
                || second.starts_with('{')
        }
        "const" | "let" | "var" => code.contains('='),
        "use" => code.contains("::") || code.ends_with(';'),
        "function" | "def" | "class" | "interface" | "struct" | "fn" | "pub" | "package"
        | "return" | "#include" => punct || code.ends_with(':'),
        _ => false,
    }
}

/// The tail that throws the exit status away: the last step after `;`, `&&` or `||` is
/// `echo $?`, or after `;`/`||` is `true`, `:` or `exit 0`.
fn discarded_status(code: &str) -> Option<&str> {
    let code = code.trim().trim_end_matches(';').trim_end();
    for sep in [";", "||", "&&"] {
        let Some(i) = code.rfind(sep) else { continue };
        let last = code[i + sep.len()..].trim();
        let discards = match sep {
            "&&" => last == "echo $?",
            _ => matches!(last, "echo $?" | "true" | ":" | "exit 0" | "echo \"$?\""),
        };
        if discards {
            return Some(code[i..].trim());
        }
    }
    None
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
    // A closing full stop is punctuation, not prose.
    let whole = method.trim().trim_end_matches('.').trim_end().len();
    let (code, not_single) = match single_code_span(method) {
        Some(code) if whole == code.len_in_method => (Some(code.text), None),
        Some(_) => (
            None,
            Some(
                "prose follows the code span, and may change what it means: the agent checks it"
                    .to_string(),
            ),
        ),
        None => (None, None),
    };
    let verify = Verify {
        kind,
        method: method.to_string(),
        code,
        not_single,
    };
    (description, Some(verify))
}

/// What a format's check string (a ralph acceptance criterion, a Taskmaster `testStrategy`)
/// runs, under the rules of a Verify code span: it must be one code span, alone or followed
/// only by words that mean "exits 0" (`passes`, `succeeds`), and read as a check
/// ([`not_a_command`]). Else why not.
pub fn named_check(s: &str) -> Result<String, String> {
    const EXIT_ZERO: [&str; 8] = [
        "",
        "passes",
        "pass",
        "succeeds",
        "exits 0",
        "exits with 0",
        "returns 0",
        "runs clean",
    ];
    let t = s.trim().trim_end_matches('.').trim_end();
    let Some((code, len)) = leading_code_span(t) else {
        return Err("names no command in a code span".into());
    };
    let rest = t[len..].trim();
    if !EXIT_ZERO.iter().any(|w| w.eq_ignore_ascii_case(rest)) {
        return Err("has prose after its code span, which may change what it means".into());
    }
    match not_a_command(&code) {
        Some(why) => Err(format!("is no command to run ({why})")),
        None => Ok(code),
    }
}

/// The content of the code span `text` starts with (after trimming), and how many bytes of
/// the trimmed text the span takes, backticks included; prose may follow it.
pub(super) fn leading_code_span(text: &str) -> Option<(String, usize)> {
    let text = text.trim();
    Parser::new_ext(text, Options::empty())
        .into_offset_iter()
        .find_map(|(event, range)| match event {
            Event::Code(code) => Some((code.trim().to_string(), range)),
            _ => None,
        })
        .filter(|(code, range)| range.start == 0 && !code.is_empty())
        .map(|(code, range)| (code, range.end))
}

/// `text` with the content of its code spans (backticks included) replaced by spaces, so that
/// what is quoted is not read as markup; byte offsets stay.
pub(super) fn blank_code_spans(text: &str) -> String {
    // No backtick, no code span: most criteria, and each is read at every parse of the PRD.
    if !text.contains('`') {
        return text.to_string();
    }
    let mut out = text.as_bytes().to_vec();
    for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
        if let Event::Code(_) = event {
            out[range].fill(b' ');
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A Type is one word of letters, digits, `-` or `_` (so `` `a:b` `` is no type).
fn is_type_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
}

/// A code span at the start of a method: its content, and how many bytes of the method the
/// span takes (backticks included).
struct Span {
    text: String,
    len_in_method: usize,
}

/// The content of `method`'s code span when the method starts with one inline code span and
/// holds no other (prose may follow: the caller decides). Read with pulldown-cmark, so
/// backtick runs, escapes and the stripping of one space on each side follow CommonMark.
fn single_code_span(method: &str) -> Option<Span> {
    let method = method.trim();
    let mut found: Option<Span> = None;
    for (event, range) in Parser::new_ext(method, Options::empty()).into_offset_iter() {
        if let Event::Code(code) = event {
            // A second span, or a first one after prose (or inside emphasis, a link, a list
            // item...), is not a command.
            if found.is_some() || range.start != 0 {
                return None;
            }
            found = Some(Span {
                text: code.trim().to_string(),
                len_in_method: range.end,
            });
        }
    }
    found.filter(|c| !c.text.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(method: &str) -> Option<String> {
        single_code_span(method).map(|s| s.text)
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
        // Text after the span: not a command.
        assert_eq!(v.code, None);
        assert!(v.not_single.is_some());
        let (_, v) = split_verify(" A | Verify: CLI: `x | y` ");
        assert_eq!(v.unwrap().code.as_deref(), Some("x | y"));
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
        assert_eq!(
            how("test: `cargo test` (unit)"),
            "agent: prose follows the code span, and may change what it means: the agent checks it"
        );
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
    fn what_is_no_command() {
        let why = |c: &str| not_a_command(c).unwrap_or_default();
        assert!(why("ls <secrets-dir>").contains("placeholder"));
        assert!(why("import { Vector6D } from './types'").contains("source code"));
        assert!(why("const x = 1;").contains("source code"));
        assert!(why("export const x = 1").contains("source code"));
        assert!(why("def f(): pass").contains("source code"));
        assert!(why("use std::fs;").contains("source code"));
        assert!(why("which golangci-lint; echo $?").contains("discarded"));
        assert!(why("grep -q x f || true").contains("discarded"));
        assert!(why("make check && echo $?").contains("discarded"));
        for ok in [
            "grep -q '<div>' index.html",
            "export CI=1 && cargo test",
            "let-me-run",
            "cargo test",
            "sort < in.txt > out.txt",
            "import -window root shot.png",
            "test -f a || exit 1",
            "a && b",
            "use-tool run",
        ] {
            assert_eq!(not_a_command(ok), None, "{ok}");
        }
    }

    #[test]
    fn check_strings_run_only_under_the_verify_rules() {
        assert_eq!(named_check("`npm test` passes").as_deref(), Ok("npm test"));
        assert_eq!(
            named_check("`npm run typecheck`.").as_deref(),
            Ok("npm run typecheck")
        );
        assert_eq!(
            named_check("`cargo test` Succeeds").as_deref(),
            Ok("cargo test")
        );
        for (s, why) in [
            ("Typecheck passes", "no command"),
            ("Run `npm test`", "no command"),
            ("`npm test` passes for the auth module", "prose"),
            ("`src/app.ts` exists", "prose"),
            ("`x; echo $?` passes", "discarded"),
        ] {
            let e = named_check(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }

    #[test]
    fn a_closing_full_stop_is_no_prose() {
        let (_, v) = split_verify("d | Verify: CLI: `make test`.");
        assert_eq!(v.unwrap().code.as_deref(), Some("make test"));
    }

    #[test]
    fn trailing_prose_is_for_the_agent() {
        for m in [
            "`sudo whoami` = root",
            "`git config --global credential.helper` != 'store'",
        ] {
            let (_, v) = split_verify(&format!("d | Verify: CLI: {m}"));
            let v = v.unwrap();
            assert_eq!(v.code, None, "{m}");
            assert!(
                matches!(v.how(&VerifyTypes::default()), HowVerified::Agent { why } if why.contains("prose"))
            );
        }
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
