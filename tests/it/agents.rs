//! The agent choice through the real binary: the `command` contract with a shell-script
//! agent, codex and gemini stand-ins (shell scripts that check the command line prdloop gives
//! them and print a recorded real output), `plan` and `doctor`.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::json;

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn fixture(path: &str) -> String {
    format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The documented contract: the prompt on stdin, the `PRDLOOP_*` environment, the workdir as
/// the working directory; the last `RESULT:` line of stdout and exit 0 decide.
#[test]
fn a_shell_script_is_an_agent_through_the_command_contract() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: one thing", "- [ ] ISC-B-1: another thing"]),
        json!({}),
    );
    let agent = script(
        sb.root(),
        "agent.sh",
        r#"prompt=$(cat)
if [ "$PRDLOOP_ROLE" = verifier ]; then
  # A verifier the user named with `--verifier command`: the VERDICT line is its contract.
  : > "$FAKE_AGENT_RECORD/$PRDLOOP_CRITERION.verified"
  case "$prompt" in *"VERDICT: $PRDLOOP_CRITERION PASS"*) ;; *) exit 7 ;; esac
  echo "ISC-A-1.cwd is there"
  echo "VERDICT: $PRDLOOP_CRITERION PASS"
  exit 0
fi
case "$prompt" in
  *"$PRDLOOP_CRITERION"*) ;;
  *) echo "the prompt does not name $PRDLOOP_CRITERION" >&2; exit 9 ;;
esac
[ -n "$PRDLOOP_SESSION_ID" ] && [ -n "$PRDLOOP_PRD" ] && [ "$PRDLOOP_ATTEMPT" = 1 ] || exit 8
pwd > "$PRDLOOP_CRITERION.cwd"
echo "working on $PRDLOOP_CRITERION"
if [ "$PRDLOOP_CRITERION" = ISC-A-1 ]; then
  echo "RESULT: $PRDLOOP_CRITERION FAIL: not yet"
  echo "RESULT: $PRDLOOP_CRITERION PASS"
else
  echo "RESULT: $PRDLOOP_CRITERION PASS"
  echo "RESULT: $PRDLOOP_CRITERION FAIL: broke it again"
fi
"#,
    );
    let out = run_command_agent(&sb, &agent, &["-a", "2", "-n", "1"]);
    assert_eq!(code(&out), 1, "one criterion still fails: {}", stderr(&out));
    let prd = sb.prd_text();
    assert!(prd.contains("- [x] ISC-A-1"), "{prd}");
    // The program is the worker itself: it does not review its own claim, which is only
    // `claimed`, and it is sent no verifier prompt.
    assert!(
        stderr(&out).contains("ISC-A-1 PASS (claimed)"),
        "{}",
        stderr(&out)
    );
    assert!(!sb.records().join("ISC-A-1.verified").exists());
    let audit = sb.run(&["audit", "PRD.md"]);
    assert!(
        stdout(&audit)
            .lines()
            .any(|l| l.contains("ISC-A-1") && l.contains("claimed    only the worker said so")),
        "{}",
        stdout(&audit)
    );
    assert!(prd.contains("- [ ] ISC-B-1"), "{prd}");
    // The working directory is the workdir.
    let cwd = std::fs::read_to_string(sb.work().join("ISC-A-1.cwd")).unwrap();
    assert_eq!(
        std::fs::canonicalize(cwd.trim()).unwrap(),
        std::fs::canonicalize(sb.work()).unwrap()
    );
    let st = sb.state();
    assert_eq!(st["workerAgent"], "command");
    let attempts = attempts(&st);
    assert_eq!(attempts.len(), 2);
    for a in &attempts {
        assert_eq!(a["agentName"], "command");
        assert_eq!(a["notReported"], json!(["cost", "tokens"]));
    }
    let b = attempts
        .iter()
        .find(|a| a["criterion"] == "ISC-B-1")
        .unwrap();
    assert_eq!(b["verdict"], "fail");
    assert_eq!(b["reason"], "broke it again", "the last RESULT line counts");
}

/// `--verifier command` is a verifier the user named: the same program then reviews, with
/// `PRDLOOP_ROLE=verifier`, and its PASS makes the tick `reviewed`.
#[test]
fn a_command_agent_is_reviewed_by_a_verifier_the_user_named() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: one thing"]), json!({}));
    let agent = script(
        sb.root(),
        "agent.sh",
        r#"prompt=$(cat)
if [ "$PRDLOOP_ROLE" = verifier ]; then
  : > "$FAKE_AGENT_RECORD/$PRDLOOP_CRITERION.verified"
  echo "VERDICT: $PRDLOOP_CRITERION PASS"
  exit 0
fi
echo "RESULT: $PRDLOOP_CRITERION PASS"
"#,
    );
    let out = run_command_agent(&sb, &agent, &["--verifier", "command", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(err.contains("ISC-A-1 PASS (reviewed)"), "{err}");
    assert!(sb.records().join("ISC-A-1.verified").exists(), "{err}");
    let audit = sb.run(&["audit", "PRD.md"]);
    assert!(
        stdout(&audit).contains("reviewed   by an independent verifier (command)"),
        "{}",
        stdout(&audit)
    );
}

#[test]
fn a_command_agent_needs_its_program() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: one thing"]), json!({}));
    let out = sb.run(&["run", "PRD.md", "--agent", "command"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--agent-bin"), "{}", stderr(&out));
}

/// A codex stand-in: checks the command line and stdin prdloop gives codex, then prints the
/// recorded output of the real codex.
fn fake_codex(sb: &Sandbox, recording: &str, exit: i32) -> PathBuf {
    script(
        sb.root(),
        "codex",
        &format!(
            r#"[ "$*" = "exec --json --skip-git-repo-check -s workspace-write -m gpt-x -" ] || {{ echo "bad args: $*" >&2; exit 2; }}
prompt=$(cat)
case "$prompt" in *ISC-1*) ;; *) echo "no prompt on stdin" >&2; exit 3 ;; esac
cat '{}'
exit {exit}
"#,
            fixture(recording)
        ),
    )
}

#[test]
fn codex_through_the_loop_pass_and_auth() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-1: the thing"]), json!({}));
    let bin = fake_codex(&sb, "codex/json-pass.jsonl", 0);
    let args = [
        "run",
        "PRD.md",
        "--agent",
        "codex",
        "--agent-bin",
        bin.to_str().unwrap(),
        "--model",
        "gpt-x",
        "-n",
        "1",
        // The stand-in prints one recorded worker's output, never a verifier's.
        "--verifier",
        "none",
    ];
    let out = sb.run(&args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(sb.prd_text().contains("- [x] ISC-1"));
    let a = &attempts(&sb.state())[0];
    assert_eq!(a["agentName"], "codex");
    assert!(
        stderr(&out).contains("up to 1 agents (codex)"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("cost not reported · tokens 100 in, 12 out, 20 cache read"),
        "{}",
        stderr(&out)
    );
    assert_eq!(a["usage"]["inputTokens"], 100);
    assert_eq!(a["notReported"], json!(["cost"]));

    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-1: the thing"]), json!({}));
    let bin = fake_codex(&sb, "codex/json-auth.jsonl", 1);
    let mut args = args;
    let bin = bin.to_str().unwrap().to_string();
    args[5] = &bin;
    let out = sb.run(&args);
    assert_eq!(code(&out), 5, "auth is fatal: {}", stderr(&out));
    assert!(stderr(&out).contains("codex login"), "{}", stderr(&out));
}

#[test]
fn gemini_gets_the_prompt_as_an_argument_and_skip_trust() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-1: the thing"]), json!({}));
    let bin = script(
        sb.root(),
        "gemini",
        &format!(
            r#"[ "$1 $2 $3 $4 $5" = "-o stream-json --approval-mode yolo --skip-trust" ] || exit 2
[ "$6" = "-p" ] || exit 3
case "$7" in *ISC-1*) ;; *) exit 4 ;; esac
[ -z "$(cat)" ] || exit 5
cat '{}'
"#,
            fixture("gemini/stream-json-pass.jsonl")
        ),
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "--agent",
        "gemini",
        "--agent-bin",
        bin.to_str().unwrap(),
        "-n",
        "1",
        // The stand-in prints one recorded worker's output, never a verifier's.
        "--verifier",
        "none",
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(attempts(&sb.state())[0]["agentName"], "gemini");
    // gemini reports no cost: the JSON events say null, not 0.
    let end = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "worker_end")
        .expect("a worker_end event");
    assert_eq!(end["verdict"], "pass");
    assert!(end["costUsd"].is_null(), "{end}");
}

#[test]
fn plan_shows_the_chosen_agents_command_line() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-1: the thing"]), json!({}));
    let out = sb.run(&["plan", "PRD.md", "--agent", "opencode", "--model", "p/m"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("opencode run --format json --auto -m p/m -- <prompt>"),
        "{}",
        stdout(&out)
    );
    let out = sb.run(&["plan", "PRD.md", "--json", "--agent", "gemini"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agent"], "gemini");
    assert_eq!(v["command"]["program"], "gemini");
    assert_eq!(v["command"]["stdin"], "empty");
    assert!(
        v["command"]["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--skip-trust"))
    );
    // --claude-arg is claude's: with another agent it is ignored, and prdloop says so.
    let out = sb.run(&["plan", "PRD.md", "--agent", "codex", "--claude-arg", "--x"]);
    assert!(
        stderr(&out).contains("--claude-arg applies to claude only"),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&out).contains("--x"), "{}", stdout(&out));
    // A worker's lane (PRDLOOP_LANE, as inside a worker of another run) is not a choice of
    // agent: the default is claude.
    let mut c = sb.command(&["plan", "PRD.md", "--json"]);
    c.env("PRDLOOP_LANE", "3");
    let out = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agent"], "claude");
    assert_eq!(v["command"]["args"][0], "-p");
    assert_eq!(v["command"]["stdin"], "prompt");
}

/// `--claude-bin` and `--claude-arg` are the hidden old names of `--agent-bin` and
/// `--agent-arg` for claude: still accepted, `--agent-bin` wins, the `--claude-arg`s come
/// first; `--help` shows only the new names and names the old ones in their help.
#[test]
fn the_old_claude_flags_are_aliases_of_the_agent_flags() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-1: the thing"]), json!({}));
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan", "PRD.md", "--json"];
        args.extend_from_slice(extra);
        let out = sb.run(&args);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["command"].clone()
    };
    let c = plan(&[
        "--claude-bin",
        "/opt/claude-x",
        "--claude-arg=--a",
        "--agent-arg=--b",
    ]);
    assert_eq!(c["program"], "/opt/claude-x");
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let (a, b) = (
        args.iter().position(|x| *x == "--a").expect("--a"),
        args.iter().position(|x| *x == "--b").expect("--b"),
    );
    assert!(a < b, "{args:?}");
    let c = plan(&[
        "--claude-bin",
        "/opt/claude-x",
        "--agent-bin",
        "/opt/agent-y",
    ]);
    assert_eq!(c["program"], "/opt/agent-y");
    // With another agent --claude-bin is claude's only.
    let c = plan(&["--agent", "codex", "--claude-bin", "/opt/claude-x"]);
    assert_eq!(c["program"], "codex");

    let help = stdout(&sb.run(&["run", "--help"]));
    assert!(!help.contains("      --claude-bin"), "{help}");
    assert!(!help.contains("      --claude-arg"), "{help}");
    assert!(
        help.contains("`--claude-bin` (PRDLOOP_CLAUDE_BIN) is its"),
        "{help}"
    );
    assert!(
        help.contains("`--claude-arg` (PRDLOOP_CLAUDE_ARGS) is its"),
        "{help}"
    );
}

#[test]
fn doctor_reports_binary_version_and_login() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-1: the thing"]), json!({}));
    let codex = script(sb.root(), "codex", "echo 'codex-cli 9.9.9'\n");
    let codex = codex.to_str().unwrap();
    // No OPENAI_API_KEY, no ~/.codex/auth.json (HOME is the sandbox).
    // Found, its version, NOT LOGGED IN (exit 2); logged in by its key (exit 0); NOT FOUND.
    let args = ["doctor", "--agent", "codex", "--agent-bin", codex];
    let mut text = shown_as(&args, &sb.run(&args));
    let mut c = sb.command(&args);
    c.env("OPENAI_API_KEY", "sk-x");
    let out = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(60));
    text.push_str(&format!(
        "\nwith OPENAI_API_KEY set:\n{}",
        shown_as(&args, &out)
    ));
    text.push('\n');
    text.push_str(&transcript(
        &sb,
        &[&["doctor", "--agent", "amp", "--agent-bin", "/no/such/amp"]],
    ));
    snapshot!(sb.root(), "doctor", &text);
}
