//! Questions that park one criterion (`QUESTION: <id> <text>`, `prdloop answer`) and stuck
//! workers (`--stuck-after`).

use crate::common::*;
use serde_json::json;

fn events(out: &std::process::Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The prompts the fake agent got for `id`, in the order its workers started.
fn prompts_of(sb: &Sandbox, id: &str) -> Vec<String> {
    let mut recs: Vec<serde_json::Value> = sb
        .worker_records()
        .into_iter()
        .filter(|r| r["criterion"] == id)
        .collect();
    recs.sort_by_key(|r| r["start"].as_u64());
    recs.iter()
        .map(|r| r["prompt"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_question_parks_its_criterion_and_round_trips_through_answer() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: prices shown", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["ask-until-answered:Cents or euros?"], "*": ["pass"]}),
    );
    let notes = sb.root().join("notes.jsonl");
    let target = format!("command:cat >> '{}'", notes.display());
    let out = sb.run(&["run", "PRD.md", "-a", "2", "--json", "--notify", &target]);
    let err = stderr(&out);
    // Only the parked criterion is left: the run ends waiting for the answer.
    assert_eq!(code(&out), 8, "{err}");
    assert!(err.contains("ISC-A-1 asks: Cents or euros?"), "{err}");
    assert!(
        err.contains("prdloop answer") && err.contains("ISC-A-1 \"<answer>\""),
        "{err}"
    );
    assert!(
        err.contains("waits for an answer — asks: Cents or euros?"),
        "{err}"
    );
    let ev = events(&out);
    let asked = ev
        .iter()
        .find(|e| e["event"] == "question")
        .expect("a question event");
    assert_eq!(asked["criterion"], "ISC-A-1");
    assert_eq!(asked["question"], "Cents or euros?");
    let end = ev.last().unwrap();
    assert_eq!(end["outcome"], "questions");
    assert_eq!(end["exitCode"], 8);
    assert_eq!(
        end["questions"],
        json!([{"criterion": "ISC-A-1", "question": "Cents or euros?"}])
    );
    // The other lane went on; the parked criterion got one worker and no attempt counted.
    assert!(sb.prd_text().contains("- [x] ISC-B-1:"));
    assert!(sb.prd_text().contains("- [ ] ISC-A-1:"));
    assert_eq!(
        prompts_of(&sb, "ISC-A-1").len(),
        1,
        "parked: not tried again"
    );
    let state = sb.state();
    let a = state["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ISC-A-1")
        .unwrap();
    assert_eq!(a["attempts"], 0, "a question is not an attempt");
    assert_eq!(state["questions"][0]["question"], "Cents or euros?");
    let logged: Vec<_> = attempts(&state)
        .into_iter()
        .filter(|a| a["criterion"] == "ISC-A-1")
        .collect();
    assert_eq!(logged[0]["verdict"], "question");
    // The person was told: a needs-a-person notification naming the question.
    let notes = std::fs::read_to_string(&notes).unwrap();
    let asked_note = notes
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|n| {
            n["event"] == "needs-person"
                && n["message"].as_str().unwrap().contains("Cents or euros?")
        })
        .unwrap_or_else(|| panic!("no notification of the question: {notes}"));
    assert!(
        asked_note["message"]
            .as_str()
            .unwrap()
            .contains("prdloop answer")
    );

    // `status` shows it, as text and JSON.
    snapshot!(
        sb.root(),
        "status_with_a_question",
        &transcript(&sb, &[&["status", "PRD.md"]])
    );
    let st = sb.run(&["status", "PRD.md", "--json"]);
    let js: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(js[0]["parked"], json!(["ISC-A-1"]));
    assert_eq!(js[0]["questions"][0]["open"], true);

    // Answers only what was asked (exit 2); without an answer, lists the open questions; an
    // answer with no loop running reaches the next `prdloop run`.
    let text = transcript(
        &sb,
        &[
            &["answer", "PRD.md", "ISC-B-1", "whatever"],
            &["answer", "PRD.md"],
            &["answer", "PRD.md", "ISC-A-1", "Cents, always."],
        ],
    );
    snapshot!(sb.root(), "answer", &text);
    // With `--json`, the list: every question, answered ones too, each with its version.
    let listed = sb.run(&["answer", "PRD.md", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["criterion"], "ISC-A-1", "{listed}");
    assert_eq!(listed[0]["answer"], "Cents, always.", "{listed}");
    assert_eq!(listed[0]["version"], 2, "{listed}");

    // A later run picks the answer up: the criterion is worked on with it in its prompt.
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
    let prompts = prompts_of(&sb, "ISC-A-1");
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts[1].contains("Question: Cents or euros?\nAnswer: Cents, always.\n"),
        "{}",
        prompts[1]
    );
    let st = sb.run(&["status", "PRD.md", "--json"]);
    let js: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(js[0]["parked"], json!([]));
    assert_eq!(js[0]["questions"][0]["answer"], "Cents, always.");
}

#[test]
fn an_answer_given_during_the_run_unparks_the_criterion_in_that_run() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["ask-until-answered:Which port?"], "ISC-B-1": ["hang-once", "pass"], "*": ["pass"]}),
    );
    let child = sb.spawn(&["run", "PRD.md", "-a", "2", "--timeout", "20s"]);
    // Wait for the question to be in the book, then answer it while ISC-B-1 still works.
    let book = sb.state_dir().join("questions");
    let t = std::time::Instant::now();
    loop {
        let asked = std::fs::read_dir(&book).ok().is_some_and(|rd| {
            rd.flatten()
                .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("Which port?")))
        });
        if asked {
            break;
        }
        assert!(
            t.elapsed().as_secs() < 60,
            "the question never reached the book"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let ok = sb.run(&["answer", "PRD.md", "ISC-A-1", "8080"]);
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    assert!(
        stdout(&ok).contains("the loop running on it"),
        "{}",
        stdout(&ok)
    );
    let out = wait_output(child, std::time::Duration::from_secs(120));
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains("ISC-A-1 answered: 8080: worked on again"),
        "{err}"
    );
    let prompts = prompts_of(&sb, "ISC-A-1");
    assert_eq!(prompts.len(), 2);
    assert!(prompts[1].contains("Answer: 8080"), "{}", prompts[1]);
    assert_eq!(sb.state_count(), 1, "one run did it all");
}

/// A hostile worker asks in another criterion's name: that criterion is not parked (it is
/// worked on and passes), and the asking worker's own attempt counts as it reported.
#[test]
fn a_worker_cannot_park_another_criterion() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["ask-other:ISC-B-1"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("the worker for ISC-A-1 asked a question for ISC-B-1; ignored"),
        "{err}"
    );
    assert!(sb.prd_text().contains("- [x] ISC-B-1:"));
    let state = sb.state();
    assert!(state.get("questions").is_none(), "{state}");
    let a = state["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "ISC-A-1")
        .unwrap();
    assert_eq!(a["attempts"], 1);
    assert_eq!(a["lastFailure"], "tried");
}

/// An agent making the same tool call over and over is ended after 5 repeats (not at its
/// 60 s timeout), its attempt recorded as stuck with what it repeated, which the next prompt
/// names.
#[test]
fn a_repeating_agent_is_caught_by_its_call_count() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        json!({"ISC-A-1": ["repeat:1000", "pass"]}),
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "--stuck-after",
        "5",
        "--timeout",
        "60s",
        "--json",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let state = sb.state();
    let first = &attempts(&state)[0];
    assert_eq!(first["verdict"], "stuck", "{first}");
    assert_eq!(first["exit"]["kind"], "stuck");
    assert_eq!(first["stuck"]["repeatedCalls"], 5);
    assert_eq!(
        first["stuck"]["repeating"],
        json!([{"call": "Bash: cargo test", "times": 5}])
    );
    let reason = first["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("stuck: 5 tool calls in ") && reason.contains("`Bash: cargo test` (5×)"),
        "{reason}"
    );
    let prompts = prompts_of(&sb, "ISC-A-1");
    assert_eq!(prompts.len(), 2);
    assert!(
        prompts[1].contains("it kept repeating `Bash: cargo test` (5×)")
            && prompts[1].contains("do not repeat them"),
        "{}",
        prompts[1]
    );
    let ev = events(&out);
    let end = ev.iter().find(|e| e["event"] == "worker_end").unwrap();
    assert_eq!(end["verdict"], "stuck");
    assert!(err.contains("ISC-A-1 STUCK"), "{err}");
    assert!(end["reason"].as_str().unwrap().starts_with("stuck:"));
    sb.assert_no_process_left();
    let st = sb.run(&["status", "PRD.md"]);
    assert!(
        stdout(&st).contains("stuck: 1 attempt(s)"),
        "{}",
        stdout(&st)
    );
}

/// By time: one agent repeats a call every 100 ms, another makes one call and then none;
/// with `--stuck-after 1s` both are ended as stuck.
#[test]
fn a_repeating_or_silent_agent_is_caught_by_its_duration() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["repeat:100000:100"], "ISC-B-1": ["repeat:1"]}),
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-a",
        "2",
        "-n",
        "1",
        "--stuck-after",
        "1s",
        "--timeout",
        "60s",
    ]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let state = sb.state();
    let logged = attempts(&state);
    for id in ["ISC-A-1", "ISC-B-1"] {
        let a = logged.iter().find(|a| a["criterion"] == id).unwrap();
        assert_eq!(a["verdict"], "stuck", "{a}");
        assert!(a["stuck"]["idleSecs"].as_u64().unwrap() >= 1, "{a}");
    }
    let a = logged.iter().find(|a| a["criterion"] == "ISC-A-1").unwrap();
    assert_eq!(a["stuck"]["repeating"][0]["call"], "Bash: cargo test");
    let b = logged.iter().find(|a| a["criterion"] == "ISC-B-1").unwrap();
    assert_eq!(
        b["reason"],
        "stuck: no new tool call for 1s; prdloop ended it (--stuck-after)"
    );
    sb.assert_no_process_left();
}

/// A `command` agent's plain output asks too, and the answer reaches the work: the script
/// writes what the person answered, which the criterion's Verify command checks.
#[test]
fn a_command_agents_question_round_trips_into_its_work() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-A-1: the colour is chosen | Verify: Test: `grep -qx blue colour.txt`",
        ]),
        json!({}),
    );
    let agent = sb.root().join("agent.sh");
    std::fs::write(
        &agent,
        r#"#!/bin/sh
prompt=$(cat)
answer=$(printf '%s\n' "$prompt" | sed -n 's/^Answer: //p' | tail -n 1)
if [ -z "$answer" ]; then
  echo "I need to know the colour."
  echo "QUESTION: $PRDLOOP_CRITERION Which colour, blue or green?"
  exit 0
fi
printf '%s\n' "$answer" > colour.txt
echo "RESULT: $PRDLOOP_CRITERION PASS"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_command_agent(&sb, &agent, &[]);
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ISC-A-1 asks: Which colour, blue or green?"),
        "{}",
        stderr(&out)
    );
    let ok = sb.run(&["answer", "PRD.md", "ISC-A-1", "blue"]);
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    let out = run_command_agent(&sb, &agent, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(sb.work().join("colour.txt")).unwrap(),
        "blue\n"
    );
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
}

/// On GitHub Actions a waiting question is a warning annotation on its criterion's line, and
/// the job summary's row says what it asks.
#[test]
fn on_github_actions_a_question_is_a_warning_on_its_line() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a"]),
        json!({"ISC-A-1": ["ask:Cents, or euros?"]}),
    );
    let summary = sb.root().join("step-summary.md");
    let out = sb
        .command(&["run", "PRD.md"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .spawn()
        .map(|c| wait_output(c, std::time::Duration::from_secs(180)))
        .unwrap();
    let err = stderr(&out);
    assert_eq!(code(&out), 8, "{err}");
    let line = sb
        .prd_text()
        .lines()
        .position(|l| l.starts_with("- [ ] ISC-A-1"))
        .unwrap()
        + 1;
    assert!(
        err.lines().any(|l| l
            == format!(
                "::warning file=PRD.md,line={line},title=ISC-A-1 asks::Cents, or euros? (answer: prdloop answer <PRD> ISC-A-1 \"<answer>\")"
            )),
        "{err}"
    );
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(summary.contains("❓ asks: Cents, or euros?"), "{summary}");
}

/// Best-of-N: when no sample of the attempt passes and one asked, the criterion parks on that
/// question (no attempt counted); answered, the next run's samples get the answer.
#[test]
fn a_samples_question_parks_the_criterion_when_no_sample_passed() {
    let sb = repo(
        &["- [ ] ISC-A-1: a"],
        json!({"ISC-A-1": ["ask-until-answered:Cents or euros?"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "--best-of", "2"]);
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ISC-A-1 asks: Cents or euros?"),
        "{}",
        stderr(&out)
    );
    let a = &sb.state()["criteria"][0];
    assert_eq!(a["attempts"], 0, "{a}");
    let ok = sb.run(&["answer", "PRD.md", "ISC-A-1", "Cents."]);
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    let out = sb.run(&["run", "PRD.md", "--best-of", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
    assert!(
        prompts_of(&sb, "ISC-A-1")
            .last()
            .unwrap()
            .contains("Answer: Cents."),
    );
}
