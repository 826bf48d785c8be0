//! A fake OpenAI Responses API on 127.0.0.1 for running the real `codex` end to end
//! (`POST /v1/responses`, always `stream: true`, answered with Server-Sent Events). Replies
//! are scripted per criterion (see `fake_model.rs`); the shapes follow what codex 0.171 sends
//! and accepts (tests/fixtures/codex/README.md).
//!
//! Needs `#[path = "common/fake_model.rs"] mod fake_model;` next to it.
#![allow(dead_code)]

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::fake_model::{Server, Shared, Turn, next_id};

pub struct FakeOpenAi {
    pub server: Server,
}

impl FakeOpenAi {
    pub fn start(script: Vec<(&str, Vec<Turn>)>) -> FakeOpenAi {
        let server = Server::start(script, |state| {
            Router::new()
                .route("/v1/responses", post(responses).get(websocket))
                .fallback(|| async {
                    (
                        StatusCode::NOT_FOUND,
                        json!({"error": {"message": "not found"}}).to_string(),
                    )
                })
                .with_state(state)
        });
        FakeOpenAi { server }
    }

    /// The `base_url` of a codex model provider.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.addr)
    }

    /// The request bodies whose prompt names `id`.
    pub fn requests_for(&self, id: &str) -> Vec<Value> {
        self.server
            .requests()
            .into_iter()
            .map(|(_, b)| b)
            .filter(|b| prompt_of(b).contains(&format!("{id}:")))
            .collect()
    }
}

/// A 401 as OpenAI sends it.
pub fn error_401() -> Turn {
    Turn::Error(
        401,
        json!({"error": {"message": "Incorrect API key provided: sk-fake.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
    )
}

/// A per-minute 429 as OpenAI sends it.
pub fn error_429() -> Turn {
    Turn::Error(
        429,
        json!({"error": {"message": "Rate limit reached for gpt-fake on tokens per min (TPM): Limit 30000, Used 30000, Requested 500. Please try again in 1s.", "type": "tokens", "param": null, "code": "rate_limit_exceeded"}}),
    )
}

/// The user's words: the `input_text` of every user message (codex sends its environment
/// context as one user message and the prompt as another).
pub fn prompt_of(body: &Value) -> String {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["role"] == "user")
        .flat_map(|i| i["content"].as_array().into_iter().flatten())
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the request carries the output of a tool call.
pub fn has_tool_output(body: &Value) -> bool {
    body["input"].as_array().into_iter().flatten().any(|i| {
        i["type"]
            .as_str()
            .is_some_and(|t| t.ends_with("_call_output"))
    })
}

/// codex's first try with the built-in provider is a WebSocket upgrade; refuse it.
async fn websocket() -> Response {
    (
        StatusCode::UPGRADE_REQUIRED,
        json!({"error": {"message": "websocket not supported"}}).to_string(),
    )
        .into_response()
}

async fn responses(State(state): State<Shared>, _h: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let turn = {
        let mut g = state.lock().unwrap();
        g.requests.push(("/v1/responses".into(), body.clone()));
        g.next(&prompt_of(&body))
    };
    let item = match turn {
        Turn::Error(status, err) => {
            return (
                StatusCode::from_u16(status).unwrap(),
                [(header::CONTENT_TYPE, "application/json")],
                err.to_string(),
            )
                .into_response();
        }
        Turn::Text(text) => return sse(&body, message_events(&text)),
        Turn::Shell(cmd) => tool_call(&body, &cmd),
        Turn::WriteFile(path, content) => tool_call(
            &body,
            &format!("printf '%s' {} > {}", sh(&content), sh(&path)),
        ),
    };
    sse(
        &body,
        vec![
            json!({"type": "response.output_item.added", "output_index": 0, "item": with_status(&item, "in_progress")}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ],
    )
}

fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn with_status(item: &Value, status: &str) -> Value {
    let mut v = item.clone();
    v["status"] = json!(status);
    v
}

/// The names of the tools offered, from `tools` and from `additional_tools` input items
/// (namespaces flattened), with their definitions.
fn tools(body: &Value) -> Vec<Value> {
    fn walk(list: &Value, out: &mut Vec<Value>) {
        for t in list.as_array().into_iter().flatten() {
            if t["type"] == "namespace" {
                walk(&t["tools"], out);
            } else {
                out.push(t.clone());
            }
        }
    }
    let mut out = Vec::new();
    walk(&body["tools"], &mut out);
    for i in body["input"].as_array().into_iter().flatten() {
        if i["type"] == "additional_tools" {
            walk(&i["tools"], &mut out);
        }
    }
    out
}

/// A call of codex's shell tool running `cmd`: in "code mode" (codex's default model, one
/// freeform `exec` tool running JavaScript) `tools.exec_command`, else the classic function.
fn tool_call(body: &Value, cmd: &str) -> Value {
    let tools = tools(body);
    let has = |name: &str| tools.iter().any(|t| t["name"] == name);
    let call_id = format!("call_{}", next_id());
    if !has("exec_command")
        && tools
            .iter()
            .any(|t| t["name"] == "exec" && t["type"] == "custom")
    {
        let src = format!(
            "const r = await tools.exec_command({{cmd: {}}});\ntext(r);\n",
            json!(cmd)
        );
        return json!({"type": "custom_tool_call", "id": format!("ctc_{call_id}"), "call_id": call_id, "name": "exec", "input": src, "status": "completed"});
    }
    let (name, args) = if has("shell_command") {
        ("shell_command", json!({"command": cmd}))
    } else if has("exec_command") {
        ("exec_command", json!({"cmd": cmd}))
    } else {
        ("shell", json!({"command": ["bash", "-lc", cmd]}))
    };
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id, "name": name, "arguments": args.to_string(), "status": "completed"})
}

/// The events of a final text answer.
fn message_events(text: &str) -> Vec<Value> {
    let id = format!("msg_{}", next_id());
    let item = json!({"type": "message", "id": id, "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]});
    let mut started = with_status(&item, "in_progress");
    started["content"] = json!([]);
    vec![
        json!({"type": "response.output_item.added", "output_index": 0, "item": started}),
        json!({"type": "response.content_part.added", "item_id": id, "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
        json!({"type": "response.output_text.delta", "item_id": id, "output_index": 0, "content_index": 0, "delta": text}),
        json!({"type": "response.output_text.done", "item_id": id, "output_index": 0, "content_index": 0, "text": text}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ]
}

/// A streamed response: `response.created`, the events, `response.completed` with usage
/// (120 input tokens of which 20 cached, 12 output).
fn sse(body: &Value, events: Vec<Value>) -> Response {
    let id = format!("resp_{}", next_id());
    let base = json!({"id": id, "object": "response", "created_at": 1_796_032_800, "model": body["model"].as_str().unwrap_or("gpt-fake"), "status": "in_progress", "output": []});
    let output: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| e["item"].clone())
        .collect();
    let mut done = base.clone();
    done["status"] = json!("completed");
    done["output"] = json!(output);
    done["usage"] = json!({"input_tokens": 120, "input_tokens_details": {"cached_tokens": 20}, "output_tokens": 12, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 132});
    let mut all = vec![json!({"type": "response.created", "sequence_number": 0, "response": base})];
    all.extend(events);
    all.push(json!({"type": "response.completed", "response": done}));
    let mut out = String::new();
    for e in all {
        out.push_str(&format!(
            "event: {}\ndata: {}\n\n",
            e["type"].as_str().unwrap(),
            e
        ));
    }
    ([(header::CONTENT_TYPE, "text/event-stream")], out).into_response()
}
