//! codex `exec --json`: its command line, its stream, its failures, its log, its login.
//! Field names and texts as codex prints them (see `tests/fixtures/codex/`).

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::agents::{Agent, AgentOptions, strings};
use super::classify::contains_any as has;
use super::claude::command::OutputFormat;
use super::contract::{Backend, Login, Reader, Seen, Var, key_set, login_file, moved, read_object};
use super::lines::{str_at, tool_result, u64_at};
use super::outcome::{Outcome, Usage, doing, tool_call};
use super::stuck::ToolCall;
use crate::report::{bold, dim, red, yellow};

/// codex's backend.
pub struct Codex;

impl Backend for Codex {
    fn args(&self, o: &AgentOptions, _prompt: &str) -> Vec<String> {
        // workspace-write: edits in the workdir, no network; `-` reads stdin. Inside
        // prdloop's sandbox codex's own (bubblewrap: it writes /proc/PID/uid_map and
        // /tmp) cannot start, and prdloop's confines its writes instead.
        let mode = if o.in_prdloop_sandbox {
            "danger-full-access"
        } else {
            "workspace-write"
        };
        let mut v = strings(&["exec", "--json", "--skip-git-repo-check", "-s", mode]);
        v.extend(o.model_args("-m"));
        v.extend(o.extra_args.iter().cloned());
        v.push("-".into());
        v
    }

    fn prompt_on_stdin(&self) -> bool {
        true
    }

    fn format(&self, _: &AgentOptions) -> OutputFormat {
        OutputFormat::CodexJson
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<CodexReader>::default()
    }

    fn says_auth(&self, all: &str, _: Option<i32>) -> bool {
        has(
            all,
            &["401 unauthorized", "invalid_api_key", "incorrect api key"],
        )
    }

    fn says_rate_limit(&self, all: &str, _: Option<i32>) -> bool {
        has(all, &["429 too many requests", "rate_limit_exceeded"])
    }

    fn says_overloaded(&self, all: &str, _: Option<i32>) -> bool {
        // codex's text for a 5xx after its retries.
        has(
            all,
            &["experiencing high demand", "500 internal server error"],
        )
    }

    fn render(&self, v: &Json) -> Option<String> {
        let at = |path: &str| v.pointer(path).and_then(Json::as_str).unwrap_or("");
        match at("/type") {
            "thread.started" => Some(dim(&format!("── session {}", at("/thread_id")))),
            "item.completed" => match at("/item/type") {
                "agent_message" => Some(at("/item/text").trim_end().to_string()),
                "reasoning" => Some(dim("(thinking)")),
                "command_execution" => {
                    let exit = v
                        .pointer("/item/exit_code")
                        .map_or_else(String::new, Json::to_string);
                    Some(format!(
                        "{} {}\n{}",
                        bold("▶ shell:"),
                        at("/item/command"),
                        tool_result(&exit, at("/item/aggregated_output"))
                    ))
                }
                "file_change" => {
                    let paths: Vec<&str> = v
                        .pointer("/item/changes")
                        .and_then(Json::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|c| c.get("path").and_then(Json::as_str))
                        .collect();
                    Some(format!("{} {}", bold("▶ edit:"), paths.join(", ")))
                }
                "error" => Some(yellow(&format!("warning: {}", at("/item/message")))),
                _ => None,
            },
            "turn.completed" => Some(dim(&format!(
                "── turn done · tokens {} in, {} out",
                v.pointer("/usage/input_tokens")
                    .map_or_else(String::new, Json::to_string),
                v.pointer("/usage/output_tokens")
                    .map_or_else(String::new, Json::to_string)
            ))),
            "turn.failed" => Some(red(&format!("turn failed: {}", at("/error/message")))),
            "error" if v.get("message").is_some() => {
                Some(red(&format!("error: {}", at("/message"))))
            }
            _ => None,
        }
    }

    fn login(&self, var: Var, home: &Path) -> Login {
        let keys = Agent::Codex.key_vars();
        key_set(var, keys).unwrap_or_else(|| {
            login_file(
                moved(var, "CODEX_HOME", home.join(".codex")).join("auth.json"),
                &format!("{} not set", keys.join(" or ")),
            )
        })
    }

    fn state_dirs(&self, var: Var, home: &Path) -> Vec<PathBuf> {
        vec![moved(var, "CODEX_HOME", home.join(".codex"))]
    }
}

/// What the codex reader remembers between lines.
#[derive(Debug, Default)]
struct CodexReader {
    /// The last `error` event's message (the `Reconnecting...` lines included).
    last_error: Option<String>,
}

impl Reader for CodexReader {
    fn line(&mut self, seen: &mut Seen, line: &[u8]) {
        read_object(seen, line, |o, e| self.read(o, e), codex_doing);
    }

    /// A stream that stopped without `turn.completed` or `turn.failed` (killed, crashed)
    /// keeps its last error message for the classifier.
    fn finish(&mut self, o: &mut Outcome) {
        if !o.has_result
            && let Some(e) = self.last_error.take()
        {
            o.errors.push(e);
        }
    }
}

impl CodexReader {
    /// One line of `codex exec --json`.
    fn read(&mut self, o: &mut Outcome, e: &Json) {
        match e.get("type").and_then(Json::as_str).unwrap_or("") {
            "thread.started" => {
                o.session_id = str_at(e, &["thread_id"]).map(String::from);
            }
            // `item.completed` with `type: "error"` is a warning (unknown model metadata), not
            // a failure: only agent messages count.
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
                    .or_else(|| self.last_error.clone())
                    .unwrap_or_else(|| "the turn failed".into());
                o.errors.push(msg);
            }
            "error" => {
                if let Some(m) = str_at(e, &["message"]) {
                    if m.starts_with("Reconnecting...") {
                        o.api_retries += 1;
                    }
                    self.last_error = Some(m.to_string());
                }
            }
            _ => {}
        }
    }
}

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
fn codex_doing(e: &Json) -> Option<(String, Option<ToolCall>)> {
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
