//! The PRD model against the fixture PRDs (two written by PAI itself) and generated text.

use prdloop::prd::{Format, HowVerified, Prd, Value, VerifyTypes};
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/prds/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ids(p: &Prd) -> Vec<&str> {
    p.criteria.iter().map(|c| c.id.as_str()).collect()
}

/// The byte ranges where two texts differ (same length assumed for tick edits).
fn changed_bytes(a: &str, b: &str) -> Vec<usize> {
    assert_eq!(a.len(), b.len());
    a.bytes()
        .zip(b.bytes())
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, _)| i)
        .collect()
}

const FIXTURES: [&str; 12] = [
    "bold-ids.md",
    "complete-open-boxes.md",
    "complete-patterns.md",
    "flat.md",
    "grouped.md",
    "legacy.md",
    "pai-after-parallel-iteration.md",
    "pai-new.md",
    "tricky.md",
    "tricky-crlf.md",
    "v4.md",
    "v4-duplicate-key.md",
];

#[test]
fn every_fixture_round_trips_byte_for_byte() {
    for name in FIXTURES {
        let text = fixture(name);
        let p = Prd::parse(text.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.text(), text, "{name}");
        // A front matter edit that sets a key to the value it has changes nothing else.
        let mut q = p.clone();
        q.set_front(&[]).unwrap();
        assert_eq!(q.text(), text, "{name}");
    }
}

#[test]
fn tricky_yields_exactly_its_eight_criteria() {
    for name in ["tricky.md", "tricky-crlf.md"] {
        let p = Prd::parse(fixture(name)).unwrap();
        assert_eq!(
            ids(&p),
            [
                "ISC-PARSE-1",
                "ISC-PARSE-2",
                "ISC-PARSE-3",
                "ISC-PARSE-4",
                "ISC-NEST-1",
                "ISC-NEST-2",
                "ISC-ORD-1",
                "ISC-A-PARSE-1"
            ],
            "{name}"
        );
        let c = |id: &str| p.criterion(id).unwrap();
        assert!(c("ISC-PARSE-1").checked, "uppercase X is ticked");
        assert_eq!(p.progress(), (1, 8));
        assert_eq!(
            c("ISC-PARSE-2").description,
            "A pipe | inside the description stays in the description"
        );
        assert_eq!(
            c("ISC-PARSE-2").command(&VerifyTypes::default()),
            Some("printf 'a|b' | grep -q '|'")
        );
        assert_eq!(
            c("ISC-PARSE-3").description,
            "Star bullets are list items too"
        );
        assert!(c("ISC-PARSE-3").verify.is_none());
        assert!(c("ISC-A-PARSE-1").anti);
        assert_eq!(c("ISC-A-PARSE-1").domain, "A-PARSE");
        assert_eq!(
            c("ISC-NEST-2").command(&VerifyTypes::default()),
            Some("true")
        );
        assert_eq!(c("ISC-ORD-1").line, 59);
        assert_eq!(p.front.failing_criteria, ["ISC-PARSE-2"]);
        assert_eq!(p.front.id.as_deref(), Some("PRD-20261130-tricky"));
        assert_eq!(p.front.verification_summary.as_deref(), Some("1/8"));
        assert_eq!(p.front.iteration, 7);
        assert_eq!(p.front.max_iterations, 20);
        assert_eq!(p.front.loop_status, None);
        // Not read, and open: each keeps the file from being marked complete.
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert_eq!(p.warnings[0].line, 51);
        assert!(p.warnings[0].message.contains("ISC-ÜNI-1"));
        assert_eq!(p.warnings[1].line, 71);
        assert!(p.warnings[1].message.contains("not marked complete"));
        let open: Vec<usize> = p.open_boxes().iter().map(|b| b.line).collect();
        assert!(open.contains(&51) && open.contains(&71), "{open:?}");
        assert!(p.context().unwrap().starts_with("Parsers in the wild"));
    }
}

#[test]
fn tricky_edits_touch_only_their_bytes_and_keep_crlf() {
    for name in ["tricky.md", "tricky-crlf.md"] {
        let text = fixture(name);
        let mut p = Prd::parse(text.clone()).unwrap();
        p.set_checked("ISC-PARSE-2", true).unwrap();
        p.set_checked("ISC-PARSE-1", false).unwrap();
        let changed = changed_bytes(&text, p.text());
        assert_eq!(changed.len(), 2, "{name}");
        let line = |i: usize| text[..i].matches('\n').count() + 1;
        assert_eq!(line(changed[0]), 47);
        assert_eq!(line(changed[1]), 48);

        let mut q = Prd::parse(text.clone()).unwrap();
        q.set_front(&[
            (
                "failing_criteria",
                Value::List(vec!["ISC-PARSE-3".into(), "ISC-ORD-1".into()]),
            ),
            ("verification_summary", Value::Quoted("2/8".into())),
            ("id", Value::str("PRD-20261130-other")),
            ("loopStatus", Value::str("running")),
        ])
        .unwrap();
        let eol = if name.ends_with("crlf.md") {
            "\r\n"
        } else {
            "\n"
        };
        let want = text
            .replace(
                &format!("failing_criteria:{eol}  - ISC-PARSE-2{eol}"),
                &format!("failing_criteria: [ISC-PARSE-3, ISC-ORD-1]{eol}"),
            )
            // The author's quotes are kept.
            .replace("verification_summary: '1/8'", "verification_summary: '2/8'")
            .replace(
                "id: \"PRD-20261130-tricky\"   # quoted id",
                "id: \"PRD-20261130-other\"   # quoted id",
            )
            .replace("loopStatus: null", "loopStatus: running");
        assert_eq!(q.text(), want, "{name}");
        assert_eq!(q.front.failing_criteria, ["ISC-PARSE-3", "ISC-ORD-1"]);
        assert_eq!(q.criteria.len(), 8);
        // Untouched: comment line, unknown keys, quoting of other values.
        assert!(
            q.text()
                .contains("owner: \"Zoë Ångström\"        # an unknown key: keep it untouched")
        );
        if name.ends_with("crlf.md") {
            assert!(
                !q.text().replace("\r\n", "").contains('\n'),
                "only CRLF endings"
            );
        }
    }
}

#[test]
fn adding_a_key_goes_before_the_closing_line() {
    let text = fixture("legacy.md");
    let mut p = Prd::parse(text.clone()).unwrap();
    p.set_front(&[("loopStatus", Value::str("running"))])
        .unwrap();
    assert_eq!(
        p.text(),
        text.replace(
            "iteration: 2\n---",
            "iteration: 2\nloopStatus: running\n---"
        )
    );
}

#[test]
fn grouped_fixture() {
    let p = Prd::parse(fixture("grouped.md")).unwrap();
    assert_eq!(p.criteria.len(), 12);
    assert_eq!(p.progress(), (9, 12));
    let c = |id: &str| p.criterion(id).unwrap();
    assert_eq!(
        c("ISC-API-2").command(&VerifyTypes::default()),
        Some("cargo test --test api export_csv")
    );
    // A Grep method's span is a pattern for the agent, even when it reads like a command.
    let db1 = c("ISC-A-DB-1");
    assert_eq!(
        db1.verify.as_ref().unwrap().code.as_deref(),
        Some(r#"! grep -rn "format!(\"SELECT" src"#)
    );
    assert_eq!(
        db1.how_verified(&VerifyTypes::default()),
        HowVerified::Agent {
            why: "Grep is not a command type".into()
        }
    );
    assert_eq!(
        db1.command(&VerifyTypes::parse("Grep").unwrap()),
        db1.verify.as_ref().unwrap().code.as_deref()
    );
    assert!(c("ISC-UX-3").is_custom());
    assert_eq!(c("ISC-UX-1").verify.as_ref().unwrap().kind, "Read");
    assert!(c("ISC-UX-1").command(&VerifyTypes::default()).is_none());
    assert!(!c("ISC-API-1").anti);
    assert!(c("ISC-A-API-1").anti);
    assert!(!c("ISC-API-3").anti);
    assert!(
        p.criterion("ISC-LOG-1").is_none(),
        "a checkbox inside backticks is text"
    );
    assert_eq!(p.front.effort_level, "Extended");
    assert_eq!(p.front.failing_criteria, ["ISC-API-2", "ISC-DB-1"]);
    assert!(p.context().unwrap().contains("### Decisions Made"));
    assert!(!p.context().unwrap().contains("## PLAN"));
}

#[test]
fn pai_written_fixtures() {
    let p = Prd::parse(fixture("pai-after-parallel-iteration.md")).unwrap();
    assert_eq!(
        ids(&p),
        [
            "ISC-AUTH-1",
            "ISC-AUTH-2",
            "ISC-API-1",
            "ISC-API-3",
            "ISC-A-API-1"
        ]
    );
    assert_eq!(p.front.failing_criteria, ["ISC-AUTH-2", "ISC-API-3"]);
    assert_eq!(p.front.verification_summary.as_deref(), Some("3/5"));
    assert_eq!(p.front.loop_status.as_deref(), Some("failed"));
    assert_eq!(p.front.max_iterations, 1);
    let p = Prd::parse(fixture("pai-new.md")).unwrap();
    assert!(p.criteria.is_empty());
    assert_eq!(p.front.mode.as_deref(), Some("interactive"));
    assert_eq!(p.front.last_phase, None);
    assert_eq!(p.title.as_deref(), Some("Build Auth: System!! v2"));
}

#[test]
fn flat_and_legacy_fixtures() {
    let p = Prd::parse(fixture("flat.md")).unwrap();
    assert_eq!(
        ids(&p),
        ["ISC-C1", "ISC-C2", "ISC-C3", "ISC-C4", "ISC-A1", "ISC-A2"]
    );
    assert!(p.criterion("ISC-A1").unwrap().anti);
    assert_eq!(p.criterion("ISC-C1").unwrap().domain, "ISC-C1");
    assert_eq!(
        p.criterion("ISC-C3")
            .unwrap()
            .command(&VerifyTypes::default()),
        Some("./tool --bogus; test $? -eq 2")
    );
    let p = Prd::parse(fixture("legacy.md")).unwrap();
    assert_eq!(ids(&p), ["C1", "C2", "A1"]);
    assert!(p.criterion("C1").unwrap().checked);
    assert!(p.criterion("A1").unwrap().anti);
    assert_eq!(p.front.mode, None);
    assert_eq!(p.front.max_iterations, 128, "PAI's default");
}

#[test]
fn no_criteria_heading_means_every_task_item() {
    let p = Prd::parse("# T\n\n- [ ] ISC-A-1: a\n\n## LOG\n\n- [x] ISC-B-1: b\n").unwrap();
    assert_eq!(ids(&p), ["ISC-A-1", "ISC-B-1"]);
    let p = Prd::parse(
        "# T\n\n- [ ] ISC-A-1: a\n\n## Criteria\n\n- [x] ISC-B-1: b\n\n## LOG\n- [ ] ISC-C-1: c\n",
    )
    .unwrap();
    assert_eq!(ids(&p), ["ISC-B-1"]);
}

#[test]
fn broken_front_matter_names_the_line() {
    let e = Prd::parse("---\nid: x\nchildren: [a, b\nstatus: DRAFT\n---\n").unwrap_err();
    assert!(e.line >= 3, "{e}");
    let e = Prd::parse("---\nid: x\n").unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e.message.contains("never closed"));
}

fn prd_like() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("---".to_string()),
        Just("id: PRD-1".to_string()),
        Just("failing_criteria:".to_string()),
        Just("  - ISC-A-1".to_string()),
        Just("iteration: 3  # c".to_string()),
        Just("task: Add retries".to_string()),
        Just("phase: build".to_string()),
        Just("phase:   # again".to_string()),
        Just("## Criteria".to_string()),
        Just("## Context".to_string()),
        Just("- ISC-1: evidence, not a task item".to_string()),
        "- \\[[ x]\\] \\*\\*ISC-[A-Z]-[0-9]{1,2}(:\\*\\*|\\*\\*:) bold( \\| Verify: (Grep|Test|Lint): `[a-z .*]{0,8}`( in `x`)?)?",
        "- \\[[ x]\\] ISC-(A-)?[0-9]{1,2}: flat",
        Just("## IDEAL STATE CRITERIA".to_string()),
        Just("## CONTEXT".to_string()),
        Just("### API".to_string()),
        Just("```".to_string()),
        Just("<!--".to_string()),
        Just("-->".to_string()),
        Just("> - [ ] ISC-Q-1: quoted".to_string()),
        "[-*+] \\[[ xX]\\] ISC-[A-Z]{1,3}-[0-9]{1,2}: [a-z |`]{0,20}( \\| Verify: (CLI|Test|Custom): `[a-z ]{0,8}`)?",
        "  - \\[[ x]\\] ISC-N-[0-9]: nested",
        "[a-zA-Z0-9 :#|`\\[\\]-]{0,30}",
    ];
    (prop::collection::vec(line, 0..40), prop::bool::ANY).prop_map(|(lines, crlf)| {
        let eol = if crlf { "\r\n" } else { "\n" };
        let mut s = lines.join(eol);
        s.push_str(eol);
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics_and_round_trips(text in any::<String>()) {
        if let Ok(p) = Prd::parse(text.clone()) {
            prop_assert_eq!(p.text(), text.as_str());
        }
    }

    #[test]
    fn prd_shaped_text_round_trips_and_ticks_one_byte(text in prd_like()) {
        if let Ok(p) = Prd::parse(text.clone()) {
            prop_assert_eq!(p.text(), text.as_str());
            for c in p.criteria.clone() {
                let mut q = p.clone();
                q.set_checked(&c.id, !c.checked).unwrap();
                prop_assert_eq!(changed_bytes(&text, q.text()).len(), 1);
                let r = Prd::parse(q.text().to_string()).unwrap();
                prop_assert_eq!(r.criterion(&c.id).unwrap().checked, !c.checked);
            }
            // Front matter edits re-parse and leave the criteria as they were.
            let mut q = p.clone();
            if q.set_front(&[("loopStatus", Value::str("running")), ("failing_criteria", Value::List(vec!["ISC-A-1".into()])), ("phase", Value::str("verify"))]).is_ok() {
                if !p.has_front_matter() {
                    // No front matter is ever added.
                    prop_assert_eq!(q.text(), p.text());
                    return Ok(());
                }
                prop_assert_eq!(q.front.loop_status.as_deref(), Some("running"));
                // Every occurrence of a repeated key is written, so the one that counts is too.
                prop_assert_eq!(q.front.phase.as_deref(), Some("verify"));
                let before: Vec<_> = p.criteria.iter().map(|c| (&c.id, c.checked)).collect();
                let after: Vec<_> = q.criteria.iter().map(|c| (&c.id, c.checked)).collect();
                prop_assert_eq!(before, after);
            }
        }
    }
}

#[test]
fn bold_ids_read_and_tick_keeping_the_bold() {
    let text = fixture("bold-ids.md");
    let p = Prd::parse(text.clone()).unwrap();
    assert_eq!(ids(&p), ["ISC-C1", "ISC-C2", "ISC-C3", "ISC-A1"]);
    // The open `**Note:** …` box in the criteria section is no criterion, and keeps the file
    // from being marked complete.
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert_eq!(p.warnings[0].line, 29);
    let c = |id: &str| p.criterion(id).unwrap();
    assert_eq!(
        c("ISC-C1").description,
        "Saving the form shows a confirmation toast"
    );
    assert_eq!(
        c("ISC-C2").description,
        "Reloading the page keeps the chosen theme"
    );
    assert!(c("ISC-C1").checked && !c("ISC-C2").checked);
    assert!(c("ISC-A1").anti);
    assert_eq!(
        c("ISC-C1").command(&VerifyTypes::default()),
        Some("npm test settings")
    );
    let mut q = p.clone();
    q.set_checked("ISC-C2", true).unwrap();
    q.set_checked("ISC-A1", true).unwrap();
    assert_eq!(changed_bytes(&text, q.text()).len(), 2);
    assert!(q.text().contains("- [x] **ISC-C2**: Reloading"));
    assert!(q.text().contains("- [x] **ISC-A1:** No setting"));
    assert_eq!(Prd::parse(q.text().to_string()).unwrap().progress(), (4, 4));
}

#[test]
fn v4_fixture() {
    let p = Prd::parse(fixture("v4.md")).unwrap();
    assert_eq!(p.front.format, Format::V4);
    assert_eq!(p.id(), Some("20260224-020000_webhook-retry-backoff"));
    assert_eq!(
        p.display_title(),
        Some("Add retry with backoff to the webhook sender")
    );
    assert_eq!(p.title.as_deref(), Some("Webhook retries"));
    assert_eq!(p.front.phase.as_deref(), Some("execute"));
    assert_eq!(p.front.progress.as_deref(), Some("3/6"));
    assert_eq!(p.front.effort.as_deref(), Some("extended"));
    assert_eq!(p.front.effort_level, "extended");
    assert_eq!(p.front.mode.as_deref(), Some("loop"));
    assert_eq!(p.front.started.as_deref(), Some("2026-02-24T02:00:00Z"));
    assert_eq!(p.front.updated.as_deref(), Some("2026-02-24T03:17:42Z"));
    assert_eq!(p.front.iteration, 2);
    assert_eq!(p.front.id, None);
    assert_eq!(
        ids(&p),
        ["ISC-1", "ISC-2", "ISC-3", "ISC-4", "ISC-5", "ISC-A-1"],
        "the Verification section's `- ISC-1: evidence` lines are not criteria"
    );
    assert_eq!(p.progress(), (3, 6));
    let c = |id: &str| p.criterion(id).unwrap();
    assert!(c("ISC-A-1").anti && !c("ISC-1").anti);
    assert_eq!(c("ISC-1").domain, "ISC-1");
    assert_eq!(c("ISC-A-1").line, 34);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let context = p.context().unwrap();
    assert!(context.starts_with("Webhook deliveries fail"), "{context}");
    assert!(context.contains("### Plan") && context.ends_with("mark the delivery `failed`."));
    assert_eq!(
        p.criteria
            .iter()
            .map(|c| c.how_verified(&VerifyTypes::default()))
            .collect::<Vec<_>>(),
        vec![
            HowVerified::Agent {
                why: "no Verify method".into()
            };
            6
        ]
    );
}

#[test]
fn v3_and_untitled_prds_keep_their_id_and_title() {
    let p = Prd::parse(fixture("grouped.md")).unwrap();
    assert_eq!(p.front.format, Format::V3);
    assert_eq!(p.id(), p.front.id.as_deref());
    assert_eq!(p.display_title(), p.title.as_deref());
    let p = Prd::parse("---\nid: PRD-1\n---\n- [ ] ISC-C1: a\n").unwrap();
    assert_eq!(p.display_title(), Some("PRD-1"));
    let p = Prd::parse("- [ ] ISC-C1: a\n").unwrap();
    assert_eq!((p.id(), p.display_title()), (None, None));
    // A v3 file that happens to have a `task` key stays v3: it has an id.
    let p = Prd::parse("---\nid: PRD-2\ntask: t\n---\n# H\n").unwrap();
    assert_eq!(p.front.format, Format::V3);
    assert_eq!(p.id(), Some("PRD-2"));
}

#[test]
fn section_names_in_any_case() {
    for (criteria, context) in [
        ("## Criteria", "## Context"),
        ("## CRITERIA", "## CONTEXT"),
        ("## criteria", "## context"),
    ] {
        let t = format!(
            "# T\n\n{context}\n\nWhy.\n\n{criteria}\n\n- [ ] ISC-1: a\n\n## Notes\n\n- [ ] ISC-2: not read\n"
        );
        let p = Prd::parse(t).unwrap();
        assert_eq!(ids(&p), ["ISC-1"], "{criteria}");
        assert_eq!(p.context(), Some("Why."), "{context}");
    }
}

#[test]
fn a_repeated_key_warns_with_its_lines_and_set_front_updates_both() {
    let text = fixture("v4-duplicate-key.md");
    let p = Prd::parse(text.clone()).unwrap();
    assert_eq!(p.front.format, Format::V4);
    assert_eq!(
        p.front.phase.as_deref(),
        Some("verify"),
        "the last value counts"
    );
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert_eq!(p.warnings[0].line, 8);
    assert_eq!(
        p.warnings[0].message,
        "`phase` is set twice (lines 5 and 8); the last value counts"
    );
    let mut q = p.clone();
    // Its boxes are open: it may not be marked complete.
    assert!(q.set_front(&[("phase", Value::str("complete"))]).is_err());
    q.set_front(&[("phase", Value::str("learn"))]).unwrap();
    assert_eq!(
        q.text(),
        text.replace("phase: build\n", "phase: learn\n")
            .replace("phase: verify\n", "phase: learn\n")
    );
    assert_eq!(q.front.phase.as_deref(), Some("learn"));
    assert_eq!(
        q.warnings.len(),
        1,
        "still written twice, so still warned about"
    );
}

#[test]
fn broken_yaml_names_the_line_without_library_hints() {
    let e = Prd::parse("---\nid: x\nchildren: [a, b\nstatus: DRAFT\n---\n").unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(!e.message.contains("line 3"), "{e}");
    assert!(!e.message.contains("Options"), "{e}");
}

#[test]
fn which_methods_the_runner_runs() {
    let p = Prd::parse(fixture("complete-patterns.md")).unwrap();
    assert_eq!(p.front.status, "COMPLETE");
    assert_eq!(p.progress(), (12, 12));
    let types = VerifyTypes::default();
    let how: Vec<(&str, String)> = p
        .criteria
        .iter()
        .map(|c| {
            let how = match c.how_verified(&types) {
                HowVerified::Command(cmd) => format!("run: {cmd}"),
                HowVerified::Agent { why } => format!("agent: {why}"),
                HowVerified::Person => "person".to_string(),
            };
            (c.id.as_str(), how)
        })
        .collect();
    let not_single = "agent: the method is not a single code span";
    assert_eq!(
        how,
        [
            ("ISC-C1", "agent: Grep is not a command type"),
            ("ISC-C2", "agent: Read is not a command type"),
            ("ISC-C3", "run: curl localhost:8888/health"),
            // Prose after the span: the agent checks it.
            (
                "ISC-C4",
                "agent: prose follows the code span, and may change what it means: the agent checks it",
            ),
            ("ISC-C5", "agent: Grep is not a command type"),
            ("ISC-C6", not_single),
            ("ISC-C7", not_single),
            ("ISC-C8", "agent: Browser is not a command type"),
            ("ISC-C9", "agent: no Verify method"),
            ("ISC-C10", "run: npx eslint src/components"),
            ("ISC-A1", "agent: Static is not a command type"),
            ("ISC-A2", "person"),
        ]
        .map(|(id, how)| (id, how.to_string()))
    );
    let c = |id: &str| p.criterion(id).unwrap();
    // A span followed by prose (`in Drawer.tsx`) is no command whatever the type.
    assert_eq!(c("ISC-C1").verify.as_ref().unwrap().code, None);
    assert_eq!(c("ISC-C5").verify.as_ref().unwrap().code, None);
    let with_grep = VerifyTypes::parse("Test, CLI, grep").unwrap();
    assert_eq!(c("ISC-C1").command(&with_grep), None);
    assert_eq!(c("ISC-C5").command(&with_grep), None);
    assert_eq!(c("ISC-C10").command(&with_grep), None, "Lint is not listed");
    assert!(c("ISC-A2").is_custom());
}

#[test]
fn complete_with_open_boxes() {
    let text = fixture("complete-open-boxes.md");
    let p = Prd::parse(text).unwrap();
    assert_eq!(p.front.status, "COMPLETE");
    assert_eq!(p.progress(), (5, 8));
    let open: Vec<&str> = p.failing().map(|c| c.id.as_str()).collect();
    assert_eq!(open, ["ISC-EXPORT-3", "ISC-EXPORT-4", "ISC-UX-2"]);
    assert!(p.criterion("ISC-UX-2").unwrap().is_custom());
    assert_eq!(p.criterion("ISC-A-EXPORT-2").unwrap().domain, "A-EXPORT");
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

// ---- LifeOS ISA files ----

fn isa_like() -> impl Strategy<Value = String> {
    let claim = prop_oneof![
        "- \\[[ x]\\] ISC-[0-9]{1,3}: [a-z `]{0,20}",
        "  - \\[[ x]\\] ISC-[0-9]{1,2}\\.[0-9]: leaf [a-z]{0,8}",
        "    - \\[[ x]\\] ISC-[0-9]{1,2}\\.[0-9]\\.[0-9]: deeper",
        "- \\[[ x]\\] (Anti|Antecedent): ISC-[0-9]{1,3}: [a-z ]{0,12}",
        "- \\[[ x]\\] ISC-[0-9]{1,3}: (Anti|Antecedent): [a-z ]{0,12}( \\(probe: [a-z ]{1,8}\\))?",
        "- \\[ \\] ISC-[0-9]{1,3}: \\[DROPPED — see Decisions\\]",
        "- \\[[ x]\\] ISC-[0-9]{1,3} — em dash( \\(after: ISC-[0-9]\\))?",
        "- \\[[ x]\\] ISC-[0-9x]{1,4}\\.[a-z0-9]{0,2}: odd split",
        Just("## Claims".to_string()),
        Just("## Anti-claims".to_string()),
        Just("## Features".to_string()),
        Just("### F1 · Search".to_string()),
        Just("## Decisions".to_string()),
        Just("## Test Strategy".to_string()),
        Just("| isc | type | check | threshold | tool |".to_string()),
        "\\| ISC-[0-9]{1,2} \\| (bash|manual|curl) \\| [a-z `|]{0,10} \\| x \\| `[a-z ]{0,8}` \\|",
        "[a-zA-Z0-9 :#|`\\[\\]-]{0,30}",
    ];
    let front = prop_oneof![
        Just(String::new()),
        "---\nphase: (climbing|learn|complete|build)\nprogress: [0-9]{1,2}/[0-9]{1,2}\n---\n",
        "---\ntask: T\nslug: 20260101-x\nphase: climbing\nprogress: 0/0\nupdated: 2026-07-23T14:00:00Z\n---\n",
    ];
    (front, prop::collection::vec(claim, 0..30), prop::bool::ANY).prop_map(
        |(front, lines, crlf)| {
            let eol = if crlf { "\r\n" } else { "\n" };
            let mut s = front.replace('\n', eol);
            s.push_str(&lines.join(eol));
            s.push_str(eol);
            s
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Reading an ISA and writing it back with no change is byte-identical; the invariant
    /// holds: it may be marked complete exactly when no box of its claims is open.
    #[test]
    fn isa_text_round_trips_and_is_never_complete_with_a_box_open(text in isa_like()) {
        let Ok(p) = Prd::parse(text.clone()) else { return Ok(()); };
        prop_assert_eq!(p.text(), text.as_str());
        let mut q = p.clone();
        for c in &p.criteria {
            prop_assert_eq!(q.set_checked(&c.id, c.checked), Some(false));
        }
        if let Some(progress) = p.front.progress.clone() {
            q.set_front(&[("progress", Value::str(progress))]).unwrap();
        }
        prop_assert_eq!(q.text(), text.as_str());
        let open = p.open_boxes();
        let mut r = p.clone();
        let res = r.set_front(&[("phase", Value::str("complete"))]);
        if p.has_front_matter() && !open.is_empty() {
            prop_assert!(res.is_err());
            prop_assert_eq!(r.text(), text.as_str());
        } else {
            prop_assert!(res.is_ok());
        }
        // Tombstones are never criteria; parents know their leaves.
        for c in &p.criteria {
            prop_assert!(!c.description.contains("[DROPPED"));
            let prefix = format!("{}.", c.id);
            for l in &c.leaves {
                prop_assert!(l.starts_with(&prefix), "{} under {}", l, c.id);
            }
        }
    }
}

#[test]
fn the_spec_isa_reads_as_lifeos_reads_it() {
    let p = Prd::parse(fixture("isa/claims.md")).unwrap();
    assert_eq!(p.front.format, Format::Isa);
    assert_eq!(
        ids(&p),
        [
            "ISC-1",
            "ISC-2",
            "ISC-2.1",
            "ISC-2.2",
            "ISC-2.2.1",
            "ISC-4",
            "ISC-5",
            "ISC-6",
            "ISC-7"
        ]
    );
    let c = |id: &str| p.criterion(id).unwrap();
    assert_eq!(c("ISC-2").leaves, ["ISC-2.1", "ISC-2.2.1"]);
    assert_eq!(c("ISC-2.2").leaves, ["ISC-2.2.1"]);
    assert!(c("ISC-2.1").leaves.is_empty());
    assert_eq!(c("ISC-2.2.1").after, ["ISC-2.1"]);
    assert!(c("ISC-4").anti && c("ISC-7").anti && !c("ISC-5").anti);
    assert!(c("ISC-5").antecedent);
    assert_eq!(c("ISC-6").description, "the flag is listed in `--help`.");
    assert_eq!(
        c("ISC-5").inline_probe.as_deref(),
        Some("read the keys aloud")
    );
    let types = VerifyTypes::default();
    assert_eq!(
        c("ISC-2.1").how_verified(&types),
        HowVerified::Command("test -f fields-ok")
    );
    assert!(c("ISC-2.1").probe.as_ref().unwrap().critical);
    assert!(
        matches!(c("ISC-4").how_verified(&types), HowVerified::Agent { why } if why.contains("names a tool"))
    );
    assert!(
        matches!(c("ISC-6").how_verified(&types), HowVerified::Agent { why } if why.contains("`manual`"))
    );
    // The tombstone: a box, not a claim, and no obstacle to completion.
    assert_eq!(p.other_boxes.len(), 1);
    assert!(p.other_boxes[0].tombstone && p.other_boxes[0].line == 22);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.progress(), (1, 9));
}

#[test]
fn the_real_isa_files_read_as_their_authors_wrote_them() {
    let types = VerifyTypes::default();
    let runs = |p: &Prd| -> Vec<String> {
        p.criteria
            .iter()
            .filter(|c| c.command(&types).is_some())
            .map(|c| c.id.clone())
            .collect()
    };
    // 135 claims, Anti:/Antecedent: after the id, an inline probe, a Test Strategy whose
    // probes are unit tests and manual checks (none of a command type).
    let p = Prd::parse(fixture("real-isa/05-photomanager-isa-135.md")).unwrap();
    assert_eq!(p.front.format, Format::Isa);
    assert_eq!(p.progress(), (0, 135));
    let c = |id: &str| p.criterion(id).unwrap().clone();
    assert!(c("ISC-18").anti && c("ISC-121").anti && !c("ISC-17").anti);
    assert!(c("ISC-59").antecedent && c("ISC-128").antecedent);
    assert!(
        c("ISC-122")
            .inline_probe
            .as_deref()
            .unwrap()
            .starts_with("flag a photo")
    );
    assert_eq!(c("ISC-1").probe.as_ref().unwrap().kind, "unit");
    assert!(runs(&p).is_empty(), "{:?}", runs(&p));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);

    // A v4 PRD: ISC-A21… are anti (no other phase letter).
    let p = Prd::parse(fixture("real-isa/08-agentbot-v4-learn-28.md")).unwrap();
    assert_eq!(p.front.format, Format::V4);
    assert_eq!(p.progress(), (0, 28));
    let anti: Vec<&str> = p
        .criteria
        .iter()
        .filter(|c| c.anti)
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(anti, ["ISC-A21", "ISC-A22", "ISC-A23", "ISC-A24"]);

    // Inline `Probe:` text, ranges in the Test Strategy (`1–7`).
    let p = Prd::parse(fixture("real-isa/21-rounds-isa-inline-probe.md")).unwrap();
    assert_eq!(p.front.format, Format::Isa);
    assert_eq!(p.progress(), (49, 61));
    let c = |id: &str| p.criterion(id).unwrap().clone();
    assert_eq!(
        c("ISC-1").inline_probe.as_deref(),
        Some("Grep `createUserWithEmailAndPassword` or `AppleAuthentication` in `app/`.")
    );
    assert_eq!(c("ISC-3").probe.as_ref().unwrap().kind, "auth/flow");
    assert_eq!(c("ISC-44").probe.as_ref().unwrap().kind, "gates");
    assert!(c("ISC-53").probe.is_none());
    assert!(c("ISC-7").anti && c("ISC-24").antecedent);
    assert!(runs(&p).is_empty());
    assert_eq!(p.open_boxes().len(), 12);

    // No task, no slug: an ISA by its keys. The claims under `## Phase 2` are outside the
    // claims section (LifeOS does not count them) but their boxes are known.
    let p = Prd::parse(fixture("real-isa/22-aihviewer-isa-no-task-slug.md")).unwrap();
    assert_eq!(p.front.format, Format::Isa);
    assert_eq!(p.progress(), (30, 30));
    assert_eq!(p.other_boxes.len(), 9);
    assert!(p.open_boxes().is_empty());
}
