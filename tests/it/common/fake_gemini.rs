//! A fake Gemini API on 127.0.0.1 for running the real `gemini` CLI end to end
//! (`GOOGLE_GEMINI_BASE_URL`): `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` is
//! the chat, scripted per criterion (see `fake_model.rs`); `:generateContent` calls that ask for
//! JSON (gemini's model router, its next-speaker check) get a value filled from their schema and
//! use up no turn; `:countTokens` is answered too. The shapes follow what gemini 0.61 sends and
//! accepts (tests/fixtures/gemini/README.md).
//!
//! Needs `#[path = "common/fake_model.rs"] mod fake_model;` next to it.
#![allow(dead_code)]

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::fake_model::{Server, Shared, Turn, next_id};

pub struct FakeGemini {
    pub server: Server,
}

impl FakeGemini {
    pub fn start(script: Vec<(&str, Vec<Turn>)>) -> FakeGemini {
        let server = Server::start(script, |state| {
            Router::new()
                .route("/v1beta/models/{call}", post(models))
                .fallback(|| async {
                    (
                        StatusCode::NOT_FOUND,
                        json!({"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}).to_string(),
                    )
                })
                .with_state(state)
        });
        FakeGemini { server }
    }

    /// For `GOOGLE_GEMINI_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.server.addr)
    }

    /// The chat requests (`streamGenerateContent`) whose prompt names `id`.
    pub fn requests_for(&self, id: &str) -> Vec<Value> {
        self.server
            .requests()
            .into_iter()
            .filter(|(p, _)| p.ends_with(":streamGenerateContent"))
            .map(|(_, b)| b)
            .filter(|b| prompt_of(b).contains(&format!("{id}:")))
            .collect()
    }
}

/// A 401 as the Gemini API sends it for a bad key.
pub fn error_401() -> Turn {
    Turn::Error(
        401,
        json!({"error": {"code": 401, "message": "API key not valid. Please pass a valid API key.", "status": "UNAUTHENTICATED", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]}}),
    )
}

/// A 429 for a used-up daily quota, which gemini does not retry.
pub fn error_daily_quota() -> Turn {
    Turn::Error(
        429,
        json!({"error": {"code": 429, "message": "You exceeded your current quota, please check your plan and billing details.", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "quotaValue": "250"}]}]}}),
    )
}

/// The user's words: the text parts of the user turns.
pub fn prompt_of(body: &Value) -> String {
    body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["role"] == "user")
        .flat_map(|c| c["parts"].as_array().into_iter().flatten())
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the request carries the result of a tool call.
pub fn has_tool_output(body: &Value) -> bool {
    body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["parts"].as_array().into_iter().flatten())
        .any(|p| p.get("functionResponse").is_some())
}

async fn models(State(state): State<Shared>, Path(call): Path<String>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (model, method) = call.split_once(':').unwrap_or((&call, ""));
    let path = format!("/v1beta/models/{call}");
    if method == "countTokens" {
        return json_reply(json!({"totalTokens": 100}));
    }
    let gen_cfg = &body["generationConfig"];
    let schema = gen_cfg
        .get("responseJsonSchema")
        .or_else(|| gen_cfg.get("responseSchema"));
    let wants_json = schema.is_some() || gen_cfg["responseMimeType"] == "application/json";
    let stream = method == "streamGenerateContent";
    let turn = {
        let mut g = state.lock().unwrap();
        g.requests.push((path, body.clone()));
        if wants_json {
            None
        } else {
            Some(g.next(&prompt_of(&body)))
        }
    };
    let parts = match turn {
        // The router and the next-speaker check: JSON filled from the schema.
        None => {
            vec![json!({"text": fill(schema.unwrap_or(&json!({"type": "object"}))).to_string()})]
        }
        Some(Turn::Error(status, err)) => {
            return (
                StatusCode::from_u16(status).unwrap(),
                [(header::CONTENT_TYPE, "application/json")],
                err.to_string(),
            )
                .into_response();
        }
        Some(Turn::Text(t)) => vec![json!({"text": t})],
        Some(Turn::Shell(cmd)) => vec![
            json!({"functionCall": {"name": "run_shell_command", "args": {"command": cmd, "description": "scripted step"}}}),
        ],
        Some(Turn::WriteFile(path, content)) => vec![
            json!({"functionCall": {"name": "write_file", "args": {"file_path": path, "content": content}}}),
        ],
    };
    let reply = |parts: Vec<Value>, last: bool| {
        let mut r = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}], "modelVersion": model, "responseId": format!("r{}", next_id())});
        if last {
            r["candidates"][0]["finishReason"] = json!("STOP");
            r["usageMetadata"] = json!({"promptTokenCount": 120, "candidatesTokenCount": 12, "totalTokenCount": 132, "cachedContentTokenCount": 20});
        }
        r
    };
    if !stream {
        return json_reply(reply(parts, true));
    }
    // A text comes in two chunks, so the CLI prints deltas.
    let chunks = match parts[0]["text"].as_str() {
        Some(t) if t.len() > 6 && t.is_char_boundary(6) => vec![
            reply(vec![json!({"text": &t[..6]})], false),
            reply(vec![json!({"text": &t[6..]})], true),
        ],
        _ => vec![reply(parts, true)],
    };
    let mut out = String::new();
    for c in chunks {
        out.push_str(&format!("data: {c}\r\n\r\n"));
    }
    ([(header::CONTENT_TYPE, "text/event-stream")], out).into_response()
}

fn json_reply(v: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

/// A value for a JSON schema: the router picks the small model, the next speaker is the user.
fn fill(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let ty = schema["type"].as_str().unwrap_or("object").to_lowercase();
    match ty.as_str() {
        "object" => {
            let mut out = serde_json::Map::new();
            for (k, v) in schema["properties"].as_object().into_iter().flatten() {
                let val = match k.as_str() {
                    "next_speaker" => json!("user"),
                    "model_choice" => json!("flash"),
                    _ => fill(v),
                };
                out.insert(k.clone(), val);
            }
            Value::Object(out)
        }
        "array" => json!([]),
        "number" | "integer" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        _ => json!("fake"),
    }
}
