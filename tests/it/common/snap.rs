//! Whole outputs compared exactly (insta snapshots): what varies from run to run (temporary
//! paths, session ids, times, durations, pids, commits) is filtered to a placeholder; everything
//! else must match byte for byte. [`snapshot!`](crate::common::snapshot) names the snapshot in
//! the calling module (`it__MODULE__NAME.snap`).

use std::path::Path;
use std::process::Output;

use super::FAKE;

/// What varies between runs of a sandbox rooted at `root`, as placeholders.
pub fn filters(root: &Path) -> Vec<(String, String)> {
    let root = regex_escape(&root.display().to_string());
    // The fake agent lives in this checkout's target folder.
    let fake = regex_escape(FAKE);
    [
        (fake.as_str(), "[FAKE AGENT]"),
        (root.as_str(), "[TMP]"),
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[SESSION]",
        ),
        (
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?",
            "[TIME]",
        ),
        // Local times as people read them (`undo --list`).
        (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "[LOCAL TIME]"),
        (r"\b\d{13}\b", "[MS]"),
        // Git commits (their ids depend on the time they were made).
        (r"\b[0-9a-f]{40}\b", "[COMMIT]"),
        (
            r"\b(commit|is at|HEAD back from) [0-9a-f]{7,12}\b",
            "$1 [COMMIT]",
        ),
        // `verify`'s log folder of one invocation.
        (r"prdloop-verify-[0-9a-f]{16}", "prdloop-verify-[ID]"),
        (
            r#""(durationMs|pid|durationSecs|elapsedMs|ms|timeMs|timeMsPerPass|agentTimeMs|waitedMs)": \d+"#,
            r#""$1": [N]"#,
        ),
        (r"\d+\.\ds\b", "[DUR]"),
        (r#""sandbox": (true|false)"#, r#""sandbox": [ON OR OFF]"#),
        // Whether the kernel sandbox is on depends on the machine.
        (r"(?m)^sandbox: .*$", "sandbox: [ON OR OFF, AND WHY]"),
        (r#""(hostname|host)": "[^"]*""#, r#""$1": "[HOST]""#),
        (
            r#""prdloopVersion": "[^"]*""#,
            r#""prdloopVersion": "[VERSION]""#,
        ),
        // The PRD's text holds the day it was written (`updated: 2026-12-01`).
        (r#""prdTextHash": "[0-9a-f]{16}""#, r#""prdTextHash": "[HASH]""#),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect()
}

pub fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A finished command's exit code, stdout and stderr, as one text to snapshot.
pub fn shown(out: &Output) -> String {
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        super::code(out),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `prdloop ARGS` and what it did ([`shown`]), for a snapshot of several runs.
pub fn shown_as(args: &[&str], out: &Output) -> String {
    format!("$ prdloop {}\n{}", args.join(" "), shown(out))
}

/// Runs prdloop in the sandbox once per argument list; each run as [`shown_as`], one after
/// another.
pub fn transcript(sb: &super::Sandbox, runs: &[&[&str]]) -> String {
    runs.iter()
        .map(|args| shown_as(args, &sb.run(args)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `snapshot!(root, name, text)`: an insta snapshot of `text` named `name`, with
/// [`filters`]`(root)` applied; `snapshot!(root, name, text, [(regex, placeholder), …])` adds
/// filters of its own (applied first).
macro_rules! snapshot {
    ($root:expr, $name:expr, $text:expr $(,)?) => {
        $crate::common::snapshot!($root, $name, $text, [])
    };
    ($root:expr, $name:expr, $text:expr, [$(($re:expr, $to:expr)),* $(,)?] $(,)?) => {{
        let mut filters: Vec<(String, String)> = vec![$(($re.to_string(), $to.to_string())),*];
        filters.extend($crate::common::snap::filters($root));
        let filters: Vec<(&str, &str)> = filters
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        insta::with_settings!({filters => filters}, {
            insta::assert_snapshot!($name, $text);
        });
    }};
}
pub(crate) use snapshot;
