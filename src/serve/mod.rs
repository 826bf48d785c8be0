//! `prdloop serve` (and `prdloop run --serve`): a local web dashboard of the sessions in the
//! state folders, live runs updating over server-sent events, with pause, stop and resume.
//!
//! Bound to 127.0.0.1 only. Every request must carry the server's random session token (its
//! cookie, or `?token=`), and a `Host` naming this server (no DNS rebinding) and, when it has
//! one, an `Origin` of this server (no other web page can drive it): another local user or a
//! web page can neither read nor drive it. The token itself is never printed, logged, written
//! to a file or put on a command line: the address prdloop prints (and hands the browser with
//! `--open`) carries a one-time code (`?code=`), which the server swaps for the token in an
//! `HttpOnly` cookie once and then forgets. The page is in the binary; it loads nothing else.
//!
//! The dashboard reads what runs write (see [`data`]); its buttons make the requests the CLI
//! makes (`prdloop pause|stop|resume`).

mod data;
mod limits;
mod live;
pub mod publish;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::exit::Exit;
use crate::request::{self, Ask};

/// The page, with its script and styles.
const PAGE: &str = include_str!("page.html");
/// How often live data is read again for the event stream.
const POLL: Duration = Duration::from_millis(500);

/// What to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// The state folders whose sessions are shown.
    pub state_dirs: Vec<PathBuf>,
    /// 0: a free port.
    pub port: u16,
}

/// A dashboard listening.
pub struct Server {
    /// `http://127.0.0.1:PORT/`: its address, no secret in it.
    pub url: String,
    listener: limits::Limited,
    app: Router,
    state: Arc<App>,
}

struct App {
    dirs: Vec<PathBuf>,
    cache: Arc<data::Cache>,
    /// The event streams' shared snapshot.
    live: Arc<live::Hub>,
    /// The session token: only ever in the cookie the one-time codes are swapped for.
    token: String,
    /// The one-time codes not used yet.
    codes: std::sync::Mutex<Vec<String>>,
    /// The cookie's name: `prdloop-PORT` (a browser sends a host's cookies to all its ports).
    cookie: String,
    /// `127.0.0.1:PORT` and `localhost:PORT`.
    hosts: [String; 2],
    /// `http://` and those.
    origins: [String; 2],
}

impl Server {
    /// Binds 127.0.0.1 (in a tokio runtime).
    pub async fn bind(opts: Options) -> Result<Server> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", opts.port))
            .await
            .with_context(|| format!("failed to listen on 127.0.0.1:{}", opts.port))?;
        let port = listener.local_addr()?.port();
        let token = uuid::Uuid::new_v4().simple().to_string();
        let hosts = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
        let cache = Arc::new(data::Cache::default());
        let app = Arc::new(App {
            live: live::Hub::new(snapshot(opts.state_dirs.clone(), Arc::clone(&cache)), POLL),
            dirs: opts.state_dirs,
            cache,
            origins: hosts.clone().map(|h| format!("http://{h}")),
            hosts,
            token,
            codes: std::sync::Mutex::new(Vec::new()),
            cookie: format!("prdloop-{port}"),
        });
        let router = Router::new()
            .route("/", get(page))
            .route("/api/sessions", get(sessions))
            .route("/api/sessions/{id}", get(session))
            .route("/api/sessions/{id}/log", get(log))
            .route("/api/sessions/{id}/diff", get(diff))
            .route("/api/sessions/{id}/answer", post(answer))
            .route("/api/sessions/{id}/{action}", post(act))
            .route("/api/events", get(events))
            .layer(axum::middleware::from_fn_with_state(
                Arc::clone(&app),
                guard,
            ))
            .with_state(Arc::clone(&app));
        Ok(Server {
            url: format!("http://127.0.0.1:{port}/"),
            listener: limits::Limited::new(listener),
            app: router,
            state: app,
        })
    }

    /// The address with a new one-time code: the first request with it gets the session's
    /// cookie, later ones are refused.
    pub fn one_time_url(&self) -> String {
        let code = uuid::Uuid::new_v4().simple().to_string();
        if let Ok(mut codes) = self.state.codes.lock() {
            codes.push(code.clone());
        }
        format!("{}?code={code}", self.url)
    }

    /// Serves until the process ends.
    pub async fn run(self) -> Result<()> {
        axum::serve(self.listener, self.app)
            .await
            .context("the dashboard's server failed")
    }
}

/// `prdloop serve`: prints the URL, opens it when asked, serves until Ctrl-C.
pub fn serve(opts: Options, open: bool) -> Result<Exit> {
    let rt = crate::platform::runtime()?;
    rt.block_on(async {
        let server = Server::bind(opts).await?;
        if open {
            crate::report::stdout(&format!(
                "{} (opening it in your browser, signed in by a one-time code)\n",
                server.url
            ))?;
            if !open_browser(&server.one_time_url()) {
                crate::report::stdout(&format!("{}\n", server.one_time_url()))?;
            }
        } else {
            crate::report::stdout(&format!("{}\n", server.one_time_url()))?;
        }
        tokio::select! {
            r = server.run() => r?,
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(crate::exit::Exit::Success)
    })
}

/// `prdloop run --serve`: the dashboard on a thread of its own beside the run, for as long as
/// the process lives. Its sign-in address (a one-time code's) is printed on stderr when that
/// is a terminal; else stderr may be a log a worker reads, so it gets the plain address and
/// the path of a file only the user can read, hidden from workers, holding the sign-in one.
pub fn beside(opts: Options) -> Result<()> {
    use std::io::IsTerminal;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to start the dashboard's runtime")?;
    let server = rt.block_on(Server::bind(opts))?;
    if std::io::stderr().is_terminal() {
        crate::report::eline(&format!("dashboard: {}", server.one_time_url()));
    } else {
        match sign_in_file(&server) {
            Ok(file) => crate::report::eline(&format!(
                "dashboard: {} (sign in with the address in {})",
                server.url,
                file.display()
            )),
            Err(e) => crate::report::eline(&format!(
                "dashboard: {} (no sign-in address: {e:#}; `prdloop serve` prints one of its own)",
                server.url
            )),
        }
    }
    std::thread::Builder::new()
        .name("dashboard".into())
        .spawn(move || {
            if let Err(e) = rt.block_on(server.run()) {
                crate::report::warn(Warning::Stopped {
                    error: format!("{e:#}"),
                });
            }
        })
        .context("failed to start the dashboard")?;
    Ok(())
}

/// Writes a one-time code's address into a file of its own (mode 0600) in
/// [`crate::worker::secrets::SIGN_IN_DIR`] under `$HOME` (mode 0700, hidden from workers);
/// its path.
fn sign_in_file(server: &Server) -> Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("HOME is not set")?;
    let dir = PathBuf::from(home).join(crate::worker::secrets::SIGN_IN_DIR);
    if let Some(up) = dir.parent() {
        std::fs::create_dir_all(up)
            .with_context(|| format!("could not create {}", up.display()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(e).with_context(|| format!("could not create {}", dir.display()));
        }
        _ => {}
    }
    let port = server
        .url
        .rsplit(':')
        .next()
        .unwrap_or("")
        .trim_end_matches('/');
    let file = dir.join(format!("dashboard-{port}.url"));
    // One left by an earlier run on this port: replaced, never written through.
    let _ = std::fs::remove_file(&file);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&file)
        .with_context(|| format!("could not create {}", file.display()))?;
    f.write_all(format!("{}\n", server.one_time_url()).as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("could not write {}", file.display()))?;
    Ok(file)
}

/// Hands `url` (a one-time code's) to the system's opener; `false` when it cannot start.
fn open_browser(url: &str) -> bool {
    let prog = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(prog)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        crate::report::warn(Warning::NoBrowser {
            program: prog,
            error: e.to_string(),
        });
        return false;
    }
    true
}

/// What the dashboard warns about on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Warning {
    /// The server beside a run stopped (the run goes on).
    Stopped { error: String },
    /// The system's opener could not start: the address is printed instead.
    NoBrowser {
        program: &'static str,
        error: String,
    },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::Stopped { error } => f.write_str(error),
            Warning::NoBrowser { program, error } => write!(
                f,
                "could not open a browser with {program} ({error}); open the address below"
            ),
        }
    }
}

/// Equal in time whatever the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The token from `?token=` (hex: no decoding needed).
fn token_of(query: Option<&str>) -> Option<&str> {
    param(query, "token")
}

/// The value of `name` in a query string (hex values: no decoding needed).
fn param<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// The value of the cookie `name` in a request's headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(name)?.strip_prefix('='))
}

/// Swaps a one-time code for the session's cookie: `Some` (a redirect to the page without
/// the code) when `code` is one not used yet, which is used up.
fn sign_in(app: &App, code: &str) -> Option<Response> {
    let mut codes = app.codes.lock().ok()?;
    let i = codes.iter().position(|c| same(c, code))?;
    codes.swap_remove(i);
    let set = format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/",
        app.cookie, app.token
    );
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        header::HeaderValue::from_str(&set).ok()?,
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    Some(r)
}

/// A refusal, and the connection closed after it: one without the token holds no place
/// under the connection cap ([`limits`]).
fn refuse(status: StatusCode, why: &'static str) -> Response {
    (status, [(header::CONNECTION, "close")], why).into_response()
}

/// Refuses a request without the token, or with a foreign `Host` or `Origin`.
async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if !host.is_some_and(|h| app.hosts.iter().any(|a| a == h)) {
        return refuse(StatusCode::FORBIDDEN, "refused: a foreign Host\n");
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !origin
            .to_str()
            .is_ok_and(|o| app.origins.iter().any(|a| a == o))
    {
        return refuse(StatusCode::FORBIDDEN, "refused: a foreign Origin\n");
    }
    if req.uri().path() == "/"
        && let Some(code) = param(req.uri().query(), "code")
        && let Some(signed_in) = sign_in(&app, code)
    {
        return signed_in;
    }
    let by_cookie = cookie(headers, &app.cookie).is_some_and(|t| same(t, &app.token));
    if !by_cookie && !token_of(req.uri().query()).is_some_and(|t| same(t, &app.token)) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "refused: open the address prdloop printed (its code works once)\n",
        );
    }
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    // Nothing but the page's own script (see `page`) runs, nothing loads from elsewhere, and
    // the page is not to be framed.
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            header::HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
        );
    }
    h.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    r
}

/// The page, its script allowed by a nonce of this response: what runs is the page's script
/// and nothing else (no handler or script in text a worker or a PRD wrote, were any to reach
/// the page as markup).
async fn page() -> Response {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let csp = format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    );
    let html = PAGE.replacen("<script>", &format!("<script nonce=\"{nonce}\">"), 1);
    (
        [(
            header::CONTENT_SECURITY_POLICY,
            header::HeaderValue::from_str(&csp).expect("an ASCII header"),
        )],
        Html(html),
    )
        .into_response()
}

/// Runs a disk read off the async threads.
async fn read<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("a dashboard read panicked")
}

async fn sessions(State(app): State<Arc<App>>) -> Json<Vec<data::SessionView>> {
    Json(
        read(move || {
            data::sessions(&app.dirs, &app.cache)
                .iter()
                .map(data::view)
                .collect()
        })
        .await,
    )
}

async fn session(State(app): State<Arc<App>>, UrlPath(id): UrlPath<String>) -> Response {
    match read(move || data::find(&app.dirs, &id).map(|f| data::detail(&f))).await {
        Some(d) => Json(d).into_response(),
        None => (StatusCode::NOT_FOUND, "no such session\n").into_response(),
    }
}

#[derive(Deserialize)]
struct FileQuery {
    file: String,
}

async fn log(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<FileQuery>,
) -> Response {
    text(read(move || data::find(&app.dirs, &id).and_then(|f| data::log(&f, &q.file))).await)
}

async fn diff(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<FileQuery>,
) -> Response {
    text(read(move || data::find(&app.dirs, &id).and_then(|f| data::diff(&f, &q.file))).await)
}

fn text(t: Option<String>) -> Response {
    match t {
        Some(t) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], t).into_response(),
        None => (StatusCode::NOT_FOUND, "not found\n").into_response(),
    }
}

/// Pause and stop: the request `prdloop pause|stop` makes. Resume: `prdloop resume` started
/// for the session's PRD and state folder, in a process group of its own, its output in
/// the session's log folder.
async fn act(
    State(app): State<Arc<App>>,
    UrlPath((id, action)): UrlPath<(String, String)>,
) -> Response {
    let r = read(move || -> Result<(StatusCode, String)> {
        let Some(f) = data::find(&app.dirs, &id) else {
            return Ok((StatusCode::NOT_FOUND, "no such session".into()));
        };
        let prd = PathBuf::from(&f.state.prd_path);
        let ask = match action.as_str() {
            "pause" => Ask::Pause,
            "stop" => Ask::Stop,
            "resume" => return resume(&f),
            _ => return Ok((StatusCode::NOT_FOUND, format!("no action `{action}`"))),
        };
        if !data::is_live(&f.state) {
            return Ok((
                StatusCode::CONFLICT,
                format!(
                    "session {} is not running; nothing changed",
                    f.state.session_id
                ),
            ));
        }
        Ok(match request::send(&prd, ask)? {
            Some(h) => (
                StatusCode::OK,
                format!(
                    "asked session {} (pid {}) to {}",
                    h.session_id,
                    h.pid,
                    ask.word()
                ),
            ),
            None => (
                StatusCode::CONFLICT,
                "no loop is running on it; nothing changed".into(),
            ),
        })
    })
    .await;
    match r {
        Ok((code, msg)) => (code, Json(serde_json::json!({"message": msg}))).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(serde_json::json!({"message": format!("{e:#}")})),
        )
            .into_response(),
    }
}

#[derive(Deserialize)]
struct AnswerBody {
    criterion: String,
    answer: String,
}

/// An answer to a worker's question: what `prdloop answer` does (the session's PRD's question
/// book; the loop running on it takes the criterion up again within a second).
async fn answer(
    State(app): State<Arc<App>>,
    UrlPath(id): UrlPath<String>,
    Json(body): Json<AnswerBody>,
) -> Response {
    let r = read(move || -> Result<(StatusCode, String)> {
        let Some(f) = data::find(&app.dirs, &id) else {
            return Ok((StatusCode::NOT_FOUND, "no such session".into()));
        };
        let prd = PathBuf::from(&f.state.prd_path);
        let (answered, holder) =
            crate::questions::send(&prd, &f.dir, &body.criterion, &body.answer)?;
        Ok(match answered {
            Ok(q) => (
                StatusCode::OK,
                match holder {
                    Some(h) => format!(
                        "answered {}: session {} works on it again within a second",
                        q.criterion, h.session_id
                    ),
                    None => format!(
                        "answered {}: the next run (Resume) works on it with the answer",
                        q.criterion
                    ),
                },
            ),
            Err(e) => (StatusCode::CONFLICT, format!("{e}; nothing changed")),
        })
    })
    .await;
    match r {
        Ok((code, msg)) => (code, Json(serde_json::json!({"message": msg}))).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(serde_json::json!({"message": format!("{e:#}")})),
        )
            .into_response(),
    }
}

fn resume(f: &data::Found) -> Result<(StatusCode, String)> {
    use std::os::unix::process::CommandExt;
    if crate::state::lock_holder(std::path::Path::new(&f.state.prd_path))?.is_some() {
        return Ok((
            StatusCode::CONFLICT,
            "a loop is running on this PRD; nothing started".into(),
        ));
    }
    let out_path =
        PathBuf::from(&f.state.log_dir).join(format!("resume-{}.out", crate::state::now_ms()));
    std::fs::create_dir_all(&f.state.log_dir)?;
    let out = std::fs::File::create(&out_path)
        .with_context(|| format!("failed to create `{}`", out_path.display()))?;
    let exe = std::env::current_exe().context("failed to find prdloop's own binary")?;
    let child = std::process::Command::new(exe)
        .arg("resume")
        .arg(&f.state.prd_path)
        .arg("--state-dir")
        .arg(&f.dir)
        .args(["--progress", "lines"])
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .context("failed to start `prdloop resume`")?;
    Ok((
        StatusCode::OK,
        format!(
            "started `prdloop resume` (pid {}); its output is in {}",
            child.id(),
            out_path.display()
        ),
    ))
}

#[derive(Deserialize)]
struct EventsQuery {
    session: Option<String>,
}

/// Server-sent events: `update`, the session list and the chosen session's detail, each
/// time what is on disk changed (read every half second, once for every client: see
/// [`live`]).
async fn events(
    State(app): State<Arc<App>>,
    Query(q): Query<EventsQuery>,
    _headers: HeaderMap,
) -> Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let client = app.live.subscribe(q.session);
    let stream = futures_util::stream::unfold(client, |mut client| async move {
        let now = client.next().await?;
        Some((Ok(Event::default().event("update").data(now)), client))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// How the event streams' snapshot is made: the session list, and the detail of each
/// session a client watches.
fn snapshot(dirs: Vec<PathBuf>, cache: Arc<data::Cache>) -> Arc<live::Build> {
    Arc::new(move |wanted: &[String]| {
        let list: Vec<data::SessionView> = data::sessions(&dirs, &cache)
            .iter()
            .map(data::view)
            .collect();
        let details = wanted
            .iter()
            .map(|id| {
                let d = data::find(&dirs, id).map(|f| data::detail(&f));
                (id.clone(), to_json(&d))
            })
            .collect();
        live::Snapshot {
            list: to_json(&list),
            details,
            built: true,
        }
    })
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_compared_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd") && !same("abc", "ab") && !same("", "a"));
        assert_eq!(token_of(Some("a=1&token=xyz")), Some("xyz"));
        assert_eq!(token_of(Some("tokens=xyz")), None);
        assert_eq!(token_of(None), None);
    }
}
