//! A worker's log as people read it (`prdloop logs`, the dashboard): each line of the agent's
//! stream rendered by its shape — claude's stream-json (also amp's and cursor's), codex's
//! `exec --json`, gemini's `stream-json`, opencode's `--format json` — `[stderr] ` lines, and
//! plain text for `command` agents. What the agent wrote is shown without control characters.

use serde_json::Value;

use crate::report::{bold, dim, green, red, yellow};
use crate::text::one_line;

/// The text of a tool call's most telling input: a command, a path, a pattern.
fn tool_input(input: &Value) -> String {
    for key in [
        "command",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "description",
    ] {
        if let Some(v) = input.get(key).and_then(Value::as_str) {
            return one_line(v, 160);
        }
    }
    one_line(&input.to_string(), 160)
}

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

/// One line of a worker log (claude's stream-json, or `[stderr] ` lines, or plain text) as
/// people read it; `None` for lines that say nothing to a reader.
pub fn render_line(line: &str) -> Option<String> {
    // What the agent wrote is shown without its control characters (`--raw` has them).
    if let Some(err) = line.strip_prefix("[stderr] ") {
        return Some(dim(&format!("stderr: {}", crate::text::visible(err))));
    }
    let Ok(mut v) = serde_json::from_str::<Value>(line) else {
        return (!line.trim().is_empty()).then(|| crate::text::visible(line));
    };
    scrub(&mut v);
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
        // gemini's `result` has a status, not claude's subtype.
        "result" if v.get("status").is_some() && v.get("subtype").is_none() => {
            let head = format!("── result: {}", str_of("status"));
            Some(if str_of("status") == "success" {
                green(&head)
            } else {
                red(&head)
            })
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
        _ => other_agent(&v, kind),
    }
}

/// A line of another agent's stream (codex `exec --json`, gemini `stream-json`, opencode
/// `--format json`; field names as in `tests/fixtures/<agent>/`) as people read it.
fn other_agent(v: &Value, kind: &str) -> Option<String> {
    let at = |path: &str| v.pointer(path).and_then(Value::as_str).unwrap_or("");
    let result = |status: &str, output: &str| {
        let mark = if matches!(status, "" | "success" | "completed" | "0") {
            dim("◀")
        } else {
            red(&format!("◀ {status}:"))
        };
        let lines: Vec<&str> = output.lines().collect();
        let more = lines.len().saturating_sub(5);
        let mut shown = format!(
            "  {mark} {}",
            lines
                .iter()
                .take(5)
                .copied()
                .collect::<Vec<_>>()
                .join("\n  ")
        );
        if more > 0 {
            shown.push_str(&format!("\n  … {more} more line(s)"));
        }
        shown
    };
    match kind {
        // codex
        "thread.started" => Some(dim(&format!("── session {}", at("/thread_id")))),
        "item.completed" => match at("/item/type") {
            "agent_message" => Some(at("/item/text").trim_end().to_string()),
            "reasoning" => Some(dim("(thinking)")),
            "command_execution" => {
                let exit = v
                    .pointer("/item/exit_code")
                    .map_or_else(String::new, Value::to_string);
                Some(format!(
                    "{} {}\n{}",
                    bold("▶ shell:"),
                    at("/item/command"),
                    result(&exit, at("/item/aggregated_output"))
                ))
            }
            "file_change" => {
                let paths: Vec<&str> = v
                    .pointer("/item/changes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("path").and_then(Value::as_str))
                    .collect();
                Some(format!("{} {}", bold("▶ edit:"), paths.join(", ")))
            }
            "error" => Some(yellow(&format!("warning: {}", at("/item/message")))),
            _ => None,
        },
        "turn.completed" => Some(dim(&format!(
            "── turn done · tokens {} in, {} out",
            v.pointer("/usage/input_tokens")
                .map_or_else(String::new, Value::to_string),
            v.pointer("/usage/output_tokens")
                .map_or_else(String::new, Value::to_string)
        ))),
        "turn.failed" => Some(red(&format!("turn failed: {}", at("/error/message")))),
        "error" if v.get("message").is_some() => Some(red(&format!("error: {}", at("/message")))),
        // gemini
        "init" => Some(dim(&format!(
            "── session {} · model {}",
            at("/session_id"),
            at("/model")
        ))),
        "message" if at("/role") == "assistant" => Some(at("/content").trim_end().to_string()),
        "tool_use" if v.get("tool_name").is_some() => {
            let params = v.get("parameters").unwrap_or(&Value::Null);
            Some(format!(
                "{} {}",
                bold(&format!("▶ {}:", at("/tool_name"))),
                tool_input(params)
            ))
        }
        "tool_result" => Some(result(at("/status"), at("/output"))),
        // opencode
        "tool_use" => {
            let input = v.pointer("/part/state/input").unwrap_or(&Value::Null);
            Some(format!(
                "{} {}\n{}",
                bold(&format!("▶ {}:", at("/part/tool"))),
                tool_input(input),
                result(at("/part/state/status"), at("/part/state/output"))
            ))
        }
        "text" => Some(at("/part/text").trim_end().to_string()).filter(|t| !t.is_empty()),
        _ => None,
    }
}

/// Every string in a JSON value, without control characters other than newlines and tabs.
fn scrub(v: &mut Value) {
    match v {
        Value::String(s) if s.chars().any(char::is_control) => *s = crate::text::visible(s),
        Value::Array(a) => a.iter_mut().for_each(scrub),
        Value::Object(o) => o.values_mut().for_each(scrub),
        _ => {}
    }
}

/// Renders a whole log (for tests and `--raw` off).
pub fn render(text: &str) -> String {
    text.lines()
        .filter_map(render_line)
        .map(|l| format!("{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> String {
        let mut out = anstream::StripStream::new(Vec::new());
        std::io::Write::write_all(&mut out, s.as_bytes()).unwrap();
        String::from_utf8(out.into_inner()).unwrap()
    }

    #[test]
    fn a_recorded_claude_stream_reads_as_a_story() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/claude/stream-json-bash-tool.jsonl"
        ))
        .unwrap();
        insta::assert_snapshot!(plain(&render(&text)));
    }

    #[test]
    fn an_agents_escape_sequences_are_not_rendered() {
        let line = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi\u001b[2J\u001b[?25l\u0007 there\nnext"}]}}"#;
        let shown = render_line(line).unwrap();
        assert_eq!(shown, "hi[2J[?25l there\nnext");
        assert_eq!(
            render_line("[stderr] x\u{1b}]0;title\u{7}y").map(|s| plain(&s)),
            Some("stderr: x]0;titley".to_string())
        );
    }

    #[test]
    fn codex_gemini_and_opencode_logs_read_as_what_the_agent_did() {
        for fixture in [
            "codex/json-tool.jsonl",
            "gemini/stream-json-tool.jsonl",
            "opencode/json-tool.jsonl",
        ] {
            let text = std::fs::read_to_string(format!(
                "{}/tests/fixtures/{fixture}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap();
            let shown = plain(&render(&text));
            assert!(shown.contains("echo made > made.txt"), "{fixture}: {shown}");
            assert!(shown.contains("RESULT: ISC-1 PASS"), "{fixture}: {shown}");
            assert!(shown.lines().count() >= 3, "{fixture}: {shown}");
        }
    }

    #[test]
    fn stderr_plain_and_silent_lines() {
        assert_eq!(
            plain(&render_line("[stderr] boom").unwrap()),
            "stderr: boom"
        );
        assert_eq!(render_line("not json").as_deref(), Some("not json"));
        assert_eq!(render_line(r#"{"type":"rate_limit_event"}"#), None);
    }
}
