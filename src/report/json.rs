//! What `--json` writes, for every command: the one sink, so that every line (a run's events,
//! `undo`, `audit`, `answer`) and every document (`plan`, `verify`, `merge`, `status`,
//! `clean`) carries `"version"`. Each command's report is a typed value that carries its own
//! [`Version`] ([`push_report`], [`push_report_line`]); a run's events get theirs here
//! ([`event`]). The version is of the shapes: a new field keeps it; a field renamed, retyped or
//! removed raises it.

use serde_json::Value;

/// The version of every `--json` shape.
pub const VERSION: u64 = 2;

/// A report's `"version"` field: always [`VERSION`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Version;

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(VERSION)
    }
}

/// `value` with `"version"`, when it is an object.
fn versioned(mut value: Value) -> Value {
    if let Value::Object(map) = &mut value {
        map.insert("version".into(), VERSION.into());
    }
    value
}

/// One event as one line of JSON Lines, added to `out`.
fn push_line(out: &mut String, value: Value) {
    out.push_str(&versioned(value).to_string());
    out.push('\n');
}

/// One event as one line of JSON Lines, to stdout now (a run's events are written as they
/// happen).
fn line(value: Value) -> std::io::Result<()> {
    let mut out = String::new();
    push_line(&mut out, value);
    super::stdout(&out)
}

/// One typed event (a run's `--json` events: `run::json_event::JsonEvent`) as one line, to
/// stdout now, with `"version"`.
pub fn event(e: &impl serde::Serialize) -> std::io::Result<()> {
    line(serde_json::to_value(e).map_err(std::io::Error::other)?)
}

/// A typed report (it carries its own [`Version`]) as one line of JSON Lines, added to `out`.
pub fn push_report_line(
    out: &mut String,
    report: &impl serde::Serialize,
) -> serde_json::Result<()> {
    out.push_str(&serde_json::to_string(report)?);
    out.push('\n');
    Ok(())
}

/// A typed report (it carries its own [`Version`]), pretty-printed, added to `out`.
pub fn push_report(out: &mut String, report: &impl serde::Serialize) -> serde_json::Result<()> {
    out.push_str(&serde_json::to_string_pretty(report)?);
    out.push('\n');
    Ok(())
}

/// A warning as a `--json` report gives it: an object of its typed fields, `kind` (camelCase)
/// first, as the type's own derive writes them (`#[serde(remote = "Self", tag = "kind")]`),
/// with `message`, the text a person reads, beside them.
pub fn warning<S: serde::Serializer>(
    fields: serde_json::Result<Value>,
    message: String,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    use serde::ser::Error;
    let mut v = fields.map_err(S::Error::custom)?;
    match &mut v {
        Value::Object(map) => {
            map.insert("message".into(), message.into());
        }
        _ => return Err(S::Error::custom("a warning serialises as an object")),
    }
    v.serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_carries_the_version() {
        assert_eq!(versioned(json!({"a": 1}))["version"], VERSION);
        let mut out = String::new();
        push_line(&mut out, json!({"event": "end"}));
        assert_eq!(
            out,
            format!("{{\"event\":\"end\",\"version\":{VERSION}}}\n")
        );
    }
}
