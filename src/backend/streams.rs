//! The output streams of the agents other than claude, read into the same [`Outcome`]:
//! codex `exec --json`, gemini `-o stream-json`, opencode `run --format json`, and the plain
//! text of a `command` agent. Amp and cursor print claude-compatible stream-json and go through
//! claude's parser. Field names as the real CLIs print them (see `tests/fixtures/<agent>/`).

use serde_json::Value as Json;

use super::claude::{Outcome, Usage, doing, tool_call};
use super::verdict::result_lines;
use crate::backend::stuck::ToolCall;

/// What a parser remembers between lines besides the outcome itself.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    /// codex: the last `error` event's message (the `Reconnecting...` lines included).
    last_error: Option<String>,
    /// gemini: the assistant deltas since the last tool call.
    answer: String,
    /// opencode: the summed `step_finish.part.cost`.
    cost: f64,
}

fn str_at<'a>(v: &'a Json, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

fn u64_at(v: &Json, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Json::as_u64)
        .unwrap_or(0)
}

/// One line of `codex exec --json`.
pub(super) fn codex(o: &mut Outcome, st: &mut StreamState, e: &Json) {
    match e.get("type").and_then(Json::as_str).unwrap_or("") {
        "thread.started" => {
            o.session_id = str_at(e, &["thread_id"]).map(String::from);
        }
        // `item.completed` with `type: "error"` is a warning (unknown model metadata), not a
        // failure: only agent messages count.
        "item.completed" if str_at(e, &["item", "type"]) == Some("agent_message") => {
            if let Some(t) = str_at(e, &["item", "text"]) {
                o.final_text = Some(t.to_string());
            }
        }
        "turn.completed" => {
            o.has_result = true;
            o.tokens_reported = true;
            o.num_turns = Some(o.num_turns.unwrap_or(0) + 1);
            // `input_tokens` includes the cached ones.
            let input = u64_at(e, &["usage", "input_tokens"]);
            let cached = u64_at(e, &["usage", "cached_input_tokens"]);
            o.usage.add(&Usage {
                input_tokens: input.saturating_sub(cached),
                output_tokens: u64_at(e, &["usage", "output_tokens"]),
                cache_creation_input_tokens: u64_at(e, &["usage", "cache_write_input_tokens"]),
                cache_read_input_tokens: cached,
            });
        }
        "turn.failed" => {
            o.has_result = true;
            o.is_error = true;
            let msg = str_at(e, &["error", "message"])
                .map(String::from)
                .or_else(|| st.last_error.clone())
                .unwrap_or_else(|| "the turn failed".into());
            o.errors.push(msg);
        }
        "error" => {
            if let Some(m) = str_at(e, &["message"]) {
                if m.starts_with("Reconnecting...") {
                    o.api_retries += 1;
                }
                st.last_error = Some(m.to_string());
            }
        }
        _ => {}
    }
}

/// One line of `gemini -o stream-json`.
pub(super) fn gemini(o: &mut Outcome, st: &mut StreamState, e: &Json) {
    match e.get("type").and_then(Json::as_str).unwrap_or("") {
        "init" => o.session_id = str_at(e, &["session_id"]).map(String::from),
        "message" if str_at(e, &["role"]) == Some("assistant") => {
            let c = str_at(e, &["content"]).unwrap_or("");
            if e.get("delta").and_then(Json::as_bool) == Some(true) {
                st.answer.push_str(c);
            } else {
                st.answer = c.to_string();
            }
        }
        // The answer is what the model says after its last tool call.
        "tool_use" | "tool_result" => st.answer.clear(),
        "error" => {
            if let Some(m) = str_at(e, &["message"]) {
                o.errors.push(m.to_string());
            }
        }
        "result" => {
            o.has_result = true;
            o.subtype = str_at(e, &["status"]).map(String::from);
            if o.subtype.as_deref() != Some("success") {
                o.is_error = true;
                let msg = str_at(e, &["error", "message"]).unwrap_or("the run failed");
                o.errors.push(msg.to_string());
            }
            if let Some(s) = e.get("stats") {
                o.tokens_reported = true;
                // `input` is the prompt tokens minus the cached ones.
                o.usage = Usage {
                    input_tokens: u64_at(s, &["input"]),
                    output_tokens: u64_at(s, &["output_tokens"]),
                    cache_creation_input_tokens: 0,
                    cache_read_input_tokens: u64_at(s, &["cached"]),
                };
            }
        }
        _ => {}
    }
}

/// One line of `opencode run --format json`.
pub(super) fn opencode(o: &mut Outcome, st: &mut StreamState, e: &Json) {
    if o.session_id.is_none() {
        o.session_id = str_at(e, &["sessionID"]).map(String::from);
    }
    match e.get("type").and_then(Json::as_str).unwrap_or("") {
        "text" => {
            if let Some(t) = str_at(e, &["part", "text"]) {
                o.final_text = Some(t.to_string());
            }
        }
        "step_finish" => {
            o.has_result = true;
            o.tokens_reported = true;
            o.num_turns = Some(o.num_turns.unwrap_or(0) + 1);
            let t = &e["part"]["tokens"];
            o.usage.add(&Usage {
                input_tokens: u64_at(t, &["input"]),
                output_tokens: u64_at(t, &["output"]),
                cache_creation_input_tokens: u64_at(t, &["cache", "write"]),
                cache_read_input_tokens: u64_at(t, &["cache", "read"]),
            });
            st.cost += e["part"]["cost"].as_f64().unwrap_or(0.0);
            // opencode prints 0 when the model has no price in its config: that is "not
            // known", not "free".
            o.cost_usd = (st.cost > 0.0).then_some(st.cost);
        }
        "error" => {
            o.has_result = true;
            o.is_error = true;
            let data = &e["error"]["data"];
            let msg = str_at(data, &["message"])
                .or_else(|| str_at(e, &["error", "name"]))
                .unwrap_or("opencode reported an error");
            o.errors.push(msg.to_string());
            // The provider's raw answer names the error type (`insufficient_quota`, ...).
            if let Some(body) = str_at(data, &["responseBody"]) {
                o.errors.push(body.to_string());
            }
            o.api_error_status = data["statusCode"]
                .as_u64()
                .and_then(|s| u16::try_from(s).ok());
        }
        _ => {}
    }
}

/// A `command` agent's plain stdout, once it has ended: the final text is the tail of stdout;
/// a `RESULT:` line counts as the agent's result.
pub(super) fn finish_result_lines(o: &mut Outcome) {
    o.has_result = o
        .final_text
        .as_deref()
        .is_some_and(|t| !result_lines(t).is_empty());
}

/// The gemini answer, once the stream has ended.
pub(super) fn finish_gemini(o: &mut Outcome, st: &mut StreamState) {
    if !st.answer.is_empty() {
        o.final_text = Some(std::mem::take(&mut st.answer));
    }
}

/// codex: a stream that stopped without `turn.completed` or `turn.failed` (killed, crashed)
/// keeps its last error message for the classifier.
pub(super) fn finish_codex(o: &mut Outcome, st: &mut StreamState) {
    if !o.has_result
        && let Some(e) = st.last_error.take()
    {
        o.errors.push(e);
    }
}

/// The first of `keys` in `input` that holds text: what a tool call works on.
fn subject<'a>(input: &'a Json, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| input.get(k)?.as_str().filter(|s| !s.trim().is_empty()))
}

const SUBJECT_KEYS: &[&str] = &[
    "command",
    "file_path",
    "filePath",
    "absolute_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
];

/// A shell command as codex gives it (`/bin/bash -lc 'cargo test'`), without the wrapper.
fn unwrap_shell(cmd: &str) -> &str {
    let inner = ["/bin/bash -lc ", "bash -lc ", "/bin/sh -c ", "sh -c "]
        .iter()
        .find_map(|p| cmd.strip_prefix(p))
        .unwrap_or(cmd);
    inner
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .unwrap_or(inner)
}

/// What a line of `codex exec --json` says the agent is doing, and the tool call it is.
pub(super) fn codex_doing(e: &Json) -> Option<(String, Option<ToolCall>)> {
    let started = match str_at(e, &["type"])? {
        "item.started" => true,
        "item.completed" => false,
        _ => return None,
    };
    let item = e.get("item")?;
    // A call counts once: a command when it starts, the others when they are done.
    let call = |label: &String, input: &Json| Some(tool_call("codex", input, label.clone()));
    Some(match str_at(item, &["type"])? {
        "command_execution" if started => {
            let command = str_at(item, &["command"]).map(unwrap_shell);
            let label = doing("command", command);
            // The command the shell runs, so its comments and spacing are the shell's.
            let c = call(&label, &command.map_or(Json::Null, Json::from));
            (label, c)
        }
        "file_change" => {
            let label = doing(
                "edit",
                item.get("changes")
                    .and_then(|c| c.get(0))
                    .and_then(|c| str_at(c, &["path"])),
            );
            let c = (!started).then(|| call(&label, &item["changes"])).flatten();
            (label, c)
        }
        "mcp_tool_call" => {
            let label = doing(str_at(item, &["tool"]).unwrap_or("tool"), None);
            let input = serde_json::json!([item["server"], item["tool"], item["arguments"]]);
            let c = (!started).then(|| call(&label, &input)).flatten();
            (label, c)
        }
        "web_search" => {
            let label = doing("search", str_at(item, &["query"]));
            let c = (!started).then(|| call(&label, &item["query"])).flatten();
            (label, c)
        }
        "reasoning" => ("thinking".into(), None),
        "agent_message" => ("writing".into(), None),
        _ => return None,
    })
}

/// What a line of `gemini -o stream-json` says the agent is doing, and the tool call it is.
pub(super) fn gemini_doing(e: &Json) -> Option<(String, Option<ToolCall>)> {
    match str_at(e, &["type"])? {
        "tool_use" => {
            let tool = str_at(e, &["tool_name"]).unwrap_or("tool");
            let label = doing(
                tool,
                e.get("parameters").and_then(|p| subject(p, SUBJECT_KEYS)),
            );
            let c = tool_call(tool, &e["parameters"], label.clone());
            Some((label, Some(c)))
        }
        "message" if str_at(e, &["role"]) == Some("assistant") => Some(("writing".into(), None)),
        _ => None,
    }
}

/// What a line of `opencode run --format json` says the agent is doing, and the tool call it
/// is.
pub(super) fn opencode_doing(e: &Json) -> Option<(String, Option<ToolCall>)> {
    match str_at(e, &["type"])? {
        "tool_use" => {
            let tool = str_at(e, &["part", "tool"]).unwrap_or("tool");
            let input = e.pointer("/part/state/input").unwrap_or(&Json::Null);
            let label = doing(tool, subject(input, SUBJECT_KEYS));
            let c = tool_call(tool, input, label.clone());
            Some((label, Some(c)))
        }
        "text" => Some(("writing".into(), None)),
        "reasoning" => Some(("thinking".into(), None)),
        _ => None,
    }
}
