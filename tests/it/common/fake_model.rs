//! What the fake model servers for the end-to-end tests share: the script of the model's
//! replies per criterion, the record of requests, an axum server on 127.0.0.1, and finding
//! the real agent binaries through `PRDLOOP_E2E_*` variables.
//!
//! Used by the e2e modules through `fake_openai.rs` (codex) and `fake_gemini.rs` (gemini), and
//! by the claude e2e tests for finding the agent binaries.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One reply of the model, in API-neutral terms; each fake renders it in its own wire format.
#[derive(Clone, Debug)]
pub enum Turn {
    /// A shell tool call that runs this command in the agent's working directory.
    Shell(String),
    /// A file-writing tool call: (path, content). Rendered with the agent's own write tool.
    WriteFile(String, String),
    /// The final text answer.
    Text(String),
    /// An HTTP error: status and the API's JSON error body.
    Error(u16, Value),
}

#[derive(Default)]
pub struct Script {
    turns: HashMap<String, Vec<Turn>>,
    served: HashMap<String, usize>,
    /// Every model request: (path with query, JSON body).
    pub requests: Vec<(String, Value)>,
}

impl Script {
    pub fn new(script: Vec<(&str, Vec<Turn>)>) -> Script {
        Script {
            turns: script
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            ..Default::default()
        }
    }

    /// The next scripted turn for the criterion the prompt names (`<id>:`; the longest id
    /// wins), the last turn again once the script is used up; `ok` for an unknown prompt.
    pub fn next(&mut self, prompt: &str) -> Turn {
        let id = self
            .turns
            .keys()
            .filter(|id| prompt.contains(&format!("{id}:")))
            .max_by_key(|id| id.len())
            .cloned();
        match id {
            Some(id) => {
                let n = self.served.entry(id.clone()).or_insert(0);
                let i = *n;
                *n += 1;
                let turns = &self.turns[&id];
                turns[i.min(turns.len() - 1)].clone()
            }
            None => Turn::Text("ok".into()),
        }
    }
}

pub type Shared = Arc<Mutex<Script>>;

/// A running fake: its address, the shared script, and the runtime that serves it.
pub struct Server {
    pub addr: SocketAddr,
    pub script: Shared,
    _rt: tokio::runtime::Runtime,
}

impl Server {
    /// Serves `app(script)` on 127.0.0.1 on a free port.
    pub fn start(
        script: Vec<(&str, Vec<Turn>)>,
        app: impl FnOnce(Shared) -> axum::Router,
    ) -> Server {
        let shared = Arc::new(Mutex::new(Script::new(script)));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let router = app(Arc::clone(&shared));
        let addr = rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                axum::serve(listener, router).await.unwrap();
            });
            addr
        });
        Server {
            addr,
            script: shared,
            _rt: rt,
        }
    }

    /// Every model request so far: (path with query, JSON body).
    pub fn requests(&self) -> Vec<(String, Value)> {
        self.script.lock().unwrap().requests.clone()
    }
}

/// A unique-enough id for response and call ids.
pub fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The real agent binary named by `var`, for an end-to-end test.
///
/// Set and non-empty: that path (it must exist). Unset: under CI (`CI=true`) the test fails;
/// elsewhere `None`, after a line (written past the test harness's capture) saying how to
/// run the test.
pub fn agent_bin(var: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(p) if !p.is_empty() => {
            assert!(
                std::path::Path::new(&p).exists(),
                "{var}={p} does not exist"
            );
            Some(p)
        }
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{var} is not set: CI must run the end-to-end tests; {how}")
        }
        _ => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "skipped: this end-to-end test needs {var}; {how}"
            );
            None
        }
    }
}

/// Settings that keep an agent off the real network even if it tries: every proxy variable
/// points at a closed port on 127.0.0.1, except for 127.0.0.1 itself.
pub const NO_NETWORK: [(&str, &str); 7] = [
    ("HTTP_PROXY", "http://127.0.0.1:9"),
    ("HTTPS_PROXY", "http://127.0.0.1:9"),
    ("ALL_PROXY", "http://127.0.0.1:9"),
    ("http_proxy", "http://127.0.0.1:9"),
    ("https_proxy", "http://127.0.0.1:9"),
    ("NO_PROXY", "127.0.0.1,localhost"),
    ("no_proxy", "127.0.0.1,localhost"),
];
