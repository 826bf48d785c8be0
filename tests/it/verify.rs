//! Trust but verify: runnable Verify commands decide, before, during and after a run, and
//! `prdloop verify` works on its own.

use crate::common::*;
use serde_json::json;

fn s(v: &serde_json::Value) -> &str {
    v.as_str().unwrap_or_default()
}

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
    // The first PASS is refused with the command's failure; the second is checked.
    snapshot!(sb.root(), "claimed_pass_whose_command_fails", &shown(&out));
    let recs = sb.worker_records();
    assert_eq!(recs.len(), 2);
    assert!(
        recs[1]["prompt"]
            .as_str()
            .unwrap()
            .contains("`test -f made-a` exited with status 1")
    );
    assert!(sb.prd_text().contains("- [x] ISC-A-1:"));
    let st = sb.state();
    assert_eq!(st["criteria"][0]["verifiedBy"], "checked");
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
    // ISC-A-1 was ticked before the run: only --recheck lets a check untick it. PAI's
    // iterations: the run ends with the iteration that found the regression (without the
    // barrier, the regressed criterion gets its own -n attempts at once).
    let out = sb.run(&[
        "run",
        "PRD.md",
        "-n",
        "1",
        "--recheck",
        "--rounds",
        "barrier",
    ]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    // ISC-A-1 REGRESSED, ISC-B-1 pass (reviewed), 1 regression(s) in the summary.
    snapshot!(sb.root(), "a_regression", &shown(&out));
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
    assert_eq!(st["criteria"][1]["verifiedBy"], "reviewed");
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
    // One lane, for the order of its lines.
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--recheck", "-a", "1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    // ISC-A-1 unticked (its check fails), ISC-B-1 ticked without a worker.
    snapshot!(sb.root(), "start_checks", &shown(&out));
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
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Failure 9: the checks of boxes the author ticked (one may be a paid model call) do not
    // run at the start of a run without --recheck: no word of ISC-A-1's check, no REGRESSED.
    snapshot!(sb.root(), "the_authors_ticks_stand", &shown(&out));
    let logs: Vec<String> = walk(&sb.state_dir())
        .into_iter()
        .filter(|p| p.contains("start-"))
        .collect();
    assert!(logs.is_empty(), "no start check ran: {logs:?}");
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
    assert_eq!(st["criteria"][1]["verifiedBy"], "reviewed");
}

/// Without lanes (outside git) the worker writes the PRD: one that rewrites its own Verify
/// command to `true` is refused, and the command is put back as it was.
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
        err.contains("the PRD's orders changed during the attempt (ISC-A-1)"),
        "{err}"
    );
    let text = sb.prd_text();
    assert!(
        text.contains("- [ ] ISC-A-1: makes the file | Verify: Test: `test -f never-made`"),
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
    snapshot!(sb.root(), "verify_the_tricky_fixture", &shown(&out));
    let text = sb.prd_text();
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

// ---- LifeOS ISA files (issue 23): one test per failure seen on real files ----

/// The front matter block of a text (between the first two `---` lines).
fn front_block(text: &str) -> &str {
    let rest = text.strip_prefix("---\n").expect("front matter");
    &rest[..rest.find("\n---\n").expect("closed")]
}

/// The prompt each worker got, by criterion.
fn prompts(sb: &Sandbox) -> std::collections::BTreeMap<String, String> {
    sb.worker_records()
        .iter()
        .map(|r| {
            (
                r["criterion"].as_str().unwrap().to_string(),
                r["prompt"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn isa_split_ids_anti_prefixes_tombstones_and_probes_never_complete_with_a_claim_open() {
    // Failures 1, 2, 3 and 6.
    let isa = fixture_prd("isa/claims.md");
    let sb = Sandbox::new(
        &isa,
        json!({"ISC-4": ["fail:still differs"], "*": ["pass"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    let p = prompts(&sb);
    let worked: Vec<&str> = p.keys().map(String::as_str).collect();
    // 1: the leaves are read and worked on; their parents are not work. 3: the tombstone
    // gets no worker. ISC-2.2.1 needs ISC-2.1 (`(after: ISC-2.1)`), which fails its probe:
    // it waits, unstarted.
    assert_eq!(
        worked,
        ["ISC-2.1", "ISC-4", "ISC-5", "ISC-6", "ISC-7"],
        "{err}"
    );
    assert!(err.contains("waiting for ISC-2.1"), "{err}");
    // 2: `Anti:` before the id is read, and the worker is told.
    assert!(p["ISC-4"].contains("(anti-criterion: something that must NOT happen)"));
    assert!(p["ISC-7"].contains("(anti-criterion"), "{}", p["ISC-7"]);
    assert!(p["ISC-5"].contains("(antecedent"), "{}", p["ISC-5"]);
    // 6: the Test Strategy probe reaches the worker, and a bash probe is run.
    assert!(
        p["ISC-4"]
            .contains("Verify (the PRD's Test Strategy, line 34): bash probe: `cli` output diff"),
        "{}",
        p["ISC-4"]
    );
    assert!(p["ISC-5"].contains("Probe (from the criterion's text): read the keys aloud"));
    assert!(p["ISC-7"].contains("Probe (from the criterion's text): diff the key sets."));
    assert!(
        err.contains(
            "the agent said PASS, but its Verify command `test -f fields-ok` exited with status 1"
        ),
        "{err}"
    );
    assert!(
        err.contains("ISC-2.1 FAIL") && err.contains("its `severity: critical` probe fails"),
        "{err}"
    );
    let text = sb.prd_text();
    assert!(text.contains("  - [ ] ISC-2.1:"), "{text}");
    // ISC-2.2.1 waited for ISC-2.1; so its parent ISC-2.2 is open too.
    assert!(text.contains("    - [ ] ISC-2.2.1:"), "{text}");
    assert!(text.contains("  - [ ] ISC-2.2:"), "{text}");
    assert!(text.contains("- [ ] ISC-2: [container]"), "{text}");
    assert!(text.contains("- [ ] ISC-3: [DROPPED"), "{text}");
    assert!(text.contains("- [ ] Anti: ISC-4:"), "{text}");
    let fm = front_block(&text);
    assert!(fm.contains("\nphase: climbing\n"), "{fm}");
    // 9 claims (the tombstone is not one): 1, 5, 6, 7 closed.
    assert!(fm.contains("\nprogress: 4/9\n"), "{fm}");
    for v3 in [
        "loopStatus",
        "status:",
        "failing_criteria",
        "verification_summary",
        "iteration",
    ] {
        assert!(!fm.contains(v3), "{v3} in {fm}");
    }

    // Once the last leaves pass (ISC-2.2.1 right after ISC-2.1, in the same run), the
    // parents are ticked, the tombstone stays open, and the ISA closes.
    std::fs::write(sb.work().join("fields-ok"), "").unwrap();
    sb.set_plan(json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    let text = sb.prd_text();
    assert!(text.contains("- [x] ISC-2: [container]"), "{text}");
    assert!(text.contains("- [ ] ISC-3: [DROPPED"), "{text}");
    let fm = front_block(&text);
    assert!(
        fm.contains("\nphase: complete\n") && fm.contains("\nprogress: 9/9\n"),
        "{fm}"
    );
    // Nothing but boxes and the front matter changed.
    let body = |t: &str| t[t.find("\n# ").unwrap()..].replace("[x]", "[ ]");
    assert_eq!(body(&text), body(&isa));
}

#[test]
fn an_unreadable_claim_line_is_named_and_keeps_the_isa_open() {
    // Failure 1's other half: a split id prdloop cannot read is not passed over silently.
    let isa = "---\nphase: climbing\nprogress: 0/2\n---\n\n# T\n\n## Claims\n- [ ] ISC-1: one\n- [ ] ISC-157.5b: a malformed split\n";
    let sb = Sandbox::new(isa, json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    // Blocked (exit 4), not complete: the line is named when it is read (10) and at the end
    // (11: the run added `updated` to the front matter).
    snapshot!(sb.root(), "an_unreadable_claim_line", &shown(&out));
    let text = sb.prd_text();
    assert!(text.contains("- [x] ISC-1: one") && text.contains("- [ ] ISC-157.5b"));
    assert!(!text.contains("phase: complete"), "{text}");
    assert!(text.contains("\nprogress: 1/1\n"), "{text}");
}

#[test]
fn an_isa_with_only_phase_and_progress_gets_only_its_own_keys() {
    // Failure 4.
    let isa = fixture_prd("isa/minimal.md");
    let sb = Sandbox::new(&isa, json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = sb.prd_text();
    let fm = front_block(&text);
    let keys: Vec<&str> = fm.lines().map(|l| l.split(':').next().unwrap()).collect();
    assert_eq!(keys, ["phase", "progress", "updated"], "{fm}");
    assert!(
        fm.starts_with("phase: complete\nprogress: 3/3\nupdated: "),
        "{fm}"
    );
    let out = sb.run(&["status", "PRD.md", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["format"], "isa", "{v}");
}

#[test]
fn a_file_with_no_front_matter_gets_none_and_every_command_reads_it_alike() {
    // Failure 5.
    let doc = fixture_prd("isa/no-front-matter.md");
    let sb = Sandbox::new(&doc, json!({"ISC-3": ["write:third"], "*": ["pass"]}));
    for cmd in [
        &["plan", "PRD.md", "--json"][..],
        &["status", "PRD.md", "--json"],
    ] {
        let out = sb.run(cmd);
        assert_eq!(code(&out), 0, "{cmd:?}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let v = if v.is_array() { v[0].clone() } else { v };
        assert_eq!(v["frontMatter"], false, "{cmd:?} {v}");
        assert_eq!(
            (v["passing"].as_u64(), v["total"].as_u64()),
            (Some(1), Some(3)),
            "{cmd:?} {v}"
        );
    }
    let out = sb.run(&["verify", "PRD.md"]);
    assert_eq!(code(&out), 1, "ISC-3's check fails: {}", stderr(&out));
    assert_eq!(
        sb.prd_text(),
        doc,
        "nothing to write, and no front matter added"
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = sb.prd_text();
    assert_eq!(text, doc.replace("- [ ] ", "- [x] "), "boxes only");
    assert!(sb.state()["criteria"].as_array().unwrap().len() == 3);
}

#[test]
fn phase_letters_are_not_anti_criteria() {
    // Failure 7.
    let sb = Sandbox::new(&fixture_prd("isa/phase-letters.md"), json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let p = prompts(&sb);
    assert_eq!(p.len(), 4);
    for (id, prompt) in &p {
        assert!(prompt.contains(&format!("{id}: ")), "{prompt}");
        assert!(!prompt.contains("anti-criterion"), "{id}: {prompt}");
    }
    // Beside PAI's `ISC-C1`, `ISC-A1` is still anti.
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-C1: does it", "- [ ] ISC-A1: never breaks it"]),
        json!({"*": ["pass"]}),
    );
    sb.run(&["run", "PRD.md", "-n", "1"]);
    assert!(prompts(&sb)["ISC-A1"].contains("anti-criterion"));
}

#[test]
fn things_that_are_not_commands_are_never_run() {
    // Failure 9: a line of TypeScript, a span followed by prose that changes its meaning, a
    // placeholder, a discarded exit status, a program that is not installed.
    let sb = Sandbox::new(&fixture_prd("isa/not-commands.md"), json!({"*": ["fail"]}));
    let out = sb.run(&["plan", "PRD.md", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let why: Vec<(String, String)> = v["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["criteria"].as_array().unwrap().clone())
        .map(|c| {
            (
                c["verifiedBy"].as_str().unwrap().to_string(),
                // `why` is typed: its kind and its words.
                format!(
                    "{}: {}",
                    c["why"]["kind"].as_str().unwrap(),
                    c["why"]["text"].as_str().unwrap()
                ),
            )
        })
        .collect();
    // Source code, a span with prose following (twice), a placeholder, a discarded exit
    // status, a program that is not installed: all checked by the agent, each saying why.
    let why: Vec<String> = why.iter().map(|(by, w)| format!("{by}: {w}")).collect();
    snapshot!(sb.root(), "not_commands_why", &why.join("\n"));
    // verify runs none of them, and says "cannot run here" as plan does.
    let out = sb.run(&["verify", "PRD.md", "--no-write", "--json"]);
    assert_eq!(code(&out), 1, "a check that cannot run here is no pass");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"], json!([]), "{v}");
    snapshot!(sb.root(), "not_commands_verify_stderr", &stderr(&out));
    // What stderr said, the report lists, typed.
    snapshot!(
        sb.root(),
        "not_commands_verify_warnings",
        &serde_json::to_string_pretty(&v["warnings"]).unwrap()
    );
    // A run with an agent that always fails ticks nothing on its own.
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(!sb.prd_text().contains("[x]"), "{}", sb.prd_text());
    let ran: Vec<String> = std::fs::read_dir(sb.work())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ran-"))
        .collect();
    assert!(ran.is_empty(), "{ran:?}");
}

#[test]
fn verify_dry_run_runs_nothing_and_no_write_runs_without_writing() {
    // Failure 10.
    let prd = prd_with(&[
        "- [ ] ISC-A-1: leaves a mark | Verify: CLI: `touch ran-a`",
        "- [ ] ISC-B-1: reads a file | Verify: Test: `test -f ran-a`",
    ]);
    let sb = Sandbox::new(&prd, json!({}));
    let out = sb.run(&["verify", "PRD.md", "--dry-run"]);
    snapshot!(
        sb.root(),
        "verify_dry_run_says_what_it_would_run",
        &shown(&out)
    );
    assert!(!sb.work().join("ran-a").exists(), "a dry run runs nothing");
    assert_eq!(sb.prd_text(), prd);
    let out = sb.run(&["verify", "PRD.md", "--no-write", "-a", "1"]);
    assert!(sb.work().join("ran-a").exists(), "{}", stderr(&out));
    assert_eq!(sb.prd_text(), prd, "--no-write writes nothing");
    let out = sb.run(&["verify", "PRD.md", "--dry-run", "--no-write"]);
    // The two do not mix.
    snapshot!(sb.root(), "verify_dry_run_and_no_write", &shown(&out));
}

#[test]
fn an_archived_prd_is_left_alone_and_a_prose_summary_is_kept() {
    // Failure 11.
    let archived = prd_with(&["- [ ] ISC-A-1: was never done"])
        .replace("status: IN_PROGRESS", "status: ARCHIVED");
    let sb = Sandbox::new(&archived, json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md"]);
    snapshot!(sb.root(), "an_archived_prd", &shown(&out));
    assert_eq!(sb.prd_text(), archived);
    assert!(sb.worker_records().is_empty());

    let prose = "Reviewed by hand on 2026-11-30: the retry logic holds under load, the two flaky tests were traced to the fixture clock, and nothing else is pending.";
    let prd = prd_with(&["- [ ] ISC-A-1: works"]).replace(
        "verification_summary: \"0/1\"",
        &format!("verification_summary: \"{prose}\""),
    );
    let sb = Sandbox::new(&prd, json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md"]);
    // A warning that the author's prose summary is kept; then the run as usual.
    snapshot!(sb.root(), "a_prose_verification_summary", &shown(&out));
    let text = sb.prd_text();
    assert!(
        text.contains(&format!("verification_summary: \"{prose}\"\n")),
        "{text}"
    );
    assert!(text.contains("\nstatus: COMPLETE\n"), "{text}");
}

#[test]
fn isas_are_found_by_id_and_listed_by_status_in_their_homes() {
    // Failure 8.
    let sb = Sandbox::new("# not used\n", json!({}));
    let lifeos = sb.root().join("lifeos");
    let work = lifeos.join("MEMORY/WORK/20260701-thing");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("ISA.md"), fixture_prd("isa/minimal.md")).unwrap();
    let project = sb.root().join("projects/surface");
    std::fs::create_dir_all(project.join(".prd")).unwrap();
    std::fs::write(
        project.join("ISA.md"),
        fixture_prd("isa/claims.md")
            .replace("slug: 20260723-140000_cli-json-flag", "slug: surface"),
    )
    .unwrap();
    std::fs::write(
        project.join(".prd/ISA-auth.md"),
        fixture_prd("isa/phase-letters.md"),
    )
    .unwrap();
    let with_lifeos = |args: &[&str]| {
        let mut c = sb.command(args);
        c.env("LIFEOS_DIR", &lifeos);
        c.output().unwrap()
    };
    let out = with_lifeos(&["status", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut found: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect();
    found.sort();
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found.iter().any(|p| p.ends_with("20260701-thing/ISA.md")));
    for (id, end) in [
        ("20260701-thing", "20260701-thing/ISA.md"),
        ("surface", "surface/ISA.md"),
        ("ISA-auth", ".prd/ISA-auth.md"),
    ] {
        let out = with_lifeos(&["plan", id, "--json"]);
        assert_eq!(code(&out), 0, "{id}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["prd"].as_str().unwrap().ends_with(end), "{id}: {v}");
    }
}

#[test]
fn a_forced_run_reopens_a_complete_isa_with_a_claim_open_as_lifeos_does() {
    let isa = "---\nphase: complete\nprogress: 1/2\nupdated: 2026-07-23T14:40:00Z\n---\n\n# T\n\n## Claims\n- [x] C1: one\n- [ ] C2: two\n";
    let sb = Sandbox::new(isa, json!({"C2": ["fail:not yet"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert!(stderr(&out).contains("already complete (phase: complete)"));
    assert_eq!(sb.prd_text(), isa);
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--force"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let text = sb.prd_text();
    let fm = front_block(&text);
    assert!(
        fm.starts_with("phase: learn\nprogress: 1/2\nupdated: "),
        "{fm}"
    );
    assert!(
        fm.contains("\niteration: 2\nresumed_at: ")
            && fm.ends_with("\nresumed_from_phase: complete"),
        "{fm}"
    );
    // Once the claim passes, it closes again.
    sb.set_plan(json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = sb.prd_text();
    assert!(
        front_block(&text).starts_with("phase: complete\nprogress: 2/2\n"),
        "{text}"
    );
}

#[test]
fn a_parent_is_not_left_ticked_when_a_leaf_regresses() {
    let isa = "---\nphase: climbing\nprogress: 0/3\n---\n\n# T\n\n## Claims\n- [ ] ISC-1: container\n  - [ ] ISC-1.1: nothing is broken | Verify: Test: `test ! -f broken`\n  - [ ] ISC-1.2: breaks 1.1\n";
    let sb = Sandbox::new(isa, json!({"ISC-1.2": ["write:broken"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    snapshot!(sb.root(), "a_leaf_regresses", &shown(&out));
    let text = sb.prd_text();
    assert!(
        text.contains("- [ ] ISC-1: container")
            && text.contains("  - [ ] ISC-1.1:")
            && text.contains("  - [x] ISC-1.2:"),
        "{text}"
    );
    assert!(
        text.contains("\nphase: climbing\nprogress: 1/3\n"),
        "{text}"
    );
}

#[test]
fn an_isa_with_open_questions_in_not_yet_specified_is_not_closed() {
    let isa = "---\nphase: climbing\nprogress: 0/1\n---\n\n# T\n\n## Claims\n- [ ] ISC-1: one\n\n## Not yet specified\n- Which region do we ship to first?\n";
    let sb = Sandbox::new(isa, json!({"*": ["pass"]}));
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    // Blocked (exit 4): `## Not yet specified` still holds open questions.
    snapshot!(
        sb.root(),
        "open_questions_in_not_yet_specified",
        &shown(&out)
    );
    let text = sb.prd_text();
    assert!(
        text.contains("- [x] ISC-1: one") && text.contains("\nphase: climbing\nprogress: 1/1\n"),
        "{text}"
    );
}

#[test]
fn a_claim_dropped_during_the_run_leaves_it_as_a_tombstone() {
    let isa = "---\nphase: climbing\nprogress: 0/2\n---\n\n# T\n\n## Claims\n- [ ] ISC-1: first\n- [ ] ISC-2: second\n";
    let sb = Sandbox::new(isa, json!({"ISC-1": ["sleep:1500"], "*": ["pass"]}));
    let child = sb.spawn(&["run", "PRD.md", "-a", "1", "-n", "1"]);
    sb.wait_for_workers(1);
    std::fs::write(
        sb.prd(),
        isa.replace("ISC-2: second", "ISC-2: [DROPPED — see Decisions]"),
    )
    .unwrap();
    let out = wait_output(child, std::time::Duration::from_secs(60));
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.contains("ISC-2 was dropped (a tombstone now) during the run"),
        "{err}"
    );
    let worked: Vec<String> = sb
        .worker_records()
        .iter()
        .map(|r| r["criterion"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(worked, ["ISC-1"], "{err}");
    let text = sb.prd_text();
    assert!(
        text.contains("- [x] ISC-1: first") && text.contains("- [ ] ISC-2: [DROPPED"),
        "{text}"
    );
    assert!(
        text.contains("\nphase: complete\nprogress: 1/1\n"),
        "{text}"
    );
}

// ---- Evidence: the independent verifier, protected checks, receipts, audit ----

#[test]
fn a_lying_workers_false_pass_is_not_ticked_when_the_verifier_looks() {
    // The worker says PASS without writing notes.md; the verifier looks for the file.
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-DOC-1: notes.md explains the design"]),
        json!({"ISC-DOC-1": ["pass", "write:notes.md"], "verifier": ["verdict-file:notes.md"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The first PASS is refused by the verifier (notes.md is missing), the second reviewed.
    snapshot!(sb.root(), "a_false_pass_the_verifier_refuses", &shown(&out));
    // Its reasons reached the next prompt.
    let recs = sb.worker_records();
    assert_eq!(recs.len(), 2);
    assert!(
        s(&recs[1]["prompt"]).contains("notes.md is missing"),
        "{}",
        recs[1]["prompt"]
    );
    // Each review ran as its own agent run, with the verifier's prompt.
    let reviews = sb.verifier_records();
    assert_eq!(reviews.len(), 2);
    let prompt = s(&reviews[0]["prompt"]);
    assert!(
        prompt.contains("ISC-DOC-1: notes.md explains the design"),
        "{prompt}"
    );
    assert!(prompt.contains("VERDICT: ISC-DOC-1 PASS"), "{prompt}");
    // The tick's receipt says what earned it; the attempts log has both reviews.
    let st = sb.state();
    let c = &st["criteria"][0];
    assert_eq!(c["verifiedBy"], "reviewed");
    assert_eq!(c["receipt"]["evidence"], "reviewed");
    assert_eq!(c["receipt"]["review"]["verdict"], "pass");
    assert_eq!(c["receipt"]["review"]["setup"], "claude");
    assert_eq!(st["reviews"], 2);
    let att = attempts(&st);
    assert_eq!(att[0]["verdict"], "fail");
    assert_eq!(att[0]["review"]["verdict"], "fail");
    assert_eq!(att[1]["review"]["verdict"], "pass");
    assert!(sb.prd_text().contains("- [x] ISC-DOC-1:"));
}

#[test]
fn verifier_none_trusts_the_worker_and_says_so() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-DOC-1: notes.md explains the design"]),
        json!({"ISC-DOC-1": ["pass"], "verifier": ["verdict-fail"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--verifier", "none"]);
    snapshot!(sb.root(), "verifier_none", &shown(&out));
    assert!(sb.verifier_records().is_empty());
    assert_eq!(sb.state()["criteria"][0]["verifiedBy"], "claimed");
}

#[test]
fn a_verifier_without_a_verdict_fails_the_attempt() {
    let sb = Sandbox::new(
        &prd_with(&["- [ ] ISC-DOC-1: notes.md explains the design"]),
        json!({"*": ["pass"], "verifier": ["verdict-none"]}),
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    snapshot!(sb.root(), "a_verifier_without_a_verdict", &shown(&out));
    assert!(sb.prd_text().contains("- [ ] ISC-DOC-1:"));
}

#[test]
fn a_verifier_that_changes_the_attempts_files_does_not_count() {
    // Unsandboxed (the sandbox would refuse its write): the lane is compared before and
    // after the review.
    let sb = repo(
        &["- [ ] ISC-DOC-1: notes.md explains the design"],
        json!({"ISC-DOC-1": ["write:notes.md"], "verifier": ["verdict-write"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--sandbox", "off"]);
    snapshot!(sb.root(), "a_verifier_that_changes_files", &shown(&out));
    assert!(!sb.work().join("verifier-was-here.txt").exists());
    assert!(!sb.work().join("notes.md").exists(), "nothing landed");
}

#[test]
fn a_sandboxed_verifier_cannot_change_the_attempt() {
    let sb = repo(
        &["- [ ] ISC-DOC-1: notes.md explains the design"],
        json!({"ISC-DOC-1": ["write:notes.md"], "verifier": ["verdict-write"]}),
        &[("README", "r\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--sandbox", "on"]);
    let err = stderr(&out);
    if err.contains("cannot be had") || code(&out) == 2 {
        eprintln!("skipped: no Landlock sandbox here: {err}");
        return;
    }
    assert_eq!(code(&out), 0, "{err}");
    // Its write was refused by the kernel; its verdict stands on the attempt as it was.
    assert!(err.contains("ISC-DOC-1 PASS (reviewed)"), "{err}");
    assert!(!sb.work().join("verifier-was-here.txt").exists());
    assert_eq!(
        std::fs::read_to_string(sb.work().join("notes.md")).unwrap(),
        "done\n"
    );
}

#[test]
fn a_worker_that_edits_the_script_its_check_runs_is_not_checked() {
    let check = "#!/bin/sh\ngrep -qx ready state.txt\n";
    let cheat = "sh:printf '#!/bin/sh\\nexit 0\\n' > check.sh";
    // With --verifier none the attempt fails: the command is no evidence of it.
    let sb = repo(
        &["- [ ] ISC-ST-1: state.txt says ready | Verify: CLI: `sh check.sh`"],
        json!({"ISC-ST-1": [cheat]}),
        &[("check.sh", check), ("state.txt", "not yet\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1", "--verifier", "none"]);
    // Failed: the attempt changed check.sh, which its Verify command runs.
    snapshot!(sb.root(), "a_worker_that_edits_its_check", &shown(&out));
    assert_eq!(
        std::fs::read_to_string(sb.work().join("check.sh")).unwrap(),
        check
    );
    assert!(sb.prd_text().contains("- [ ] ISC-ST-1:"));
    // With the verifier, it is told and decides.
    let sb = repo(
        &["- [ ] ISC-ST-1: state.txt says ready | Verify: CLI: `sh check.sh`"],
        json!({"ISC-ST-1": [cheat], "verifier": ["verdict-fail"]}),
        &[("check.sh", check), ("state.txt", "not yet\n")],
    );
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let reviews = sb.verifier_records();
    let prompt = s(&reviews[0]["prompt"]);
    assert!(
        prompt.contains("The attempt changed check.sh, which the criterion's Verify command runs"),
        "{prompt}"
    );
    assert!(
        prompt.contains("exit 0"),
        "the diff is in the prompt: {prompt}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.work().join("check.sh")).unwrap(),
        check
    );
}

#[test]
fn audit_finds_a_regression_a_later_commit_brought() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt says two | Verify: CLI: `grep -qx two a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
            "- [ ] ISC-DOC-1: notes.md explains the design",
        ],
        json!({"ISC-A-1": ["sh:echo two > a.txt"], "ISC-B-1": ["write:b.txt"], "ISC-DOC-1": ["write:notes.md"]}),
        &[("README", "r\n")],
    );
    let w = sb.work();
    let out = sb.run(&["run", "PRD.md", "--commit"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = sb.run(&["audit", "PRD.md"]);
    snapshot!(sb.root(), "audit_text", &shown(&out));
    // A later commit breaks ISC-A-1.
    std::fs::write(w.join("a.txt"), "one\n").unwrap();
    git(&w, &["commit", "-qam", "later change"]);
    let before = git(&w, &["status", "--porcelain"]);
    let out = sb.run(&["audit", "PRD.md", "--json"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let rows = json_lines(&out);
    let find = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(find("ISC-A-1")["finding"], "regressed");
    assert_eq!(find("ISC-B-1")["finding"], "holds");
    assert_eq!(find("ISC-DOC-1")["finding"], "reviewed");
    assert!(rows.iter().all(|r| r["version"] == 2));
    // The user's checkout is as it was: the checks ran in a copy.
    assert_eq!(git(&w, &["status", "--porcelain"]), before);
}

#[test]
fn audit_fails_when_it_can_check_nothing_and_a_receipt_for_another_command_is_stale() {
    let sb = repo(
        &[
            "- [x] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
        ],
        json!({"ISC-B-1": ["write:b.txt"]}),
        &[("a.txt", "a\n")],
    );
    // Ticked by hand, no state folder (a fresh CI job): nothing vouches for it.
    let out = sb.run(&["audit", "PRD.md"]);
    assert_eq!(code(&out), 9, "{}{}", out_text(&out), stderr(&out));
    assert!(out_text(&out).contains("no receipt"), "{}", out_text(&out));
    assert!(
        stderr(&out).contains("no tick could be checked again"),
        "{}",
        stderr(&out)
    );
    // In `--json`, the warning is the last line, typed.
    let out = sb.run(&["audit", "PRD.md", "--json"]);
    assert_eq!(code(&out), 9, "{}", stderr(&out));
    let rows = json_lines(&out);
    let last = rows.last().unwrap();
    assert_eq!(last["event"], "warning", "{rows:?}");
    assert_eq!(last["kind"], "nothing_vouches");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("no tick could be checked again"),
        "{last}"
    );
    let out = sb.run(&["run", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = sb.run(&["audit", "PRD.md"]);
    assert_eq!(code(&out), 0, "{}", out_text(&out));
    // ISC-B-1's Verify changes: the old command's receipt does not vouch for the new one.
    let prd = sb.work().join("PRD.md");
    let text = std::fs::read_to_string(&prd).unwrap();
    std::fs::write(&prd, text.replace("`test -f b.txt`", "`test -s c.txt`")).unwrap();
    let out = sb.run(&["audit", "PRD.md", "--json"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let rows = json_lines(&out);
    let b = rows.iter().find(|r| r["id"] == "ISC-B-1").unwrap();
    assert_eq!(b["finding"], "stale", "{rows:?}");
    assert_eq!(b["command"], "test -f b.txt");
    assert_eq!(b["now"], "test -s c.txt");
}

/// `--json` output: one object a line.
fn json_lines(o: &std::process::Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn out_text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// After `verify` unticks a box of a file that says it is complete, the file no longer says
/// so (v3 `status: VERIFYING`, v4 `phase: verify`), every other byte is kept, and `run`
/// takes the file up rather than calling it complete.
#[test]
fn verify_that_unticks_a_box_reopens_a_complete_prd() {
    let prd = prd_with(&[
        "- [x] ISC-A-1: a holds | Verify: Test: `test -f a`",
        "- [x] ISC-B-1: b holds | Verify: Test: `test -f b`",
    ])
    .replace("status: IN_PROGRESS", "status: COMPLETE")
    .replace(
        "verification_summary: \"0/2\"",
        "verification_summary: \"2/2\"",
    );
    let sb = Sandbox::new(&prd, json!({"ISC-B-1": ["write:b"]}));
    std::fs::write(sb.work().join("a"), "").unwrap();
    let out = sb.run(&["verify", "PRD.md"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let want = prd
        .replace("- [x] ISC-B-1:", "- [ ] ISC-B-1:")
        .replace("status: COMPLETE", "status: VERIFYING")
        .replace("failing_criteria: []", "failing_criteria: [ISC-B-1]")
        .replace(
            "verification_summary: \"2/2\"",
            "verification_summary: \"1/2\"",
        );
    assert_eq!(sb.prd_text(), want);
    let out = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        sb.prd_text().contains("- [x] ISC-B-1:"),
        "{}",
        sb.prd_text()
    );
    assert!(
        sb.prd_text().contains("status: COMPLETE"),
        "{}",
        sb.prd_text()
    );

    // v4: `phase: complete` becomes `verify`, its progress counted.
    let v4 = "---\ntask: two checks\nslug: two\nphase: complete\nprogress: 2/2\n---\n\n## Criteria\n\n- [x] ISC-1: a holds | Verify: Test: `test -f a`\n- [x] ISC-2: c holds | Verify: Test: `test -f c`\n";
    std::fs::write(sb.work().join("PRD.md"), v4).unwrap();
    let out = sb.run(&["verify", "PRD.md"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let want = v4.replace("- [x] ISC-2:", "- [ ] ISC-2:").replace(
        "phase: complete\nprogress: 2/2",
        "phase: verify\nprogress: 1/2",
    );
    assert_eq!(sb.prd_text(), want);
    let out = sb.run(&["run", "PRD.md", "--dry-run"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}
