//! End to end with `--agent command`: a real shell script as the agent, doing real work in the
//! workdir that the criteria's Verify commands then check. (tests/agents.rs covers the
//! contract's inputs: the prompt on stdin, the `PRDLOOP_*` environment, the working
//! directory, the last `RESULT:` line.) Needs nothing but `/bin/sh`.

use std::path::{Path, PathBuf};

use crate::common::*;
use serde_json::json;

fn script(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("agent.sh");
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn run(sb: &Sandbox, agent: &Path, extra: &[&str]) -> std::process::Output {
    run_command_agent(sb, agent, extra)
}

/// The script reads its task from the prompt on stdin (the Verify command it quotes) and does
/// it; the boxes are ticked because the Verify commands pass, and the work stays.
#[test]
fn a_script_that_does_the_work_completes_the_prd() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: a.txt says alpha | Verify: Test: `grep -q alpha a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
        ]),
        json!({}),
    );
    let agent = script(
        sb.root(),
        r#"prompt=$(cat)
case "$PRDLOOP_CRITERION" in
  ISC-A-1) echo alpha > a.txt ;;
  ISC-B-1) : > b.txt ;;
esac
echo "$prompt" | grep -q "Verify: " || { echo "no Verify in the prompt" >&2; exit 7; }
echo "did $PRDLOOP_CRITERION"
echo "RESULT: $PRDLOOP_CRITERION PASS"
"#,
    );
    let out = run(&sb, &agent, &["-a", "2", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let text = sb.prd_text();
    assert!(
        text.contains("\nstatus: COMPLETE\n") && text.contains("\nverification_summary: \"2/2\"\n"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.work().join("a.txt")).unwrap(),
        "alpha\n"
    );
    let st = sb.state();
    for c in st["criteria"].as_array().unwrap() {
        assert_eq!(c["verifiedBy"], "checked", "{c}");
    }
    for a in attempts(&st) {
        assert_eq!(a["verdict"], "pass", "{a}");
    }
}

/// A `RESULT: PASS` line counts only with exit status 0; a script that says PASS without doing
/// the work is caught by the Verify command; one with no RESULT line has not passed.
#[test]
fn pass_needs_exit_0_the_work_and_a_result_line() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-X-1: x.txt exists | Verify: Test: `test -f x.txt`",
            "- [ ] ISC-C-1: c.txt exists | Verify: Test: `test -f c.txt`",
            "- [ ] ISC-N-1: n.txt exists | Verify: Test: `test -f n.txt`",
        ]),
        json!({}),
    );
    let agent = script(
        sb.root(),
        r#"cat > /dev/null
case "$PRDLOOP_CRITERION" in
  ISC-X-1) : > x.txt; echo "RESULT: ISC-X-1 PASS"; exit 3 ;;
  ISC-C-1) echo "RESULT: ISC-C-1 PASS" ;;
  ISC-N-1) : > n.txt; echo "all done" ;;
esac
"#,
    );
    let out = run(&sb, &agent, &["-a", "3", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let text = sb.prd_text();
    for id in ["ISC-X-1", "ISC-C-1", "ISC-N-1"] {
        assert!(text.contains(&format!("- [ ] {id}:")), "{id}: {text}");
    }
    assert!(
        err.contains(
            "the agent said PASS, but its Verify command `test -f c.txt` exited with status 1"
        ),
        "{err}"
    );
    let att = attempts(&sb.state());
    let reason = |id: &str| {
        let a = att.iter().find(|a| a["criterion"] == id).unwrap();
        assert_eq!(a["verdict"], "fail", "{a}");
        a["reason"].as_str().unwrap().to_string()
    };
    // x.txt is there and its Verify command would pass, but the exit status decides first.
    assert_eq!(
        reason("ISC-X-1"),
        "the agent exited with status 3 after printing PASS"
    );
    assert_eq!(
        reason("ISC-N-1"),
        "no `RESULT: ISC-N-1 PASS|FAIL` line in the agent's final message"
    );
}

/// `prdloop logs` reads a log as the agent that wrote it: a `command` agent's output is plain
/// text, even a line shaped like claude's `result` object.
#[test]
fn logs_of_a_command_agent_are_its_plain_output() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let agent = script(
        sb.root(),
        r#"cat > /dev/null
echo '{"type":"result","subtype":"success","result":"claude-shaped"}'
echo "RESULT: $PRDLOOP_CRITERION PASS"
"#,
    );
    let out = run(&sb, &agent, &["-n", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let o = sb.run(&["logs", "PRD.md", "ISC-A-1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        shown.contains(r#"{"type":"result","subtype":"success","result":"claude-shaped"}"#),
        "{shown}"
    );
    assert!(!shown.contains("── result"), "{shown}");
}
