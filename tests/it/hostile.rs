//! Hostile workers and a hostile world: a worker that leaves a detached process holding its
//! stdout, daemons a worker detaches, writes the sandbox refuses, `--sandbox on` where there is
//! no sandbox, and a runner killed with SIGKILL while its workers and Verify commands run.

use std::time::Duration;

use crate::common::*;
use serde_json::json;

/// Kills the given pids when dropped, so a failing test leaves nothing behind.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &p in &self.0 {
            prdloop::platform::kill_pid(p);
        }
    }
}

/// Every `children` pid the fake agent recorded.
fn children(sb: &Sandbox) -> Vec<u32> {
    sb.worker_records()
        .iter()
        .flat_map(|r| r["children"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_u64().map(|c| c as u32))
        .collect()
}

#[test]
fn a_result_read_before_a_detached_holder_is_kept() {
    // Five workers at once, each printing PASS and leaving a process in a new session that
    // holds its stdout for 60 s: every result counts, nobody waits for the holders, and none
    // outlives the run.
    // One group each (the letter), so they run in parallel lanes.
    let ids: Vec<String> = ["A", "B", "C", "D", "E"]
        .iter()
        .map(|g| format!("ISC-HOLD{g}-1"))
        .collect();
    let lines: Vec<String> = ids
        .iter()
        .map(|id| format!("- [ ] {id}: printed PASS, then left a holder"))
        .collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let sb = Sandbox::new(&prd_with(&lines), json!({"*": ["setsid-holder:60"]}));
    let child = sb.spawn(&["run", "PRD.md", "-a", "5", "-n", "1", "--timeout", "30s"]);
    // A safety limit, not a speed assertion: far below the holders' 60 s.
    let out = wait_output(child, Duration::from_secs(50));
    let holders = KillOnDrop(children(&sb));
    let err = stderr(&out);
    assert_eq!(holders.0.len(), 5, "each worker left a holder: {err}");
    // They carried their worker's token: ended with it.
    assert!(
        holders.0.iter().all(|&p| !prdloop::platform::is_alive(p)),
        "a holder outlived the run: {err}"
    );
    assert_eq!(code(&out), 0, "{err}");
    let text = sb.prd_text();
    for id in &ids {
        assert!(
            text.contains(&format!("- [x] {id}:")),
            "{id}: {err}\n{text}"
        );
    }
    assert!(!err.contains("no `RESULT"), "{err}");
}

/// A runner killed by SIGKILL takes its children with it: Linux's parent-death signal, set by
/// the exec trampoline. (On macOS the next run's takeover ends them; see run_loop.rs.)
#[cfg(target_os = "linux")]
mod killed_runner {
    use std::process::{Command, Stdio};
    use std::time::Instant;

    use super::*;

    /// Waits up to `limit` for `pid` to die; whether it did.
    fn dies_within(pid: u32, limit: Duration) -> bool {
        let t = Instant::now();
        while prdloop::platform::is_alive(pid) {
            if t.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    #[test]
    fn workers_die_with_a_runner_killed_by_sigkill() {
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: hangs"]), json!({"*": ["hang"]}));
        let child = sb.spawn(&["run", "PRD.md", "--timeout", "30m"]);
        sb.wait_for_workers(1);
        let worker = sb.worker_records()[0]["pid"].as_u64().unwrap() as u32;
        let _guard = KillOnDrop(vec![worker]);
        assert!(prdloop::platform::is_alive(worker));
        send_signal(child.id(), "KILL");
        let _ = wait_output(child, Duration::from_secs(30));
        assert!(
            dies_within(worker, Duration::from_secs(10)),
            "worker {worker} outlived the runner killed by SIGKILL"
        );
    }

    #[test]
    fn verify_commands_die_with_a_runner_killed_by_sigkill() {
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
        // Inside what the check may write: the sandbox allows the records folder.
        let pid_file = sb.records().join("verify.pid");
        let prd = prd_with(&[&format!(
            "- [ ] ISC-A-1: a | Verify: Test: `echo $$ > {}; exec sleep 600`",
            pid_file.display()
        )]);
        std::fs::write(sb.prd(), prd).unwrap();
        let child = sb.spawn(&["run", "PRD.md", "--verify-timeout", "30m"]);
        let t = Instant::now();
        let pid = loop {
            if let Some(p) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
            {
                break p;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "the check never ran");
            std::thread::sleep(Duration::from_millis(20));
        };
        let _guard = KillOnDrop(vec![pid]);
        assert!(prdloop::platform::is_alive(pid));
        send_signal(child.id(), "KILL");
        let _ = wait_output(child, Duration::from_secs(30));
        assert!(
            dies_within(pid, Duration::from_secs(10)),
            "the Verify command {pid} outlived the runner killed by SIGKILL"
        );
    }

    /// The exec trampoline (`prdloop __prdloop-exec <parent pid> <program> <args…>`) keeps the pid
    /// and the pipes, and reports a program it cannot run with status 127.
    #[test]
    fn the_exec_trampoline_keeps_the_pid_and_reports_a_missing_program() {
        let me = std::process::id().to_string();
        let out = Command::new(PRDLOOP)
            .args([
                "__prdloop-exec",
                &me,
                "sh",
                "-c",
                "echo $$; echo to-stderr >&2",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = out.id();
        let out = out.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), pid.to_string());
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), "to-stderr");

        let out = Command::new(PRDLOOP)
            .args(["__prdloop-exec", &me, "/nonexistent/agent", "-p"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(127), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("/nonexistent/agent"), "{err}");

        // A trampoline whose parent is not the one named ends at once without running anything.
        let marker = tempfile::tempdir().unwrap();
        let file = marker.path().join("ran");
        let out = Command::new(PRDLOOP)
            .args(["__prdloop-exec", "1", "touch"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{out:?}");
        assert!(
            !file.exists(),
            "the program ran under a parent that was gone"
        );

        // Hidden: not in the help.
        let help = Command::new(PRDLOOP).arg("--help").output().unwrap();
        assert!(!String::from_utf8_lossy(&help.stdout).contains("__prdloop-exec"));
    }
}

/// Runs a script as the worker of one criterion (the fake agent's `sh` step).
fn sh_plan(script: &str) -> serde_json::Value {
    json!({ "*": [format!("sh:{script}")] })
}

/// Makes ISC-A-1's Verify command `sh verify.sh`, a script (outside the work folder) holding
/// `body`.
fn verified_by_script(sb: &Sandbox, body: &str) {
    let script = sb.root().join("verify.sh");
    std::fs::write(&script, body).unwrap();
    std::fs::write(
        sb.prd(),
        prd_with(&[&format!(
            "- [ ] ISC-A-1: a | Verify: Test: `sh {}`",
            script.display()
        )]),
    )
    .unwrap();
}

/// `run PRD.md -n 1 --sandbox on` and `extra`, one sandboxed round.
fn sandboxed(sb: &Sandbox, extra: &[&str]) -> std::process::Command {
    let mut args = vec!["run", "PRD.md", "-n", "1", "--sandbox", "on"];
    args.extend(extra);
    sb.command(&args)
}

/// The pid a daemon wrote to `file` in the workers' folder.
fn pid_in(sb: &Sandbox, file: &str) -> u32 {
    let text =
        std::fs::read_to_string(sb.work().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{file}: {text:?}: {e}"))
}

/// Daemons a worker detaches: one in a new session (it keeps the worker's token), one in a new
/// session with a cleared environment (no token: it is ended at the end of the run, as a
/// process prdloop adopted), one double-forked that ignores SIGTERM (killed after the grace).
/// None is alive when prdloop has exited.
#[cfg(target_os = "linux")]
#[test]
fn daemons_a_worker_detaches_do_not_outlive_the_run() {
    let script = "setsid sh -c 'echo $$ > d1.pid; exec sleep 300' </dev/null >/dev/null 2>&1 &
env -i /usr/bin/setsid /bin/sh -c 'echo $$ > d2.pid; exec /bin/sleep 300' </dev/null >/dev/null 2>&1 &
( setsid sh -c 'trap \"\" TERM; echo $$ > d3.pid; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & )
until [ -s d1.pid ] && [ -s d2.pid ] && [ -s d3.pid ]; do sleep 0.05; done";
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: leaves daemons"]),
        sh_plan(script),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--kill-grace", "1s"]);
    let pids: Vec<u32> = ["d1.pid", "d2.pid", "d3.pid"]
        .iter()
        .map(|f| pid_in(&sb, f))
        .collect();
    let _guard = KillOnDrop(pids.clone());
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    for p in &pids {
        assert!(
            !prdloop::platform::is_alive(*p),
            "daemon {p} outlived the run: {err}"
        );
    }
}

/// `--sandbox on` where the kernel cannot sandbox (the test seam says so) fails before any
/// worker starts, with exit 2 and the PRD untouched; `auto` there runs unsandboxed and says so.
#[test]
fn sandbox_on_where_it_cannot_be_had_fails_before_any_worker() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let before = sb.prd_text();
    let out = sb
        .command(&["run", "PRD.md", "--sandbox", "on"])
        .env("PRDLOOP_TEST_SANDBOX_UNSUPPORTED", "1")
        .output()
        .unwrap();
    snapshot!(sb.root(), "sandbox_on_where_it_cannot_be_had", &shown(&out));
    assert!(sb.worker_records().is_empty(), "a worker started");
    assert_eq!(sb.prd_text(), before);
    // The same through the environment variable, and `auto`: a run without the sandbox.
    let out = sb
        .command(&["run", "PRD.md"])
        .env("PRDLOOP_TEST_SANDBOX_UNSUPPORTED", "1")
        .env("PRDLOOP_SANDBOX", "auto")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("sandbox: off ("), "{err}");
}

/// Verify commands run the workers' code: without isolation they run under the workers' own
/// rules, so one that writes beside the run's folder is refused (and fails), while writing in
/// the folder works.
#[cfg(target_os = "linux")]
#[test]
fn verify_commands_run_inside_the_sandbox() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let marker = sb.root().join("verify-wrote-here");
    std::fs::write(
        sb.prd(),
        prd_with(&[&format!(
            "- [ ] ISC-A-1: a | Verify: Test: `touch {}`",
            marker.display()
        )]),
    )
    .unwrap();
    let out = sb.run(&["run", "PRD.md", "--sandbox", "on", "-n", "1"]);
    let err = stderr(&out);
    assert_ne!(code(&out), 0, "{err}");
    assert!(!marker.exists(), "{err}");
    assert!(sb.prd_text().contains("- [ ] ISC-A-1:"), "{err}");
}

/// A `--sandbox-allow` path that does not exist is a usage error naming it, before any worker.
#[test]
fn a_sandbox_allow_path_that_does_not_exist_is_refused() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "--sandbox-allow", "no/such/dir"]);
    snapshot!(
        sb.root(),
        "a_sandbox_allow_path_that_does_not_exist",
        &shown(&out)
    );
    assert!(sb.worker_records().is_empty());
}

/// Without isolation the sandboxed worker writes the run's folder (and a --sandbox-allow
/// folder), and nothing beside it.
#[cfg(target_os = "linux")]
#[test]
fn without_isolation_a_sandboxed_worker_writes_its_folder_and_nothing_beside_it() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let root = sb.root().display().to_string();
    std::fs::create_dir(sb.root().join("allowed")).unwrap();
    let script = format!(
        "r=''
echo ok > in-folder.txt && r=\"$r folder\"
echo ok > '{root}/allowed/a.txt' && r=\"$r allowed\"
echo evil > '{root}/beside.txt' && r=\"$r beside\"
echo \"$r\" > result.txt"
    );
    sb.set_plan(sh_plan(&script));
    let allowed = sb.root().join("allowed");
    let out = sb.run(&[
        "run",
        "PRD.md",
        "--sandbox",
        "on",
        "--sandbox-allow",
        allowed.to_str().unwrap(),
        "--json",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("sandbox: on"), "{err}");
    let start: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(start["event"], "start");
    assert_eq!(start["sandbox"], true, "{start}");
    let result = std::fs::read_to_string(sb.work().join("result.txt")).unwrap();
    assert_eq!(result.trim(), "folder allowed", "{err}");
    assert!(!sb.root().join("beside.txt").exists());
}

#[test]
fn a_process_a_worker_leaves_cannot_answer_for_its_check() {
    // The worker says PASS and leaves a detached process that would make the check pass a
    // moment later: the runner ends it before its check runs, so the check sees the truth.
    let sb = Sandbox::new(
        // The check removes the flag and looks again a moment later: only a process still
        // alive could have put it back.
        &prd_with(&[
            "- [ ] ISC-A-1: flag exists | Verify: CLI: `rm -f flag; sleep 0.5; test -f flag`",
        ]),
        json!({"ISC-A-1": ["sh:setsid sh -c 'while true; do touch flag; sleep 0.05; done' </dev/null >/dev/null 2>&1 &"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("its Verify command"), "{err}");
    assert!(!sb.work().join("flag").exists());
    assert!(sb.prd_text().contains("- [ ] ISC-A-1:"));
}

/// A sandboxed worker signals only processes of its own sandbox: its SIGTERM to a process of
/// yours and its SIGSTOP to the runner fail (Landlock's signal scope, ABI 6), while it still
/// signals a child of its own.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_worker_signals_nothing_outside_its_sandbox() {
    if !prdloop::worker::sandbox::probe().scopes() {
        eprintln!("skipped: this kernel's Landlock has no signal scope (ABI 6)");
        return;
    }
    let mut yours = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let _guard = KillOnDrop(vec![yours.id()]);
    // The fake agent is the runner's child; the script is the fake agent's.
    let script = format!(
        "runner=$(awk '{{print $4}}' /proc/$PPID/stat)
r=''
kill -STOP \"$runner\" && r=\"$r stopped\" && kill -CONT \"$runner\"
kill -TERM {yours} && r=\"$r killed\"
sleep 300 & own=$!
kill -TERM \"$own\" && r=\"$r own\"
echo \"ran$r\" > result.txt",
        yours = yours.id()
    );
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: signals"]), sh_plan(&script));
    let out = sandboxed(&sb, &[]).output().unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("signals and abstract Unix sockets reach only the worker's own sandbox"),
        "{err}"
    );
    let result = std::fs::read_to_string(sb.work().join("result.txt")).unwrap();
    assert_eq!(result.trim(), "ran own", "{err}");
    assert_eq!(yours.try_wait().unwrap(), None, "your process was killed");
}

/// A sandboxed worker reads none of your secrets: not a key planted in `~/.ssh` (it may list
/// the folder, not read the file), not the registry, vault, docker or kubernetes logins, not
/// another agent's login nor its own agent's real one (its private home has a copy), not
/// `SSH_AUTH_SOCK`, the cloud credentials, other agents' keys or any variable named as a
/// token, password or key, or holding a password in a URL; the rest of `$HOME` it reads, its
/// own agent's key it keeps, and `--pass-env` lets one variable through.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_worker_reads_none_of_your_secrets() {
    let files = [
        (".ssh/id_rsa", "key"),
        (".netrc", "netrc"),
        (".npmrc", "npmrc"),
        (".vault-token", "vault"),
        (".docker/config.json", "docker"),
        (".kube/config", "kube"),
        (".codex/auth.json", "codex-login"),
        (".gemini/oauth_creds.json", "gemini-login"),
        (".claude/.credentials.json", "claude-login"),
    ];
    let vars = [
        ("SSH_AUTH_SOCK", "agent"),
        ("AWS_SECRET_ACCESS_KEY", "aws-key"),
        ("AWS_PROFILE", "aws-profile"),
        ("OPENAI_API_KEY", "openai-key"),
        ("GEMINI_API_KEY", "gemini-key"),
        ("ANTHROPIC_API_KEY", "own-key"),
        ("SLACK_TOKEN", "slack"),
        ("SENTRY_AUTH_TOKEN", "sentry"),
        ("HOMEBREW_GITHUB_API_TOKEN", "homebrew"),
        ("CODECOV_TOKEN", "codecov"),
        ("DOCKER_PASSWORD", "docker-password"),
        ("DATABASE_URL", "database"),
        ("REDIS_URL", "redis"),
    ];
    let mut script = String::from("r=''\n");
    for (f, word) in files {
        script.push_str(&format!("cat \"$HOME/{f}\" && r=\"$r {word}\"\n"));
    }
    for (v, word) in vars {
        script.push_str(&format!("[ -n \"${v}\" ] && r=\"$r {word}\"\n"));
    }
    script.push_str(
        "ls \"$HOME/.ssh\" >/dev/null && r=\"$r listed\"
cat \"$HOME/notes.txt\" >/dev/null && r=\"$r notes\"
grep -q claude-login \"$CLAUDE_CONFIG_DIR/.credentials.json\" && r=\"$r own-login\"
echo \"ran$r\" > result.txt",
    );
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: secrets"]), sh_plan(&script));
    for (f, word) in files {
        let path = sb.root().join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, word).unwrap();
    }
    std::fs::write(sb.root().join("notes.txt"), "mine").unwrap();
    let mut cmd = sandboxed(&sb, &["--pass-env", "AWS_PROFILE"]);
    for (v, _) in vars {
        cmd.env(v, "secret");
    }
    let out = cmd
        .env("SSH_AUTH_SOCK", sb.root().join("agent.sock"))
        .env("DATABASE_URL", "postgres://u@db/app")
        .env("REDIS_URL", "redis://default:pw@cache:6379/0")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(err.contains("read none of your secrets"), "{err}");
    let result = std::fs::read_to_string(sb.work().join("result.txt")).unwrap();
    assert_eq!(
        result.trim(),
        "ran aws-profile own-key listed notes own-login",
        "{err}"
    );
}

/// A server on 127.0.0.1 that answers every request with `hello` (for the network tests).
fn hello_server() -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut b = [0u8; 4096];
            let _ = s.read(&mut b);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    port
}

/// `--network agent` (the default): the worker reaches its agent's API host (the base URL's,
/// a server on 127.0.0.1) only through its proxy; a direct connection (curl without the proxy,
/// a python socket) fails (the kernel), another 127.0.0.1 port is refused by the proxy, and
/// every refusal is counted (warning, summary, `--json`, state). `off`: not even the API host,
/// and every attempt counted.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_worker_reaches_only_its_agents_api_through_the_proxy() {
    if !prdloop::worker::sandbox::probe().tcp() {
        eprintln!("skipped: this kernel's Landlock has no TCP rules (ABI 4)");
        return;
    }
    let (api, other) = (hello_server(), hello_server());
    let script = format!(
        "r=''
curl -sf http://127.0.0.1:{api}/v1 | grep -q hello && r=\"$r proxied\"
curl -sf --noproxy '*' http://127.0.0.1:{api}/v1 && r=\"$r direct\"
curl -sf http://127.0.0.1:{other}/ && r=\"$r other\"
curl -sf --noproxy '*' http://127.0.0.1:{other}/ && r=\"$r other-direct\"
python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {other}))' 2>/dev/null && r=\"$r python\"
ls -l /proc/self/fd | grep -q seccomp && r=\"$r holds-the-listener\"
echo \"ran$r\" > result.txt"
    );
    let run = |mode: &str| {
        let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: network"]), sh_plan(&script));
        let out = sandboxed(&sb, &["--network", mode, "--json"])
            .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{api}"))
            .output()
            .unwrap();
        let err = stderr(&out);
        let result = std::fs::read_to_string(sb.work().join("result.txt")).unwrap();
        let last: serde_json::Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap())
                .unwrap();
        let state = sb.state();
        (
            err,
            result.trim().to_string(),
            (attempts(&state), state, last),
        )
    };
    let (err, result, (all, state, summary)) = run("agent");
    assert!(
        err.contains("network: agent (only the agent's API hosts"),
        "{err}"
    );
    assert_eq!(result, "ran proxied", "{err}");
    // The proxy refused one (the proxied curl to the other port), the kernel the three
    // direct ones (curl to each port, python's socket to the other): all counted.
    let refused = format!("127.0.0.1:{other} (3), 127.0.0.1:{api} (1)");
    assert!(
        err.contains(&format!(
            "the network policy refused ISC-A-1's worker 4 connection(s): {refused}"
        )),
        "{err}"
    );
    let last = all.last().unwrap();
    assert_eq!(
        last["refusedConnections"],
        json!([
            {"host": format!("127.0.0.1:{other}"), "count": 3},
            {"host": format!("127.0.0.1:{api}"), "count": 1}
        ]),
        "{last}"
    );
    // The summary, `--json` and the state file count it by criterion and host.
    assert!(
        err.contains(&format!(
            "network: 4 connection(s) refused: ISC-A-1 127.0.0.1:{other} (3), ISC-A-1 127.0.0.1:{api} (1)"
        )),
        "{err}"
    );
    let counted = json!([
        {"criterion": "ISC-A-1", "host": format!("127.0.0.1:{other}"), "count": 3},
        {"criterion": "ISC-A-1", "host": format!("127.0.0.1:{api}"), "count": 1}
    ]);
    assert_eq!(summary["refusedConnections"], counted, "{summary}");
    assert_eq!(state["refusedConnections"], counted);
    let (err, result, (_, _, summary)) = run("off");
    assert!(err.contains("network: off (no TCP connection"), "{err}");
    assert_eq!(result, "ran", "{err}");
    // No proxy: the kernel refused all five, each counted.
    let total: u64 = summary["refusedConnections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["count"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 5, "{summary}");
}

/// The calls that connect without `connect(2)`, which Landlock's TCP rule checks: a worker's
/// TCP Fast Open send (`sendto` with `MSG_FASTOPEN`) to a listener on 127.0.0.1 fails with
/// EACCES and nothing arrives; `io_uring_setup` fails with EACCES too (a ring's connect is no
/// system call at all). Plain UDP still sends.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_worker_cannot_connect_by_tcp_fast_open_or_io_uring() {
    if !prdloop::worker::sandbox::probe().tcp() {
        eprintln!("skipped: this kernel's Landlock has no TCP rules (ABI 4)");
        return;
    }
    let outside = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = outside.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let script = format!(
        "python3 - > result.txt <<'PY'
import ctypes, errno, socket
r = []
s = socket.socket()
try:
    s.sendto(b'fast-open', socket.MSG_FASTOPEN, ('127.0.0.1', {port}))
    s.sendall(b' and more')
    r.append('tfo-sent')
except OSError as e:
    r.append('tfo-' + errno.errorcode[e.errno])
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
if libc.syscall(425, 4, params) < 0:
    r.append('uring-' + errno.errorcode[ctypes.get_errno()])
else:
    r.append('uring-made')
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b'udp', ('127.0.0.1', {udp_port}))
r.append('udp-sent')
print(' '.join(r))
PY"
    );
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: fast open"]), sh_plan(&script));
    let out = sandboxed(&sb, &[]).output().unwrap();
    let err = stderr(&out);
    let result = std::fs::read_to_string(sb.work().join("result.txt")).unwrap();
    assert_eq!(result.trim(), "tfo-EACCES uring-EACCES udp-sent", "{err}");
    // A connection the worker made would wait in the listener's backlog, accepted or not.
    outside.set_nonblocking(true).unwrap();
    let arrived = outside.accept();
    assert!(
        arrived
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection arrived: {arrived:?}"
    );
}

/// A Verify command runs under the network policy too, and what it was refused is counted as
/// a worker's is: its `curl` to another 127.0.0.1 port gets 403 (the proxy) and a python
/// socket straight to that port fails (the kernel), both counted (a warning; the attempt's
/// record counts its check's, the summary, `--json`'s end event and the state file every
/// check's).
#[cfg(target_os = "linux")]
#[test]
fn a_verify_commands_refused_connections_are_counted() {
    if !prdloop::worker::sandbox::probe().tcp() {
        eprintln!("skipped: this kernel's Landlock has no TCP rules (ABI 4)");
        return;
    }
    let other = hello_server();
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        sh_plan("echo done > done.txt"),
    );
    let out_dir = sb.root().join("check-out");
    std::fs::create_dir(&out_dir).unwrap();
    let o = out_dir.display();
    verified_by_script(
        &sb,
        &format!(
            "curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{other}/ > {o}/curl
python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {other}), timeout=5)' 2> {o}/py && echo connected > {o}/py
test -f done.txt
"
        ),
    );
    let allow = out_dir.to_str().unwrap();
    let out = sandboxed(&sb, &["--sandbox-allow", allow, "--json"])
        .output()
        .unwrap();
    let err = stderr(&out);
    let read = |f: &str| std::fs::read_to_string(out_dir.join(f)).unwrap_or_default();
    assert_eq!(read("curl"), "403", "{err}");
    assert!(
        read("py").contains("Permission denied"),
        "{}\n{err}",
        read("py")
    );
    let host = format!("127.0.0.1:{other}");
    assert!(
        err.contains(&format!(
            "the network policy refused ISC-A-1's check 2 connection(s): {host} (2)"
        )),
        "{err}"
    );
    let state = sb.state();
    let last = attempts(&state).last().cloned().unwrap();
    assert_eq!(
        last["refusedConnections"],
        json!([{"host": host, "count": 2}]),
        "{last}"
    );
    // The start check (before the worker made `done.txt`), the attempt's, and the
    // iteration's regression check: each warned of once.
    let warned = format!("the network policy refused ISC-A-1's check 2 connection(s): {host} (2)");
    assert_eq!(err.matches(&warned).count(), 3, "{err}");
    let counted = json!([{"criterion": "ISC-A-1", "host": host, "count": 6}]);
    let end: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(end["refusedConnections"], counted, "{end}\n{err}");
    assert_eq!(state["refusedConnections"], counted);
    assert!(
        err.contains(&format!(
            "network: 6 connection(s) refused: ISC-A-1 {host} (6)"
        )),
        "{err}"
    );
}

/// `--check-allow HOST`: the runner's checks reach that host through their proxy, the
/// workers still do not (a package registry for the checks only).
#[cfg(target_os = "linux")]
#[test]
fn checks_reach_what_check_allow_names_and_workers_do_not() {
    if !prdloop::worker::sandbox::probe().tcp() {
        eprintln!("skipped: this kernel's Landlock has no TCP rules (ABI 4)");
        return;
    }
    let registry = hello_server();
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let out_dir = sb.root().join("reached");
    std::fs::create_dir(&out_dir).unwrap();
    let o = out_dir.display();
    let curl = |to: &str| {
        format!("curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{registry}/ > {o}/{to}")
    };
    sb.set_plan(sh_plan(&format!(
        "{}; echo done > done.txt",
        curl("worker")
    )));
    verified_by_script(&sb, &format!("{}\ntest -f done.txt\n", curl("check")));
    let allow = out_dir.to_str().unwrap();
    let host = format!("127.0.0.1:{registry}");
    let out = sandboxed(&sb, &["--sandbox-allow", allow, "--check-allow", &host])
        .output()
        .unwrap();
    let err = stderr(&out);
    let read = |f: &str| std::fs::read_to_string(out_dir.join(f)).unwrap_or_default();
    assert_eq!(read("check"), "200", "{err}");
    assert_eq!(read("worker"), "403", "{err}");
    assert_eq!(code(&out), 0, "{err}");
}

/// Under the default `--sandbox auto` a codex worker keeps codex's own sandbox (prdloop's
/// does not bind it), but its environment still drops your secrets (its own agent's key
/// stays), and the sandbox line says what else it lacks.
#[cfg(target_os = "linux")]
#[test]
fn under_auto_a_codex_worker_gets_no_secrets_in_its_environment() {
    if !matches!(
        prdloop::worker::sandbox::probe(),
        prdloop::worker::sandbox::Support::Landlock { .. }
    ) {
        eprintln!("skipped: no Landlock here, so auto runs without the sandbox");
        return;
    }
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: env"]), sh_plan("true"));
    let seen = sb.root().join("codex-env.txt");
    let codex = sb.root().join("codex.sh");
    std::fs::write(
        &codex,
        format!(
            "#!/bin/sh\ncat >/dev/null\n{{ echo \"gh=$GH_TOKEN\"; echo \"ssh=$SSH_AUTH_SOCK\"; echo \"slack=$SLACK_TOKEN\"; echo \"key=$OPENAI_API_KEY\"; echo \"lang=$LANG\"; }} > {}\n",
            seen.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = sb
        .command(&[
            "run",
            "PRD.md",
            "-n",
            "1",
            "--agent",
            "codex",
            "--agent-bin",
            codex.to_str().unwrap(),
        ])
        .env("GH_TOKEN", "gh-secret")
        .env("SSH_AUTH_SOCK", sb.root().join("agent.sock"))
        .env("SLACK_TOKEN", "xoxb")
        .env("OPENAI_API_KEY", "sk-own")
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains(
            "codex workers keep their agent's own sandbox, which cannot start inside prdloop's (--sandbox on: prdloop's instead): of prdloop's they get only the environment without your secrets; they can read your secret files"
        ),
        "{err}"
    );
    let env = std::fs::read_to_string(&seen).unwrap_or_else(|e| panic!("{e}\n{err}"));
    assert_eq!(
        env, "gh=\nssh=\nslack=\nkey=sk-own\nlang=C.UTF-8\n",
        "{err}"
    );
}

/// A sandboxed worker reads no other process's environment: not the runner's (its
/// `GH_TOKEN`) nor one of yours, in `/proc/PID/environ`, even when prdloop runs as root
/// (whose `CAP_SYS_ADMIN` and `CAP_PERFMON` would let it past Landlock's check: the worker
/// does not keep them); its own it reads.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_worker_reads_no_other_processes_environment() {
    let mut yours = std::process::Command::new("sleep")
        .arg("300")
        .env("YOURS", "yours-secret")
        .spawn()
        .unwrap();
    let _guard = KillOnDrop(vec![yours.id()]);
    let script = format!(
        "runner=$(awk '{{print $4}}' /proc/$PPID/stat)
r=''
tr '\\0' '\\n' < /proc/$runner/environ | grep -q gh-runner-secret && r=\"$r runner\"
tr '\\0' '\\n' < /proc/{yours}/environ | grep -q yours-secret && r=\"$r yours\"
tr '\\0' '\\n' < /proc/$$/environ | grep -q PRDLOOP_WORKER_TOKEN && r=\"$r own\"
echo \"ran$r\" > result.txt",
        yours = yours.id()
    );
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: environ"]), sh_plan(&script));
    let out = sandboxed(&sb, &[])
        .env("GH_TOKEN", "gh-runner-secret")
        .output()
        .unwrap();
    let err = stderr(&out);
    let result = std::fs::read_to_string(sb.work().join("result.txt")).unwrap();
    assert_eq!(result.trim(), "ran own", "{err}");
    assert_eq!(yours.try_wait().unwrap(), None);
}
