//! Reading and showing the JSON lines agents print: a field at a path, what a tool call works
//! on, a tool's result as the log shows it. Shared by the backends.

use serde_json::Value as Json;

use crate::report::{dim, red};
use crate::text::one_line;

pub(super) fn str_at<'a>(v: &'a Json, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

pub(super) fn u64_at(v: &Json, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Json::as_u64)
        .unwrap_or(0)
}

/// The first of `keys` in `input` that holds text: what a tool call works on.
pub(super) fn subject<'a>(input: &'a Json, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| input.get(k)?.as_str().filter(|s| !s.trim().is_empty()))
}

pub(super) const SUBJECT_KEYS: &[&str] = &[
    "command",
    "file_path",
    "filePath",
    "absolute_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
];

/// The text of a tool call's most telling input, for the log: a command, a path, a pattern.
pub(super) fn tool_input(input: &Json) -> String {
    for key in [
        "command",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "description",
    ] {
        if let Some(v) = input.get(key).and_then(Json::as_str) {
            return one_line(v, 160);
        }
    }
    one_line(&input.to_string(), 160)
}

/// A tool's result in the log: its first lines, marked as an error unless `status` says it
/// worked.
pub(super) fn tool_result(status: &str, output: &str) -> String {
    let mark = if matches!(status, "" | "success" | "completed" | "0") {
        dim("◀")
    } else {
        red(&format!("◀ {status}:"))
    };
    let lines: Vec<&str> = output.lines().collect();
    let more = lines.len().saturating_sub(5);
    let mut shown = format!(
        "  {mark} {}",
        lines
            .iter()
            .take(5)
            .copied()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    if more > 0 {
        shown.push_str(&format!("\n  … {more} more line(s)"));
    }
    shown
}
