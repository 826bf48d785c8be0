//! The front matter's top-level `key: value` lines, found by a line scan (the YAML parser gives
//! values, not byte positions), and surgical edits of one key that leave every other byte alone.

use std::ops::Range;

use super::{Span, Value};

/// One top-level `key: value` line of the front matter, found by a line scan.
#[derive(Debug, Clone)]
pub(super) struct KeyLine {
    pub(super) key: String,
    /// 1-based line number in the file.
    pub(super) line: usize,
    /// The value's bytes on the key line (without a trailing comment or spaces).
    value: Range<usize>,
    /// End of the key line's content (before `\r\n`/`\n`).
    content_end: usize,
    /// End of the key line including its line ending.
    line_end: usize,
    /// End of the value's continuation lines (block lists, indented blocks).
    block_end: usize,
}

pub(super) fn scan_keys(text: &str, span: &Span) -> Vec<KeyLine> {
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

/// Sets one top-level key: replaces its value in place (keeping a trailing comment and dropping
/// the old value's continuation lines), or adds `key: value` just before the closing `---`.
/// A key written more than once gets the value at every occurrence, so none of them disagrees
/// with the value that counts. Returns the new text; every other byte is unchanged.
pub fn set_key(text: &str, span: &Span, key: &str, value: &Value) -> String {
    let rendered = value.render();
    let found: Vec<KeyLine> = scan_keys(text, span)
        .into_iter()
        .filter(|k| k.key == key)
        .collect();
    if found.is_empty() {
        let mut out = String::with_capacity(text.len() + key.len() + rendered.len() + 4);
        out.push_str(&text[..span.close_start]);
        // A front matter whose last line lacks a line ending cannot happen: the closing `---`
        // starts a line. The inserted key takes the file's own line ending.
        out.push_str(key);
        out.push_str(": ");
        out.push_str(&rendered);
        out.push_str(span.eol);
        out.push_str(&text[span.close_start..]);
        return out;
    }
    let mut out = String::with_capacity(text.len() + found.len() * rendered.len());
    let mut copied = 0;
    for k in &found {
        out.push_str(&text[copied..k.value.start]);
        // `key:` directly followed by the end of the line: add the separating space.
        if text[..k.value.start].ends_with(':') {
            out.push(' ');
        }
        out.push_str(
            &in_authors_quotes(value, &text[k.value.clone()]).unwrap_or_else(|| rendered.clone()),
        );
        let comment = &text[k.value.end..k.content_end];
        if !comment.is_empty() {
            if k.value.is_empty() && !comment.starts_with([' ', '\t']) {
                out.push(' ');
            }
            out.push_str(comment);
        }
        out.push_str(&text[k.content_end..k.line_end]);
        copied = k.block_end;
    }
    out.push_str(&text[copied..]);
    out
}

/// A string written over a value the author quoted keeps the author's quotes (`"…"` or
/// `'…'`); `None` when the old value was not quoted or the new one is not a plain string.
fn in_authors_quotes(value: &Value, old: &str) -> Option<String> {
    let (Value::Str(s) | Value::Quoted(s)) = value else {
        return None;
    };
    match old.chars().next()? {
        '"' => Some(Value::Quoted(s.clone()).render()),
        // Single quotes hold anything on one line; a quote is doubled.
        '\'' if !s.chars().any(char::is_control) => Some(format!("'{}'", s.replace('\'', "''"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::locate;
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
    fn a_repeated_key_is_set_everywhere() {
        let t = "---\nphase: build\ntask: x\nphase:   # again\n  - old\nz: 1\n---\n";
        assert_eq!(
            edit(t, "phase", Value::str("verify")),
            "---\nphase: verify\ntask: x\nphase:   verify # again\nz: 1\n---\n"
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
            "---\nid: \"new\" # real\n---\n"
        );
    }

    #[test]
    fn the_authors_quotes_are_kept() {
        let t = "---\nstatus: 'IN_PROGRESS'\nphase: \"build\"\nloopStatus: null\n---\n";
        let t = edit(t, "status", Value::str("it's done"));
        let t = edit(&t, "phase", Value::str("verify"));
        let t = edit(&t, "loopStatus", Value::str("running"));
        assert_eq!(
            t,
            "---\nstatus: 'it''s done'\nphase: \"verify\"\nloopStatus: running\n---\n"
        );
        // Read back: the same strings.
        let doc = crate::prd::Prd::parse(format!("{t}\n# T\n")).unwrap();
        assert_eq!(doc.front.status, "it's done");
    }
}
