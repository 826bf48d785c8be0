use super::*;
use crate::backend::classify::retry_time;

fn opts(agent: Agent) -> AgentOptions {
    AgentOptions {
        agent,
        bin: agent.default_bin().unwrap_or("./agent.sh").into(),
        model: Some("m1".into()),
        extra_args: vec!["--x".into()],
        claude: ClaudeOptions {
            bin: "claude".into(),
            model: Some("m1".into()),
            permission_mode: None,
            max_turns: None,
            allowed_tools: String::new(),
            extra_args: vec![],
        },
        in_prdloop_sandbox: false,
    }
}

#[test]
fn command_lines() {
    let shown: Vec<String> = Agent::ALL.iter().map(|a| opts(*a).display()).collect();
    assert_eq!(
        shown,
        [
            "claude -p --output-format stream-json --verbose --model m1",
            "codex exec --json --skip-git-repo-check -s workspace-write -m m1 --x -",
            "gemini -o stream-json --approval-mode yolo --skip-trust -m m1 --x -p <prompt>",
            "opencode run --format json --auto -m m1 --x -- <prompt>",
            "agent -p --output-format stream-json --force --trust --model m1 --x <prompt>",
            "amp -x <prompt> --stream-json --dangerously-allow-all --mode m1 --x",
            "./agent.sh --x",
        ]
    );
}

/// Inside prdloop's sandbox codex is told not to start its own (which cannot start there);
/// the others' command lines stay as they are.
#[test]
fn inside_prdloop_s_sandbox_codex_does_not_sandbox_itself() {
    for a in Agent::ALL {
        let mut o = opts(a);
        let outside = o.display();
        o.in_prdloop_sandbox = true;
        let inside = o.display();
        if a.sandboxes_itself() {
            assert_eq!(
                inside,
                outside.replace("workspace-write", "danger-full-access")
            );
        } else {
            assert_eq!(inside, outside, "{a}");
        }
    }
}

#[test]
fn the_prompt_goes_on_stdin_or_as_an_argument() {
    let c = opts(Agent::Codex).command("do it");
    assert_eq!(c.stdin, b"do it");
    assert_eq!(c.args.last().map(String::as_str), Some("-"));
    let g = opts(Agent::Gemini).command("do it");
    assert!(g.stdin.is_empty(), "gemini would join stdin to the prompt");
    assert_eq!(&g.args[g.args.len() - 2..], ["-p", "do it"]);
    let o = opts(Agent::Opencode).command("-starts with a dash");
    assert!(o.stdin.is_empty());
    assert_eq!(&o.args[o.args.len() - 2..], ["--", "-starts with a dash"]);
    let c = opts(Agent::Command).command("p");
    assert_eq!(
        (c.program.as_str(), c.stdin.as_slice()),
        ("./agent.sh", &b"p"[..])
    );
}

#[test]
fn names_parse() {
    assert_eq!("Codex".parse::<Agent>(), Ok(Agent::Codex));
    assert_eq!("cursor-agent".parse::<Agent>(), Ok(Agent::Cursor));
    assert!(
        "aider"
            .parse::<Agent>()
            .unwrap_err()
            .contains("one of claude")
    );
}

#[test]
fn retry_times() {
    let now = 1_796_032_800; // 2026-11-30 10:00 UTC
    assert_eq!(retry_time("Please try again in 1s.", now), Some(now + 1));
    assert_eq!(
        retry_time("Suggested retry after 20s..", now),
        Some(now + 20)
    );
    assert_eq!(retry_time("nothing here", now), None);
    let at = retry_time("or try again at 2:25 PM.", now).unwrap();
    assert!(at > now && at <= now + 24 * 3600);
    let local = jiff::Timestamp::from_second(at)
        .unwrap()
        .to_zoned_datetime(jiff::tz::TimeZone::system());
    assert_eq!((local.hour(), local.minute()), (14, 25));
}
