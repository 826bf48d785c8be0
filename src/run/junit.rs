//! The JUnit XML report of a run (`--junit FILE`), made from the run's `Summary`: one
//! `testsuite` for the PRD, one `testcase` per criterion, for CI test reporters.

use std::path::Path;

use anyhow::{Context, Result};
use quick_junit::{
    FlakyOrRerun, NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use super::event::{Row, RowState, Summary};
use crate::state::Evidence;

/// How much of the end of a failing criterion's last log goes into its `failure`.
const LOG_TAIL_BYTES: u64 = 16 * 1024;

/// The report: `prd_file` is the PRD's path as the readers should resolve it.
pub fn report(s: &Summary, prd_file: &str) -> Report {
    let mut suite = TestSuite::new(s.prd_id.clone().unwrap_or_else(|| prd_file.to_string()));
    suite.set_time(s.elapsed);
    suite.extra.insert("file".into(), prd_file.into());
    suite.add_properties([
        Property::new("title", &s.title),
        Property::new("outcome", s.end.word()),
        Property::new("iterations", s.iterations.to_string()),
        Property::new("cost-usd", format!("{:.4}", s.cost)),
    ]);
    suite.add_test_cases(s.rows.iter().map(|r| case(r, prd_file)));
    let mut report = Report::new("prdloop");
    report.set_time(s.elapsed);
    report.add_test_suite(suite);
    report
}

fn case(r: &Row, prd_file: &str) -> TestCase {
    let failure = |reason: &String| {
        let mut f = TestRerun::new(NonSuccessKind::Failure);
        f.set_message(reason.as_str()).set_type("criterion-failed");
        f
    };
    let status = match &r.state {
        RowState::Pass(_) => {
            let mut st = TestCaseStatus::success();
            // Earlier failed attempts of a criterion that passed in the end.
            st.add_reruns(r.failures.iter().map(failure));
            st
        }
        RowState::NeedsPerson => {
            let mut st = TestCaseStatus::skipped();
            st.set_message("its Verify method is Custom: a person decides")
                .set_type("needs-a-person");
            st
        }
        RowState::Parked => {
            let mut st = TestCaseStatus::skipped();
            st.set_message(format!(
                "its worker asks: {}",
                r.question.as_deref().unwrap_or_default()
            ))
            .set_type("question");
            st
        }
        RowState::Waiting(on) => {
            let mut st = TestCaseStatus::skipped();
            st.set_message(format!("not started: waiting for {on}"))
                .set_type("waiting");
            st
        }
        RowState::Fail => {
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let message = r
                .last_failure
                .clone()
                .or_else(|| r.failures.last().cloned())
                .unwrap_or_else(|| "not passing: no attempt finished in this run".into());
            st.set_message(message).set_type("criterion-failed");
            if let Some(tail) = r.last_log.as_deref().and_then(log_tail) {
                st.set_description(tail);
            }
            let earlier = r.failures.len().saturating_sub(1);
            st.add_reruns(r.failures[..earlier].iter().map(failure));
            st.set_rerun_kind(FlakyOrRerun::Rerun);
            st
        }
    };
    let mut c = TestCase::new(r.id.as_str(), status);
    c.set_classname(r.domain.as_str());
    c.set_time(r.time);
    c.extra.insert("file".into(), prd_file.into());
    c.extra.insert("line".into(), r.line.to_string().into());
    let verified = match r.state {
        RowState::Pass(Evidence::Checked) => "checked",
        RowState::Pass(Evidence::Reviewed) => "reviewed",
        RowState::Pass(Evidence::Claimed) => "claimed",
        RowState::Pass(Evidence::Before) => "before-the-run",
        RowState::NeedsPerson => "person",
        RowState::Parked | RowState::Fail | RowState::Waiting(_) => "none",
    };
    c.add_properties([
        Property::new(
            "kind",
            if r.anti {
                "anti-criterion"
            } else {
                "criterion"
            },
        ),
        Property::new("attempts", r.attempts.to_string()),
        Property::new("cost-usd", format!("{:.4}", r.cost)),
        Property::new("input-tokens", r.usage.input_tokens.to_string()),
        Property::new("output-tokens", r.usage.output_tokens.to_string()),
        Property::new(
            "cache-read-tokens",
            r.usage.cache_read_input_tokens.to_string(),
        ),
        Property::new(
            "cache-creation-tokens",
            r.usage.cache_creation_input_tokens.to_string(),
        ),
        Property::new("regressions", r.regressions.to_string()),
        Property::new("verified-by", verified),
    ]);
    c
}

/// The last part of a log, from a line's start (quick-junit strips what XML cannot hold).
fn log_tail(path: &Path) -> Option<String> {
    let bytes = crate::worker::output_log::tail(path, LOG_TAIL_BYTES)
        .ok()?
        .from_line_start();
    let text = String::from_utf8_lossy(&bytes);
    (!text.trim().is_empty()).then(|| text.into_owned())
}

/// Writes the report to `path` (through a temporary file beside it), making its folder.
pub fn write(path: &Path, s: &Summary, prd_file: &str) -> Result<()> {
    let xml = report(s, prd_file)
        .to_string()
        .context("failed to serialize the JUnit report")?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("failed to create {}", dir.display()))?;
    }
    crate::fsutil::write_atomic(path, xml.as_bytes())
        .with_context(|| format!("failed to write the JUnit report {}", path.display()))
}
