//! A scriptable fake agent for prdloop's own tests and benchmarks. Not part of the product.
//!
//! It reads the prompt on stdin like `claude -p`, then behaves as the plan file named by
//! `FAKE_AGENT_PLAN` says for its criterion (`PRDLOOP_CRITERION`):
//! `{"ISC-A-1": ["fail", "pass"], "*": ["pass"]}`; the attempt number (`PRDLOOP_ATTEMPT`)
//! picks the entry and the last one repeats. A key `<id>@<model>` (or `*@<model>`) is for
//! the workers run with `--model <model>` and comes first. When `FAKE_AGENT_RECORD` names a folder, each run
//! writes `<pid>.json` there: criterion, pid, start and end times, the prompt, child pids.

use std::io::{Read, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Record {
    dir: Option<std::path::PathBuf>,
    value: serde_json::Value,
}

impl Record {
    fn write(&self) {
        if let Some(dir) = &self.dir {
            let path = dir.join(format!("{}.json", std::process::id()));
            let tmp = dir.join(format!(".{}.tmp", std::process::id()));
            let _ = std::fs::write(&tmp, self.value.to_string());
            let _ = std::fs::rename(&tmp, &path);
        }
    }
}

fn result_line(text: &str, is_error: bool, cost: f64) -> String {
    serde_json::json!({
        "type": "result",
        "subtype": "success",
        "is_error": is_error,
        "api_error_status": serde_json::Value::Null,
        "num_turns": 2,
        "result": text,
        "session_id": "fake-session",
        "total_cost_usd": cost,
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 5},
        "permission_denials": [],
    })
    .to_string()
}

/// A result object as claude prints it for an API error (captured from claude 2.1.197).
fn api_error(text: &str, status: u16) -> String {
    serde_json::json!({
        "type": "result",
        "subtype": "success",
        "is_error": true,
        "api_error_status": status,
        "num_turns": 1,
        "result": text,
        "session_id": "fake-session",
        "total_cost_usd": 0,
        "usage": {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        "permission_denials": [],
    })
    .to_string()
}

fn assistant_line(text: &str) -> String {
    serde_json::json!({
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
    })
    .to_string()
}

/// A number in [0, 1) from `key` (FNV-1a, then a SplitMix64 finish): the same for the same key.
fn unit(key: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn main() {
    if let Ok(secs) = std::env::var("FAKE_AGENT_SLEEP") {
        // The grandchild mode: hold the inherited pipes open (in a session of its own when
        // asked, out of reach of the worker's process group kill).
        if std::env::var_os("FAKE_AGENT_SETSID").is_some() {
            let _ = nix::unistd::setsid();
        }
        std::thread::sleep(Duration::from_secs(secs.parse().unwrap_or(600)));
        return;
    }
    let mut prompt = String::new();
    let _ = std::io::stdin().read_to_string(&mut prompt);
    let id = std::env::var("PRDLOOP_CRITERION").unwrap_or_default();
    let attempt: usize = std::env::var("PRDLOOP_ATTEMPT")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let plan: serde_json::Value = std::env::var("FAKE_AGENT_PLAN")
        .ok()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args
        .windows(2)
        .find(|w| w[0] == "--model")
        .map(|w| w[1].clone());
    let by_model = |key: &str| model.as_ref().and_then(|m| plan.get(format!("{key}@{m}")));
    let steps: Vec<String> = by_model(&id)
        .or_else(|| by_model("*"))
        .or_else(|| plan.get(&id))
        .or_else(|| plan.get("*"))
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_else(|| vec!["pass".into()]);
    let step = steps
        .get(attempt.saturating_sub(1))
        .or(steps.last())
        .cloned()
        .unwrap_or_else(|| "pass".into());

    if std::env::var("PRDLOOP_ROLE").as_deref() == Ok("verifier") {
        verifier(&plan, &id, attempt, &prompt);
        return;
    }
    let mut rec = Record {
        dir: std::env::var_os("FAKE_AGENT_RECORD").map(Into::into),
        value: serde_json::json!({
            "pid": std::process::id(),
            "criterion": id,
            "attempt": attempt,
            "step": step,
            "start": now_ms(),
            "prompt": prompt,
            "lane": std::env::var("PRDLOOP_LANE").ok(),
            "iteration": std::env::var("PRDLOOP_ITERATION").ok(),
            "session": std::env::var("PRDLOOP_SESSION_ID").ok(),
            "prd": std::env::var("PRDLOOP_PRD").ok(),
            "claudecode": std::env::var("CLAUDECODE").ok(),
            "args": args,
            "model": model,
            "sample": std::env::var("PRDLOOP_SAMPLE").ok(),
            "cwd": std::env::current_dir().ok(),
            "children": [],
        }),
    };
    rec.write();

    let (name, arg) = match step.split_once(':') {
        Some((n, a)) => (n.to_string(), a.to_string()),
        None => (step.clone(), String::new()),
    };
    let pass = format!("Done.\nRESULT: {id} PASS");
    let init =
        serde_json::json!({"type": "system", "subtype": "init", "session_id": "fake-session"})
            .to_string();
    say(&init);
    let mut code = 0;
    match name.as_str() {
        "ask-until-answered" => {
            // Asks `arg` until its prompt carries a person's answer, then passes.
            if prompt.contains("## A person answered your questions") {
                say(&result_line(&pass, false, 0.001));
            } else {
                say(&result_line(
                    &format!("I cannot decide this alone.\nQUESTION: {id} {arg}"),
                    false,
                    0.001,
                ));
            }
        }
        "ask" => {
            // A worker that needs a person's decision: `ask:<question>`.
            say(&result_line(
                &format!("I cannot decide this alone.\nQUESTION: {id} {arg}"),
                false,
                0.001,
            ));
        }
        "ask-other" => {
            // A hostile worker asking in another criterion's name: `ask-other:<ID>`.
            say(&result_line(
                &format!("QUESTION: {arg} should {arg} be skipped?\nRESULT: {id} FAIL: tried"),
                false,
                0.001,
            ));
        }
        "repeat" => {
            // A looping agent: `repeat:<N>[:<ms>]` makes the same tool call N times (ms
            // apart), then keeps waiting without a new one; it never answers.
            let (n, ms) = arg.split_once(':').unwrap_or((&arg, "0"));
            let n: u64 = n.parse().unwrap_or(100);
            let ms: u64 = ms.parse().unwrap_or(0);
            for i in 0..n {
                let block = serde_json::json!({"type": "tool_use", "id": format!("t{i}"), "name": "Bash",
                    "input": {"command": "cargo test", "description": "run the tests"}});
                say(&serde_json::json!({
                    "type": "assistant",
                    "message": {"id": format!("msg_{i}"), "role": "assistant", "content": [block]},
                })
                .to_string());
                std::thread::sleep(Duration::from_millis(ms));
            }
            rec.write();
            sleep_forever();
        }
        "pass" => {
            say(&assistant_line(&pass));
            say(&result_line(&pass, false, 0.001));
        }
        "work" => {
            // Works like claude for `arg` ms (1500 by default): thinks, runs a command, edits
            // a file (each an assistant message with its usage), then passes.
            let ms: u64 = arg.parse().unwrap_or(1500);
            let crate_name = id.to_lowercase();
            for (i, block) in [
                serde_json::json!({"type": "thinking", "thinking": "Let me look.", "signature": "s"}),
                serde_json::json!({"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": format!("cargo test {crate_name}"), "description": "run the tests"}}),
                serde_json::json!({"type": "tool_use", "id": "t2", "name": "Edit", "input": {"file_path": format!("src/{crate_name}.rs"), "old_string": "a", "new_string": "b"}}),
            ]
            .into_iter()
            .enumerate()
            {
                say(&serde_json::json!({
                    "type": "assistant",
                    "message": {"id": format!("msg_{i}"), "role": "assistant", "content": [block],
                        "usage": {"input_tokens": 1200 * (i + 1), "output_tokens": 150, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}},
                })
                .to_string());
                std::thread::sleep(Duration::from_millis(ms / 3));
            }
            say(&assistant_line(&pass));
            say(&result_line(&pass, false, 0.001));
        }
        "sleep" => {
            std::thread::sleep(Duration::from_millis(arg.parse().unwrap_or(100)));
            say(&result_line(&pass, false, 0.001));
        }
        "sleep-fail" => {
            std::thread::sleep(Duration::from_millis(arg.parse().unwrap_or(100)));
            say(&result_line(
                &format!("Tried.\nRESULT: {id} FAIL: the tests still fail"),
                false,
                0.002,
            ));
        }
        "fail" => {
            let reason = if arg.is_empty() {
                "the tests still fail".to_string()
            } else {
                arg
            };
            say(&result_line(
                &format!("Tried.\nRESULT: {id} FAIL: {reason}"),
                false,
                0.002,
            ));
        }
        "crash-after-pass" => {
            say(&assistant_line(&pass));
            eprintln!("fatal: the agent crashed");
            code = 3;
        }
        "is-error" => {
            say(&result_line(
                &format!("API Error: 400 invalid_request_error\nRESULT: {id} PASS"),
                true,
                0.0,
            ));
            code = 1;
        }
        "is-error-exit0" => {
            say(&result_line(&format!("RESULT: {id} PASS"), true, 0.0));
        }
        "hang" => {
            rec.write();
            sleep_forever();
        }
        "hang-once" => {
            let marker = rec
                .dir
                .clone()
                .unwrap_or_default()
                .join(format!("hung-{id}"));
            if !marker.exists() {
                let _ = std::fs::write(&marker, "");
                sleep_forever();
            }
            say(&result_line(&pass, false, 0.001));
        }
        "ignore-sigterm" => {
            if arg == "hold" {
                // Also leaves a grandchild in a session of its own holding the pipes for a
                // minute, without the worker's token (so prdloop cannot tell it is the
                // worker's and end it with the worker): once the worker is killed, its pipes
                // still take the drain window.
                let me = std::env::current_exe().expect("own path");
                let child = std::process::Command::new(me)
                    .env("FAKE_AGENT_SLEEP", "60")
                    .env("FAKE_AGENT_SETSID", "1")
                    .env_remove("PRDLOOP_WORKER_TOKEN")
                    .stdin(std::process::Stdio::null())
                    .spawn()
                    .expect("spawn the holder");
                rec.value["children"] = serde_json::json!([child.id()]);
                rec.write();
                std::mem::forget(child);
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                        .expect("signal");
                eprintln!("ignoring SIGTERM");
                loop {
                    term.recv().await;
                    eprintln!("got SIGTERM, ignoring it");
                }
            });
        }
        "grandchild" => {
            let me = std::env::current_exe().expect("own path");
            let child = std::process::Command::new(me)
                .env("FAKE_AGENT_SLEEP", "600")
                .spawn()
                .expect("spawn grandchild");
            rec.value["children"] = serde_json::json!([child.id()]);
            rec.write();
            say(&result_line(&pass, false, 0.001));
            std::mem::forget(child);
        }
        "flood" => {
            let mib: usize = arg.parse().unwrap_or(100);
            let line = "x".repeat(1023);
            let mut out = std::io::stdout().lock();
            for _ in 0..mib * 1024 {
                if writeln!(out, "{line}").is_err() {
                    break;
                }
            }
            let _ = out.flush();
            drop(out);
            say(&result_line(&pass, false, 0.001));
        }
        "flood-noline" => {
            let mib: usize = arg.parse().unwrap_or(10);
            let chunk = vec![b'y'; 1024 * 1024];
            let mut out = std::io::stdout().lock();
            for _ in 0..mib {
                let _ = out.write_all(&chunk);
            }
            let _ = out.write_all(b"\n");
            drop(out);
            say(&result_line(&pass, false, 0.001));
        }
        "invalid-utf8" => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(
                b"\xff\xfe not utf8 \xc3\x28\n{\"type\":\"assistant\",\"x\":\"\xff\"}\n",
            );
            let _ = std::io::stderr().write_all(b"\xff stderr junk\n");
            drop(out);
            say(&result_line(&pass, false, 0.001));
        }
        "claim" => {
            // A RESULT for another id only.
            say(&result_line(&format!("RESULT: {arg} PASS"), false, 0.001));
        }
        "edit-prd" => {
            // Against the rules: tick boxes in the PRD and append a line.
            if let Ok(prd) = std::env::var("PRDLOOP_PRD") {
                let text = std::fs::read_to_string(&prd).unwrap_or_default();
                let mut text = text.replace(&format!("- [ ] {id}:"), &format!("- [x] {id}:"));
                if !arg.is_empty() {
                    text = text.replace(&format!("- [ ] {arg}:"), &format!("- [x] {arg}:"));
                }
                text.push_str("- worker note: edited by the worker\n");
                let _ = std::fs::write(&prd, text);
            }
            say(&result_line(
                &format!("RESULT: {id} FAIL: edited the PRD instead"),
                false,
                0.001,
            ));
        }
        "write" => {
            // Does the work: creates the file named by the argument, then says PASS.
            let _ = std::fs::write(&arg, "done\n");
            say(&result_line(&pass, false, 0.001));
        }
        "sh" => {
            // Does the work with a shell command in its folder; PASS when it exits 0.
            let ok = std::process::Command::new("sh")
                .args(["-c", &arg])
                .stdin(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            let text = if ok {
                pass.clone()
            } else {
                format!("RESULT: {id} FAIL: `{arg}` failed")
            };
            say(&result_line(&text, false, 0.001));
        }
        "remove" => {
            let _ = std::fs::remove_file(&arg);
            say(&result_line(&pass, false, 0.001));
        }
        "rewrite-verify" => {
            // Against the rules: makes its own Verify command trivially true, then claims PASS.
            if let Ok(prd) = std::env::var("PRDLOOP_PRD") {
                let text = std::fs::read_to_string(&prd).unwrap_or_default();
                let out: Vec<String> = text
                    .split_inclusive('\n')
                    .map(|l| {
                        if l.contains(&format!("{id}:")) {
                            match (l.find("| Verify:"), l.rfind('`')) {
                                (Some(_), Some(_)) => {
                                    let start = l.find('`').unwrap();
                                    let end = l.rfind('`').unwrap();
                                    format!("{}`true`{}", &l[..start], &l[end + 1..])
                                }
                                _ => l.to_string(),
                            }
                        } else {
                            l.to_string()
                        }
                    })
                    .collect();
                let _ = std::fs::write(&prd, out.concat());
            }
            say(&result_line(&pass, false, 0.001));
        }
        "cost" => {
            say(&result_line(&pass, false, arg.parse().unwrap_or(0.1)));
        }
        "chance" => {
            // `chance:P:PATH`: does the work (creates PATH) with probability P, drawn from
            // `FAKE_AGENT_SEED`, the criterion, attempt, sample and model (the same draw for
            // the same worker of the same seed); claims PASS either way, so the Verify
            // command decides.
            let (p, path) = arg.split_once(':').unwrap_or((arg.as_str(), "done.txt"));
            let p: f64 = p.parse().unwrap_or(0.5);
            let key = format!(
                "{}|{id}|{attempt}|{}|{}",
                std::env::var("FAKE_AGENT_SEED").unwrap_or_default(),
                std::env::var("PRDLOOP_SAMPLE").unwrap_or_default(),
                model.as_deref().unwrap_or("")
            );
            let lucky = unit(&key) < p;
            if lucky {
                let _ = std::fs::write(path, "done\n");
            }
            rec.value["lucky"] = serde_json::json!(lucky);
            rec.write();
            say(&result_line(&pass, false, 0.001));
        }
        "usage-limit" => {
            // Always out of usage; the limit resets `arg` seconds from now (3600 by default).
            let resets = now_ms() / 1000 + arg.parse::<u64>().unwrap_or(3600);
            say(&serde_json::json!({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": resets, "rateLimitType": "five_hour"}}).to_string());
            say(&api_error(
                "You've hit your limit · resets 4pm (Europe/Berlin)",
                429,
            ));
            code = 1;
        }
        "usage-limit-once" => {
            // The first run hits a usage limit that resets `arg` seconds from now; later runs pass.
            let marker = rec
                .dir
                .clone()
                .unwrap_or_default()
                .join(format!("limited-{id}"));
            if marker.exists() {
                say(&result_line(&pass, false, 0.001));
            } else {
                let _ = std::fs::write(&marker, "");
                let resets = now_ms() / 1000 + arg.parse::<u64>().unwrap_or(3);
                say(&serde_json::json!({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": resets, "rateLimitType": "five_hour"}}).to_string());
                say(&api_error(
                    "You've hit your limit · resets 4pm (Europe/Berlin)",
                    429,
                ));
                code = 1;
            }
        }
        "auth" => {
            say(&api_error("Invalid API key · Fix external API key", 401));
            code = 1;
        }
        "overloaded" => {
            say(&serde_json::json!({"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 1, "retry_delay_ms": 500, "error_status": 529}).to_string());
            say(&api_error(
                "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.",
                529,
            ));
            code = 1;
        }
        "rate-limit" => {
            say(&api_error(
                "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.",
                429,
            ));
            code = 1;
        }
        // Hostile workers (tests/hostile.rs).
        "setsid-holder" => {
            // Leaves a detached grandchild in a new session (the group kill after this exit
            // misses it) that holds stdout and stderr open for `arg` seconds (60 by default),
            // then prints PASS and exits 0. Its pid is recorded in `children`.
            let me = std::env::current_exe().expect("own path");
            let secs = if arg.is_empty() { "60" } else { arg.as_str() };
            let child = std::process::Command::new(me)
                .env("FAKE_AGENT_SLEEP", secs)
                .env("FAKE_AGENT_SETSID", "1")
                .stdin(std::process::Stdio::null())
                .spawn()
                .expect("spawn the holder");
            rec.value["children"] = serde_json::json!([child.id()]);
            rec.write();
            // Exit only once it leads its own session.
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let t = std::time::Instant::now();
            while nix::unistd::getsid(Some(pid)).ok() != Some(pid)
                && t.elapsed() < Duration::from_secs(10)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            say(&assistant_line(&pass));
            say(&result_line(&pass, false, 0.001));
            std::mem::forget(child);
        }
        "break-prd" => {
            // Leaves the PRD with a front matter that is never closed.
            if let Ok(prd) = std::env::var("PRDLOOP_PRD") {
                let text = std::fs::read_to_string(&prd).unwrap_or_default();
                let _ = std::fs::write(&prd, text.replacen("\n---\n", "\n", 1));
            }
            say(&result_line(&pass, false, 0.001));
        }
        "exit" => {
            code = arg.parse().unwrap_or(1);
        }
        "delete-own-line" => {
            // Against the rules: removes its own criterion from the PRD, then claims PASS.
            if let Ok(prd) = std::env::var("PRDLOOP_PRD") {
                let text = std::fs::read_to_string(&prd).unwrap_or_default();
                let kept: String = text
                    .split_inclusive('\n')
                    .filter(|l| !l.contains(&format!(" {id}:")))
                    .collect();
                let _ = std::fs::write(&prd, kept);
            }
            say(&result_line(&pass, false, 0.001));
        }
        "freeze-prd-dir" => {
            // Makes the PRD's folder immutable (`chattr +i`, which binds root too), then
            // passes: prdloop can no longer write the PRD.
            if let Ok(prd) = std::env::var("PRDLOOP_PRD") {
                let dir = std::path::Path::new(&prd).parent().unwrap().to_path_buf();
                let ok = std::process::Command::new("chattr")
                    .arg("+i")
                    .arg(&dir)
                    .status()
                    .is_ok_and(|s| s.success());
                rec.value["frozen"] = serde_json::json!(ok);
                rec.write();
            }
            say(&result_line(&pass, false, 0.001));
        }
        "empty-prd" => {
            if let Ok(prd) = std::env::var("PRDLOOP_PRD") {
                let _ = std::fs::write(&prd, "");
            }
            say(&result_line(&pass, false, 0.001));
        }
        "remove-prd" => {
            // The PRD goes away (deleted; with an argument, replaced by a folder).
            if let Ok(prd) = std::env::var("PRDLOOP_PRD") {
                let _ = std::fs::remove_file(&prd);
                if arg == "dir" {
                    let _ = std::fs::create_dir(&prd);
                }
            }
            say(&result_line(&pass, false, 0.001));
        }
        "text-pass" => {
            println!("plain text answer\nRESULT: {id} PASS");
        }
        other => {
            eprintln!("fake agent: unknown step `{other}`");
            code = 2;
        }
    }
    rec.value["end"] = serde_json::json!(now_ms());
    rec.write();
    std::process::exit(code);
}

/// The verifier's role (`PRDLOOP_ROLE=verifier`): the plan's `"verifier"` entry (or
/// `"verifier:<id>"`), by attempt like a worker's: `verdict-pass`, `verdict-fail`,
/// `verdict-file:<path>` (PASS when the file exists), `verdict-none` (no VERDICT line),
/// `verdict-write` (changes a file, then PASS). Default: `verdict-pass`. Its record has
/// `"role": "verifier"`.
fn verifier(plan: &serde_json::Value, id: &str, attempt: usize, prompt: &str) {
    let steps: Vec<String> = plan
        .get(format!("verifier:{id}"))
        .or_else(|| plan.get("verifier"))
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_else(|| vec!["verdict-pass".into()]);
    let step = steps
        .get(attempt.saturating_sub(1))
        .or(steps.last())
        .cloned()
        .unwrap_or_else(|| "verdict-pass".into());
    let rec = Record {
        dir: std::env::var_os("FAKE_AGENT_RECORD").map(Into::into),
        value: serde_json::json!({
            "pid": std::process::id(),
            "role": "verifier",
            "criterion": id,
            "attempt": attempt,
            "step": step,
            "start": now_ms(),
            "prompt": prompt,
            "cwd": std::env::current_dir().ok(),
        }),
    };
    rec.write();
    let (name, arg) = match step.split_once(':') {
        Some((n, a)) => (n.to_string(), a.to_string()),
        None => (step.clone(), String::new()),
    };
    let text = match name.as_str() {
        "verdict-fail" => format!("I looked at the files.\nVERDICT: {id} FAIL: not done"),
        "verdict-file" => {
            if std::path::Path::new(&arg).exists() {
                format!("{arg} exists.\nVERDICT: {id} PASS")
            } else {
                format!("There is no {arg}.\nVERDICT: {id} FAIL: {arg} is missing")
            }
        }
        "verdict-none" => "I could not tell.".to_string(),
        "verdict-write" => {
            let _ = std::fs::write("verifier-was-here.txt", "x\n");
            format!("Fixed it myself.\nVERDICT: {id} PASS")
        }
        _ => format!("It is done.\nVERDICT: {id} PASS"),
    };
    let args: Vec<String> = std::env::args().collect();
    let text_format = args.iter().any(|a| a == "--output-format=text")
        || args
            .windows(2)
            .any(|w| w[0] == "--output-format" && w[1] == "text");
    if text_format {
        say(&text);
        return;
    }
    say(&assistant_line(&text));
    say(&result_line(&text, false, 0.0005));
}
