//! Trust but verify: runnable Verify commands decide, before, during and after a run, and
//! `prdloop verify` works on its own.

mod common;

use common::*;
use serde_json::json;

/// Every file below `dir`, as strings.
fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out
}

#[test]
fn a_claimed_pass_whose_command_fails_is_not_ticked_and_the_reason_reaches_the_retry() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: makes the file | Verify: Test: `test -f made-a`"]),
        json!({"ISC-A-1": ["pass", "write:made-a"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "2"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains(
            "the agent said PASS, but its Verify command `test -f made-a` exited with status 1"
        ),
        "{err}"
    );
    let recs = sb.worker_records();
    assert_eq!(recs.len(), 2);
    assert!(
        recs[1]["prompt"]
            .as_str()
            .unwrap()
            .contains("`test -f made-a` exited with status 1")
    );
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
    assert!(err.contains("pass (checked)"), "{err}");
    let st = sb.state();
    assert_eq!(st["criteria"][0]["verifiedBy"], "command");
    let att = attempts(&st);
    assert_eq!(att[0]["verdict"], "fail");
    assert_eq!(att[1]["verdict"], "pass");
}

#[test]
fn a_ticked_criterion_that_regresses_is_unticked_at_the_iteration_end() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [x] ISC-A-1: nothing is broken | Verify: Test: `test ! -f broken`",
            "- [ ] ISC-B-1: does something that breaks A",
        ]),
        json!({"ISC-B-1": ["write:broken"]}),
    );
    // ISC-A-1 was ticked before the run: only --recheck lets a check untick it.
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--recheck"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(err.contains("ISC-A-1 REGRESSED"), "{err}");
    let text = sb.prd_text();
    assert!(
        text.contains("- [ ] ISC-A-1:") && text.contains("- [x] ISC-B-1:"),
        "{text}"
    );
    assert!(text.contains("\nfailing_criteria: [ISC-A-1]\n"), "{text}");
    let st = sb.state();
    let a = &st["criteria"][0];
    assert_eq!(a["regressions"], 1);
    assert!(
        a["lastFailure"]
            .as_str()
            .unwrap()
            .starts_with("regression: `test ! -f broken`")
    );
    assert_eq!(st["criteria"][1]["verifiedBy"], "agent");
    assert!(err.contains("pass (agent-verified)"), "{err}");
    assert!(err.contains("1 regression(s)"), "{err}");
}

#[test]
fn start_checks_untick_failing_hand_ticks_and_tick_passing_ones_without_a_worker() {
    let sb = Sandbox::new(
        &prd_with(&[
            "- [x] ISC-A-1: hand-ticked but broken | Verify: Test: `false`",
            "- [ ] ISC-B-1: already true | Verify: CLI: `true`",
            "- [ ] ISC-C-1: needs work",
        ]),
        json!({"ISC-A-1": ["fail"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--recheck"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let mut ran: Vec<String> = sb
        .worker_records()
        .iter()
        .map(|r| r["criterion"].as_str().unwrap().to_string())
        .collect();
    ran.sort();
    assert_eq!(ran, ["ISC-A-1", "ISC-C-1"], "no worker for ISC-B-1");
    let text = sb.prd_text();
    assert!(
        text.contains("- [ ] ISC-A-1:")
            && text.contains("- [x] ISC-B-1:")
            && text.contains("- [x] ISC-C-1:")
    );
    assert!(
        err.contains("ISC-A-1 FAIL ticked, but its Verify command fails: unticked"),
        "{err}"
    );
}

#[test]
fn the_authors_ticks_are_never_unticked_and_their_checks_not_run_without_recheck() {
    let prd = prd_with(&[
        "- [x] ISC-A-1: hand-ticked, its check fails here | Verify: Test: `false`",
        "- [x] ISC-B-1: hand-ticked, broken by C | Verify: Test: `test ! -f broken`",
        "- [ ] ISC-C-1: breaks B",
    ]);
    let sb = Sandbox::new(&prd, json!({"ISC-C-1": ["write:broken"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    // Failure 9: the checks of boxes the author ticked (one may be a paid model call) do not
    // run at the start of a run without --recheck.
    assert!(
        !err.contains("ISC-A-1 is ticked but its check fails"),
        "{err}"
    );
    let logs: Vec<String> = walk(&sb.state_dir())
        .into_iter()
        .filter(|p| p.contains("start-"))
        .collect();
    assert!(logs.is_empty(), "no start check ran: {logs:?}");
    assert!(!err.contains("REGRESSED"), "{err}");
    let text = sb.prd_text();
    for id in ["ISC-A-1", "ISC-B-1", "ISC-C-1"] {
        assert!(text.contains(&format!("- [x] {id}:")), "{id}: {text}");
    }
    let ran: Vec<String> = sb
        .worker_records()
        .iter()
        .map(|r| r["criterion"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ran, ["ISC-C-1"], "no worker for the author's ticks");
}

#[test]
fn a_command_that_cannot_run_here_is_not_a_failing_criterion() {
    // A `CLI:` method naming a program this machine lacks (exit 127), and one that cannot be
    // executed (126): the agent's verdict counts, with one warning each; nothing is unticked.
    let sb = Sandbox::new(
        &prd_with(&[
            "- [x] ISC-A-1: health answers | Verify: CLI: `no-such-tool-xyz --health`",
            "- [ ] ISC-B-1: the service runs | Verify: CLI: `no-such-tool-xyz --run`",
            "- [ ] ISC-C-1: the script runs | Verify: Test: `./not-executable.sh`",
        ]),
        json!({"*": ["pass"]}),
    );
    std::fs::write(
        sb.work().join("not-executable.sh"),
        "#!/bin/sh
",
    )
    .unwrap();
    let out = sb.run(&["run", "PRD.md", "-n", "2", "--recheck"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    for id in ["ISC-A-1", "ISC-B-1", "ISC-C-1"] {
        assert_eq!(
            err.matches(&format!("warning: {id} cannot be verified here:"))
                .count(),
            1,
            "{id}: {err}"
        );
    }
    let text = sb.prd_text();
    for id in ["ISC-A-1", "ISC-B-1", "ISC-C-1"] {
        assert!(text.contains(&format!("- [x] {id}:")), "{id}: {text}");
    }
    let st = sb.state();
    assert_eq!(st["criteria"][1]["verifiedBy"], "agent");
}

#[test]
fn a_worker_that_rewrites_its_verify_command_still_fails() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: makes the file | Verify: Test: `test -f never-made`"]),
        json!({"*": ["rewrite-verify"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("the Verify command of ISC-A-1 changed during the run (now `true`)"),
        "{err}"
    );
    assert!(
        err.contains("`test -f never-made` exited with status 1"),
        "{err}"
    );
    let text = sb.prd_text();
    assert!(
        text.contains("- [ ] ISC-A-1: makes the file | Verify: Test: `true`"),
        "{text}"
    );
}

#[test]
fn no_verify_trusts_the_worker_as_pai_did() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-A-1: makes the file | Verify: Test: `test -f never-made`"]),
        json!({"*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--no-verify"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
}

#[test]
fn verify_command_on_the_tricky_fixture() {
    let fixture = fixture_prd("tricky-crlf.md");
    let sb = Sandbox::new(&fixture, json!({}));
    // --no-write: the report, no writes.
    let out = sb.run(&["verify", "PRD.md", "--no-write", "--json", "-a", "4"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let res = v["results"].as_array().unwrap();
    let ids: Vec<&str> = res.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "ISC-PARSE-2",
            "ISC-NEST-1",
            "ISC-NEST-2",
            "ISC-ORD-1",
            "ISC-A-PARSE-1"
        ]
    );
    let passed: Vec<bool> = res.iter().map(|r| r["passed"].as_bool().unwrap()).collect();
    assert_eq!(passed, [true, true, true, true, false]);
    assert_eq!(res[0]["change"], "ticked");
    assert_eq!(
        v["agentVerified"],
        json!(["ISC-PARSE-1", "ISC-PARSE-3", "ISC-PARSE-4"])
    );
    assert_eq!(sb.prd_text(), fixture, "dry run writes nothing");

    // For real: boxes and front matter, CRLF kept, nothing else touched.
    let out = sb.run(&["verify", "PRD.md"]);
    assert_eq!(code(&out), 1);
    let text = sb.prd_text();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("4/5 runnable criteria pass; 5/8 criteria ticked"),
        "{stdout}"
    );
    let want = fixture
        .replace("- [ ] ISC-PARSE-2:", "- [x] ISC-PARSE-2:")
        .replace("- [ ] ISC-NEST-1:", "- [x] ISC-NEST-1:")
        .replace("- [ ] ISC-NEST-2:", "- [x] ISC-NEST-2:")
        .replace("1. [ ] ISC-ORD-1:", "1. [x] ISC-ORD-1:")
        .replace(
            "failing_criteria:\r\n  - ISC-PARSE-2\r\n",
            "failing_criteria: [ISC-PARSE-3, ISC-PARSE-4, ISC-A-PARSE-1]\r\n",
        )
        // In the author's single quotes.
        .replace("verification_summary: '1/8'", "verification_summary: '5/8'");
    assert_eq!(text, want);

    // Once the failing command passes, verify exits 0.
    std::fs::write(sb.work().join("a"), "same").unwrap();
    std::fs::write(sb.work().join("b"), "same").unwrap();
    let out = sb.run(&["verify", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert!(sb.prd_text().contains("- [x] ISC-A-PARSE-1:"));
}

#[test]
fn verify_on_the_grouped_fixture_runs_only_command_types_and_verify_types_widens_them() {
    let fixture = fixture_prd("grouped.md");
    let sb = Sandbox::new(&fixture, json!({}));
    let run = |extra: &[&str]| {
        let mut args = vec!["verify", "PRD.md", "--no-write", "--json", "-a", "4"];
        args.extend_from_slice(extra);
        let out = sb.run(&args);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v
    };
    let by_id = |v: &serde_json::Value, id: &str| {
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
    };
    // By default only Test and CLI methods are commands: the `Grep:` spans are patterns for
    // the agent, `Read:` and `Static:` are prose, ISC-UX-3 (Custom) needs a person.
    let v = run(&[]);
    for id in [
        "ISC-DB-2",
        "ISC-A-API-1",
        "ISC-A-DB-1",
        "ISC-UX-1",
        "ISC-UX-3",
    ] {
        assert!(by_id(&v, id).is_none(), "{id} is not run");
    }
    assert_eq!(
        v["agentVerified"],
        json!([
            "ISC-DB-2",
            "ISC-UX-1",
            "ISC-UX-2",
            "ISC-A-API-1",
            "ISC-A-DB-1"
        ])
    );
    assert_eq!(v["needsPerson"], json!(["ISC-UX-3"]));
    assert_eq!(v["runnableTotal"], 6);
    // Grep made a command type: its commands run (and pass in an empty folder).
    let v = run(&["--verify-types", "test, cli,GREP"]);
    assert_eq!(by_id(&v, "ISC-DB-2").unwrap()["passed"], true);
    assert_eq!(by_id(&v, "ISC-A-API-1").unwrap()["passed"], true);
    assert_eq!(by_id(&v, "ISC-A-DB-1").unwrap()["passed"], true);
    assert!(by_id(&v, "ISC-UX-3").is_none());
    assert_eq!(v["runnableTotal"], 9);
}
