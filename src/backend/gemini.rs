//! gemini `-o stream-json`: its command line, its stream, its failures, its log, its login.
//! Field names, texts and exit codes as gemini prints them (see `tests/fixtures/gemini/`).

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::agents::{Agent, AgentOptions, strings};
use super::classify::{AgentFailure, Kind, contains_any as has};
use super::claude::command::OutputFormat;
use super::contract::{Backend, Login, Reader, Seen, Var, key_set, login_file, moved, read_object};
use super::lines::{SUBJECT_KEYS, str_at, subject, tool_input, tool_result, u64_at};
use super::outcome::{Outcome, Usage, doing, tool_call};
use super::stuck::ToolCall;
use crate::report::{bold, dim, green, red};

/// gemini's backend.
pub struct Gemini;

impl Backend for Gemini {
    fn args(&self, o: &AgentOptions, prompt: &str) -> Vec<String> {
        // yolo approves tool calls; `--skip-trust` keeps a fresh worktree from silently
        // dropping to `default` and exiting 55.
        let mut v = strings(&[
            "-o",
            "stream-json",
            "--approval-mode",
            "yolo",
            "--skip-trust",
        ]);
        v.extend(o.model_args("-m"));
        v.extend(o.extra_args.iter().cloned());
        v.extend(["-p".to_string(), prompt.to_string()]);
        v
    }

    fn format(&self, _: &AgentOptions) -> OutputFormat {
        OutputFormat::GeminiStreamJson
    }

    fn reader(&self) -> Box<dyn Reader> {
        Box::<GeminiReader>::default()
    }

    fn says_auth(&self, all: &str, code: Option<i32>) -> bool {
        // 401 → exit 145 (status mod 256), 403 → 147; 41 is gemini's own auth exit code.
        matches!(code, Some(41 | 145 | 147))
            || has(
                all,
                &["api_key_invalid", "unauthenticated", "api key not valid"],
            )
    }

    fn says_rate_limit(&self, all: &str, code: Option<i32>) -> bool {
        code == Some(173) || has(all, &["resource_exhausted", "status: 429"])
    }

    fn says_overloaded(&self, all: &str, code: Option<i32>) -> bool {
        matches!(code, Some(244..=248)) || has(all, &["status: 500"])
    }

    fn own_failure(&self, all: &str, code: Option<i32>) -> Option<AgentFailure> {
        (code == Some(55) || has(all, &["not running in a trusted"])).then(|| AgentFailure {
            kind: Kind::Crash,
            text: "gemini refused an untrusted folder (exit 55); pass --skip-trust or set \
                   GEMINI_CLI_TRUST_WORKSPACE=true"
                .into(),
            resets_at: None,
        })
    }

    fn render(&self, v: &Json) -> Option<String> {
        let at = |path: &str| v.pointer(path).and_then(Json::as_str).unwrap_or("");
        match at("/type") {
            "init" => Some(dim(&format!(
                "── session {} · model {}",
                at("/session_id"),
                at("/model")
            ))),
            "message" if at("/role") == "assistant" => Some(at("/content").trim_end().to_string()),
            "tool_use" => {
                let params = v.get("parameters").unwrap_or(&Json::Null);
                Some(format!(
                    "{} {}",
                    bold(&format!("▶ {}:", at("/tool_name"))),
                    tool_input(params)
                ))
            }
            "tool_result" => Some(tool_result(at("/status"), at("/output"))),
            "result" => {
                let head = format!("── result: {}", at("/status"));
                Some(if at("/status") == "success" {
                    green(&head)
                } else {
                    red(&head)
                })
            }
            "error" if v.get("message").is_some() => {
                Some(red(&format!("error: {}", at("/message"))))
            }
            _ => None,
        }
    }

    fn login(&self, var: Var, home: &Path) -> Login {
        let keys = Agent::Gemini.key_vars();
        if let Some(yes) = key_set(var, keys) {
            return yes;
        }
        if var("GOOGLE_GENAI_USE_VERTEXAI").is_some() {
            return Login::Unknown("Vertex AI credentials (GOOGLE_GENAI_USE_VERTEXAI)".into());
        }
        let base = moved(var, "GEMINI_CLI_HOME", home.to_path_buf()).join(".gemini");
        login_file(
            base.join("oauth_creds.json"),
            &format!("{} not set", keys.join(" or ")),
        )
    }

    fn state_dirs(&self, var: Var, home: &Path) -> Vec<PathBuf> {
        vec![moved(var, "GEMINI_CLI_HOME", home.to_path_buf()).join(".gemini")]
    }
}

/// What the gemini reader remembers between lines.
#[derive(Debug, Default)]
struct GeminiReader {
    /// The assistant deltas since the last tool call.
    answer: String,
}

impl Reader for GeminiReader {
    fn line(&mut self, seen: &mut Seen, line: &[u8]) {
        read_object(seen, line, |o, e| self.read(o, e), gemini_doing);
    }

    /// The answer is what the model said after its last tool call.
    fn finish(&mut self, o: &mut Outcome) {
        if !self.answer.is_empty() {
            o.final_text = Some(std::mem::take(&mut self.answer));
        }
    }
}

impl GeminiReader {
    /// One line of `gemini -o stream-json`.
    fn read(&mut self, o: &mut Outcome, e: &Json) {
        match e.get("type").and_then(Json::as_str).unwrap_or("") {
            "init" => o.session_id = str_at(e, &["session_id"]).map(String::from),
            "message" if str_at(e, &["role"]) == Some("assistant") => {
                let c = str_at(e, &["content"]).unwrap_or("");
                if e.get("delta").and_then(Json::as_bool) == Some(true) {
                    self.answer.push_str(c);
                } else {
                    self.answer = c.to_string();
                }
            }
            // The answer is what the model says after its last tool call.
            "tool_use" | "tool_result" => self.answer.clear(),
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
}

/// What a line of `gemini -o stream-json` says the agent is doing, and the tool call it is.
fn gemini_doing(e: &Json) -> Option<(String, Option<ToolCall>)> {
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
