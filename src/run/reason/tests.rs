use super::*;
use serde_json::json;

fn shape(v: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(v).unwrap()
}

#[test]
fn each_fail_reason_says_what_it_said_before_and_carries_its_kind() {
    let exit1 = Exit::Code { code: 1 };
    let cases: Vec<(FailReason, &str, serde_json::Value)> = vec![
        (
            FailReason::VerifyFailed {
                command: "make test".into(),
                exit: exit1.clone(),
                tail: "boom\n".into(),
            },
            "the agent said PASS, but its Verify command `make test` exited with status 1; its output ends:\nboom",
            json!({"kind": "verify_failed", "command": "make test",
                       "exit": {"kind": "code", "code": 1}, "tail": "boom\n"}),
        ),
        (
            FailReason::Regression {
                command: "make test".into(),
                exit: Exit::Signal { signal: 9 },
                tail: String::new(),
            },
            "regression: `make test` was killed by signal 9",
            json!({"kind": "regression", "command": "make test",
                       "exit": {"kind": "signal", "signal": 9}, "tail": ""}),
        ),
        (
            FailReason::VerifyNotRun {
                error: "no sh".into(),
            },
            "the Verify command could not be run: no sh",
            json!({"kind": "verify_not_run", "error": "no sh"}),
        ),
        (
            FailReason::PrdChanged {
                what: vec!["ISC-B-1".into(), "the prdloop: map".into()],
            },
            "the PRD's orders changed during the attempt (ISC-B-1, the prdloop: map): without lanes a worker writes the PRD, so the attempt is refused and they are put back as they were; leave the PRD's criteria and its prdloop: map as they are",
            json!({"kind": "prd_changed", "what": ["ISC-B-1", "the prdloop: map"]}),
        ),
        (
            FailReason::ProtectedChanged {
                files: vec!["t.sh".into(), "Makefile".into()],
            },
            "the attempt changed t.sh, Makefile, which its Verify command runs: that command is no evidence of this attempt's work; leave the check's files as they are",
            json!({"kind": "protected_changed", "files": ["t.sh", "Makefile"]}),
        ),
        (
            FailReason::VerifierRejected {
                setup: "codex".into(),
                reasons: "no test".into(),
            },
            "the independent verifier (codex) found it not done: no test",
            json!({"kind": "verifier_rejected", "setup": "codex", "reasons": "no test"}),
        ),
        (
            FailReason::NotReviewed {
                why: "timeout".into(),
            },
            "the claimed PASS could not be reviewed (timeout); a claim alone does not pass",
            json!({"kind": "not_reviewed", "why": "timeout"}),
        ),
        (
            FailReason::NotStarted {
                program: "./a.sh".into(),
                error: "Resource temporarily unavailable (os error 11)".into(),
                errno: Some(11),
            },
            "failed to start `./a.sh`: Resource temporarily unavailable (os error 11)",
            json!({"kind": "not_started", "program": "./a.sh",
                       "error": "Resource temporarily unavailable (os error 11)", "errno": 11}),
        ),
        (
            FailReason::CriticalProbe {
                reason: Box::new(FailReason::Internal { error: "x".into() }),
            },
            "its `severity: critical` probe fails (by its Test Strategy the product is down): internal error while running the worker: x",
            json!({"kind": "critical_probe", "reason": {"kind": "internal", "error": "x"}}),
        ),
        (
            FailReason::AgentTimedOut {
                after_ms: 40_000,
                text: "the worker ran past --timeout".into(),
            },
            "timed out: the worker ran past --timeout",
            json!({"kind": "timed_out", "afterMs": 40_000,
                       "text": "the worker ran past --timeout"}),
        ),
        (
            FailReason::AgentFailed {
                failure: Kind::Auth,
                text: "Not logged in\nplease".into(),
            },
            "authentication failure: Not logged in please",
            json!({"kind": "agent_failed", "failure": "auth", "text": "Not logged in\nplease"}),
        ),
        (
            WorkerFail::WorkerSaidFail {
                text: Some("red".into()),
            }
            .into(),
            "red",
            json!({"kind": "worker_said_fail", "text": "red"}),
        ),
        (
            WorkerFail::WorkerSaidFail { text: None }.into(),
            "the agent reported FAIL",
            json!({"kind": "worker_said_fail"}),
        ),
        (
            WorkerFail::NoResultLine {
                id: "ISC-1".into(),
                stderr: Some("last words".into()),
                plain_line: false,
            }
            .into(),
            "no `RESULT: ISC-1 PASS|FAIL` line in the agent's final message (stderr: last words)",
            json!({"kind": "no_result_line", "id": "ISC-1", "stderr": "last words"}),
        ),
        (
            WorkerFail::NoResultLine {
                id: "ISC-1".into(),
                stderr: None,
                plain_line: true,
            }
            .into(),
            "a plain `RESULT: ISC-1 …` line where the agent's JSON was expected: run a script of your own with `--agent command --agent-bin PATH`",
            json!({"kind": "no_result_line", "id": "ISC-1", "plainLine": true}),
        ),
        (
            WorkerFail::ExitStatus {
                code: 2,
                after_pass: false,
                http_status: Some(500),
                stderr: None,
            }
            .into(),
            "the agent exited with status 2 (HTTP 500)",
            json!({"kind": "exit_status", "code": 2, "afterPass": false, "httpStatus": 500}),
        ),
        (
            WorkerFail::ExitStatus {
                code: 1,
                after_pass: true,
                http_status: None,
                stderr: None,
            }
            .into(),
            "the agent exited with status 1 after printing PASS",
            json!({"kind": "exit_status", "code": 1, "afterPass": true}),
        ),
        (
            WorkerFail::AgentError {
                detail: Some("overloaded".into()),
                http_status: Some(529),
            }
            .into(),
            "agent error: overloaded (HTTP 529)",
            json!({"kind": "agent_error", "detail": "overloaded", "httpStatus": 529}),
        ),
        (
            WorkerFail::Signal { signal: 15 }.into(),
            "the agent was killed by signal 15",
            json!({"kind": "signal", "signal": 15}),
        ),
        (
            WorkerFail::TimedOut { after_ms: 120_000 }.into(),
            "timed out after 2m",
            json!({"kind": "timed_out", "afterMs": 120_000}),
        ),
        (
            WorkerFail::Cancelled.into(),
            "cancelled",
            json!({"kind": "cancelled"}),
        ),
    ];
    for (reason, words, kind) in cases {
        assert_eq!(reason.to_string(), words);
        assert_eq!(shape(&reason), kind, "{words}");
    }
}

#[test]
fn a_timed_out_agent_failure_keeps_how_long_it_ran() {
    let failure = crate::backend::AgentFailure {
        kind: Kind::Timeout,
        text: "the worker ran past --timeout".into(),
        resets_at: None,
    };
    let r = FailReason::agent(&failure, Some(&Exit::TimedOut { after_secs: 3 }));
    assert_eq!(shape(&r)["kind"], "timed_out");
    assert_eq!(shape(&r)["afterMs"], 3000);
    // Without the exit (or another kind): the failure's kind.
    let r = FailReason::agent(&failure, None);
    assert_eq!(
        shape(&r),
        json!({"kind": "agent_failed", "failure": "timeout", "text": "the worker ran past --timeout"})
    );
    assert_eq!(r.to_string(), "timed out: the worker ran past --timeout");
}

#[test]
fn each_stop_reason_says_what_it_said_before_and_ends_the_run_its_way() {
    use super::super::end::End;
    let auth = StopReason::AgentFailure {
        failure: Kind::Auth,
        text: "Not logged in".into(),
    };
    let cases: Vec<(StopReason, &str, End, &str)> = vec![
        (
            StopReason::BudgetReached {
                spent_usd: 0.9,
                running: 0,
                running_usd: 0.0,
                max_usd: 1.1,
                next_usd: 0.3,
            },
            "spent $0.9000 of --max-cost $1.10; the next worker could pass it (about $0.3000 each)",
            End::Budget,
            "budget_reached",
        ),
        (
            StopReason::TimeLimit {
                ran_ms: 50_000,
                max_ms: 55_000,
                next_ms: 10_000,
            },
            "ran 50.0s of --max-time 55.0s; the next worker could pass it (about 10.0s each)",
            End::TimeLimit,
            "time_limit",
        ),
        (
            auth.clone(),
            "authentication failure: Not logged in",
            End::AgentFatal,
            "agent_failure",
        ),
        (
            StopReason::AgentFailureElsewhere {
                prd: "b".into(),
                reason: Box::new(auth),
            },
            "the agent cannot work (in b: authentication failure: Not logged in)",
            End::AgentFatal,
            "agent_failure_elsewhere",
        ),
        (
            StopReason::MaxWait {
                label: "rate limited".into(),
                extension_ms: 60_000,
                max_wait_ms: 3_600_000,
                waited_ms: 3_595_000,
            },
            "rate limited again; waiting 1m 00s more would pass --max-wait 1h 00m (already waited 59m 55s)",
            End::MaxWait,
            "max_wait",
        ),
        (
            StopReason::Worktree {
                criterion: "ISC-1".into(),
                error: "disk full".into(),
            },
            "the worktree for ISC-1 could not be made ready: disk full",
            End::Worktree,
            "worktree",
        ),
        (
            StopReason::Stalled { iterations: 3 },
            "no criterion newly passed in 3 iteration(s) in a row",
            End::Stalled,
            "stalled",
        ),
        (
            StopReason::Unfinished {
                unreadable: vec!["P.md:4".into()],
                unspecified: vec![],
            },
            "open boxes prdloop cannot read are left (P.md:4)",
            End::Blocked,
            "unfinished",
        ),
        (
            StopReason::Unfinished {
                unreadable: vec!["P.md:4".into()],
                unspecified: vec!["P.md:9".into()],
            },
            "open boxes prdloop cannot read are left (P.md:4), and `## Not yet specified` still holds open questions (P.md:9)",
            End::Blocked,
            "unfinished",
        ),
    ];
    for (reason, words, end, kind) in cases {
        assert_eq!(reason.to_string(), words);
        assert_eq!(reason.end(), end, "{words}");
        assert_eq!(shape(&reason)["kind"], kind, "{words}");
        // Its fields are camelCase, as every `--json` key is.
        let v = shape(&reason);
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert!(keys.iter().all(|k| !k.contains('_')), "{words}: {keys:?}");
    }
    assert_eq!(
        shape(&StopReason::BudgetReached {
            spent_usd: 1.0,
            running: 1,
            running_usd: 0.5,
            max_usd: 2.0,
            next_usd: 0.25,
        }),
        json!({"kind": "budget_reached", "spentUsd": 1.0, "running": 1, "runningUsd": 0.5,
               "maxUsd": 2.0, "nextUsd": 0.25})
    );
    assert_eq!(
        shape(&StopReason::Stalled { iterations: 3 }),
        json!({"kind": "stalled", "iterations": 3})
    );
}

#[test]
fn the_loops_notices_say_what_they_said_before() {
    let budget = StopReason::BudgetReached {
        spent_usd: 0.001,
        running: 0,
        running_usd: 0.0,
        max_usd: 0.0,
        next_usd: 0.0,
    };
    let cases = [
        (
            Notice::NoNewWorkers(budget),
            "budget: spent $0.0010 of --max-cost $0.00; the next worker could pass it (about $0.0000 each); no new workers",
        ),
        (
            Notice::NoNewWorkers(StopReason::TimeLimit {
                ran_ms: 1000,
                max_ms: 1000,
                next_ms: 0,
            }),
            "time: ran 1.0s of --max-time 1.0s; the next worker could pass it (about 0.0s each); no new workers",
        ),
        (
            Notice::StopRequested,
            "stop requested in the PRD: stopping the workers",
        ),
        (
            Notice::Interrupted {
                grace: Duration::from_secs(5),
            },
            "interrupted: stopping the workers (up to 5.0s grace); press Ctrl-C again to kill them now",
        ),
        (
            Notice::Swept {
                removed: 2,
                pinned: vec!["refs/prdloop/x".into()],
            },
            "removed 2 lane(s) left by runs that ended without cleaning up; what they held is kept as refs/prdloop/x",
        ),
        (
            Notice::Swept {
                removed: 1,
                pinned: vec![],
            },
            "removed 1 lane(s) left by runs that ended without cleaning up",
        ),
        (
            Notice::Escalated {
                id: "ISC-1".into(),
                failed: 2,
                from: "claude".into(),
                to: "codex".into(),
                after: 2,
            },
            "ISC-1 failed 2 attempt(s) on claude: its next attempts run on codex (--escalate-after 2)",
        ),
    ];
    for (notice, words) in cases {
        assert_eq!(notice.to_string(), words);
    }
}

#[test]
fn a_worker_ended_as_stuck_is_known_by_its_kind_not_its_words() {
    let stuck = FailReason::Worker(WorkerFail::Stuck {
        stuck: crate::backend::stuck::Stuck {
            repeated_calls: 0,
            idle_secs: 60,
            repeating: Vec::new(),
        },
    });
    assert!(stuck.is_stuck());
    assert!(
        FailReason::CriticalProbe {
            reason: Box::new(stuck.clone())
        }
        .is_stuck()
    );
    // A check whose output starts with the word is not a stuck worker.
    let tail = FailReason::VerifyNotRun {
        error: "stuck: the test server never answered".into(),
    };
    assert!(!tail.is_stuck());
    let joined = crate::run::ledger::Failure::joined(&[
        crate::run::ledger::Failure::of(&tail),
        crate::run::ledger::Failure::of(&stuck),
    ]);
    assert!(joined.stuck);
    assert_eq!(joined.text, format!("{tail}; {stuck}"));
}
