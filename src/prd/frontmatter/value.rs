//! Values written into the front matter, rendered as YAML that reads back as the same value.

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
    // A fraction such as v4's `progress: 3/5` is a string to YAML: plain, as people write it.
    let is_fraction = s.split_once('/').is_some_and(|(a, b)| {
        !a.is_empty()
            && !b.is_empty()
            && a.bytes().all(|c| c.is_ascii_digit())
            && b.bytes().all(|c| c.is_ascii_digit())
    });
    if is_fraction {
        return true;
    }
    // An ISO 8601 timestamp (`2026-02-24T02:00:00Z`, `…+01:00`) stays plain, as PAI writes it.
    if s.len() > 10
        && s[..10].bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
        && s.as_bytes()[10] == b'T'
        && s[11..]
            .bytes()
            .all(|b| b.is_ascii_digit() || b":.+-Z".contains(&b))
    {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
