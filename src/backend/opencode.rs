//! opencode `run --format json`: its command line, its stream, its log, its login. Field
//! names as opencode prints them (see `tests/fixtures/opencode/`); its failures go by the
//! shared rules (the HTTP status it reports).

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::agents::{AgentOptions, strings};
use super::claude::command::OutputFormat;
use super::contract::{Backend, Login, Reader, Seen, Var, read_object, xdg};
use super::lines::{SUBJECT_KEYS, str_at, subject, tool_input, tool_result, u64_at};
use super::outcome::{Outcome, Usage, doing, tool_call};
use super::stuck::ToolCall;
use crate::report::bold;

/// opencode's backend.
pub struct Opencode;

impl Backend for Opencode {
    fn args(&self, o: &AgentOptions, prompt: &str) -> Vec<String> {
        let mut v = strings(&["run", "--format", "json", "--auto"]);
        v.extend(o.model_args("-m"));
        v.extend(o.extra_args.iter().cloned());
        v.extend(["--".to_string(), prompt.to_string()]);
        v
    }

    fn format(&self, _: &AgentOptions) -> OutputFormat {
        OutputFormat::OpencodeJson
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<OpencodeReader>::default()
    }

    fn render(&self, v: &Json) -> Option<String> {
        let at = |path: &str| v.pointer(path).and_then(Json::as_str).unwrap_or("");
        match at("/type") {
            "tool_use" => {
                let input = v.pointer("/part/state/input").unwrap_or(&Json::Null);
                Some(format!(
                    "{} {}\n{}",
                    bold(&format!("▶ {}:", at("/part/tool"))),
                    tool_input(input),
                    tool_result(at("/part/state/status"), at("/part/state/output"))
                ))
            }
            "text" => Some(at("/part/text").trim_end().to_string()).filter(|t| !t.is_empty()),
            _ => None,
        }
    }

    fn login(&self, var: Var, home: &Path) -> Login {
        let (_, data) = xdg(var, home);
        let f = data.join("opencode/auth.json");
        if f.is_file() {
            Login::Yes(format!("{} exists", f.display()))
        } else {
            Login::Unknown(format!(
                "no {}; a provider's key in the environment or config may still work",
                f.display()
            ))
        }
    }

    fn state_dirs(&self, var: Var, home: &Path) -> Vec<PathBuf> {
        let (config, data) = xdg(var, home);
        vec![config.join("opencode"), data.join("opencode")]
    }
}

/// What the opencode reader remembers between lines.
#[derive(Debug, Default)]
struct OpencodeReader {
    /// The summed `step_finish.part.cost`.
    cost: f64,
}

impl Reader for OpencodeReader {
    fn line(&mut self, seen: &mut Seen, line: &[u8]) {
        read_object(seen, line, |o, e| self.read(o, e), opencode_doing);
    }
}

impl OpencodeReader {
    /// One line of `opencode run --format json`.
    fn read(&mut self, o: &mut Outcome, e: &Json) {
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
                self.cost += e["part"]["cost"].as_f64().unwrap_or(0.0);
                // opencode prints 0 when the model has no price in its config: that is "not
                // known", not "free".
                o.cost_usd = (self.cost > 0.0).then_some(self.cost);
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
}

/// What a line of `opencode run --format json` says the agent is doing, and the tool call it
/// is.
fn opencode_doing(e: &Json) -> Option<(String, Option<ToolCall>)> {
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
