//! A line of claude's stream-json (amp's and cursor's too) as people read it in the log.

use serde_json::Value;

use crate::backend::lines::tool_input;
use crate::report::{bold, dim, green, red, yellow};

fn tool_result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// One JSON line; `None` for lines that say nothing to a reader.
pub(super) fn line(v: &Value) -> Option<String> {
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let str_of = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or("");
    match kind {
        "system" if str_of("subtype") == "init" => Some(dim(&format!(
            "── session {} · model {} · in {}",
            str_of("session_id"),
            str_of("model"),
            str_of("cwd")
        ))),
        "system" if str_of("subtype") == "api_retry" => Some(yellow(&format!(
            "retrying the model API (attempt {}, status {})",
            v.get("attempt").map_or_else(String::new, Value::to_string),
            v.get("error_status")
                .map_or_else(String::new, Value::to_string)
        ))),
        "assistant" => {
            let blocks = v.pointer("/message/content")?.as_array()?;
            let mut out = Vec::new();
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => out.push(b.get("text")?.as_str()?.trim_end().to_string()),
                    Some("tool_use") => out.push(format!(
                        "{} {}",
                        bold(&format!("▶ {}:", b.get("name")?.as_str()?)),
                        tool_input(b.get("input").unwrap_or(&Value::Null))
                    )),
                    Some("thinking") => out.push(dim("(thinking)")),
                    _ => {}
                }
            }
            (!out.is_empty()).then(|| out.join("\n"))
        }
        "user" => {
            let blocks = v.pointer("/message/content")?.as_array()?;
            let mut out = Vec::new();
            for b in blocks {
                if b.get("type").and_then(Value::as_str) != Some("tool_result") {
                    continue;
                }
                let text = tool_result_text(b.get("content").unwrap_or(&Value::Null));
                let lines: Vec<&str> = text.lines().collect();
                let shown = lines
                    .iter()
                    .take(5)
                    .copied()
                    .collect::<Vec<_>>()
                    .join("\n  ");
                let more = lines.len().saturating_sub(5);
                let tail = if more > 0 {
                    format!("\n  … {more} more line(s)")
                } else {
                    String::new()
                };
                let mark = if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                    red("◀ error:")
                } else {
                    dim("◀")
                };
                out.push(format!("  {mark} {shown}{tail}"));
            }
            (!out.is_empty()).then(|| out.join("\n"))
        }
        "result" => {
            let error = v.get("is_error").and_then(Value::as_bool) == Some(true);
            let cost = v
                .get("total_cost_usd")
                .and_then(Value::as_f64)
                .map(|c| format!(" · ${c:.4}"))
                .unwrap_or_default();
            let turns = v
                .get("num_turns")
                .and_then(Value::as_u64)
                .map(|n| format!(" · {n} turn(s)"))
                .unwrap_or_default();
            let head = format!("── result: {}{turns}{cost}", str_of("subtype"));
            let head = if error { red(&head) } else { green(&head) };
            let text = v
                .get("result")
                .and_then(Value::as_str)
                .map(|t| format!("\n{}", t.trim_end()))
                .unwrap_or_default();
            Some(format!("{head}{text}"))
        }
        _ => None,
    }
}
