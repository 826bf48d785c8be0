//! The YAML front matter: where it is, and its typed fields, read through a real YAML parser
//! in either of PAI's formats (v3 and v4). Edits live in `keys`, rendering in `value`.

mod keys;
mod value;

use std::ops::Range;

use serde_json::Value as Json;

use super::Warning;
use keys::scan_keys;
pub use keys::set_key;
pub use value::Value;

/// Where the front matter sits in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The YAML text between the two `---` lines (byte range in the file).
    pub content: Range<usize>,
    /// Byte offset where the closing `---` line starts.
    pub close_start: usize,
    /// Byte offset of the first body byte (after the closing line and its line ending).
    pub body_start: usize,
    /// The line ending used by the opening line (`\n` or `\r\n`).
    pub eol: &'static str,
}

/// An error in the front matter, with the 1-based line it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FmError {
    pub line: usize,
    pub message: String,
}

/// Finds the front matter: a `---` line at the very start (after an optional BOM), closed by a
/// `---` line. `Ok(None)` when the file has none.
pub fn locate(text: &str) -> Result<Option<Span>, FmError> {
    let start = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let rest = &text[start..];
    let eol = if rest.starts_with("---\r\n") {
        "\r\n"
    } else if rest.starts_with("---\n") {
        "\n"
    } else {
        return Ok(None);
    };
    let content_start = start + 3 + eol.len();
    let mut pos = content_start;
    while pos < text.len() {
        let line_end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
        let line = text[pos..line_end].trim_end_matches('\r');
        if line == "---" {
            let body_start = (line_end + 1).min(text.len());
            return Ok(Some(Span {
                content: content_start..pos,
                close_start: pos,
                body_start,
                eol,
            }));
        }
        pos = line_end + 1;
    }
    Err(FmError {
        line: 1,
        message: "the front matter opened here is never closed by a `---` line".into(),
    })
}

/// Which of PAI's PRD formats the front matter is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// PAI v3 (`algorithm new`): `id`, `status`, `loopStatus`, `verification_summary`...
    #[default]
    V3,
    /// PAI v4 ("PRD Format Specification v2.0"): `task`, `slug`, `effort`, `phase`,
    /// `progress`, `mode`, `started`, `updated`.
    V4,
    /// LifeOS's ISA (ISAFormat v2.18.0): v4's keys, of which only `phase` (a lifecycle value)
    /// and `progress` are required; never v3's keys. Told from v4 by the body (see
    /// `Prd::parse`) or by having `phase`/`progress` without `task`/`slug`.
    Isa,
}

impl Format {
    /// The format rule from the keys: v4 when the front matter has a `task` or a `slug` key
    /// and no `id` key (v4 has no `id`, v3 has neither `task` nor `slug`); an ISA when it has
    /// `phase` or `progress` and none of `id`, `task`, `slug`, `status`, `loopStatus`; v3
    /// otherwise, which includes a file with no front matter. A key counts when present,
    /// whatever its value.
    pub fn detect(has_key: impl Fn(&str) -> bool) -> Format {
        if has_key("id") {
            Format::V3
        } else if has_key("task") || has_key("slug") {
            Format::V4
        } else if (has_key("phase") || has_key("progress"))
            && !has_key("status")
            && !has_key("loopStatus")
        {
            Format::Isa
        } else {
            Format::V3
        }
    }

    /// The name `status --json` and messages use.
    pub fn name(self) -> &'static str {
        match self {
            Format::V3 => "v3",
            Format::V4 => "v4",
            Format::Isa => "isa",
        }
    }
}

/// LifeOS's lifecycle values of `phase` (its old station names aside).
pub fn is_lifecycle_phase(phase: &str) -> bool {
    ["starting", "scoping", "marking", "climbing"]
        .iter()
        .any(|p| phase.trim().eq_ignore_ascii_case(p))
}

/// v3 `status` values that end a PRD's life, as real files write them: prdloop leaves such a
/// file alone as it does a `COMPLETE` one.
pub const TERMINAL_STATUSES: [&str; 9] = [
    "COMPLETE",
    "COMPLETED",
    "DONE",
    "ARCHIVED",
    "CANCELLED",
    "CANCELED",
    "ABANDONED",
    "SUPERSEDED",
    "CLOSED",
];

/// Typed view of the front matter with PAI's defaults for missing keys. Fields of both formats
/// are read whatever the format; `format` says which one the file is written in.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct FrontMatter {
    pub format: Format,
    /// v3: the PRD's id (`PRD-<YYYYMMDD>-<slug>`).
    pub id: Option<String>,
    pub status: String,
    pub mode: Option<String>,
    /// v3 `effort_level` (or the older `sla_tier`); else v4 `effort`; else `Standard`.
    pub effort_level: String,
    pub created: Option<String>,
    pub updated: Option<String>,
    /// Absent is 0 (v4 omits it on the first run).
    pub iteration: u64,
    #[serde(rename = "maxIterations")]
    pub max_iterations: u64,
    #[serde(rename = "loopStatus")]
    pub loop_status: Option<String>,
    pub last_phase: Option<String>,
    pub failing_criteria: Vec<String>,
    pub verification_summary: Option<String>,
    pub parent: Option<String>,
    pub children: Vec<String>,
    /// v4: the title (up to 60 characters).
    pub task: Option<String>,
    /// v4: `YYYYMMDD-HHMMSS_kebab-description`, the id and the folder name.
    pub slug: Option<String>,
    /// v4: standard, extended, advanced, deep or comprehensive.
    pub effort: Option<String>,
    /// v4: observe, think, plan, build, execute, verify, learn or complete.
    pub phase: Option<String>,
    /// v4: `M/N`, ticked criteria over total, as written.
    pub progress: Option<String>,
    /// v4: when the work started (ISO 8601).
    pub started: Option<String>,
    /// The issue tracker `prdloop import` read its criteria from (`github:OWNER/REPO`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracker: Option<String>,
}

pub const DEFAULT_MAX_ITERATIONS: u64 = 128;

impl FrontMatter {
    /// Whether the PRD says its work is over: v3 `status: COMPLETE` or another terminal
    /// status (`ARCHIVED`...), v4/ISA `phase: complete`.
    pub fn is_complete(&self) -> bool {
        match self.format {
            Format::V3 => self.terminal_status().is_some(),
            Format::V4 | Format::Isa => {
                self.phase
                    .as_deref()
                    .is_some_and(|p| p.trim().eq_ignore_ascii_case("complete"))
                    || self.terminal_status().is_some()
            }
        }
    }

    /// The `status` value, when it is one of [`TERMINAL_STATUSES`] (any case).
    pub fn terminal_status(&self) -> Option<&str> {
        let s = self.status.trim();
        TERMINAL_STATUSES
            .iter()
            .any(|t| t.eq_ignore_ascii_case(s))
            .then_some(s)
    }

    pub fn defaults() -> Self {
        FrontMatter {
            status: "DRAFT".into(),
            effort_level: "Standard".into(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            ..Default::default()
        }
    }

    /// The PRD's id: `id` in v3, `slug` in v4.
    pub fn id(&self) -> Option<&str> {
        match self.format {
            Format::V3 => self.id.as_deref(),
            Format::V4 | Format::Isa => self.slug.as_deref(),
        }
    }
}

/// The typed fields and the warnings about how they are written.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub front: FrontMatter,
    pub warnings: Vec<Warning>,
}

/// Reads the typed fields. Unknown keys are ignored here (and kept in the file). A key set
/// more than once is read as PAI's line reader reads it: the last value counts, with a warning.
pub fn read(text: &str, span: &Span) -> Result<Read, FmError> {
    let yaml = &text[span.content.clone()];
    let first_line = text[..span.content.start].matches('\n').count() + 1;
    let mut fm = FrontMatter::defaults();
    if yaml.trim().is_empty() {
        return Ok(Read {
            front: fm,
            warnings: Vec::new(),
        });
    }
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    let doc: Json = serde_saphyr::from_str_with_options(yaml, options).map_err(|e| {
        let msg = e.to_string();
        FmError {
            line: first_line + yaml_error_line(&msg).unwrap_or(1) - 1,
            message: format!("the front matter is not valid YAML: {}", yaml_problem(&msg)),
        }
    })?;
    let map = match doc {
        Json::Object(map) => map,
        Json::Null => {
            return Ok(Read {
                front: fm,
                warnings: Vec::new(),
            });
        }
        _ => {
            return Err(FmError {
                line: first_line,
                message: "the front matter must be a YAML mapping of `key: value` lines".into(),
            });
        }
    };
    let keys = scan_keys(text, span);
    let warnings = repeated_keys(&keys);
    // The last occurrence is the one that counts.
    let line_of = |key: &str| {
        keys.iter()
            .rev()
            .find(|k| k.key == key)
            .map_or(first_line, |k| k.line)
    };
    let text_of = |key: &str| map.get(key).and_then(scalar_text);
    fm.format = Format::detect(|k| map.contains_key(k));
    fm.id = text_of("id");
    if let Some(s) = text_of("status") {
        fm.status = s;
    }
    fm.mode = text_of("mode");
    fm.effort = text_of("effort");
    if let Some(s) = text_of("effort_level")
        .or_else(|| text_of("sla_tier"))
        .or_else(|| fm.effort.clone())
    {
        fm.effort_level = s;
    }
    fm.created = text_of("created");
    fm.updated = text_of("updated");
    for (key, slot) in [
        ("iteration", &mut fm.iteration),
        ("maxIterations", &mut fm.max_iterations),
    ] {
        match map.get(key) {
            None | Some(Json::Null) => {}
            Some(v) => {
                *slot = whole_number(v).ok_or_else(|| FmError {
                    line: line_of(key),
                    message: format!(
                        "`{key}` must be a whole number, found `{}`",
                        scalar_text(v).unwrap_or_else(|| v.to_string())
                    ),
                })?;
            }
        }
    }
    fm.loop_status = text_of("loopStatus");
    fm.last_phase = text_of("last_phase");
    fm.failing_criteria = list_of(map.get("failing_criteria"));
    fm.verification_summary = text_of("verification_summary");
    fm.parent = text_of("parent");
    fm.children = list_of(map.get("children"));
    fm.task = text_of("task");
    fm.slug = text_of("slug");
    fm.phase = text_of("phase");
    fm.progress = text_of("progress");
    fm.started = text_of("started");
    fm.tracker = text_of("tracker");
    Ok(Read {
        front: fm,
        warnings,
    })
}

/// One warning per key written more than once, at the line of its last occurrence.
fn repeated_keys(keys: &[keys::KeyLine]) -> Vec<Warning> {
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].iter().any(|e| e.key == k.key) {
            continue; // reported with its first occurrence
        }
        let lines: Vec<usize> = keys[i..]
            .iter()
            .filter(|e| e.key == k.key)
            .map(|e| e.line)
            .collect();
        let [rest @ .., last] = lines.as_slice() else {
            continue;
        };
        if rest.is_empty() {
            continue;
        }
        let times = match lines.len() {
            2 => "twice".to_string(),
            n => format!("{n} times"),
        };
        let listed: Vec<String> = rest.iter().map(usize::to_string).collect();
        out.push(Warning {
            line: *last,
            message: format!(
                "`{}` is set {times} (lines {} and {last}); the last value counts",
                k.key,
                listed.join(", ")
            ),
        });
    }
    out
}

/// The problem itself from a YAML error message: its first line, without the `error: line N
/// column M:` prefix (its line counts from the YAML, not the file, and the caller names the
/// file's line) and without hints meant for programs using the parser ("set
/// DuplicateKeyPolicy in Options if acceptable"): they would mislead the person editing a PRD.
fn yaml_problem(msg: &str) -> String {
    let mut problem = msg.lines().next().unwrap_or("").trim();
    problem = problem
        .strip_prefix("error:")
        .unwrap_or(problem)
        .trim_start();
    if let Some(rest) = problem.strip_prefix("line ")
        && let Some(colon) = rest.find(": ")
        && rest[..colon]
            .split(" column ")
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    {
        problem = &rest[colon + 2..];
    }
    let mut end = problem.len();
    let mut pos = 0;
    for clause in problem.split_inclusive([',', ';', '.']) {
        let c = clause.trim_start();
        let hint = ["set ", "use ", "If you", "if acceptable"]
            .iter()
            .any(|p| c.starts_with(p))
            || ["Options", "Policy", "from_str"]
                .iter()
                .any(|w| c.contains(w));
        if hint && pos > 0 {
            end = pos;
            break;
        }
        pos += clause.len();
    }
    problem[..end]
        .trim_end_matches([',', ';', '.', ' '])
        .to_string()
}

fn yaml_error_line(msg: &str) -> Option<usize> {
    // serde-saphyr reports "line N" (1-based within the YAML text).
    let idx = msg.find("line ")?;
    let digits: String = msg[idx + 5..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok().filter(|n| *n >= 1)
}

fn scalar_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn whole_number(v: &Json) -> Option<u64> {
    match v {
        Json::Number(n) => n.as_u64(),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn list_of(v: Option<&Json>) -> Vec<String> {
    match v {
        Some(Json::Array(items)) => items.iter().filter_map(scalar_text).collect(),
        Some(Json::String(s)) if !s.trim().is_empty() => s
            .split(',')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether a front matter edit says the work is done.
pub fn marks_complete(key: &str, value: &Value) -> bool {
    let (Value::Str(v) | Value::Quoted(v)) = value else {
        return false;
    };
    match key {
        "status" => v.trim().eq_ignore_ascii_case("COMPLETE"),
        "phase" => v.trim().eq_ignore_ascii_case("complete"),
        _ => false,
    }
}

/// The text of a PRD's `prdloop:` map as written (each block of it, if the key repeats), for
/// telling whether an edit changed it; `None` without one.
pub fn prdloop_map_text(text: &str) -> Option<String> {
    let span = locate(text).ok()??;
    let yaml = &text[span.content.clone()];
    let mut out = String::new();
    let mut inside = false;
    for line in yaml.lines() {
        let top_level = line.starts_with(|c: char| !c.is_whitespace() && c != '#');
        if top_level {
            inside = line
                .strip_prefix("prdloop")
                .is_some_and(|r| r.trim_start().starts_with(':'));
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prds_map_text_is_its_block_only() {
        let prd = "---\nprd: true\nprdloop:\n  sandbox: off\n  # why\n  setup: make\nstatus: OPEN\n---\n\n- [ ] x\n";
        assert_eq!(
            prdloop_map_text(prd).as_deref(),
            Some("prdloop:\n  sandbox: off\n  # why\n  setup: make\n")
        );
        let flow = "---\nprdloop: {timeout: 1m}\nid: x\n---\n";
        assert_eq!(
            prdloop_map_text(flow).as_deref(),
            Some("prdloop: {timeout: 1m}\n")
        );
        assert_eq!(prdloop_map_text("---\nid: x\n---\n"), None);
        assert_eq!(prdloop_map_text("no front matter\n"), None);
    }

    #[test]
    fn rendered_values_read_back() {
        for s in [
            "null",
            "12",
            "a: b",
            "x # y",
            "[a]",
            "'q'",
            "\"d\"",
            "tab\there",
            "ü",
        ] {
            let t = format!("---\nid: {}\n---\n", Value::str(s).render());
            let span = locate(&t).unwrap().unwrap();
            assert_eq!(read(&t, &span).unwrap().front.id.as_deref(), Some(s), "{t}");
        }
        let t = format!(
            "---\nfailing_criteria: {}\n---\n",
            Value::List(vec!["a,b".into(), "c".into()]).render()
        );
        let span = locate(&t).unwrap().unwrap();
        assert_eq!(
            read(&t, &span).unwrap().front.failing_criteria,
            vec!["a,b", "c"]
        );
    }

    #[test]
    fn unclosed_front_matter_is_an_error() {
        assert_eq!(locate("---\nid: x\n").unwrap_err().line, 1);
        assert_eq!(locate("# no front matter\n").unwrap(), None);
    }

    #[test]
    fn bad_iteration_names_its_line() {
        let t = "---\nid: x\niteration: abc\n---\n";
        let span = locate(t).unwrap().unwrap();
        let e = read(t, &span).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("iteration"), "{}", e.message);
    }

    #[test]
    fn yaml_errors_lose_position_prefix_and_library_hints() {
        assert_eq!(
            yaml_problem("error: line 3 column 7: illegal placement of ':' indicator\n --> x"),
            "illegal placement of ':' indicator"
        );
        assert_eq!(
            yaml_problem(
                "error: line 2 column 1: duplicate mapping key: a, set DuplicateKeyPolicy in Options if acceptable"
            ),
            "duplicate mapping key: a"
        );
        assert_eq!(
            yaml_problem("multiple YAML documents detected; use from_str_multidoc"),
            "multiple YAML documents detected"
        );
        assert_eq!(yaml_problem("unclosed quote"), "unclosed quote");
    }

    #[test]
    fn broken_yaml_names_the_file_line() {
        let t = "---\nid: x\nchildren: [a, b\nstatus: DRAFT\n---\n";
        let e = read(t, &locate(t).unwrap().unwrap()).unwrap_err();
        assert_eq!(e.line, 4);
        assert_eq!(
            e.message,
            "the front matter is not valid YAML: illegal placement of ':' indicator"
        );
    }

    #[test]
    fn a_repeated_key_warns_and_the_last_value_counts() {
        let t = "---\ntask: T\nphase: build\nslug: s\nphase: verify\nphase: learn\nmode: loop\nmode: loop\n---\n";
        let r = read(t, &locate(t).unwrap().unwrap()).unwrap();
        assert_eq!(r.front.phase.as_deref(), Some("learn"));
        let w: Vec<(usize, &str)> = r
            .warnings
            .iter()
            .map(|w| (w.line, w.message.as_str()))
            .collect();
        assert_eq!(
            w,
            [
                (
                    6,
                    "`phase` is set 3 times (lines 3, 5 and 6); the last value counts"
                ),
                (
                    8,
                    "`mode` is set twice (lines 7 and 8); the last value counts"
                )
            ]
        );
    }

    #[test]
    fn format_rule() {
        let fmt = |keys: &[&str]| Format::detect(|k| keys.contains(&k));
        assert_eq!(fmt(&["task", "slug", "phase"]), Format::V4);
        assert_eq!(fmt(&["slug"]), Format::V4);
        assert_eq!(fmt(&["task"]), Format::V4);
        assert_eq!(fmt(&["task", "id"]), Format::V3);
        assert_eq!(fmt(&["id", "status"]), Format::V3);
        assert_eq!(fmt(&[]), Format::V3);
        assert_eq!(fmt(&["phase", "progress"]), Format::Isa);
        assert_eq!(fmt(&["progress"]), Format::Isa);
        assert_eq!(fmt(&["phase", "status"]), Format::V3);
    }
}
