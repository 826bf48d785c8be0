//! A fake Anthropic Messages API on 127.0.0.1 for running the real `claude` end to end.
//! Replies are scripted per criterion (the id is found in the prompt); every request is
//! recorded for assertions.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One reply of the model.
#[derive(Clone, Debug)]
pub enum Turn {
    /// A Bash tool call that runs `command`.
    Bash(String),
    /// A Write tool call: (absolute path, content).
    Write(String, String),
    /// A call of any tool by its name (an MCP server's `mcp__server__tool`) with its input.
    Tool(String, Value),
    /// A final text answer.
    Text(String),
    /// An HTTP error with an Anthropic error body.
    Error(u16, &'static str, &'static str),
}

#[derive(Default)]
struct Inner {
    script: HashMap<String, Vec<Turn>>,
    served: HashMap<String, usize>,
    requests: Vec<Value>,
}

pub struct FakeApi {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    _rt: tokio::runtime::Runtime,
}

impl FakeApi {
    pub fn start(script: Vec<(&str, Vec<Turn>)>) -> FakeApi {
        let inner = Arc::new(Mutex::new(Inner {
            script: script
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ..Default::default()
        }));
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .fallback(|| async { StatusCode::OK })
            .with_state(Arc::clone(&inner));
        let (addr, rt) = super::serve_local(app);
        FakeApi {
            addr,
            inner,
            _rt: rt,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Points a claude started by `c` (directly or as prdloop's worker) at this API, with
    /// `home` as its HOME and no way out to the network.
    pub fn point_claude(&self, c: &mut std::process::Command, home: &std::path::Path) {
        std::fs::create_dir_all(home).unwrap();
        c.env("HOME", home)
            .env("ANTHROPIC_BASE_URL", self.base_url())
            .env("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .env("DISABLE_AUTOUPDATER", "1")
            .envs(super::fake_model::NO_NETWORK);
    }

    /// Every `POST /v1/messages` body received.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// The requests whose prompt names `id`.
    pub fn requests_for(&self, id: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| prompt_of(r).contains(&format!("{id}:")))
            .collect()
    }
}

/// The prompt: the text of the first user message.
pub fn prompt_of(body: &Value) -> String {
    let Some(msgs) = body["messages"].as_array() else {
        return String::new();
    };
    let Some(first) = msgs.iter().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &first["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

async fn messages(State(inner): State<Arc<Mutex<Inner>>>, _h: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let prompt = prompt_of(&body);
    let turn = {
        let mut g = inner.lock().unwrap();
        g.requests.push(body.clone());
        let id = g
            .script
            .keys()
            .filter(|id| prompt.contains(&format!("{id}:")))
            .max_by_key(|id| id.len())
            .cloned();
        match id {
            Some(id) => {
                let n = g.served.entry(id.clone()).or_insert(0);
                let i = *n;
                *n += 1;
                let turns = &g.script[&id];
                turns[i.min(turns.len() - 1)].clone()
            }
            None => Turn::Text("ok".into()),
        }
    };
    match turn {
        Turn::Error(status, kind, message) => (
            StatusCode::from_u16(status).unwrap(),
            [(header::CONTENT_TYPE, "application/json")],
            json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        )
            .into_response(),
        Turn::Text(text) => sse(
            vec![
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
                json!({"type": "content_block_stop", "index": 0}),
            ],
            "end_turn",
        ),
        Turn::Bash(command) => tool_call(
            "Bash",
            json!({"command": command, "description": "scripted step"}),
        ),
        Turn::Write(path, content) => {
            tool_call("Write", json!({"file_path": path, "content": content}))
        }
        Turn::Tool(name, input) => tool_call(&name, input),
    }
}

/// A reply that calls one tool with `input`.
fn tool_call(name: &str, input: Value) -> Response {
    sse(
        vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": format!("toolu_{}", uuid_like()), "name": name, "input": {}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            json!({"type": "content_block_stop", "index": 0}),
        ],
        "tool_use",
    )
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    format!("{:020}", N.fetch_add(1, Ordering::Relaxed))
}

fn sse(blocks: Vec<Value>, stop_reason: &str) -> Response {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": format!("msg_{}", uuid_like()), "type": "message", "role": "assistant", "model": "claude-fake", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ];
    events.extend(blocks);
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 5}}));
    events.push(json!({"type": "message_stop"}));
    let mut out = String::new();
    for e in events {
        out.push_str(&format!(
            "event: {}\ndata: {}\n\n",
            e["type"].as_str().unwrap(),
            e
        ));
    }
    ([(header::CONTENT_TYPE, "text/event-stream")], out).into_response()
}
