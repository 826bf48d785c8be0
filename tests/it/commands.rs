//! PAI's command set: new, pause, stop, resume, interactive, and notifications.

use std::sync::{Arc, Mutex};

use crate::common::*;
use serde_json::json;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn new_writes_a_prd_that_parses_round_trips_and_is_never_overwritten() {
    let sb = Sandbox::new("", json!({}));
    let dir = sb.root().join("prds");
    let o = sb.run(&[
        "new",
        "-t",
        "Build Auth: System!! v2",
        "-e",
        "extended",
        "-p",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let path = stdout(&o).lines().next().unwrap().to_string();
    let today = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let name = today.to_string_lossy();
    assert!(
        name.starts_with("PRD-") && name.ends_with("-build-auth-system-v2.md"),
        "{name}"
    );
    assert!(
        stdout(&o).contains(&format!("prdloop run {} -a 4", dir.join(&*name).display())),
        "the next command names the file: {}",
        stdout(&o)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let p = prdloop::prd::Prd::parse(text.clone()).unwrap();
    assert_eq!(p.text(), text);
    assert_eq!(p.front.effort_level, "Extended");
    assert_eq!(p.front.status, "DRAFT");
    assert_eq!(p.front.verification_summary.as_deref(), Some("0/0"));
    assert_eq!(p.title.as_deref(), Some("Build Auth: System!! v2"));
    // Same title, same day: a new id, the first file untouched.
    let o = sb.run(&[
        "new",
        "-t",
        "Build Auth: System!! v2",
        "-p",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let second = stdout(&o).lines().next().unwrap().to_string();
    assert!(second.ends_with("-build-auth-system-v2-2.md"), "{second}");
    let p2 = prdloop::prd::Prd::parse(std::fs::read_to_string(&second).unwrap()).unwrap();
    assert_ne!(p2.id(), p.id());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    // An empty title is refused.
    let o = sb.run(&["new", "-t", "", "-p", dir.to_str().unwrap()]);
    snapshot!(sb.root(), "new_with_an_empty_title", &shown(&o));
    // v4: `<folder>/PRD.md` with v4's front matter; found by its slug.
    let o = sb.run(&["new", "-t", "Webhook retries", "--format", "v4"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v4 = stdout(&o).lines().next().unwrap().to_string();
    assert!(v4.ends_with("_webhook-retries/PRD.md"), "{v4}");
    let p4 = prdloop::prd::Prd::parse(std::fs::read_to_string(&v4).unwrap()).unwrap();
    assert_eq!(p4.front.format, prdloop::prd::Format::V4);
    let o = sb.run(&["status", p4.id().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("phase observe"), "{}", stdout(&o));
    // Without -p: PAI's work folder, found by id afterwards.
    let o = sb.run(&["new", "-t", "!!!"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let path = stdout(&o).lines().next().unwrap().to_string();
    assert!(
        path.contains("/MEMORY/WORK/") && path.ends_with("-task.md"),
        "{path}"
    );
    let id = std::path::Path::new(&path)
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let o = sb.run(&["status", &id]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = sb.run(&["new", "-t", "x", "-e", "Huge"]);
    snapshot!(sb.root(), "new_with_an_unknown_effort", &shown(&o));
}

#[test]
fn pause_lets_running_workers_finish_and_ends_paused() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b", "- [ ] ISC-A-3: c"]),
        json!({"*": ["sleep:2000"]}),
    );
    let child = sb.spawn(&["run", "PRD.md"]);
    sb.wait_for_workers(1);
    let o = sb.run(&["pause", "PRD.md", "--wait"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("asked session"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("the loop has ended (loopStatus: paused)"),
        "{}",
        stdout(&o)
    );
    let out = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let text = sb.prd_text();
    assert!(text.contains("\nloopStatus: paused\n"));
    assert!(
        text.contains("- [x] ISC-A-1:"),
        "the running worker finished and counted"
    );
    assert_eq!(
        sb.worker_records().len(),
        1,
        "no worker started after the request"
    );
    sb.assert_no_process_left();
}

#[test]
fn stop_ends_the_workers_and_ends_stopped() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"*": ["hang"]}),
    );
    let child = sb.spawn(&["run", "PRD.md", "-a", "2", "--kill-grace", "1s"]);
    sb.wait_for_workers(2);
    let o = sb.run(&["stop", "-p", "PRD.md"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(sb.prd_text().contains("\nloopStatus: stopped\n"));
    assert_eq!(sb.state()["active"], false);
    sb.assert_no_process_left();
}

#[test]
fn pause_and_stop_without_a_running_loop_change_nothing() {
    let prd = prd_with(&["- [ ] ISC-A-1: a"]).replace("loopStatus: null", "loopStatus: completed");
    let sb = Sandbox::new(&prd, json!({}));
    let text = transcript(&sb, &[&["pause", "PRD.md"], &["stop", "PRD.md"]]);
    snapshot!(sb.root(), "pause_and_stop_without_a_loop", &text);
    assert_eq!(
        sb.prd_text(),
        prd,
        "PAI's stop overwrote finished states; prdloop does not"
    );
}

#[test]
fn resume_keeps_the_session_its_history_and_its_agent_count() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"*": ["fail:first try was wrong"]}),
    );
    let o = sb.run(&["run", "PRD.md", "-a", "2", "-n", "1"]);
    assert_eq!(code(&o), 1);
    let first = sb.state();
    let session = first["sessionId"].as_str().unwrap().to_string();
    sb.set_plan(json!({"*": ["pass"]}));
    let o = sb.run(&["resume", "PRD.md", "-n", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // (Two lanes: the order of their lines varies, so no snapshot of the whole.)
    assert!(
        stderr(&o).starts_with(&format!(
            "resuming session {session}: 1 earlier iteration(s), 2 attempt(s), $0.0040 spent · with its --agents 2\n"
        )),
        "{}",
        stderr(&o)
    );
    assert_eq!(sb.state_count(), 1, "the same state file");
    let st = sb.state();
    assert_eq!(st["sessionId"], session.as_str());
    assert_eq!(st["parallelAgents"], 2);
    assert_eq!(st["loopHistory"].as_array().unwrap().len(), 2);
    assert_eq!(st["criteria"][0]["attempts"], 2);
    assert_eq!(attempts(&st).len(), 4);
    let recs = sb.worker_records();
    let retry = recs
        .iter()
        .find(|r| {
            r["criterion"] == "ISC-A-1" && r["session"] == session.as_str() && r["step"] == "pass"
        })
        .unwrap();
    assert!(
        retry["prompt"]
            .as_str()
            .unwrap()
            .contains("first try was wrong")
    );
    assert_eq!(retry["attempt"], 2);
    // A resume with nothing to resume says so.
    let sb2 = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let o = sb2.run(&["resume", "PRD.md"]);
    snapshot!(sb2.root(), "resume_with_nothing_to_resume", &shown(&o));
}

#[test]
fn interactive_starts_claude_on_the_prd_and_passes_its_exit_code() {
    let sb = Sandbox::new(
        &prd_with(&["- [x] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"*": ["exit:7"]}),
    );
    for args in [
        &["interactive", "PRD.md"][..],
        &["-m", "interactive", "-p", "PRD.md"],
    ] {
        let o = sb.run(args);
        assert_eq!(code(&o), 7, "{args:?}: {}", stderr(&o));
    }
    for r in sb.worker_records() {
        let prompt = r["args"][0].as_str().unwrap();
        assert!(
            prompt.contains("PRD.md") && prompt.contains("1 of 2 criteria pass"),
            "{prompt}"
        );
        assert!(prompt.contains("- ISC-B-1: b"), "{prompt}");
        assert!(r["claudecode"].is_null());
        assert_eq!(r["cwd"].as_str().unwrap(), sb.work().to_str().unwrap());
    }
}

/// A local notification server: records bodies posted to /notify.
fn notify_server() -> (
    String,
    Arc<Mutex<Vec<serde_json::Value>>>,
    tokio::runtime::Runtime,
) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let g = Arc::clone(&got);
    let addr = rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let app = axum::Router::new().route(
            "/notify",
            axum::routing::post(move |body: axum::body::Bytes| {
                let g = Arc::clone(&g);
                async move {
                    g.lock()
                        .unwrap()
                        .push(serde_json::from_slice(&body).unwrap());
                    "ok"
                }
            }),
        );
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        addr
    });
    (format!("http://{addr}/notify"), got, rt)
}

#[test]
fn notifications_arrive_with_pai_style_messages() {
    let (url, got, _rt) = notify_server();
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-B-1": ["fail", "pass"], "*": ["pass"]}),
    );
    // PAI's iterations: with a barrier between them, each one's count is known (without
    // one, B's retry may pass before iteration 1 closes, and its count says 2 of 2).
    let o = sb.run(&[
        "run",
        "PRD.md",
        "-a",
        "2",
        "--rounds",
        "barrier",
        "--notify-url",
        &url,
        "--voice-id",
        "voice-7",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let bodies = got.lock().unwrap().clone();
    let messages: Vec<&str> = bodies
        .iter()
        .map(|b| b["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            "Starting loop on Test PRD. 2 criteria, 0 already passing. 2 parallel agents.",
            "Iteration 1 complete. 1 of 2 passing. Gained 1.",
            "Iteration 2 complete. 2 of 2 passing. Gained 1.",
            "Loop complete on Test PRD. All 2 criteria passing.",
        ]
    );
    assert!(bodies.iter().all(|b| b["voice_id"] == "voice-7"));
}

#[test]
fn an_unreachable_notification_url_costs_one_warning_and_nothing_else() {
    // A port that was free a moment ago: connections are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let mut c = sb.command(&["run", "PRD.md"]);
    c.env(
        "PRDLOOP_NOTIFY_URL",
        format!("http://127.0.0.1:{port}/notify"),
    );
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("notifications to").count(),
        1,
        "{}",
        stderr(&o)
    );
}

/// What a local receiver got: the path, the ntfy headers, the body.
#[derive(Debug, Clone)]
struct Hit {
    path: String,
    title: Option<String>,
    priority: Option<String>,
    body: String,
}

/// A local receiver for every HTTP notification target: records each request, any path.
fn receiver() -> (String, Arc<Mutex<Vec<Hit>>>, tokio::runtime::Runtime) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let g = Arc::clone(&got);
    let addr = rt.block_on(async move {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let app = axum::Router::new().fallback(
            move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let g = Arc::clone(&g);
                async move {
                    let header = |n: &str| headers.get(n).map(|v| v.to_str().unwrap().to_string());
                    g.lock().unwrap().push(Hit {
                        path: uri.path().to_string(),
                        title: header("title"),
                        priority: header("priority"),
                        body: String::from_utf8(body.to_vec()).unwrap(),
                    });
                    "ok"
                }
            },
        );
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        addr
    });
    (format!("http://{addr}"), got, rt)
}

/// A fake `notify-send` on PATH that appends its arguments, one a line, to `file`.
fn fake_notify_send(sb: &Sandbox, file: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = sb.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("notify-send");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\n",
            file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn every_notification_target_is_told_of_a_finished_run() {
    let (base, got, _rt) = receiver();
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let desktop = sb.root().join("desktop.txt");
    let event = sb.root().join("event.json");
    let path = fake_notify_send(&sb, &desktop);
    let targets = [
        format!("ntfy:{base}/topic"),
        format!("slack:{base}/slack"),
        format!("discord:{base}/discord"),
        "desktop".to_string(),
        "pai-voice".to_string(),
        format!("command:cat > '{}'", event.display()),
    ];
    let mut args = vec!["run", "PRD.md", "--notify-url"];
    let voice = format!("{base}/voice");
    args.push(&voice);
    for t in &targets {
        args.extend(["--notify", t.as_str()]);
    }
    let mut c = sb.command(&args);
    c.env("PATH", path);
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(120));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("notifications to"), "{}", stderr(&o));
    let hits = got.lock().unwrap().clone();
    let on = |p: &str| hits.iter().filter(|h| h.path == p).collect::<Vec<_>>();
    let done = "Loop complete on Test PRD. All 1 criteria passing.";
    // The default: only what matters (the end), once per target.
    let ntfy = on("/topic");
    assert_eq!(ntfy.len(), 1, "{hits:?}");
    assert_eq!(ntfy[0].body, done);
    assert_eq!(ntfy[0].title.as_deref(), Some("prdloop: Test PRD (done)"));
    assert_eq!(ntfy[0].priority.as_deref(), Some("default"));
    let slack = on("/slack");
    assert_eq!(slack.len(), 1, "{hits:?}");
    let v: serde_json::Value = serde_json::from_str(&slack[0].body).unwrap();
    assert_eq!(
        v,
        json!({"text": format!("*prdloop: Test PRD (done)*\n{done}")})
    );
    let discord = on("/discord");
    assert_eq!(discord.len(), 1, "{hits:?}");
    let v: serde_json::Value = serde_json::from_str(&discord[0].body).unwrap();
    assert_eq!(
        v,
        json!({
            "content": format!("**prdloop: Test PRD (done)**\n{done}"),
            // A worker's text (a question) in a message pings no one.
            "allowed_mentions": {"parse": []},
        })
    );
    // PAI's voice as before: the start, the iteration, the end (`pai-voice` and
    // `--notify-url` are one target).
    let voice: Vec<String> = on("/voice")
        .iter()
        .map(|h| {
            serde_json::from_str::<serde_json::Value>(&h.body).unwrap()["message"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(voice.len(), 3, "{voice:?}");
    assert!(
        voice[0].starts_with("Starting loop on Test PRD."),
        "{voice:?}"
    );
    assert_eq!(voice[2], done);
    let desktop = std::fs::read_to_string(&desktop).unwrap();
    assert_eq!(
        desktop,
        format!("--app-name=prdloop\n--\nprdloop: Test PRD (done)\n{done}\n")
    );
    let e: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&event).unwrap()).unwrap();
    assert_eq!(e["event"], "done");
    assert_eq!(e["outcome"], "completed");
    assert_eq!(e["message"], done);
    assert_eq!(
        (e["passing"].as_u64(), e["total"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(e["title"], "Test PRD");
    assert_eq!(e["session"], sb.state()["sessionId"]);
    assert!(e["prd"].as_str().unwrap().ends_with("PRD.md"), "{e}");
}

#[test]
fn notify_on_picks_the_events_a_limit_and_a_person_are_told() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: a",
            "- [ ] ISC-UX-1: looks right | Verify: Custom: open it",
        ]),
        json!({"ISC-A-1": ["usage-limit-once:1"], "*": ["pass"]}),
    );
    let events = sb.root().join("events.jsonl");
    let target = format!("command:cat >> '{}'", events.display());
    let o = sb.run(&[
        "run",
        "PRD.md",
        "--notify",
        &target,
        "--notify-on",
        "limit,resumed,needs-person",
    ]);
    assert_eq!(code(&o), 4, "blocked: {}", stderr(&o));
    let text = std::fs::read_to_string(&events).unwrap();
    let kinds: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds, ["limit", "resumed", "needs-person"], "{text}");
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["outcome"], "blocked");
    assert_eq!(
        (last["passing"].as_u64(), last["total"].as_u64()),
        (Some(1), Some(2))
    );
}

#[test]
fn a_bad_notify_target_is_refused_naming_the_flag() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let before = sb.prd_text();
    for bad in [
        "voice",
        "ntfy:topic",
        "https://example.com/hook",
        "command:",
    ] {
        let o = sb.run(&["run", "PRD.md", "--notify", bad]);
        assert_eq!(code(&o), 2, "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--notify"), "{bad}: {}", stderr(&o));
    }
    assert!(sb.worker_records().is_empty());
    assert_eq!(sb.prd_text(), before);
}

#[test]
fn a_failing_notify_program_is_a_warning_not_a_failure() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"*": ["pass"]}),
    );
    let o = sb.run(&[
        "run",
        "PRD.md",
        "--notify",
        "command:exit 3",
        "--notify-on",
        "done,failed",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("notifications to `exit 3` fail").count(),
        1,
        "{}",
        stderr(&o)
    );
}

/// The session id of the one state file in `dir` (a state folder given with --state-dir).
fn session_in(dir: &std::path::Path) -> String {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a state file");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    v["sessionId"].as_str().unwrap().to_string()
}

#[test]
fn pause_from_another_state_folder_or_home_reaches_the_running_loop() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b", "- [ ] ISC-A-3: c"]),
        json!({"*": ["sleep:2000"]}),
    );
    let loop_dir = sb.root().join("loop-state");
    let child = sb.spawn(&["run", "PRD.md", "--state-dir", loop_dir.to_str().unwrap()]);
    sb.wait_for_workers(1);
    let session = session_in(&loop_dir);
    // Another HOME and PAI_DIR, and no --state-dir: the default state folder is not the loop's.
    let home = sb.root().join("other-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = sb.command(&["pause", "PRD.md", "--wait"]);
    cmd.env("HOME", &home).env("PAI_DIR", home.join(".claude"));
    let o = wait_output(cmd.spawn().unwrap(), std::time::Duration::from_secs(120));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("asked session {session}")),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains(&loop_dir.display().to_string()),
        "names the loop's state folder: {}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("the loop has ended (loopStatus: paused)"),
        "{}",
        stdout(&o)
    );
    let out = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(sb.prd_text().contains("\nloopStatus: paused\n"));
    assert_eq!(
        sb.worker_records().len(),
        1,
        "no worker started after the request"
    );
    sb.assert_no_process_left();
}

#[test]
fn status_and_stop_find_a_loop_with_another_state_folder() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
    let loop_dir = sb.root().join("loop-state");
    let child = sb.spawn(&[
        "run",
        "PRD.md",
        "--kill-grace",
        "1s",
        "--state-dir",
        loop_dir.to_str().unwrap(),
    ]);
    sb.wait_for_workers(1);
    let session = session_in(&loop_dir);
    // The default state folder (the sandbox's PAI_DIR), not the loop's.
    let o = sb.run(&["status", "PRD.md"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("running now: session {session}")),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains(&loop_dir.display().to_string()),
        "{}",
        stdout(&o)
    );
    let other = sb.root().join("yet-another-state");
    let o = sb.run(&[
        "status",
        "PRD.md",
        "--json",
        "--state-dir",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["liveLoop"]["session"], session.as_str(), "{v}");
    assert_eq!(v[0]["liveLoop"]["stateDir"], loop_dir.to_str().unwrap());
    let o = sb.run(&["stop", "PRD.md", "--state-dir", other.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(sb.prd_text().contains("\nloopStatus: stopped\n"));
    let o = sb.run(&["status", "PRD.md"]);
    assert!(!stdout(&o).contains("running now"), "{}", stdout(&o));
    sb.assert_no_process_left();
}

#[test]
fn logs_shows_a_workers_attempt_for_people_and_raw() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["fail:first try", "pass"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-a", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let o = sb.run(&["logs", "PRD.md", "ISC-A-1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    snapshot!(sb.root(), "logs_for_people", &shown(&o));
    let o = sb.run(&["logs", "PRD.md", "ISC-A-1", "--attempt", "1", "--raw"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains(r#"RESULT: ISC-A-1 FAIL: first try"#),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o)
            .lines()
            .next()
            .unwrap()
            .contains(r#""subtype":"init""#),
        "{}",
        stdout(&o)
    );
    let o = sb.run(&["logs", "PRD.md", "ISC-Z-9"]);
    snapshot!(sb.root(), "logs_of_an_unknown_criterion", &shown(&o));
}

#[test]
fn logs_follow_prints_a_running_workers_log_until_it_ends() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        json!({"*": ["sleep:1500"]}),
    );
    let run = sb.spawn(&["run", "PRD.md"]);
    sb.wait_for_workers(1);
    let o = sb.run(&["logs", "PRD.md", "ISC-A-1", "-f"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("── result: success"),
        "followed to the result: {}",
        stdout(&o)
    );
    let out = wait_output(run, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// A raw HTTP/1.1 request to 127.0.0.1:`port` (every header as given, so that `Host` and
/// `Origin` can be anything): its status and body.
fn http(port: u16, request: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// The port of a dashboard address (`http://127.0.0.1:PORT/?code=…`).
/// The file `run --serve` names on its `dashboard:` line (after `dashboard: `) for its
/// sign-in address.
fn sign_in_file_of(line: &str) -> std::path::PathBuf {
    let (_, rest) = line
        .split_once(" (sign in with the address in ")
        .unwrap_or_else(|| panic!("no sign-in file named: {line}"));
    rest.trim_end_matches(')').into()
}

/// The sign-in address of a `dashboard:` line of `run --serve` (from the file it names).
fn sign_in_address(line: &str) -> String {
    std::fs::read_to_string(sign_in_file_of(line))
        .unwrap()
        .trim()
        .to_string()
}

fn port_of(url: &str) -> u16 {
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .expect("bound to 127.0.0.1");
    rest.split_once('/').unwrap().0.parse().unwrap()
}

/// Signs in with a dashboard address's one-time code, as a browser does: the response to
/// the first request with it (its status, and the session token its cookie carries).
fn sign_in(url: &str) -> (u16, Option<String>) {
    use std::io::{Read, Write};
    let port = port_of(url);
    let path = &url[url.find(&format!(":{port}/")).unwrap() + port.to_string().len() + 1..];
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let cookie = format!("set-cookie: prdloop-{port}=");
    let token = out.lines().find_map(|l| {
        let lower = l.to_ascii_lowercase();
        lower
            .starts_with(&cookie)
            .then(|| l[cookie.len()..].split(';').next().unwrap().to_string())
    });
    (status, token)
}

/// The port and session token of a dashboard address: signed in with its one-time code.
fn port_and_token(url: &str) -> (u16, String) {
    let (status, token) = sign_in(url);
    assert_eq!(status, 303, "{url}");
    (port_of(url), token.expect("a session cookie"))
}

/// `prdloop serve` on the sandbox's state folder; ended when dropped.
struct Served {
    child: std::process::Child,
    url: String,
}

impl Served {
    fn start(sb: &Sandbox) -> Served {
        use std::io::BufRead;
        let state = sb.state_dir();
        let mut child = sb.spawn(&["serve", "--state-dir", state.to_str().unwrap()]);
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Served {
            child,
            url: line.trim().to_string(),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve --open` hands the browser a one-time code, not the token: the opener's argv and
/// what is printed carry no token, the code signs in once (a session cookie) and then no
/// more, and the token is in no file of the run (logs, state).
#[test]
fn the_dashboard_token_is_in_no_argv_output_or_file() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "--serve"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    // `run --serve` with its stderr not a terminal (a log a worker may read) prints no code
    // and no token: the one-time code's address is in a file only the user reads, in a
    // folder workers cannot read.
    assert!(err.contains("dashboard: http://127.0.0.1:"), "{err}");
    assert!(!err.contains("code=") && !err.contains("token="), "{err}");
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("dashboard: "))
        .unwrap();
    let file = sign_in_file_of(line);
    assert!(
        file.starts_with(sb.root().join(".local/state/prdloop/sign-in")),
        "{}",
        file.display()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", file.display());
    let dir_mode = std::fs::metadata(file.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    assert!(
        std::fs::read_to_string(&file).unwrap().contains("/?code="),
        "{}",
        file.display()
    );
    let bin = sb.root().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let opened = sb.root().join("opened.txt");
    let opener = bin.join("xdg-open");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nprintf '%s' \"$*\" > '{}.tmp' && mv '{0}.tmp' '{0}'\n",
            opened.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = sb.state_dir();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = sb
        .command(&["serve", "--open", "--state-dir", state.to_str().unwrap()])
        .env("PATH", path)
        .spawn()
        .unwrap();
    let mut line = String::new();
    {
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
    }
    let mut argv = String::new();
    for _ in 0..600 {
        if let Ok(t) = std::fs::read_to_string(&opened) {
            argv = t;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(argv.contains("/?code="), "the opener got {argv:?}");
    assert!(!line.contains("code=") && !line.contains("token"), "{line}");
    let (status, token) = sign_in(argv.trim());
    let token = token.expect("a session cookie");
    assert_eq!(status, 303);
    assert!(!argv.contains(&token) && !line.contains(&token));
    // The code works once.
    assert_eq!(sign_in(argv.trim()), (401, None));
    // With the cookie, the API answers.
    let port = port_of(argv.trim());
    let (status, _) = http(
        port,
        &format!(
            "GET /api/sessions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: prdloop-{port}={token}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 200);
    let _ = child.kill();
    let _ = child.wait();
    // In no file under the test's root: logs, state, the PRD.
    let mut todo = vec![sb.root().to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                todo.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(&token),
                    "the token is in {}",
                    p.display()
                );
            }
        }
    }
}

#[test]
fn the_dashboard_refuses_a_request_without_its_token_or_from_elsewhere() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    assert_eq!(code(&sb.run(&["run", "PRD.md"])), 0);
    let session = session_in(&sb.state_dir());
    let served = Served::start(&sb);
    let (port, token) = port_and_token(&served.url);
    assert_eq!(token.len(), 32, "{}", served.url);
    let host = format!("127.0.0.1:{port}");
    let get = |path: &str, extra: &str| {
        http(
            port,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"),
        )
    };
    let (status, page) = get(&format!("/?token={token}"), "");
    assert_eq!(status, 200);
    assert!(page.contains("<title>prdloop</title>"), "{page}");
    // Nothing loaded from elsewhere (the SVG namespace is a name, not a request).
    let own = page.replace("http://www.w3.org/2000/svg", "");
    assert!(
        !own.contains("http://") && !own.contains("https://") && !own.contains("//cdn"),
        "nothing loaded from elsewhere"
    );
    let (status, list) = get(&format!("/api/sessions?token={token}"), "");
    assert_eq!(status, 200, "{list}");
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["id"], session.as_str());
    assert_eq!(
        (list[0]["passing"].as_u64(), list[0]["live"].as_bool()),
        (Some(1), Some(false))
    );
    // One character off (a token that starts with `0` gets a `1`: a 1-in-16 chance made this
    // "wrong" token the right one).
    let first = if token.starts_with('0') { '1' } else { '0' };
    for path in ["/", "/api/sessions", &format!("/api/sessions/{session}")] {
        assert_eq!(get(path, "").0, 401, "{path} without the token");
        assert_eq!(
            get(&format!("{path}?token={first}{}", &token[1..]), "").0,
            401,
            "{path}, a wrong token"
        );
    }
    let foreign_host = http(
        port,
        &format!(
            "GET /?token={token} HTTP/1.1\r\nHost: attacker.example:{port}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(foreign_host.0, 403, "a rebound name");
    let foreign_origin = get(
        &format!("/api/sessions?token={token}"),
        "Origin: http://attacker.example\r\n",
    );
    assert_eq!(foreign_origin.0, 403);
    let post = |origin: &str| {
        http(
            port,
            &format!(
                "POST /api/sessions/{session}/stop?token={token} HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    assert_eq!(post("http://attacker.example").0, 403);
    // Its own origin gets an answer: no loop runs on the PRD, so nothing changes.
    let before = sb.prd_text();
    let (status, body) = post(&format!("http://{host}"));
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("not running"), "{body}");
    assert_eq!(sb.prd_text(), before);
    // Logs are named by file within the session's log folder, nothing else.
    let (status, _) = get(
        &format!("/api/sessions/{session}/log?file=..%2F..%2Fplan.json&token={token}"),
        "",
    );
    assert_eq!(status, 404);
    let log = sb.state()["criteria"][0]["lastLog"]
        .as_str()
        .unwrap()
        .to_string();
    let name = std::path::Path::new(&log)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let (status, text) = get(
        &format!("/api/sessions/{session}/log?file={name}&token={token}"),
        "",
    );
    assert_eq!(status, 200);
    assert!(text.contains("RESULT: ISC-A-1 PASS"), "{text}");
}

/// The Chromium to drive: `PRDLOOP_CHROMIUM`, else `chromium` on PATH. Under CI a missing one
/// fails the test; elsewhere it is skipped with a line saying so.
fn chromium() -> Option<String> {
    if let Ok(p) = std::env::var("PRDLOOP_CHROMIUM")
        && !p.is_empty()
    {
        return Some(p);
    }
    if let Ok(p) = which::which("chromium") {
        return Some(p.display().to_string());
    }
    let how = "`apt-get install chromium` (as .ci/run does), or set PRDLOOP_CHROMIUM";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("no Chromium: CI must run the dashboard's browser test; {how}");
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipped: the dashboard's browser test needs Chromium; {how}"
    );
    None
}

/// Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
/// NUL-separated JSON on fds 3 and 4, which `sh` maps to the child's stdin and stdout).
struct Browser {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::sync::mpsc::Receiver<serde_json::Value>,
    next: u64,
    session: Option<String>,
}

/// How long the browser test waits for anything (a safety limit, not a speed assertion).
const BROWSER_LIMIT: std::time::Duration = std::time::Duration::from_secs(90);

impl Browser {
    fn launch(bin: &str, profile: &std::path::Path) -> Browser {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-pipe",
                "--window-size=1280,1000",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let input = child.stdin.take().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, output) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            while out.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                if let Ok(v) = serde_json::from_slice(buf.strip_suffix(&[0]).unwrap_or(&buf)) {
                    let _ = tx.send(v);
                }
                buf.clear();
            }
        });
        Browser {
            child,
            input,
            output,
            next: 0,
            session: None,
        }
    }

    /// One protocol call (on the page once one is open): its result.
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        use std::io::Write;
        self.next += 1;
        let mut msg = json!({"id": self.next, "method": method, "params": params});
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(0);
        self.input.write_all(&bytes).unwrap();
        self.input.flush().unwrap();
        let t = std::time::Instant::now();
        loop {
            let left = BROWSER_LIMIT.saturating_sub(t.elapsed());
            let v = self
                .output
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer from chromium to {method}"));
            if v["id"] == json!(self.next) {
                assert!(v["error"].is_null(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Opens `url` in a new page and talks to that page from now on.
    fn open(&mut self, url: &str) {
        self.session = None;
        let target = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let attached = self.call(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
        );
        self.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}),
        );
        self.call("Page.navigate", json!({"url": url}));
    }

    fn eval(&mut self, expression: &str) -> serde_json::Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        r["result"]["value"].clone()
    }

    /// Evaluates `expression` until it is true (or a safety limit); says `what` if never.
    fn wait_for(&mut self, what: &str, expression: &str) {
        let t = std::time::Instant::now();
        while self.eval(expression) != json!(true) {
            assert!(
                t.elapsed() < BROWSER_LIMIT,
                "the page never showed {what}; it shows:\n{}",
                self.eval("document.body ? document.body.innerText : ''")
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine;
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[cfg_attr(
    not(e2e_chromium),
    ignore = "needs Chromium: `apt-get install chromium` (as .ci/run does), or set PRDLOOP_CHROMIUM"
)]
fn a_live_run_is_followed_and_paused_from_the_dashboard_in_a_real_browser() {
    let Some(bin) = chromium() else {
        return;
    };
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-H-1: a worker's hostile reason",
            "- [ ] ISC-A-1: the first criterion",
            "- [ ] ISC-B-1: the second, after it",
            "- [ ] ISC-C-1: the third, never reached",
        ]),
        // Long enough for a browser to start and look; ISC-B-1 runs while the page pauses.
        json!({
            "ISC-H-1": [format!("fail:{HOSTILE}")],
            "ISC-A-1": ["work:9000"],
            "ISC-B-1": ["work:15000"],
            "*": ["pass"],
        }),
    );
    let mut run = sb.spawn(&[
        "run",
        "PRD.md",
        "-a",
        "1",
        "--serve",
        "--max-cost",
        "0.5",
        "--progress",
        "lines",
    ]);
    // Its stderr, read as it comes: the dashboard's address is on it.
    let err = Arc::new(Mutex::new(String::new()));
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    {
        use std::io::BufRead;
        let err = Arc::clone(&err);
        let pipe = std::io::BufReader::new(run.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in pipe.lines().map_while(Result::ok) {
                if let Some(u) = line.strip_prefix("dashboard: ") {
                    let _ = url_tx.send(sign_in_address(u));
                }
                err.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
    }
    let url = url_rx
        .recv_timeout(BROWSER_LIMIT)
        .unwrap_or_else(|_| panic!("no dashboard address: {}", err.lock().unwrap()));
    let port = port_of(&url);
    let mut b = Browser::launch(&bin, &sb.root().join("chromium-profile"));

    // Without the token the page is refused.
    b.open(&format!("http://127.0.0.1:{port}/"));
    b.wait_for(
        "the refusal",
        "document.readyState === 'complete' && document.body.innerText.includes('refused')",
    );
    assert_eq!(
        b.eval("document.getElementById('sessions') === null"),
        json!(true)
    );

    // With it, the live run: its lane with what the agent does now, then the criteria moving.
    b.open(&url);
    b.wait_for(
        "lane 1's agent at work on ISC-A-1",
        "(document.querySelector('#lanes tr[data-criterion=\"ISC-A-1\"] .doing')?.textContent || '').includes('isc-a-1')",
    );
    assert_eq!(
        b.eval("document.querySelector('#summary').dataset.live"),
        json!("true")
    );
    b.wait_for(
        "ISC-A-1 passing and ISC-B-1 on the lane",
        "document.querySelector('#criteria tr[data-criterion=\"ISC-A-1\"]')?.dataset.status === 'completed' && !!document.querySelector('#lanes tr[data-criterion=\"ISC-B-1\"]')",
    );
    b.wait_for(
        "the first attempt on the timeline",
        "!!document.querySelector('#timeline rect[data-kind=\"pass\"]') && !!document.querySelector('#timeline rect[data-kind=\"running\"]')",
    );
    assert!(
        b.eval("document.getElementById('cost').textContent")
            .as_str()
            .unwrap()
            .ends_with("of $0.5000"),
        "cost against --max-cost"
    );
    // ISC-A-1's attempt and its log, rendered.
    b.eval("document.querySelector('#criteria tr[data-criterion=\"ISC-A-1\"]').click()");
    b.wait_for(
        "ISC-A-1's attempt",
        "!!document.querySelector('#attempts tr[data-log] button')",
    );
    assert_eq!(
        b.eval("document.querySelector('#attempts tr[data-log] td:nth-child(2)').textContent"),
        json!("1"),
        "it ran on lane 1"
    );
    b.eval("document.querySelector('#attempts tr[data-log] button').click()");
    b.wait_for(
        "ISC-A-1's log",
        "(document.getElementById('viewer')?.textContent || '').includes('▶ Bash: cargo test isc-a-1')",
    );
    // What a worker wrote is shown as text: nothing in it runs or loads.
    b.wait_for(
        "ISC-H-1's reason, as text",
        "(document.querySelector('#criteria tr[data-criterion=\"ISC-H-1\"]')?.innerText || '').includes('<img src=x')",
    );
    assert_eq!(b.eval("document.title"), json!("prdloop"));
    assert_eq!(
        b.eval("document.querySelectorAll('#detail img, #detail script').length"),
        json!(0)
    );
    let png = b.screenshot();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    std::fs::write(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png"),
        &png,
    )
    .unwrap();
    // `PRDLOOP_UPDATE_SCREENSHOT=1` makes it the book's (docs/book/src/images).
    if std::env::var_os("PRDLOOP_UPDATE_SCREENSHOT").is_some() {
        std::fs::write(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("docs/book/src/images/dashboard.png"),
            &png,
        )
        .unwrap();
    }

    // Pause from the page: ISC-B-1's worker finishes and counts, ISC-C-1 never starts.
    b.eval("document.getElementById('pause').click()");
    b.wait_for(
        "the pause asked",
        "(document.getElementById('message')?.textContent || '').includes('to pause')",
    );
    let status = wait_output_status(&mut run);
    let err = err.lock().unwrap().clone();
    assert_eq!(status, 1, "ended paused: {err}");
    assert!(
        sb.prd_text().contains("\nloopStatus: paused\n"),
        "{}",
        sb.prd_text()
    );
    let started: Vec<String> = sb
        .worker_records()
        .iter()
        .map(|r| r["criterion"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!started.iter().any(|c| c == "ISC-C-1"), "{started:?}");
    let state = sb.state();
    assert_eq!(
        state["criteria"][1]["status"], "completed",
        "ISC-B-1 finished and counted"
    );
    // What the agents were doing was published while they ran, and is gone with them.
    let left: Vec<String> = std::fs::read_dir(state["logDir"].as_str().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("activity-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A failure reason that would run script if the page put it in as markup.
const HOSTILE: &str =
    "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>";

/// Waits for a child (a safety limit of 120 s): its exit code.
fn wait_output_status(child: &mut std::process::Child) -> i32 {
    let t = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        if t.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the run did not end");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn the_dashboard_shows_the_diff_that_landed_and_resumes_a_session() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists", "- [ ] ISC-B-1: b"],
        json!({"ISC-A-1": ["write:a.txt"], "ISC-B-1": ["fail", "pass"]}),
        &[("README", "r\n")],
    );
    let o = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let session = session_in(&sb.state_dir());
    let served = Served::start(&sb);
    let (port, token) = port_and_token(&served.url);
    let request = |method: &str, path: &str| {
        http(
            port,
            &format!(
                "{method} {path}{}token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                if path.contains('?') { "&" } else { "?" }
            ),
        )
    };
    let (status, detail) = request("GET", &format!("/api/sessions/{session}"));
    assert_eq!(status, 200, "{detail}");
    let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
    let landed = detail["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["criterion"] == "ISC-A-1")
        .expect("ISC-A-1's attempt")
        .clone();
    assert_eq!(landed["landed"], json!(["a.txt"]), "{landed}");
    let (status, diff) = request(
        "GET",
        &format!(
            "/api/sessions/{session}/diff?file={}",
            landed["log"].as_str().unwrap()
        ),
    );
    assert_eq!(status, 200, "{diff}");
    assert!(diff.contains("a.txt") && diff.contains("+done"), "{diff}");
    // A failed attempt landed nothing: no diff.
    let failed = detail["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["criterion"] == "ISC-B-1")
        .unwrap()
        .clone();
    assert_eq!(failed["verdict"], "fail");
    let (status, _) = request(
        "GET",
        &format!(
            "/api/sessions/{session}/diff?file={}",
            failed["log"].as_str().unwrap()
        ),
    );
    assert_eq!(status, 404);
    // Stop and pause need a live loop; resume starts `prdloop resume` on the session.
    assert_eq!(
        request("POST", &format!("/api/sessions/{session}/pause")).0,
        409
    );
    let (status, body) = request("POST", &format!("/api/sessions/{session}/resume"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("started `prdloop resume`"), "{body}");
    let t = std::time::Instant::now();
    while sb.state()["criteria"][1]["status"] != "completed" || sb.state()["active"] == true {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(120),
            "the resumed run did not finish: {}",
            sb.state()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(
        sb.state()["sessionId"],
        session.as_str(),
        "the same session, resumed"
    );
    assert!(
        sb.prd_text().contains("- [x] ISC-B-1: b"),
        "{}",
        sb.prd_text()
    );
}

#[test]
fn a_budget_end_is_told_by_default_as_budget() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"*": ["cost:0.6"]}),
    );
    let events = sb.root().join("events.jsonl");
    let target = format!("command:cat >> '{}'", events.display());
    let o = sb.run(&[
        "run",
        "PRD.md",
        "-a",
        "1",
        "--max-cost",
        "0.5",
        "--notify",
        &target,
        // The worker's own cost alone (a verifier's review would add to it).
        "--verifier",
        "none",
    ]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let text = std::fs::read_to_string(&events).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert_eq!(lines[0]["event"], "budget");
    assert!(
        (lines[0]["costUsd"].as_f64().unwrap() - 0.6).abs() < 1e-9,
        "{text}"
    );
}

#[test]
fn serve_follows_another_processs_run_over_server_sent_events_with_its_limit_wait() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        json!({"ISC-A-1": ["usage-limit-once:6"], "*": ["pass"]}),
    );
    let run = sb.spawn(&["run", "PRD.md", "--progress", "lines"]);
    let t = std::time::Instant::now();
    while sb.state_count() == 0 {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "no state file"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let session = session_in(&sb.state_dir());
    let served = Served::start(&sb);
    let (port, token) = port_and_token(&served.url);
    // The event stream: its first `update` has the session, live, waiting out the limit.
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET /api/events?session={session}&token={token} HTTP/1.1\r\nHost: localhost:{port}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut lines = std::io::BufReader::new(s).lines();
    let head = lines.next().unwrap().unwrap();
    assert!(head.contains(" 200 "), "{head}");
    let t = std::time::Instant::now();
    let mut updates = 0;
    let waiting = loop {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "the stream never showed the limit's wait"
        );
        let line = lines.next().unwrap().unwrap();
        if line == "event: update" {
            updates += 1;
        }
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        if v["detail"]["session"]["pausedUntil"].is_u64() {
            break v;
        }
    };
    assert!(updates >= 1);
    assert_eq!(waiting["detail"]["session"]["id"], session.as_str());
    assert_eq!(waiting["detail"]["session"]["live"], true);
    assert_eq!(waiting["sessions"][0]["id"], session.as_str());
    let o = wait_output(run, std::time::Duration::from_secs(120));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// The id of the one session in the sandbox's state folder.
fn only_session(sb: &Sandbox) -> String {
    sb.state()["sessionId"].as_str().unwrap().to_string()
}

/// The dashboard answers a worker's question as `prdloop answer` does: the same question
/// book, the same refusals (nothing open for that criterion), and only from its own page.
#[test]
fn the_dashboard_answers_a_question_as_prdloop_answer_does() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["ask-until-answered:Cents or euros?"], "*": ["pass"]}),
    );
    let o = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&o), 8, "{}", stderr(&o));
    let session = only_session(&sb);
    let served = Served::start(&sb);
    let (port, token) = port_and_token(&served.url);
    let host = format!("127.0.0.1:{port}");
    let get = |path: &str| {
        http(
            port,
            &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
    };
    let (status, list) = get(&format!("/api/sessions?token={token}"));
    assert_eq!(status, 200);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["questions"], 1, "{list}");
    let (_, detail) = get(&format!("/api/sessions/{session}?token={token}"));
    let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(detail["questions"][0]["criterion"], "ISC-A-1");
    assert_eq!(detail["questions"][0]["question"], "Cents or euros?");
    let a = detail["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ISC-A-1")
        .unwrap();
    assert_eq!(a["question"], "Cents or euros?");
    let answer = |origin: &str, body: &str| {
        http(
            port,
            &format!(
                "POST /api/sessions/{session}/answer?token={token} HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    };
    let own = format!("http://{host}");
    let body = json!({"criterion": "ISC-A-1", "answer": "Cents."}).to_string();
    assert_eq!(answer("http://attacker.example", &body).0, 403);
    let (status, msg) = answer(
        &own,
        &json!({"criterion": "ISC-B-1", "answer": "x"}).to_string(),
    );
    assert_eq!(status, 409, "{msg}");
    assert!(msg.contains("ISC-B-1 has no open question"), "{msg}");
    let (status, msg) = answer(&own, &body);
    assert_eq!(status, 200, "{msg}");
    assert!(msg.contains("answered ISC-A-1"), "{msg}");
    // Answered once: the CLI finds nothing open, and a second answer is refused.
    let listed = sb.run(&["answer", "PRD.md"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("no question"),
        "{listed:?}"
    );
    assert_eq!(answer(&own, &body).0, 409);
    let o = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let prompt = sb
        .worker_records()
        .into_iter()
        .filter(|r| r["criterion"] == "ISC-A-1")
        .max_by_key(|r| r["start"].as_u64())
        .unwrap()["prompt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.contains("Answer: Cents."), "{prompt}");
}

/// A live run's question on the page (as text, whatever the worker put in it), answered
/// there: the running loop takes the criterion up again and it passes in that run.
#[test]
#[cfg_attr(
    not(e2e_chromium),
    ignore = "needs Chromium: `apt-get install chromium` (as .ci/run does), or set PRDLOOP_CHROMIUM"
)]
fn a_question_is_shown_and_answered_from_the_dashboard_in_a_real_browser() {
    let Some(bin) = chromium() else {
        return;
    };
    let question = "Which <b>port</b>? <img src=x onerror=\"document.title='pwned'\">";
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        // ISC-B-1 keeps the run going until the test stops it.
        json!({"ISC-A-1": [format!("ask-until-answered:{question}")], "ISC-B-1": ["hang"]}),
    );
    let mut run = sb.spawn(&[
        "run",
        "PRD.md",
        "-a",
        "2",
        "--serve",
        "--timeout",
        "300s",
        "--progress",
        "lines",
    ]);
    let err = Arc::new(Mutex::new(String::new()));
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    {
        use std::io::BufRead;
        let err = Arc::clone(&err);
        let pipe = std::io::BufReader::new(run.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in pipe.lines().map_while(Result::ok) {
                if let Some(u) = line.strip_prefix("dashboard: ") {
                    let _ = url_tx.send(sign_in_address(u));
                }
                err.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
    }
    let url = url_rx
        .recv_timeout(BROWSER_LIMIT)
        .unwrap_or_else(|_| panic!("no dashboard address: {}", err.lock().unwrap()));
    let mut b = Browser::launch(&bin, &sb.root().join("chromium-profile"));
    b.open(&url);
    b.wait_for(
        "ISC-A-1's question",
        "(document.querySelector('#questions [data-question=\"ISC-A-1\"] p')?.textContent || '').includes('<img src=x')",
    );
    assert_eq!(
        b.eval("document.querySelector('#criteria tr[data-criterion=\"ISC-A-1\"] .st-asks')?.textContent"),
        json!("waits for an answer")
    );
    // The session list is read from the state file, which the run rewrites a coalesced
    // write after the question came: it may show it a moment after the question panel.
    b.wait_for(
        "the session list saying a question waits",
        "(document.querySelector('#sessions .badge.ask')?.textContent || '').includes('asks 1')",
    );
    assert_eq!(b.eval("document.title"), json!("prdloop"));
    assert_eq!(
        b.eval("document.querySelectorAll('#questions img, #questions b b').length"),
        json!(0),
        "the question is text"
    );
    // Typed into the box (it survives the live re-renders), then sent.
    b.eval(
        "(() => { const t = document.querySelector('#questions textarea[data-answer=\"ISC-A-1\"]'); t.focus(); t.value = 'Port 8080.'; t.dispatchEvent(new Event('input')); })()",
    );
    // A live update draws the page anew: what was typed stays, and so does the focus.
    b.eval("render(last)");
    assert_eq!(
        b.eval("document.activeElement?.dataset?.answer ?? null"),
        json!("ISC-A-1")
    );
    assert_eq!(
        b.eval("document.querySelector('#questions textarea[data-answer=\"ISC-A-1\"]').value"),
        json!("Port 8080.")
    );
    let png = b.screenshot();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    // `PRDLOOP_UPDATE_SCREENSHOT=1` makes it the book's (docs/book/src/images).
    if std::env::var_os("PRDLOOP_UPDATE_SCREENSHOT").is_some() {
        std::fs::write(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("docs/book/src/images/dashboard-question.png"),
            &png,
        )
        .unwrap();
    }
    b.eval("document.querySelector('#questions button[data-answer-button=\"ISC-A-1\"]').click()");
    b.wait_for(
        "ISC-A-1 worked on again and passing",
        "document.querySelector('#criteria tr[data-criterion=\"ISC-A-1\"]')?.dataset.status === 'completed'",
    );
    b.wait_for(
        "the answer under the question",
        "(document.querySelector('#questions [data-answered=\"ISC-A-1\"]')?.textContent || '').includes('answered: Port 8080.')",
    );
    let stop = sb.run(&["stop", "PRD.md"]);
    assert_eq!(code(&stop), 0, "{}", stderr(&stop));
    let status = wait_output_status(&mut run);
    let err = err.lock().unwrap().clone();
    assert_eq!(status, 1, "stopped: {err}");
    assert!(
        err.contains("ISC-A-1 answered: Port 8080.: worked on again"),
        "{err}"
    );
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
    let prompt = sb
        .worker_records()
        .into_iter()
        .filter(|r| r["criterion"] == "ISC-A-1")
        .max_by_key(|r| r["start"].as_u64())
        .unwrap()["prompt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(prompt.contains("Answer: Port 8080."), "{prompt}");
}
