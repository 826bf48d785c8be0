//! `prdloop mcp` spoken to over stdio as a client does: JSON-RPC lines in, responses and
//! notifications out. The tools run the real commands on a sandbox with the fake agent.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::fake_api::{FakeApi, Turn};
use crate::common::{PRDLOOP, Sandbox, fake_model, prd_with};

/// `program` with the sandbox's environment (as `Sandbox::command` gives prdloop), in its
/// work folder.
fn in_sandbox(sb: &Sandbox, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    cmd.env_clear();
    for (k, v) in sb.command(&[]).get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.current_dir(sb.work()).stdin(Stdio::null());
    cmd
}

/// A limit for one message: a test that waits longer has failed (not a speed assertion).
const PATIENCE: Duration = Duration::from_secs(120);

struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    /// The response to `initialize`.
    init: Value,
    /// Notifications read while waiting for a response.
    notes: Vec<Value>,
    next: u64,
}

impl Client {
    fn start(sb: &Sandbox) -> Client {
        Client::start_with(sb, &[])
    }

    /// With more environment variables for the server.
    fn start_with(sb: &Sandbox, env: &[(&str, &str)]) -> Client {
        Client::start_args(sb, &["mcp"], env)
    }

    /// `prdloop ARGS` (`mcp` and its options) as the server.
    fn start_args(sb: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Client {
        let mut child = sb
            .command(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn prdloop mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON-RPC on stdout: {line:?}: {e}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut c = Client {
            child,
            stdin,
            lines,
            init: Value::Null,
            notes: Vec::new(),
            next: 1,
        };
        c.init = c.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "it", "version": "1"}}),
        );
        assert_eq!(
            c.init["result"]["protocolVersion"], "2025-06-18",
            "{}",
            c.init
        );
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn read(&mut self) -> Value {
        self.lines
            .recv_timeout(PATIENCE)
            .expect("the server said nothing more")
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let v = self.read();
            if v["id"] == id {
                return v;
            }
            self.notes.push(v);
        }
    }

    /// A tool's result (`result` of `tools/call`).
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(r["error"].is_null(), "{tool}: a protocol error: {r}");
        r["result"].clone()
    }

    /// Waits for a log message whose data matches.
    fn log_where(&mut self, what: impl Fn(&Value) -> bool) -> Value {
        let is = |n: &Value| n["method"] == "notifications/message" && what(&n["params"]);
        if let Some(i) = self.notes.iter().position(is) {
            return self.notes.remove(i);
        }
        loop {
            let v = self.read();
            if is(&v) {
                return v;
            }
            self.notes.push(v);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn code(result: &Value) -> i64 {
    result["structuredContent"]["exitCode"]
        .as_i64()
        .unwrap_or_else(|| panic!("no exit code: {result}"))
}

#[test]
fn mcp_lists_the_tools_and_a_bad_call_is_an_error_result_after_which_it_serves_on() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let mut c = Client::start(&sb);
    let list = c.request("tools/list", json!({}));
    let mut names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "answer", "audit", "logs", "pause", "plan", "resume", "run", "status", "stop", "undo"
        ]
    );
    let plan = &list["result"]["tools"][0];
    assert_eq!(plan["inputSchema"]["required"], json!(["prd"]), "{plan}");

    // The command line's own message and exit code.
    let missing = c.call("plan", json!({"prd": "nope.md"}));
    assert_eq!(missing["isError"], true, "{missing}");
    assert_eq!(code(&missing), 2);
    let message = missing["structuredContent"]["message"].as_str().unwrap();
    assert!(message.contains("nope.md"), "{message}");
    // The command line's parser judges the values: -a 0 is refused as on the command line.
    let zero = c.call("plan", json!({"prd": "PRD.md", "agents": 0}));
    assert_eq!(
        (zero["isError"].clone(), code(&zero)),
        (json!(true), 2),
        "{zero}"
    );
    let unknown = c.call("status", json!({"prd": "PRD.md"}));
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert_eq!(code(&unknown), 2);
    let no_loop = c.call("run", json!({"prd": "nope.md"}));
    assert_eq!(no_loop["isError"], true, "{no_loop}");
    assert_eq!(code(&no_loop), 2);

    // And it goes on serving.
    let plan = c.call("plan", json!({"prd": "PRD.md", "agents": 2}));
    assert_eq!(plan["isError"], false, "{plan}");
    assert_eq!(code(&plan), 0);
    assert!(plan["structuredContent"]["output"].is_object(), "{plan}");
    assert!(!plan["content"][0]["text"].as_str().unwrap().is_empty());
}

#[test]
fn mcp_tools_take_the_config_files_and_the_environment_as_the_command_line_does() {
    let sb = crate::common::repo(
        &["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"],
        json!({}),
        &[("prdloop.toml", "agents = 3\n")],
    );
    let agents = |c: &mut Client, args: Value| {
        let plan = c.call("plan", args);
        assert_eq!(code(&plan), 0, "{plan}");
        plan["structuredContent"]["output"]["agents"].clone()
    };
    let mut c = Client::start(&sb);
    // The project's config file, and a flag over it.
    assert_eq!(agents(&mut c, json!({"prd": "PRD.md"})), 3);
    assert_eq!(agents(&mut c, json!({"prd": "PRD.md", "agents": 1})), 1);
    // A PRDLOOP_* variable over the file.
    let mut c = Client::start_with(&sb, &[("PRDLOOP_AGENTS", "2")]);
    assert_eq!(agents(&mut c, json!({"prd": "PRD.md"})), 2);
}

#[test]
fn mcp_profile_reaches_the_tools() {
    let sb = crate::common::repo(
        &["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b", "- [ ] ISC-C-1: c"],
        json!({}),
        &[("prdloop.toml", "agents = 1\n[profile.deep]\nagents = 3\n")],
    );
    let agents = |c: &mut Client| {
        let plan = c.call("plan", json!({"prd": "PRD.md"}));
        assert_eq!(code(&plan), 0, "{plan}");
        plan["structuredContent"]["output"]["agents"].clone()
    };
    assert_eq!(agents(&mut Client::start(&sb)), 1);
    // `prdloop mcp --profile deep`: every command it runs takes the profile.
    let mut c = Client::start_args(&sb, &["mcp", "--profile", "deep"], &[]);
    assert_eq!(agents(&mut c), 3);
}

#[test]
fn a_successful_results_text_has_the_commands_warnings() {
    let sb = crate::common::repo(
        &["- [ ] ISC-A-1: a"],
        json!({"*": ["pass"]}),
        &[("prdloop.toml", "agent-bin = \"/bin/echo\"\n")],
    );
    let mut c = Client::start(&sb);
    let warned = |r: &Value| {
        let text = r["content"][0]["text"].as_str().unwrap();
        text.contains("is not trusted") && text.contains("`agent-bin`")
    };
    let plan = c.call("plan", json!({"prd": "PRD.md"}));
    assert_eq!(code(&plan), 0, "{plan}");
    assert!(warned(&plan), "{plan}");
    // A run that waits: its end, and what its stderr warned of.
    let run = c.call("run", json!({"prd": "PRD.md", "wait": true}));
    assert_eq!(code(&run), 0, "{run}");
    assert!(warned(&run), "{run}");
}

#[test]
fn mcp_runs_the_loop_tells_of_a_question_takes_the_answer_and_shows_the_run() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: prices shown", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["ask-until-answered:Cents or euros?"], "*": ["pass"]}),
    );
    let mut c = Client::start(&sb);
    let started = c.call("run", json!({"prd": "PRD.md", "agents": 2}));
    assert_eq!(started["isError"], false, "{started}");
    let session = started["structuredContent"]["session"]
        .as_str()
        .expect("the run's session")
        .to_string();

    // The worker's question reaches the client, naming the criterion.
    let asked = c.log_where(|p| p["data"]["event"] == "question");
    assert_eq!(asked["params"]["level"], "warning", "{asked}");
    assert_eq!(asked["params"]["data"]["criterion"], "ISC-A-1");
    assert_eq!(asked["params"]["data"]["session"], session.as_str());
    assert!(
        asked["params"]["data"]["message"]
            .as_str()
            .unwrap()
            .contains("Cents or euros?"),
        "{asked}"
    );
    let end = c.log_where(|p| p["data"]["event"] == "end");
    assert_eq!(end["params"]["data"]["exitCode"], 8, "{end}");

    let answered = c.call(
        "answer",
        json!({"prd": "PRD.md", "id": "ISC-A-1", "text": "cents"}),
    );
    assert_eq!(code(&answered), 0, "{answered}");

    // A run that waits: progress while it goes on, its end as the result.
    let r = c.request(
        "tools/call",
        json!({"name": "run", "arguments": {"prd": "PRD.md", "wait": true},
               "_meta": {"progressToken": "p1"}}),
    );
    let done = &r["result"];
    assert_eq!(code(done), 0, "{done}");
    assert_eq!(
        done["structuredContent"]["output"]["outcome"], "completed",
        "{done}"
    );
    let progress = c
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress" && n["params"]["progressToken"] == "p1")
        .count();
    assert!(progress > 0, "no progress: {:?}", c.notes);
    assert!(sb.prd_text().contains("- [x] ISC-A-1"));

    let status = c.call("status", json!({"prds": ["PRD.md"]}));
    assert_eq!(code(&status), 0, "{status}");
    assert!(!status["structuredContent"]["output"].is_null(), "{status}");
    let logs = c.call("logs", json!({"prd": "PRD.md", "criterion": "ISC-A-1"}));
    assert_eq!(code(&logs), 0, "{logs}");

    // Resources: the PRD, the state and the logs of the runs started here.
    let listed = c.request("resources/list", json!({}));
    let uris: Vec<String> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_string())
        .collect();
    let prd_uri = format!("file://{}", sb.prd().display());
    assert!(uris.contains(&prd_uri), "{uris:?}");
    assert!(uris.iter().any(|u| u.ends_with(".log")), "{uris:?}");
    let state_uri = uris.iter().find(|u| u.ends_with(".json")).expect("a state");
    let read = c.request("resources/read", json!({"uri": state_uri}));
    let text = read["result"]["contents"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text).expect("the state is JSON");
    let prd = c.request("resources/read", json!({"uri": prd_uri}));
    assert!(
        prd["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("ISC-A-1")
    );
    let outside = c.request("resources/read", json!({"uri": "file:///etc/passwd"}));
    assert!(!outside["error"].is_null(), "{outside}");

    // No loop runs now: pause says so as the command line does, and the server goes on.
    let pause = c.call("pause", json!({"prd": "PRD.md"}));
    assert_eq!(pause["isError"], code(&pause) != 0, "{pause}");
    let audit = c.call("audit", json!({"prd": "PRD.md"}));
    assert!(audit["structuredContent"]["exitCode"].is_i64(), "{audit}");
    let undo = c.call("undo", json!({"list": true}));
    assert!(undo["structuredContent"]["exitCode"].is_i64(), "{undo}");
    let again = c.request("tools/list", json!({}));
    assert!(again["result"]["tools"].is_array());
}

#[test]
fn mcp_resources_are_listed_once_percent_encoded_and_announced() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let docs = sb.work().join("my docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::rename(sb.prd(), docs.join("PRD.md")).unwrap();
    let mut c = Client::start(&sb);
    assert_eq!(
        c.init["result"]["capabilities"]["resources"]["listChanged"], true,
        "{}",
        c.init
    );
    for _ in 0..2 {
        let run = c.call("run", json!({"prd": "my docs/PRD.md", "wait": true}));
        assert_eq!(code(&run), 0, "{run}");
    }
    // Each run's start was announced.
    let changed = c
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/resources/list_changed")
        .count();
    assert!(changed >= 2, "{:?}", c.notes);
    let listed = c.request("resources/list", json!({}));
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    let mut distinct = uris.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(uris.len(), distinct.len(), "listed twice: {uris:?}");
    // The PRD once though two runs had it, its space percent-encoded.
    let prd = format!("file://{}/my%20docs/PRD.md", sb.work().display());
    assert_eq!(uris.iter().filter(|u| **u == prd).count(), 1, "{uris:?}");
    assert!(uris.iter().all(|u| !u.contains(' ')), "{uris:?}");
    for asked in [prd.clone(), prd.replace("%20", " ")] {
        let read = c.request("resources/read", json!({"uri": asked}));
        let contents = &read["result"]["contents"][0];
        assert_eq!(contents["uri"], prd.as_str(), "{read}");
        assert!(
            contents["text"].as_str().unwrap().contains("ISC-A-1"),
            "{read}"
        );
    }
}

#[test]
fn mcp_run_is_refused_the_lock_while_a_run_goes_and_stop_ends_it() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["hang"]}));
    let mut c = Client::start(&sb);
    let first = c.call(
        "run",
        json!({"prd": "PRD.md", "args": ["--kill-grace", "1s"]}),
    );
    assert_eq!(first["isError"], false, "{first}");
    sb.wait_for_workers(1);
    // As from a shell: the other loop's lock, exit 3.
    let second = c.call("run", json!({"prd": "PRD.md"}));
    assert_eq!(second["isError"], true, "{second}");
    assert_eq!(code(&second), 3, "{second}");
    assert_eq!(
        second["structuredContent"]["output"]["outcome"], "locked",
        "{second}"
    );
    let stop = c.call("stop", json!({"prd": "PRD.md", "wait": true}));
    assert_eq!(code(&stop), 0, "{stop}");
    let end = c.log_where(|p| p["data"]["event"] == "end");
    assert_eq!(end["params"]["data"]["outcome"], "stopped", "{end}");
    assert!(sb.prd_text().contains("\nloopStatus: stopped\n"));
    sb.assert_no_process_left();
}

#[test]
fn mcp_pauses_a_live_run_and_resumes_it() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-A-2: b", "- [ ] ISC-A-3: c"]),
        json!({"*": ["sleep:2000"]}),
    );
    let mut c = Client::start(&sb);
    let started = c.call("run", json!({"prd": "PRD.md"}));
    let session = started["structuredContent"]["session"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {started}"))
        .to_string();
    sb.wait_for_workers(1);
    let pause = c.call("pause", json!({"prd": "PRD.md", "wait": true}));
    assert_eq!(code(&pause), 0, "{pause}");
    let end = c.log_where(|p| p["data"]["event"] == "end");
    assert_eq!(end["params"]["data"]["outcome"], "paused", "{end}");
    assert!(sb.prd_text().contains("\nloopStatus: paused\n"));

    sb.set_plan(json!({"*": ["pass"]}));
    let resumed = c.call("resume", json!({"prd": "PRD.md", "wait": true}));
    assert_eq!(code(&resumed), 0, "{resumed}");
    let output = &resumed["structuredContent"]["output"];
    assert_eq!(output["outcome"], "completed", "{resumed}");
    assert_eq!(output["session"], session.as_str(), "{resumed}");
    assert!(sb.prd_text().contains("- [x] ISC-A-3"));
}

#[test]
fn mcp_audit_and_undo_end_with_the_command_lines_exit_codes() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let o = sb.run(&["run", "PRD.md"]);
    assert_eq!(crate::common::code(&o), 0, "{}", crate::common::stderr(&o));
    let mut c = Client::start(&sb);
    for (tool, args, cli) in [
        (
            "audit",
            json!({"prd": "PRD.md"}),
            &["audit", "--json", "PRD.md"][..],
        ),
        ("undo", json!({}), &["undo", "--json"][..]),
    ] {
        let r = c.call(tool, args);
        let expected = crate::common::code(&sb.run(cli));
        assert_ne!(expected, 0, "{tool}: the command line succeeded");
        assert_eq!(code(&r), i64::from(expected), "{tool}: {r}");
        assert_eq!(r["isError"], true, "{tool}: {r}");
    }
}

/// The official MCP inspector's command-line mode against `prdloop mcp`: the command naming
/// it is in PRDLOOP_TEST_MCP_INSPECTOR (`.ci/run` installs it from npm and sets it).
#[test]
fn the_mcp_inspector_lists_and_calls_the_tools() {
    let Some(inspector) = std::env::var_os("PRDLOOP_TEST_MCP_INSPECTOR") else {
        eprintln!("SKIPPED: PRDLOOP_TEST_MCP_INSPECTOR is unset (the MCP inspector's command)");
        return;
    };
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let inspect = |more: &[&str]| {
        let mut cmd = std::process::Command::new(&inspector);
        cmd.arg("--cli")
            .arg(crate::common::PRDLOOP)
            .arg("mcp")
            .args(more);
        // The sandbox's environment (PATH included), and npm's cache where it was filled.
        cmd.env_clear();
        for (k, v) in sb.command(&[]).get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        if let Some(home) = std::env::var_os("HOME") {
            cmd.env("npm_config_cache", std::path::Path::new(&home).join(".npm"));
        }
        cmd.current_dir(sb.work())
            .stdin(Stdio::null())
            .output()
            .expect("run the inspector")
    };
    let tools = inspect(&["--method", "tools/list"]);
    let text = String::from_utf8_lossy(&tools.stdout);
    assert!(
        tools.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&tools.stderr)
    );
    let v: Value = serde_json::from_str(&text).expect("the inspector prints JSON");
    assert_eq!(v["tools"].as_array().unwrap().len(), 10, "{v}");
    let plan = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "plan",
        "--tool-arg",
        "prd=PRD.md",
    ]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(
        plan.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let v: Value = serde_json::from_str(&text).expect("the inspector prints JSON");
    assert_eq!(v["structuredContent"]["exitCode"], 0, "{v}");
    let bad = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "plan",
        "--tool-arg",
        "prd=nope.md",
    ]);
    let text = String::from_utf8_lossy(&bad.stdout);
    let v: Value = serde_json::from_str(&text).expect("the inspector prints JSON");
    assert_eq!(v["isError"], true, "{v}");
}

/// The real claude as the MCP client (`--mcp-config` naming `prdloop mcp`), the fake model
/// server scripting its tool calls: plan, then run (waiting) on a small PRD with the fake
/// agent, then status.
#[test]
fn claude_plans_runs_and_reads_the_status_through_prdloop_mcp() {
    let Some(claude) = fake_model::agent_bin(
        "PRDLOOP_E2E_CLAUDE",
        "`bash .ci/install-claude` installs the pinned claude and prints its path",
    ) else {
        return;
    };
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({"*": ["pass"]}));
    let prd = sb.prd().display().to_string();
    let api = FakeApi::start(vec![(
        "MCP-SESSION",
        vec![
            Turn::Tool("mcp__prdloop__plan".into(), json!({"prd": prd})),
            Turn::Tool(
                "mcp__prdloop__run".into(),
                json!({"prd": prd, "wait": true}),
            ),
            Turn::Tool("mcp__prdloop__status".into(), json!({"prds": [prd]})),
            Turn::Text("Done.".into()),
        ],
    )]);
    // The server gets the sandbox's environment (the fake agent as the workers' claude).
    let env: serde_json::Map<String, Value> = sb
        .command(&[])
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_str()?.to_string(), json!(v?.to_str()?))))
        .collect();
    let config = sb.root().join("mcp.json");
    let servers =
        json!({"mcpServers": {"prdloop": {"command": PRDLOOP, "args": ["mcp"], "env": env}}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let mut c = in_sandbox(&sb, &claude);
    api.point_claude(&mut c, &sb.root().join("home"));
    c.args(["-p", "MCP-SESSION: plan, run and show the status of PRD.md"])
        .arg("--mcp-config")
        .arg(&config)
        .args(["--strict-mcp-config", "--output-format", "json"])
        .args([
            "--allowedTools",
            "mcp__prdloop__plan,mcp__prdloop__run,mcp__prdloop__status",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = crate::common::wait_output(c.spawn().unwrap(), Duration::from_secs(240));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    // The run happened: through claude, prdloop mcp, prdloop run and the fake agent.
    assert!(sb.prd_text().contains("- [x] ISC-A-1"), "{said}");
    // claude was given each tool's result.
    let sent = serde_json::to_string(&api.requests()).unwrap();
    assert!(sent.contains("tool_result"), "{sent}");
    assert!(
        sent.contains(r#"\"outcome\":\"completed\""#),
        "the run's end: {sent}"
    );
    assert!(sent.contains("lanes") || sent.contains("ISC-A-1"), "{sent}");
}
