//! A JSON reader that keeps where each value sits: every value carries the byte range of its
//! text, so a writer can change one value in place and leave every other byte as it was
//! (formatting, key order, indentation, the final newline). Strict JSON (RFC 8259): what it
//! refuses is an error at a byte offset.

use std::ops::Range;

/// A JSON value and the byte range of its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub span: Range<usize>,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// A number as written.
    Number(String),
    String(String),
    Array(Vec<Node>),
    /// Members in the order written.
    Object(Vec<(String, Node)>),
}

/// Where and why a text is not JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub offset: usize,
    pub message: String,
}

impl Node {
    /// The member `key` of an object (the last one, as JSON parsers do, when written twice).
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            Value::Object(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Node]> {
        match &self.value {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[(String, Node)]> {
        match &self.value {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// A string as is, a number as written; else `None` (ids are written either way).
    pub fn as_id(&self) -> Option<String> {
        match &self.value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.clone()),
            _ => None,
        }
    }
}

/// Parses a whole text as one JSON value (whitespace around it allowed; a BOM is not).
pub fn parse(text: &str) -> Result<Node, JsonError> {
    let mut p = P {
        s: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("text after the JSON value"));
    }
    Ok(v)
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

/// How deep arrays and objects may nest (a hostile file must not overflow the stack).
const MAX_DEPTH: usize = 256;

impl P<'_> {
    fn err(&self, m: &str) -> JsonError {
        JsonError {
            offset: self.i,
            message: m.to_string(),
        }
    }

    fn ws(&mut self) {
        while self
            .s
            .get(self.i)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Result<Node, JsonError> {
        let start = self.i;
        let value = match self.s.get(self.i) {
            None => return Err(self.err("the text ends where a value should be")),
            Some(b'{') => self.nested(b'}', true)?,
            Some(b'[') => self.nested(b']', false)?,
            Some(b'"') => Value::String(self.string()?),
            Some(b't') => self.word("true", Value::Bool(true))?,
            Some(b'f') => self.word("false", Value::Bool(false))?,
            Some(b'n') => self.word("null", Value::Null)?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            Some(_) => return Err(self.err("a value was expected here")),
        };
        Ok(Node {
            span: start..self.i,
            value,
        })
    }

    fn word(&mut self, w: &str, v: Value) -> Result<Value, JsonError> {
        if self.s[self.i..].starts_with(w.as_bytes()) {
            self.i += w.len();
            Ok(v)
        } else {
            Err(self.err("a value was expected here"))
        }
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.i;
        if self.s[self.i] == b'-' {
            self.i += 1;
        }
        let digits = |p: &mut Self| {
            let from = p.i;
            while p.s.get(p.i).is_some_and(u8::is_ascii_digit) {
                p.i += 1;
            }
            p.i - from
        };
        let int = self.i;
        if digits(self) == 0 {
            return Err(self.err("a number needs digits"));
        }
        if self.s[int] == b'0' && self.i - int > 1 {
            self.i = int;
            return Err(self.err("a number may not start with 0"));
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return Err(self.err("digits must follow the decimal point"));
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(self.err("digits must follow the exponent"));
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).expect("ASCII");
        Ok(Value::Number(text.to_string()))
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.i += 1; // the opening quote
        let mut out = String::new();
        loop {
            let from = self.i;
            while self
                .s
                .get(self.i)
                .is_some_and(|&b| b != b'"' && b != b'\\' && b >= 0x20)
            {
                self.i += 1;
            }
            // The input is a &str, and the run stops only at ASCII bytes: a whole UTF-8 run.
            out.push_str(std::str::from_utf8(&self.s[from..self.i]).expect("UTF-8"));
            match self.s.get(self.i) {
                None => return Err(self.err("a string is not closed")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = match self.s.get(self.i) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.i += 1;
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if !self.s[self.i..].starts_with(b"\\u") {
                                    return Err(self.err("a lone surrogate in a \\u escape"));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err("a lone surrogate in a \\u escape"));
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            out.push(
                                char::from_u32(code)
                                    .ok_or_else(|| self.err("a lone surrogate in a \\u escape"))?,
                            );
                            continue;
                        }
                        _ => return Err(self.err("an unknown escape in a string")),
                    };
                    out.push(c);
                    self.i += 1;
                }
                Some(_) => return Err(self.err("a control character inside a string")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.err("\\u must be followed by four hex digits"))?;
        self.i += 4;
        Ok(h)
    }

    fn nested(&mut self, close: u8, object: bool) -> Result<Value, JsonError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("arrays and objects nest too deep"));
        }
        self.i += 1;
        let mut items = Vec::new();
        let mut members = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&close) {
            self.i += 1;
        } else {
            loop {
                self.ws();
                if object {
                    if self.s.get(self.i) != Some(&b'"') {
                        return Err(self.err("an object's key must be a string"));
                    }
                    let key = self.string()?;
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return Err(self.err("`:` must follow an object's key"));
                    }
                    self.i += 1;
                    self.ws();
                    members.push((key, self.value()?));
                } else {
                    items.push(self.value()?);
                }
                self.ws();
                match self.s.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(&b) if b == close => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(self.err("`,` or the closing bracket was expected")),
                }
            }
        }
        self.depth -= 1;
        Ok(if object {
            Value::Object(members)
        } else {
            Value::Array(items)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_each_value() {
        let t = "{\n  \"a\": [1, -2.5e3, \"x\\n\\u00e9\\ud83d\\ude00\"],\n  \"b\": false,\n  \"b\": true\n}\n";
        let v = parse(t).unwrap();
        let a = v.get("a").unwrap().as_array().unwrap();
        assert_eq!(&t[a[1].span.clone()], "-2.5e3");
        assert_eq!(a[2].as_str(), Some("x\né😀"));
        let b = v.get("b").unwrap();
        assert_eq!((&t[b.span.clone()], &b.value), ("true", &Value::Bool(true)));
        assert_eq!(v.span, 0..t.len() - 1);
    }

    #[test]
    fn what_is_not_json_is_an_error_at_its_offset() {
        for (t, at) in [
            ("{\"a\": 1,}", 8),
            ("[01]", 1),
            ("{\"a\" 1}", 5),
            ("\"a", 2),
            ("[1] x", 4),
            ("", 0),
            ("{'a': 1}", 1),
        ] {
            assert_eq!(parse(t).unwrap_err().offset, at, "{t:?}");
        }
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(parse(&deep).unwrap_err().message.contains("deep"));
    }
}
