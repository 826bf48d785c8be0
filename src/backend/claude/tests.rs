use super::*;
use crate::backend::Activity;
use crate::backend::outcome::DOING_MAX;
use crate::backend::stream::{StreamParser, TEXT_TAIL};

fn opts() -> ClaudeOptions {
    ClaudeOptions {
        bin: "claude".into(),
        model: Some("sonnet".into()),
        permission_mode: None,
        max_turns: Some(30),
        allowed_tools: DEFAULT_ALLOWED_TOOLS.into(),
        extra_args: vec!["--append-system-prompt".into(), "be brief".into()],
    }
}

#[test]
fn default_argv() {
    assert_eq!(
        opts().display(),
        "claude -p --output-format stream-json --verbose --allowedTools \
             Edit,Write,Bash,Read,Glob,Grep,WebFetch,WebSearch,NotebookEdit --model sonnet \
             --max-turns 30 --append-system-prompt 'be brief'"
    );
    assert_eq!(opts().output_format(), OutputFormat::StreamJson);
}

#[test]
fn user_output_format_wins() {
    let mut o = opts();
    o.extra_args = vec!["--output-format=text".into()];
    assert_eq!(o.output_format(), OutputFormat::Text);
    assert!(!o.args().contains(&"stream-json".to_string()));
}

/// Every stream gives its tool calls with their whole input: the same call hashes the same
/// (timestamps and ids apart), another input differs, and a codex command counts once.
#[test]
fn each_stream_gives_its_tool_calls_for_the_stuck_watch() {
    let calls = |format, lines: &[&str]| {
        let mut p = StreamParser::new(format);
        for l in lines {
            p.feed_line(l.as_bytes());
        }
        p.take_calls()
    };
    let claude = calls(
        OutputFormat::StreamJson,
        &[
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test","description":"d"}}]}}"#,
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"description":"d","command":"cargo test"}}]}}"#,
            r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"tool_use","id":"t3","name":"Write","input":{"file_path":"a.rs","content":"x"}}]}}"#,
            r#"{"type":"assistant","message":{"id":"m4","content":[{"type":"tool_use","id":"t4","name":"Write","input":{"file_path":"a.rs","content":"y"}}]}}"#,
        ],
    );
    assert_eq!(claude.len(), 4);
    assert_eq!(
        claude[0], claude[1],
        "the same call, its keys in another order"
    );
    assert_eq!(claude[0].label, "Bash: cargo test");
    assert_ne!(
        claude[2].fingerprint, claude[3].fingerprint,
        "another content"
    );
    let codex = calls(
        OutputFormat::CodexJson,
        &[
            r#"{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'cargo test'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"/bin/bash -lc 'cargo test'","aggregated_output":"ok","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'cargo test'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"a.rs","kind":"update"}],"status":"completed"}}"#,
        ],
    );
    assert_eq!(codex.len(), 3, "{codex:?}");
    assert_eq!(codex[0], codex[1]);
    assert_eq!(codex[0].label, "command: cargo test");
    assert_eq!(codex[2].label, "edit: a.rs");
    let gemini = calls(
        OutputFormat::GeminiStreamJson,
        &[
            r#"{"type":"tool_use","timestamp":"2026-11-30T13:25:46.613Z","tool_name":"run_shell_command","tool_id":"a","parameters":{"command":"make"}}"#,
            r#"{"type":"tool_use","timestamp":"2026-11-30T13:25:47.613Z","tool_name":"run_shell_command","tool_id":"b","parameters":{"command":"make"}}"#,
        ],
    );
    assert_eq!(gemini.len(), 2);
    assert_eq!(gemini[0], gemini[1]);
    let opencode = calls(
        OutputFormat::OpencodeJson,
        &[
            r#"{"type":"tool_use","timestamp":1,"part":{"tool":"bash","callID":"c1","state":{"status":"completed","input":{"command":"make"},"output":"a"}}}"#,
            r#"{"type":"tool_use","timestamp":2,"part":{"tool":"bash","callID":"c2","state":{"status":"completed","input":{"command":"make"},"output":"b"}}}"#,
        ],
    );
    assert_eq!(opencode.len(), 2);
    assert_eq!(opencode[0], opencode[1], "its output is not its input");
    // Plain text has none.
    assert!(calls(OutputFormat::Text, &["Bash: cargo test"]).is_empty());
}

#[test]
fn text_format_keeps_a_bounded_tail() {
    let mut p = StreamParser::new(OutputFormat::Text);
    for _ in 0..10_000 {
        p.feed_line(&[b'a'; 100]);
    }
    p.feed_line(b"RESULT: ISC-1 PASS");
    let o = p.finish();
    let t = o.final_text.unwrap();
    assert!(t.len() <= 2 * TEXT_TAIL + 200);
    assert!(t.ends_with("RESULT: ISC-1 PASS\n"));
}

#[test]
fn an_odd_field_never_costs_the_result() {
    let mut p = StreamParser::new(OutputFormat::StreamJson);
    p.feed_line(
            br#"{"type":"result","is_error":null,"result":"RESULT: ISC-1 PASS","total_cost_usd":0.01,"permission_denials":null,"num_turns":"2","usage":{"input_tokens":null,"output_tokens":7},"api_error_status":"429"}"#,
        );
    let o = p.finish();
    assert!(o.has_result);
    assert_eq!(o.final_text.as_deref(), Some("RESULT: ISC-1 PASS"));
    assert_eq!(o.cost_usd, Some(0.01));
    assert!(!o.is_error);
    assert_eq!(o.usage.output_tokens, 7);
    assert_eq!(o.api_error_status, Some(429));
    assert_eq!(o.unparsed_lines, 0);
}

#[test]
fn tolerates_garbage() {
    let mut p = StreamParser::new(OutputFormat::StreamJson);
    p.feed_line(b"not json");
    p.feed_line(&[0xff, 0xfe, b'{']);
    p.feed_line(br#"{"type":"brand_new_event","x":1}"#);
    p.feed_line(br#"{"type":"assistant","message":{"content":[{"type":"text","text":"RESULT: ISC-1 PASS"}]}}"#);
    let o = p.finish();
    assert_eq!(o.unparsed_lines, 2);
    assert!(!o.has_result);
    assert_eq!(o.final_text.as_deref(), Some("RESULT: ISC-1 PASS"));
}

/// Every change of activity a recorded stream shows, in order.
fn activities(format: OutputFormat, stream: &str) -> Vec<Activity> {
    let mut p = StreamParser::new(format);
    let mut seen = Vec::new();
    for line in stream.lines() {
        p.feed_line(line.as_bytes());
        seen.extend(p.take_activity());
    }
    seen
}

fn doings(seen: &[Activity]) -> Vec<&str> {
    seen.iter().map(|a| a.doing.as_str()).collect()
}

#[test]
fn activity_never_carries_control_characters() {
    let d = doing("Bash\u{7}", Some("echo \u{1b}[2J\u{1b}[?25l hi"));
    assert!(!d.chars().any(char::is_control), "{d:?}");
    assert!(d.starts_with("Bash: echo"), "{d}");
}

/// Repeats of one command that differ only by a comment or spacing are one call for the
/// stuck watch, in claude's stream and codex's (where the shell's quoting is taken off first).
#[test]
fn a_command_repeated_with_another_comment_is_the_same_call() {
    let calls = |format, lines: &[String]| {
        let mut p = StreamParser::new(format);
        for l in lines {
            p.feed_line(l.as_bytes());
        }
        p.take_calls()
    };
    let bash = |n: usize, cmd: &str| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"m{n}","content":[{{"type":"tool_use","id":"t{n}","name":"Bash","input":{{"command":{}}}}}]}}}}"#,
            Json::from(cmd)
        )
    };
    let claude = calls(
        OutputFormat::StreamJson,
        &[
            bash(1, "cargo test"),
            bash(2, "cargo test # attempt 2"),
            bash(3, "cargo  test\n# attempt 3"),
            bash(4, "cargo test -- --nocapture"),
        ],
    );
    assert_eq!(claude.len(), 4);
    assert_eq!(claude[0].fingerprint, claude[1].fingerprint);
    assert_eq!(claude[0].fingerprint, claude[2].fingerprint);
    assert_ne!(
        claude[0].fingerprint, claude[3].fingerprint,
        "another command"
    );
    let started = |n: usize, cmd: &str| {
        format!(
            r#"{{"type":"item.started","item":{{"id":"item_{n}","type":"command_execution","command":{},"status":"in_progress"}}}}"#,
            Json::from(cmd)
        )
    };
    let codex = calls(
        OutputFormat::CodexJson,
        &[
            started(0, "/bin/bash -lc 'cargo test'"),
            started(1, "/bin/bash -lc 'cargo test  # once more'"),
        ],
    );
    assert_eq!(codex.len(), 2);
    assert_eq!(codex[0].fingerprint, codex[1].fingerprint);
}

#[test]
fn activity_of_a_real_claude_tool_call() {
    let seen = activities(
        OutputFormat::StreamJson,
        include_str!("../../../tests/fixtures/claude/stream-json-bash-tool.jsonl"),
    );
    assert_eq!(
        doings(&seen),
        [
            "Bash: echo hello-from-bash > /home/user/project/bash.txt && cat /home/user/project/bash.txt",
            "writing",
        ]
    );
    // Each assistant message's usage, counted once: 10 + 1 per message here.
    assert_eq!(seen.last().unwrap().tokens, Some(22));
    // Nothing changes after the last change: nothing more is sent.
    let mut p = StreamParser::new(OutputFormat::StreamJson);
    p.feed_line(br#"{"type":"system","subtype":"init","session_id":"s"}"#);
    assert_eq!(p.take_activity(), None);
}

#[test]
fn activity_of_real_claude_streams_without_tools() {
    for (name, stream) in [
        (
            "success",
            include_str!("../../../tests/fixtures/claude/stream-json-success.jsonl"),
        ),
        (
            "partial messages",
            include_str!("../../../tests/fixtures/claude/stream-json-partial-messages.jsonl"),
        ),
    ] {
        let seen = activities(OutputFormat::StreamJson, stream);
        assert_eq!(doings(&seen).last(), Some(&"writing"), "{name}");
    }
    // A denied Write still shows what it tried to write, not the file's content.
    let seen = activities(
        OutputFormat::StreamJson,
        include_str!("../../../tests/fixtures/claude/stream-json-write-denied.jsonl"),
    );
    assert!(
        doings(&seen)
            .iter()
            .any(|d| d.starts_with("Write: /home/user/")),
        "{seen:?}"
    );
}

#[test]
fn activity_names_the_tool_and_what_it_works_on() {
    let line = |block: &str| {
        format!(
            r#"{{"type":"assistant","message":{{"id":"m","content":[{block}],"usage":{{"input_tokens":5,"output_tokens":1}}}}}}"#
        )
    };
    let mut p = StreamParser::new(OutputFormat::StreamJson);
    let mut seen = Vec::new();
    for block in [
        r#"{"type":"thinking","thinking":"hmm","signature":"x"}"#,
        r#"{"type":"tool_use","id":"t","name":"Edit","input":{"file_path":"src/x.rs","old_string":"a","new_string":"b"}}"#,
        r#"{"type":"tool_use","id":"t","name":"Grep","input":{"pattern":"fn  main\n"}}"#,
        r#"{"type":"tool_use","id":"t","name":"TodoWrite","input":{"todos":[]}}"#,
        r#"{"type":"tool_use","id":"t","name":"Bash","input":{"command":42}}"#,
    ] {
        p.feed_line(line(block).as_bytes());
        seen.extend(p.take_activity());
    }
    assert_eq!(
        doings(&seen),
        [
            "thinking",
            "Edit: src/x.rs",
            "Grep: fn main",
            "TodoWrite",
            "Bash"
        ]
    );
    // One message (one id) in several events is counted once.
    assert_eq!(seen.last().unwrap().tokens, Some(6));
    let long = doing("Bash", Some(&"word ".repeat(100)));
    assert!(long.len() <= DOING_MAX + '…'.len_utf8() && long.ends_with('…'));
}

#[test]
fn activity_of_the_other_agents_real_streams() {
    let codex = activities(
        OutputFormat::CodexJson,
        include_str!("../../../tests/fixtures/codex/json-tool.jsonl"),
    );
    assert_eq!(doings(&codex)[0], "command: echo made > made.txt");
    assert!(codex.last().unwrap().tokens.unwrap() > 0);
    let gemini = activities(
        OutputFormat::GeminiStreamJson,
        include_str!("../../../tests/fixtures/gemini/stream-json-tool.jsonl"),
    );
    assert!(
        doings(&gemini).contains(&"run_shell_command: echo made > made.txt"),
        "{gemini:?}"
    );
    let opencode = activities(
        OutputFormat::OpencodeJson,
        include_str!("../../../tests/fixtures/opencode/json-tool.jsonl"),
    );
    assert!(
        doings(&opencode).contains(&"bash: echo made > made.txt"),
        "{opencode:?}"
    );
    // A plain-text agent says nothing about what it does.
    assert!(activities(OutputFormat::ResultLines, "working\nRESULT: X PASS").is_empty());
}
