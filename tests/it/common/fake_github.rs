//! A stand-in for GitHub's REST API on 127.0.0.1: issues (filtered by state, labels and
//! milestone, paginated with `Link` headers), comments, pull requests. Every request is
//! recorded; scripted answers (an error status with headers) can be put before the real ones.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A request as the stand-in saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    /// The path and query.
    pub uri: String,
    pub authorization: Option<String>,
    pub body: Value,
}

/// A scripted answer: status, headers, body.
type Scripted = (u16, Vec<(String, String)>, String);

#[derive(Default)]
struct Inner {
    issues: Vec<Value>,
    pulls: Vec<Value>,
    /// (issue, body)
    comments: Vec<(u64, String)>,
    seen: Vec<Seen>,
    /// Answers given before any real one: (status, headers, body).
    scripted: VecDeque<Scripted>,
    page_size: usize,
    /// A `next` link to give instead of the stand-in's own (to test that it is not followed).
    foreign_next: Option<String>,
}

pub struct FakeGithub {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    _rt: tokio::runtime::Runtime,
}

impl FakeGithub {
    pub fn start() -> FakeGithub {
        let inner = Arc::new(Mutex::new(Inner {
            page_size: 100,
            ..Default::default()
        }));
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&inner));
        let (addr, rt) = super::serve_local(app);
        FakeGithub {
            addr,
            inner,
            _rt: rt,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds an issue: `labels` by name, `milestone` by number.
    pub fn issue(&self, number: u64, title: &str, body: &str, labels: &[&str], open: bool) {
        self.push_issue(json!({
            "number": number, "title": title, "body": body,
            "state": if open { "open" } else { "closed" },
            "labels": labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
            "milestone": null,
        }));
    }

    pub fn push_issue(&self, issue: Value) {
        self.inner.lock().unwrap().issues.push(issue);
    }

    /// Changes an issue's body.
    pub fn set_body(&self, number: u64, body: &str) {
        let mut g = self.inner.lock().unwrap();
        let i = g.issues.iter_mut().find(|i| i["number"] == number).unwrap();
        i["body"] = json!(body);
    }

    pub fn page_size(&self, n: usize) {
        self.inner.lock().unwrap().page_size = n;
    }

    pub fn foreign_next(&self, url: &str) {
        self.inner.lock().unwrap().foreign_next = Some(url.into());
    }

    /// The next request gets this answer instead (then the next scripted one, then the real
    /// ones).
    pub fn script(&self, status: u16, headers: &[(&str, &str)], body: &str) {
        self.inner.lock().unwrap().scripted.push_back((
            status,
            headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body.into(),
        ));
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.inner.lock().unwrap().seen.clone()
    }

    pub fn pulls(&self) -> Vec<Value> {
        self.inner.lock().unwrap().pulls.clone()
    }

    pub fn comments(&self) -> Vec<(u64, String)> {
        self.inner.lock().unwrap().comments.clone()
    }
}

async fn handle(
    State(state): State<Arc<Mutex<Inner>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut g = state.lock().unwrap();
    g.seen.push(Seen {
        method: method.to_string(),
        uri: uri.to_string(),
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body: body.clone(),
    });
    if let Some((status, hs, text)) = g.scripted.pop_front() {
        let mut r = Response::builder().status(status);
        for (k, v) in hs {
            r = r.header(k, v);
        }
        return r.body(Body::from(text)).unwrap();
    }
    let host = headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let query: Vec<(String, String)> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), decode(v)))
        .collect();
    let q = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let ok = |v: Value| (StatusCode::OK, axum::Json(v)).into_response();
    match (&method, &parts[..]) {
        (&Method::GET, ["repos", _, _, "issues"]) => {
            let want_labels: Vec<String> = q("labels")
                .map(|l| l.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            let milestone = q("milestone");
            let all: Vec<Value> = g
                .issues
                .iter()
                .filter(|i| q("state").is_none_or(|s| s == "all" || i["state"] == s.as_str()))
                .filter(|i| {
                    want_labels.iter().all(|l| {
                        i["labels"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|x| x["name"] == l.as_str())
                    })
                })
                .filter(|i| {
                    milestone
                        .as_deref()
                        .is_none_or(|m| i["milestone"]["number"].as_u64() == m.parse().ok())
                })
                .cloned()
                .collect();
            let page: usize = q("page").and_then(|p| p.parse().ok()).unwrap_or(1);
            let size = g.page_size;
            let items: Vec<Value> = all
                .iter()
                .skip((page - 1) * size)
                .take(size)
                .cloned()
                .collect();
            let mut r = axum::Json(Value::Array(items)).into_response();
            if page * size < all.len() {
                let next = g.foreign_next.clone().unwrap_or_else(|| {
                    let rest: Vec<String> = query
                        .iter()
                        .filter(|(k, _)| k != "page")
                        .map(|(k, v)| format!("{k}={}", encode(v)))
                        .collect();
                    format!(
                        "http://{host}{}?{}&page={}",
                        uri.path(),
                        rest.join("&"),
                        page + 1
                    )
                });
                let link = format!("<{next}>; rel=\"next\", <http://{host}/last>; rel=\"last\"");
                r.headers_mut().insert("link", link.parse().unwrap());
            }
            r
        }
        (&Method::GET, ["repos", _, _, "issues", n]) => {
            match g
                .issues
                .iter()
                .find(|i| i["number"].as_u64() == n.parse().ok())
            {
                Some(i) => ok(i.clone()),
                None => not_found(),
            }
        }
        (&Method::GET, ["repos", _, _, "issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap();
            ok(Value::Array(
                g.comments
                    .iter()
                    .filter(|(i, _)| *i == n)
                    .map(|(_, b)| json!({"body": b}))
                    .collect(),
            ))
        }
        (&Method::POST, ["repos", _, _, "issues", n, "comments"]) => {
            let n: u64 = n.parse().unwrap();
            g.comments
                .push((n, body["body"].as_str().unwrap_or("").to_string()));
            (StatusCode::CREATED, axum::Json(json!({"id": 1}))).into_response()
        }
        (&Method::GET, ["repos", owner, _, "pulls"]) => {
            let head = q("head").unwrap_or_default();
            let list: Vec<Value> = g
                .pulls
                .iter()
                .filter(|p| p["state"] == "open")
                .filter(|p| format!("{owner}:{}", p["head"]["ref"].as_str().unwrap()) == head)
                .cloned()
                .collect();
            ok(Value::Array(list))
        }
        (&Method::POST, ["repos", o, r, "pulls"]) => {
            let number = 100 + g.pulls.len() as u64;
            let pull = json!({
                "number": number,
                "state": "open",
                "html_url": format!("https://github.example/{o}/{r}/pull/{number}"),
                "head": {"ref": body["head"]},
                "base": {"ref": body["base"]},
                "title": body["title"],
                "body": body["body"],
                "draft": body["draft"],
            });
            g.pulls.push(pull.clone());
            (StatusCode::CREATED, axum::Json(pull)).into_response()
        }
        (&Method::PATCH, ["repos", _, _, "pulls", n]) => {
            match g
                .pulls
                .iter_mut()
                .find(|p| p["number"].as_u64() == n.parse().ok())
            {
                Some(p) => {
                    p["title"] = body["title"].clone();
                    p["body"] = body["body"].clone();
                    ok(p.clone())
                }
                None => not_found(),
            }
        }
        (&Method::GET, ["repos", _, _, "milestones"]) => ok(json!([])),
        _ => not_found(),
    }
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"message": "Not Found"})),
    )
        .into_response()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(x) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(x);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
