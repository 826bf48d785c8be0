//! A worker's log as people read it (`prdloop logs`, the dashboard): each line of the agent's
//! stream rendered by the backend of the agent that wrote it, `[stderr] ` lines, and plain
//! text. What the agent wrote is shown without control characters.

use serde_json::Value;

use super::agents::Agent;
use crate::report::dim;

/// One line of a log `agent` wrote (its stream, or `[stderr] ` lines, or plain text) as
/// people read it; `None` for lines that say nothing to a reader.
pub fn render_line(agent: Agent, line: &str) -> Option<String> {
    // What the agent wrote is shown without its control characters (`--raw` has them).
    if let Some(err) = line.strip_prefix("[stderr] ") {
        return Some(dim(&format!("stderr: {}", crate::text::visible(err))));
    }
    let backend = agent.backend();
    let parsed = backend
        .speaks_json()
        .then(|| serde_json::from_str::<Value>(line).ok())
        .flatten();
    let Some(mut v) = parsed else {
        return (!line.trim().is_empty()).then(|| crate::text::visible(line));
    };
    scrub(&mut v);
    backend.render(&v)
}

/// Every string in a JSON value, without control characters other than newlines and tabs.
fn scrub(v: &mut Value) {
    match v {
        Value::String(s) if s.chars().any(char::is_control) => *s = crate::text::visible(s),
        Value::Array(a) => a.iter_mut().for_each(scrub),
        Value::Object(o) => o.values_mut().for_each(scrub),
        _ => {}
    }
}

/// Renders a whole log `agent` wrote (for the dashboard and tests).
pub fn render(agent: Agent, text: &str) -> String {
    text.lines()
        .filter_map(|l| render_line(agent, l))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> String {
        let mut out = anstream::StripStream::new(Vec::new());
        std::io::Write::write_all(&mut out, s.as_bytes()).unwrap();
        String::from_utf8(out.into_inner()).unwrap()
    }

    #[test]
    fn a_recorded_claude_stream_reads_as_a_story() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/claude/stream-json-bash-tool.jsonl"
        ))
        .unwrap();
        insta::assert_snapshot!(plain(&render(Agent::Claude, &text)));
    }

    #[test]
    fn an_agents_escape_sequences_are_not_rendered() {
        let line = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi\u001b[2J\u001b[?25l\u0007 there\nnext"}]}}"#;
        let shown = render_line(Agent::Claude, line).unwrap();
        assert_eq!(shown, "hi[2J[?25l there\nnext");
        assert_eq!(
            render_line(Agent::Claude, "[stderr] x\u{1b}]0;title\u{7}y").map(|s| plain(&s)),
            Some("stderr: x]0;titley".to_string())
        );
    }

    #[test]
    fn codex_gemini_and_opencode_logs_read_as_what_the_agent_did() {
        for (agent, fixture) in [
            (Agent::Codex, "codex/json-tool.jsonl"),
            (Agent::Gemini, "gemini/stream-json-tool.jsonl"),
            (Agent::Opencode, "opencode/json-tool.jsonl"),
        ] {
            let text = std::fs::read_to_string(format!(
                "{}/tests/fixtures/{fixture}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap();
            let shown = plain(&render(agent, &text));
            assert!(shown.contains("echo made > made.txt"), "{fixture}: {shown}");
            assert!(shown.contains("RESULT: ISC-1 PASS"), "{fixture}: {shown}");
            assert!(shown.lines().count() >= 3, "{fixture}: {shown}");
        }
    }

    #[test]
    fn stderr_plain_and_silent_lines() {
        assert_eq!(
            plain(&render_line(Agent::Claude, "[stderr] boom").unwrap()),
            "stderr: boom"
        );
        assert_eq!(
            render_line(Agent::Claude, "not json").as_deref(),
            Some("not json")
        );
        assert_eq!(
            render_line(Agent::Claude, r#"{"type":"rate_limit_event"}"#),
            None
        );
    }

    #[test]
    fn a_line_is_read_as_the_agent_that_wrote_it_reads_it() {
        // A `result` line of a `command` agent's plain output is its text, not a claude result.
        let line = r#"{"type":"result","subtype":"success","result":"done"}"#;
        assert_eq!(render_line(Agent::Command, line).as_deref(), Some(line));
        assert!(
            plain(&render_line(Agent::Claude, line).unwrap()).starts_with("── result: success")
        );
        // codex's lines say nothing to claude's renderer, and the other way round.
        let codex = r#"{"type":"turn.failed","error":{"message":"boom"}}"#;
        assert_eq!(
            render_line(Agent::Codex, codex)
                .map(|s| plain(&s))
                .as_deref(),
            Some("turn failed: boom")
        );
        assert_eq!(render_line(Agent::Claude, codex), None);
        let assistant =
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}"#;
        assert_eq!(render_line(Agent::Codex, assistant), None);
        assert_eq!(render_line(Agent::Amp, assistant).as_deref(), Some("hi"));
    }
}
