//! The CI views of a run: the JUnit file (`--junit`) and, on GitHub Actions, the iteration
//! groups, the error annotations and the job summary.

use std::collections::HashMap;

use crate::common::*;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus};
use serde_json::json;

/// The JUnit schema common readers accept: Jenkins' (xunit junit-10.xsd) with Surefire's
/// `flakyFailure`/`flakyError` and per-testcase `properties` (as pytest writes them): each
/// element, the parents it may sit in, and its attributes.
const SCHEMA: &[(&str, &[&str], &[&str])] = &[
    (
        "testsuites",
        &[""],
        // `skipped` is not in Jenkins' schema; quick-junit (so nextest) writes it, and the
        // readers count skipped tests from the testcases anyway.
        &[
            "name", "time", "tests", "failures", "disabled", "errors", "skipped",
        ],
    ),
    (
        "testsuite",
        &["testsuites", "testsuite"],
        &[
            "name",
            "tests",
            "failures",
            "errors",
            "time",
            "disabled",
            "skipped",
            "timestamp",
            "hostname",
            "id",
            "package",
            "assertions",
            "file",
        ],
    ),
    ("properties", &["testsuite", "testcase"], &[]),
    ("property", &["properties"], &["name", "value"]),
    (
        "testcase",
        &["testsuite"],
        &[
            "name",
            "assertions",
            "time",
            "timestamp",
            "classname",
            "status",
            "file",
            "line",
        ],
    ),
    ("skipped", &["testcase"], &["message", "type"]),
    ("failure", &["testcase"], &["message", "type"]),
    ("error", &["testcase"], &["message", "type"]),
    ("rerunFailure", &["testcase"], &["message", "type"]),
    ("rerunError", &["testcase"], &["message", "type"]),
    ("flakyFailure", &["testcase"], &["message", "type"]),
    ("flakyError", &["testcase"], &["message", "type"]),
    (
        "system-out",
        &[
            "testsuite",
            "testcase",
            "rerunFailure",
            "rerunError",
            "flakyFailure",
            "flakyError",
        ],
        &[],
    ),
    (
        "system-err",
        &[
            "testsuite",
            "testcase",
            "rerunFailure",
            "rerunError",
            "flakyFailure",
            "flakyError",
        ],
        &[],
    ),
    (
        "stackTrace",
        &["rerunFailure", "rerunError", "flakyFailure", "flakyError"],
        &[],
    ),
];

/// Fails unless every element and attribute of `xml` is one the schema allows where it is.
fn assert_schema(xml: &str) {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut stack: Vec<String> = Vec::new();
    loop {
        let event = reader.read_event().expect("well-formed XML");
        let (start, empty) = match &event {
            Event::Start(e) => (Some(e.clone()), false),
            Event::Empty(e) => (Some(e.clone()), true),
            Event::End(_) => {
                stack.pop();
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let e = start.unwrap();
        let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
        let parent = stack.last().map_or("", String::as_str);
        let (_, parents, attrs) = SCHEMA
            .iter()
            .find(|(n, _, _)| *n == name)
            .unwrap_or_else(|| panic!("<{name}> is not in the schema"));
        assert!(parents.contains(&parent), "<{name}> inside <{parent}>");
        for a in e.attributes() {
            let a = a.unwrap();
            let key = String::from_utf8(a.key.as_ref().to_vec()).unwrap();
            assert!(attrs.contains(&key.as_str()), "<{name} {key}=…>");
        }
        if name == "testcase" {
            let keys: Vec<String> = e
                .attributes()
                .map(|a| String::from_utf8(a.unwrap().key.as_ref().to_vec()).unwrap())
                .collect();
            assert!(keys.contains(&"name".to_string()), "a testcase has a name");
        }
        if !empty {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
}

fn props(c: &TestCase) -> HashMap<&str, &str> {
    c.properties
        .iter()
        .map(|p| (p.name.as_str(), p.value.as_str()))
        .collect()
}

fn extra<'a>(c: &'a TestCase, key: &str) -> &'a str {
    c.extra
        .get(key)
        .map(|v| v.as_str())
        .unwrap_or_else(|| panic!("{}: no {key}", c.name.as_str()))
}

#[test]
fn the_junit_file_has_one_testcase_per_criterion_with_its_outcome() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [ ] ISC-API-1: checked by its command | Verify: Test: `true`",
            "- [ ] ISC-API-2: fails once, then passes",
            "- [ ] ISC-DB-1: keeps failing",
            "- [ ] ISC-UX-1: a person looks | Verify: Custom: open it",
            "- [ ] ISC-A-1: no secrets in the logs",
        ]),
        json!({
            "ISC-API-2": ["fail:needs a second look", "pass"],
            "ISC-DB-1": ["fail:the schema is wrong", "fail:the schema is still wrong"],
            "*": ["pass"],
        }),
    );
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-a",
        "2",
        "-n",
        "2",
        "--junit",
        "report/junit.xml",
    ]);
    assert_ne!(code(&out), 0, "ISC-DB-1 still fails: {}", stderr(&out));
    let xml = std::fs::read_to_string(sb.work().join("report/junit.xml")).expect("junit.xml");
    assert_schema(&xml);
    let report = Report::deserialize_from_str(&xml).expect("quick-junit reads it back");
    assert_eq!(report.name.as_ref().map(|n| n.as_str()), Some("prdloop"));
    assert_eq!(report.test_suites.len(), 1, "one testsuite per PRD");
    let suite = &report.test_suites[0];
    assert_eq!(suite.name.as_str(), "PRD-20261130-test");
    assert_eq!(
        (suite.tests, suite.failures, suite.skipped, suite.errors),
        (5, 1, 1, 0)
    );
    let cases: HashMap<&str, &TestCase> = suite
        .test_cases
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let names: Vec<&str> = suite.test_cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["ISC-API-1", "ISC-API-2", "ISC-DB-1", "ISC-UX-1", "ISC-A-1"]
    );
    let prd = sb.prd_text();
    for c in &suite.test_cases {
        // file and line name the criterion's line in the PRD.
        assert_eq!(extra(c, "file"), "PRD.md");
        let line: usize = extra(c, "line").parse().unwrap();
        let text = prd.lines().nth(line - 1).unwrap();
        assert!(text.contains(c.name.as_str()), "line {line}: {text}");
        assert_eq!(
            props(c)["kind"] == "anti-criterion",
            c.name.as_str() == "ISC-A-1"
        );
    }
    assert_eq!(
        cases["ISC-API-1"].classname.as_ref().unwrap().as_str(),
        "API"
    );
    assert_eq!(cases["ISC-DB-1"].classname.as_ref().unwrap().as_str(), "DB");

    // Checked by its command before any agent: passing, no attempt, no time.
    let api1 = cases["ISC-API-1"];
    assert!(
        matches!(&api1.status, TestCaseStatus::Success { flaky_runs } if flaky_runs.is_empty())
    );
    assert_eq!(props(api1)["attempts"], "0");
    assert_eq!(props(api1)["verified-by"], "checked");

    // Flaky: passed on its second attempt; the first one's failure is a flakyFailure.
    let api2 = cases["ISC-API-2"];
    let TestCaseStatus::Success { flaky_runs } = &api2.status else {
        panic!("ISC-API-2 passed: {:?}", api2.status)
    };
    assert_eq!(flaky_runs.len(), 1);
    assert_eq!(flaky_runs[0].kind, NonSuccessKind::Failure);
    assert_eq!(
        flaky_runs[0].message.as_ref().unwrap().as_str(),
        "needs a second look"
    );
    assert!(xml.contains("<flakyFailure"), "{xml}");
    let p = props(api2);
    assert_eq!(
        (
            p["attempts"],
            p["cost-usd"],
            p["input-tokens"],
            p["output-tokens"]
        ),
        // Two workers and the verifier's review of the pass.
        ("2", "0.0035", "300", "60")
    );
    assert!(
        api2.time.unwrap() > std::time::Duration::ZERO,
        "summed worker time"
    );

    // Failing: the last reason as the message, the tail of its last log as the text, the
    // earlier attempt as a rerunFailure.
    let db = cases["ISC-DB-1"];
    let TestCaseStatus::NonSuccess {
        kind,
        message,
        description,
        reruns,
        ..
    } = &db.status
    else {
        panic!("ISC-DB-1 failed: {:?}", db.status)
    };
    assert_eq!(*kind, NonSuccessKind::Failure);
    assert_eq!(
        message.as_ref().unwrap().as_str(),
        "the schema is still wrong"
    );
    let body = description.as_ref().expect("the log's tail").as_str();
    assert!(
        body.contains("RESULT: ISC-DB-1 FAIL: the schema is still wrong"),
        "{body}"
    );
    assert_eq!(reruns.runs.len(), 1);
    assert_eq!(
        reruns.runs[0].message.as_ref().unwrap().as_str(),
        "the schema is wrong"
    );
    assert_eq!(
        (props(db)["attempts"], props(db)["cost-usd"]),
        ("2", "0.0040")
    );

    // Custom: skipped, never tried.
    let ux = cases["ISC-UX-1"];
    assert!(
        matches!(&ux.status, TestCaseStatus::Skipped { .. }),
        "{:?}",
        ux.status
    );
    assert_eq!(props(ux)["attempts"], "0");

    // The anti-criterion passed on its first attempt.
    let anti = cases["ISC-A-1"];
    assert!(
        matches!(&anti.status, TestCaseStatus::Success { flaky_runs } if flaky_runs.is_empty())
    );
    assert_eq!(props(anti)["verified-by"], "reviewed");
}

#[test]
fn on_github_actions_the_groups_annotations_and_job_summary_are_exactly_these() {
    let mut criteria = vec![
        "- [ ] ISC-OK-1: passes".to_string(),
        "- [ ] ISC-UX-1: a person looks | Verify: Custom: open it".to_string(),
        // The reason holds %, LFs, `:` and `,`: % and LF are escaped in the annotation.
        "- [ ] ISC-OPS-1: its check fails | Verify: Test: `printf '100%% broken\\nnext: a,b\\n'; exit 1`".to_string(),
    ];
    let mut plan = serde_json::Map::new();
    plan.insert("*".into(), json!(["pass"]));
    for i in 1..=10 {
        criteria.push(format!("- [ ] ISC-F-{i}: fails"));
        plan.insert(
            format!("ISC-F-{i}"),
            // A CR inside the reason; `|` and HTML for the summary's table.
            json!([format!("fail:reason {i}: 5% done\rretrying | <b>x</b>, ok")]),
        );
    }
    let criteria: Vec<&str> = criteria.iter().map(String::as_str).collect();
    let sb = Sandbox::new(&prd_with(&criteria), plan.into());
    let summary = sb.root().join("step-summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let out = sb
        .command(&["run", "PRD.md", "-a", "4", "-n", "1"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .spawn()
        .map(|c| wait_output(c, std::time::Duration::from_secs(180)))
        .unwrap();
    assert_ne!(code(&out), 0, "{}", stderr(&out));
    let commands: Vec<String> = stderr(&out)
        .lines()
        .filter(|l| l.starts_with("::"))
        .map(String::from)
        .collect();
    let summary_text = std::fs::read_to_string(&summary).unwrap();
    insta::with_settings!({filters => vec![
        (r"\d+(\.\d+)?(ms|s) ·", "[DUR] ·"),
    ]}, {
        insta::assert_snapshot!("github_commands", commands.join("\n"));
        insta::assert_snapshot!("github_step_summary", summary_text);
    });
}

#[test]
fn ctrl_c_still_writes_the_junit_file() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": ["hang"], "*": ["pass"]}),
    );
    let child = sb.spawn(&[
        "run",
        "PRD.md",
        "-a",
        "2",
        "--kill-grace",
        "1s",
        "--junit",
        "junit.xml",
    ]);
    let pid = child.id();
    sb.wait_for_workers(2);
    sb.wait_for_prd("- [x] ISC-B-1:");
    send_signal(pid, "INT");
    let out = wait_output(child, std::time::Duration::from_secs(60));
    assert_eq!(code(&out), 130, "{}", stderr(&out));
    let xml = std::fs::read_to_string(sb.work().join("junit.xml")).expect("junit.xml");
    let report = Report::deserialize_from_str(&xml).unwrap();
    let suite = &report.test_suites[0];
    assert_eq!((suite.tests, suite.failures), (2, 1), "{xml}");
    let props: HashMap<&str, &str> = suite
        .properties
        .iter()
        .map(|p| (p.name.as_str(), p.value.as_str()))
        .collect();
    assert_eq!(props["outcome"], "paused", "{xml}");
    sb.assert_no_process_left();
}

/// The Action's run step (`action/run.sh`) with its environment as action.yml sets it.
pub(crate) fn action_step(sb: &Sandbox, inputs: &[(&str, &str)]) -> (std::process::Output, String) {
    let outputs = sb.root().join("github-output");
    let _ = std::fs::remove_file(&outputs);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/action/run.sh");
    // The sandbox's environment, with the agent chosen by the inputs only.
    let mut c = std::process::Command::new("bash");
    c.env_clear();
    for (k, v) in sb.command(&[]).get_envs() {
        if let Some(v) = v
            && k != "PRDLOOP_CLAUDE_BIN"
        {
            c.env(k, v);
        }
    }
    c.arg(script)
        .current_dir(sb.root())
        .env("PRDLOOP_BIN", PRDLOOP)
        .env("GITHUB_OUTPUT", &outputs)
        .env("RUNNER_TEMP", sb.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in inputs {
        c.env(k, v);
    }
    let o = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(120));
    let written = std::fs::read_to_string(&outputs).unwrap_or_default();
    (o, written)
}

#[test]
fn the_actions_named_inputs_are_its_flags_and_the_junit_path_is_an_output() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": "pass", "ISC-B-1": "pass"}),
    );
    let (o, outputs) = action_step(
        &sb,
        &[
            ("INPUT_PRD", "PRD.md"),
            ("INPUT_AGENTS", "2"),
            ("INPUT_WORKING_DIRECTORY", "work"),
            ("INPUT_AGENT", "claude"),
            ("INPUT_AGENT_BIN", FAKE),
            ("INPUT_MODEL", "opus"),
            ("INPUT_MAX_COST", "5"),
            ("INPUT_TIMEOUT", "5m"),
            ("INPUT_JUNIT", "reports/junit.xml"),
            ("INPUT_ARGS", "--stall 2"),
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let junit = sb.work().join("reports/junit.xml");
    assert!(outputs.contains("outcome=completed\n"), "{outputs}");
    assert!(outputs.contains("exit-code=0\n"), "{outputs}");
    assert!(
        outputs.contains(&format!("junit={}\n", junit.display())),
        "{outputs}"
    );
    assert!(junit.is_file());
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(
        shown.contains("--agent claude --agent-bin")
            && shown.contains("--model opus --max-cost 5 --timeout 5m --junit")
            && shown.contains("--stall 2"),
        "{shown}"
    );
    let records = sb.worker_records();
    assert_eq!(records.len(), 2);
    assert!(
        records[0]["args"]
            .to_string()
            .contains("\"--model\",\"opus\"")
    );
}

#[test]
fn the_actions_agent_input_is_a_name_and_a_path_there_says_where_it_goes() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let (o, outputs) = action_step(
        &sb,
        &[
            ("INPUT_PRD", "work/PRD.md"),
            ("INPUT_AGENT", "./bin/claude"),
        ],
    );
    assert_eq!(code(&o), 2);
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("give the program `./bin/claude` as `agent-bin`"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(outputs, "exit-code=2\n");
    assert!(sb.worker_records().is_empty());
}

#[test]
fn the_actions_empty_inputs_leave_the_flags_to_the_config_files() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a", "- [ ] ISC-B-1: b"]),
        json!({"ISC-A-1": "pass", "ISC-B-1": "pass"}),
    );
    std::fs::write(
        sb.work().join("prdloop.toml"),
        "agents = 2\nmodel = \"sonnet\"\n",
    )
    .unwrap();
    let (o, outputs) = action_step(
        &sb,
        &[
            ("INPUT_PRD", "PRD.md"),
            ("INPUT_WORKING_DIRECTORY", "work"),
            ("INPUT_AGENT_BIN", FAKE),
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(outputs.contains("exit-code=0\n"), "{outputs}");
    let events = std::fs::read_to_string(sb.root().join("prdloop-events.jsonl")).unwrap();
    let start: serde_json::Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    assert_eq!(start["event"], "start");
    assert_eq!(start["agents"], 2, "{start}");
    let records = sb.worker_records();
    assert!(
        records
            .iter()
            .all(|r| r["args"].to_string().contains("\"--model\",\"sonnet\"")),
        "{records:?}"
    );
}

#[test]
fn the_actions_audit_mode_reports_a_regressed_tick() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: a.txt says two | Verify: CLI: `grep -qx two a.txt`"]),
        json!({"ISC-A-1": ["sh:echo two > a.txt"]}),
    );
    let w = sb.work();
    git(&w, &["init", "-q"]);
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-qm", "initial"]);
    let run = [
        ("INPUT_PRD", "PRD.md"),
        ("INPUT_WORKING_DIRECTORY", "work"),
        ("INPUT_AGENT_BIN", FAKE),
        ("INPUT_VERIFIER", "none"),
    ];
    let (o, _) = action_step(&sb, &run);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("--verifier none"));
    let audit = [
        ("INPUT_PRD", "PRD.md"),
        ("INPUT_WORKING_DIRECTORY", "work"),
        ("INPUT_AUDIT", "true"),
    ];
    let (o, outputs) = action_step(&sb, &audit);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(outputs.contains("audit-holding=1\n"), "{outputs}");
    // A later change breaks it: the step fails and says which tick.
    std::fs::write(w.join("a.txt"), "one\n").unwrap();
    let (o, outputs) = action_step(&sb, &audit);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(outputs.contains("audit-regressed=1\n"), "{outputs}");
    assert!(outputs.contains("exit-code=1\n"), "{outputs}");
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("::error title=prdloop audit::ISC-A-1 regressed"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}
