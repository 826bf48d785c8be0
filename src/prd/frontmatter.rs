//! The YAML front matter: where it is, its typed fields (read-only, through a real YAML
//! parser), and surgical edits of one top-level key that leave every other byte alone.

use std::ops::Range;

use serde_json::Value as Json;

/// Where the front matter sits in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The YAML text between the two `---` lines (byte range in the file).
    pub content: Range<usize>,
    /// Byte offset where the closing `---` line starts.
    pub close_start: usize,
    /// Byte offset of the first body byte (after the closing line and its line ending).
    pub body_start: usize,
    /// The line ending used by the opening line (`\n` or `\r\n`).
    pub eol: &'static str,
}

/// An error in the front matter, with the 1-based line it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FmError {
    pub line: usize,
    pub message: String,
}

/// Finds the front matter: a `---` line at the very start (after an optional BOM), closed by a
/// `---` line. `Ok(None)` when the file has none.
pub fn locate(text: &str) -> Result<Option<Span>, FmError> {
    let start = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let rest = &text[start..];
    let eol = if rest.starts_with("---\r\n") {
        "\r\n"
    } else if rest.starts_with("---\n") {
        "\n"
    } else {
        return Ok(None);
    };
    let content_start = start + 3 + eol.len();
    let mut pos = content_start;
    while pos < text.len() {
        let line_end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
        let line = text[pos..line_end].trim_end_matches('\r');
        if line == "---" {
            let body_start = (line_end + 1).min(text.len());
            return Ok(Some(Span {
                content: content_start..pos,
                close_start: pos,
                body_start,
                eol,
            }));
        }
        pos = line_end + 1;
    }
    Err(FmError {
        line: 1,
        message: "the front matter opened here is never closed by a `---` line".into(),
    })
}

/// One top-level `key: value` line of the front matter, found by a line scan.
#[derive(Debug, Clone)]
struct KeyLine {
    key: String,
    /// 1-based line number in the file.
    line: usize,
    /// The value's bytes on the key line (without a trailing comment or spaces).
    value: Range<usize>,
    /// End of the key line's content (before `\r\n`/`\n`).
    content_end: usize,
    /// End of the key line including its line ending.
    line_end: usize,
    /// End of the value's continuation lines (block lists, indented blocks).
    block_end: usize,
}

fn scan_keys(text: &str, span: &Span) -> Vec<KeyLine> {
    let mut out: Vec<KeyLine> = Vec::new();
    let first_line = text[..span.content.start].matches('\n').count() + 1;
    let mut lines: Vec<(usize, usize, usize)> = Vec::new(); // (start, content_end, line_end)
    let mut pos = span.content.start;
    while pos < span.content.end {
        let nl = text[pos..span.content.end]
            .find('\n')
            .map_or(span.content.end, |i| pos + i);
        let line_end = (nl + 1).min(span.content.end);
        let content_end = if nl > pos && text.as_bytes()[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        lines.push((pos, content_end, line_end));
        pos = line_end;
    }
    let mut i = 0;
    while i < lines.len() {
        let (start, content_end, line_end) = lines[i];
        let line = &text[start..content_end];
        let Some((key, after_colon)) = key_of(line) else {
            i += 1;
            continue;
        };
        let value_start = start + after_colon + leading_ws(&line[after_colon..]);
        let value_end = start + after_colon + value_end_in(&line[after_colon..]);
        let value_end = value_end.max(value_start);
        let value_empty = value_start == value_end;
        // Continuation lines: indented, or `- item` at column 0 under an empty value; blank lines
        // only when more continuation follows.
        let mut block_end = line_end;
        let mut j = i + 1;
        while j < lines.len() {
            let (s, ce, le) = lines[j];
            let l = &text[s..ce];
            if l.trim().is_empty() {
                j += 1;
                continue;
            }
            let indented = l.starts_with(' ') || l.starts_with('\t');
            let dash_item = value_empty && (l == "-" || l.starts_with("- "));
            if indented || dash_item {
                block_end = le;
                j += 1;
            } else {
                break;
            }
        }
        out.push(KeyLine {
            key,
            line: first_line + i,
            value: value_start..value_end,
            content_end,
            line_end,
            block_end,
        });
        // Skip past the block we consumed.
        while i + 1 < lines.len() && lines[i + 1].0 < block_end {
            i += 1;
        }
        i += 1;
    }
    out
}

/// The key of a top-level mapping line and the offset just after its `:`.
fn key_of(line: &str) -> Option<(String, usize)> {
    let first = line.chars().next()?;
    if matches!(
        first,
        ' ' | '\t' | '#' | '-' | '[' | '{' | '}' | ']' | '%' | '&' | '*' | '!'
    ) {
        return None;
    }
    if first == '"' || first == '\'' {
        let close = line[1..].find(first)? + 1;
        let after = &line[close + 1..];
        let colon_rel = after.find(':')?;
        if !after[..colon_rel].trim().is_empty() {
            return None;
        }
        let colon = close + 1 + colon_rel;
        if !is_value_sep(&line[colon + 1..]) {
            return None;
        }
        return Some((line[1..close].to_string(), colon + 1));
    }
    let mut search = 0;
    while let Some(rel) = line[search..].find(':') {
        let colon = search + rel;
        if is_value_sep(&line[colon + 1..]) {
            let key = line[..colon].trim_end();
            if key.is_empty() || key.contains(" #") {
                return None;
            }
            return Some((key.to_string(), colon + 1));
        }
        search = colon + 1;
    }
    None
}

fn is_value_sep(after: &str) -> bool {
    after.is_empty() || after.starts_with(' ') || after.starts_with('\t')
}

fn leading_ws(s: &str) -> usize {
    s.len() - s.trim_start_matches([' ', '\t']).len()
}

/// Where a value on its line ends: before a ` # comment` outside quotes, then trailing spaces.
fn value_end_in(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut in_single = false;
    let mut in_double = false;
    let mut end = s.len();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_double {
            if b == b'\\' {
                i += 2;
                continue;
            }
            if b == b'"' {
                in_double = false;
            }
        } else if in_single {
            if b == b'\'' {
                in_single = false;
            }
        } else if b == b'"' {
            in_double = true;
        } else if b == b'\'' {
            in_single = true;
        } else if b == b'#' && (i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t') {
            end = i;
            break;
        }
        i += 1;
    }
    s[..end].trim_end_matches([' ', '\t']).len()
}

/// A value to write into the front matter.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(u64),
    /// A string, written plain when YAML reads it back as the same string, else double-quoted.
    Str(String),
    /// A string always written double-quoted (PAI quotes `verification_summary`).
    Quoted(String),
    /// A flow list `[a, b]`.
    List(Vec<String>),
}

impl Value {
    pub fn str(s: impl Into<String>) -> Self {
        Value::Str(s.into())
    }

    /// The YAML text of the value.
    pub fn render(&self) -> String {
        match self {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Int(n) => n.to_string(),
            Value::Str(s) => scalar(s, false),
            Value::Quoted(s) => quoted(s),
            Value::List(items) => {
                let parts: Vec<String> = items.iter().map(|s| scalar(s, true)).collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }
}

fn quoted(s: &str) -> String {
    // A JSON string is a valid YAML double-quoted scalar.
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn scalar(s: &str, in_flow: bool) -> String {
    if plain_ok(s, in_flow) {
        s.to_string()
    } else {
        quoted(s)
    }
}

fn plain_ok(s: &str, in_flow: bool) -> bool {
    if s.is_empty() || s.trim() != s {
        return false;
    }
    let first = s.chars().next().unwrap_or(' ');
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return false;
    }
    if s.chars().any(|c| c.is_control()) {
        return false;
    }
    if in_flow && s.contains([',', '[', ']', '{', '}']) {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "true" | "false" | "null" | "~" | "yes" | "no" | "on" | "off" | "y" | "n"
    ) {
        return false;
    }
    // Dates stay plain, as PAI writes them; anything number-like is quoted.
    let is_date = s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if is_date {
        return true;
    }
    if s.parse::<f64>().is_ok() || lower.starts_with("0x") || lower.starts_with("0o") {
        return false;
    }
    if first.is_ascii_digit() || first == '.' || first == '+' {
        // Sexagesimal, version-like or otherwise number-ish strings: quote to be safe.
        return s.bytes().any(|b| b.is_ascii_alphabetic()) && !s.contains(':');
    }
    true
}

/// Sets one top-level key: replaces its value in place (keeping a trailing comment and dropping
/// the old value's continuation lines), or adds `key: value` just before the closing `---`.
/// Returns the new text; every other byte is unchanged.
pub fn set_key(text: &str, span: &Span, key: &str, value: &Value) -> String {
    let rendered = value.render();
    let keys = scan_keys(text, span);
    if let Some(k) = keys.iter().find(|k| k.key == key) {
        let mut out = String::with_capacity(text.len() + rendered.len());
        out.push_str(&text[..k.value.start]);
        // `key:` directly followed by the end of the line: add the separating space.
        if text[..k.value.start].ends_with(':') {
            out.push(' ');
        }
        out.push_str(&rendered);
        let comment = &text[k.value.end..k.content_end];
        if !comment.is_empty() {
            if k.value.is_empty() && !comment.starts_with([' ', '\t']) {
                out.push(' ');
            }
            out.push_str(comment);
        }
        out.push_str(&text[k.content_end..k.line_end]);
        out.push_str(&text[k.block_end..]);
        out
    } else {
        let mut out = String::with_capacity(text.len() + key.len() + rendered.len() + 4);
        out.push_str(&text[..span.close_start]);
        // A front matter whose last line lacks a line ending cannot happen: the closing `---`
        // starts a line. The inserted key takes the file's own line ending.
        out.push_str(key);
        out.push_str(": ");
        out.push_str(&rendered);
        out.push_str(span.eol);
        out.push_str(&text[span.close_start..]);
        out
    }
}

/// Typed view of the front matter with PAI's defaults for missing keys.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct FrontMatter {
    pub id: Option<String>,
    pub status: String,
    pub mode: Option<String>,
    pub effort_level: String,
    pub created: Option<String>,
    pub updated: Option<String>,
    pub iteration: u64,
    #[serde(rename = "maxIterations")]
    pub max_iterations: u64,
    #[serde(rename = "loopStatus")]
    pub loop_status: Option<String>,
    pub last_phase: Option<String>,
    pub failing_criteria: Vec<String>,
    pub verification_summary: Option<String>,
    pub parent: Option<String>,
    pub children: Vec<String>,
}

pub const DEFAULT_MAX_ITERATIONS: u64 = 128;

impl FrontMatter {
    pub fn defaults() -> Self {
        FrontMatter {
            status: "DRAFT".into(),
            effort_level: "Standard".into(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            ..Default::default()
        }
    }
}

/// Reads the typed fields. Unknown keys are ignored here (and kept in the file).
pub fn read(text: &str, span: &Span) -> Result<FrontMatter, FmError> {
    let yaml = &text[span.content.clone()];
    let first_line = text[..span.content.start].matches('\n').count() + 1;
    let mut fm = FrontMatter::defaults();
    if yaml.trim().is_empty() {
        return Ok(fm);
    }
    let doc: Json = serde_saphyr::from_str(yaml).map_err(|e| {
        let msg = e.to_string();
        FmError {
            line: first_line + yaml_error_line(&msg).unwrap_or(1) - 1,
            message: format!(
                "the front matter is not valid YAML: {}",
                msg.lines().next().unwrap_or("")
            ),
        }
    })?;
    let map = match doc {
        Json::Object(map) => map,
        Json::Null => return Ok(fm),
        _ => {
            return Err(FmError {
                line: first_line,
                message: "the front matter must be a YAML mapping of `key: value` lines".into(),
            });
        }
    };
    let keys = scan_keys(text, span);
    let line_of = |key: &str| {
        keys.iter()
            .find(|k| k.key == key)
            .map_or(first_line, |k| k.line)
    };
    let text_of = |key: &str| map.get(key).and_then(scalar_text);
    fm.id = text_of("id");
    if let Some(s) = text_of("status") {
        fm.status = s;
    }
    fm.mode = text_of("mode");
    if let Some(s) = text_of("effort_level").or_else(|| text_of("sla_tier")) {
        fm.effort_level = s;
    }
    fm.created = text_of("created");
    fm.updated = text_of("updated");
    for (key, slot) in [
        ("iteration", &mut fm.iteration),
        ("maxIterations", &mut fm.max_iterations),
    ] {
        match map.get(key) {
            None | Some(Json::Null) => {}
            Some(v) => {
                *slot = whole_number(v).ok_or_else(|| FmError {
                    line: line_of(key),
                    message: format!(
                        "`{key}` must be a whole number, found `{}`",
                        scalar_text(v).unwrap_or_else(|| v.to_string())
                    ),
                })?;
            }
        }
    }
    fm.loop_status = text_of("loopStatus");
    fm.last_phase = text_of("last_phase");
    fm.failing_criteria = list_of(map.get("failing_criteria"));
    fm.verification_summary = text_of("verification_summary");
    fm.parent = text_of("parent");
    fm.children = list_of(map.get("children"));
    Ok(fm)
}

fn yaml_error_line(msg: &str) -> Option<usize> {
    // serde-saphyr reports "line N" (1-based within the YAML text).
    let idx = msg.find("line ")?;
    let digits: String = msg[idx + 5..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok().filter(|n| *n >= 1)
}

fn scalar_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn whole_number(v: &Json) -> Option<u64> {
    match v {
        Json::Number(n) => n.as_u64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn list_of(v: Option<&Json>) -> Vec<String> {
    match v {
        Some(Json::Array(items)) => items.iter().filter_map(scalar_text).collect(),
        Some(Json::String(s)) if !s.trim().is_empty() => s
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(text: &str, key: &str, v: Value) -> String {
        let span = locate(text).unwrap().unwrap();
        set_key(text, &span, key, &v)
    }

    #[test]
    fn replaces_in_place_keeping_comment() {
        let t = "---\nid: x\nstatus: DRAFT   # a comment\nz: 1\n---\nbody\n";
        assert_eq!(
            edit(t, "status", Value::str("COMPLETE")),
            "---\nid: x\nstatus: COMPLETE   # a comment\nz: 1\n---\nbody\n"
        );
    }

    #[test]
    fn replaces_block_list_with_flow_list() {
        let t = "---\r\nfailing_criteria:\r\n  - A\r\n  - B\r\nnext: 1\r\n---\r\n";
        assert_eq!(
            edit(t, "failing_criteria", Value::List(vec!["ISC-1".into()])),
            "---\r\nfailing_criteria: [ISC-1]\r\nnext: 1\r\n---\r\n"
        );
        let t = "---\nfailing_criteria:\n- A\n- B\nnext: 1\n---\n";
        assert_eq!(
            edit(t, "failing_criteria", Value::List(vec![])),
            "---\nfailing_criteria: []\nnext: 1\n---\n"
        );
    }

    #[test]
    fn adds_missing_key_before_close() {
        let t = "---\r\nid: x\r\n---\r\nbody";
        assert_eq!(
            edit(t, "loopStatus", Value::str("running")),
            "---\r\nid: x\r\nloopStatus: running\r\n---\r\nbody"
        );
    }

    #[test]
    fn empty_value_with_comment() {
        let t = "---\nparent: # c\nx: 1\n---\n";
        assert_eq!(
            edit(t, "parent", Value::Null),
            "---\nparent: null # c\nx: 1\n---\n"
        );
    }

    #[test]
    fn hash_inside_quotes_is_not_a_comment() {
        let t = "---\nid: \"a #b\" # real\n---\n";
        assert_eq!(
            edit(t, "id", Value::str("new")),
            "---\nid: new # real\n---\n"
        );
    }

    #[test]
    fn quoting_rules() {
        assert_eq!(Value::str("COMPLETE").render(), "COMPLETE");
        assert_eq!(Value::str("2026-11-30").render(), "2026-11-30");
        assert_eq!(Value::str("null").render(), "\"null\"");
        assert_eq!(Value::str("12").render(), "\"12\"");
        assert_eq!(Value::str("a: b").render(), "\"a: b\"");
        assert_eq!(Value::str("- x").render(), "\"- x\"");
        assert_eq!(Value::Quoted("3/5".into()).render(), "\"3/5\"");
        assert_eq!(
            Value::List(vec!["ISC-A-1".into(), "a,b".into()]).render(),
            "[ISC-A-1, \"a,b\"]"
        );
    }

    #[test]
    fn rendered_values_read_back() {
        for s in [
            "null",
            "12",
            "a: b",
            "x # y",
            "[a]",
            "'q'",
            "\"d\"",
            "tab\there",
            "ü",
        ] {
            let t = format!("---\nid: {}\n---\n", Value::str(s).render());
            let span = locate(&t).unwrap().unwrap();
            assert_eq!(read(&t, &span).unwrap().id.as_deref(), Some(s), "{t}");
        }
        let t = format!(
            "---\nfailing_criteria: {}\n---\n",
            Value::List(vec!["a,b".into(), "c".into()]).render()
        );
        let span = locate(&t).unwrap().unwrap();
        assert_eq!(read(&t, &span).unwrap().failing_criteria, vec!["a,b", "c"]);
    }

    #[test]
    fn unclosed_front_matter_is_an_error() {
        assert_eq!(locate("---\nid: x\n").unwrap_err().line, 1);
        assert_eq!(locate("# no front matter\n").unwrap(), None);
    }

    #[test]
    fn bad_iteration_names_its_line() {
        let t = "---\nid: x\niteration: abc\n---\n";
        let span = locate(t).unwrap().unwrap();
        let e = read(t, &span).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("iteration"), "{}", e.message);
    }
}
