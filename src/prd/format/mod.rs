//! The task lists prdloop reads besides PAI's PRDs and LifeOS's ISAs, each in its own terms:
//! snarktank/ralph's and ralph-tui's `prd.json`, Taskmaster's `.taskmaster/tasks/tasks.json`,
//! Spec Kit's `specs/NNN-feature/tasks.md` and Kiro's `.kiro/specs/FEATURE/tasks.md`.
//! [`ListFormat`] tells them apart (by path and content), reads each into the one criteria
//! model the loop runs (ids, done markers, order, dependencies, parents, tombstones), and
//! writes a done marker back by changing its bytes and nothing else.

pub mod json;
pub use progress::ProgressLog;
mod progress;
mod ralph;
mod requirements;
mod taskmaster;
mod tasks_md;

use std::path::{Path, PathBuf};

use std::collections::HashMap;

use super::{Criterion, FrontMatter, LineIndex, OtherBox, ParseError, Prd, Warning};

/// Which task list a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum ListFormat {
    /// A PAI PRD or a LifeOS ISA (the front matter's [`super::Format`] says which).
    #[default]
    Markdown,
    /// snarktank/ralph's `prd.json`: `userStories`, done is `"passes": true`.
    Ralph,
    /// ralph-tui's `prd.json`: ralph's shape with `name`, `dependsOn`, `metadata`.
    RalphTui,
    /// Taskmaster's `tasks.json`: tagged `tasks` with `subtasks`, done is `"status": "done"`.
    Taskmaster,
    /// Spec Kit's `tasks.md`: `- [ ] T001 [P] [US1] text` under `## Phase N` headings.
    SpecKit,
    /// Kiro's `tasks.md`: `- [ ] 1. Title`, `- [ ] 1.1 Sub-task`, `_Requirements: 1.1_`.
    Kiro,
}

/// What a reader finds in a text: the parts of a [`super::Prd`] that a format fills.
#[derive(Debug, Default)]
pub(super) struct Parts {
    pub title: Option<String>,
    /// In the order they are to be worked in.
    pub criteria: Vec<Criterion>,
    pub other_boxes: Vec<OtherBox>,
    pub warnings: Vec<Warning>,
    /// What the file says of the whole work (a `description`).
    pub context: Option<String>,
}

/// Files that come with a task list but are none: what to run instead.
const COMPANIONS: [(&str, &str); 7] = [
    ("progress.txt", "prd.json"),
    ("spec.md", "tasks.md"),
    ("requirements.md", "tasks.md"),
    ("design.md", "tasks.md"),
    ("plan.md", "tasks.md"),
    ("research.md", "tasks.md"),
    ("data-model.md", "tasks.md"),
];

impl ListFormat {
    /// The name `plan` shows (markdown files show their front matter's format instead).
    pub fn name(self) -> &'static str {
        match self {
            ListFormat::Markdown => "markdown",
            ListFormat::Ralph => "ralph",
            ListFormat::RalphTui => "ralph-tui",
            ListFormat::Taskmaster => "taskmaster",
            ListFormat::SpecKit => "spec-kit",
            ListFormat::Kiro => "kiro",
        }
    }

    /// Whether its dependencies name ids exactly (no prose among them).
    pub fn exact_ids(self) -> bool {
        !matches!(self, ListFormat::Markdown)
    }

    /// Which task list the file at `path` with `text` is, or why it is none prdloop runs
    /// (a companion file given on its own, JSON of another shape): the message names the file.
    pub fn detect(path: &Path, text: &str) -> Result<ListFormat, String> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        if let Some((_, run)) = COMPANIONS.iter().find(|(n, _)| *n == name)
            && is_companion(path, &name)
        {
            let beside = path.with_file_name(run);
            return Err(format!(
                "{} is not a task list: it is read as context beside its {run}; run {}",
                path.display(),
                beside.display()
            ));
        }
        if name.ends_with(".json") {
            return detect_json(path, text);
        }
        if name == "tasks.md" {
            let dirs: Vec<String> = path
                .parent()
                .into_iter()
                .flat_map(Path::components)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let n = dirs.len();
            if n >= 3 && dirs[n - 3] == ".kiro" && dirs[n - 2] == "specs" {
                return Ok(ListFormat::Kiro);
            }
            if n >= 2 && dirs[n - 2] == "specs" {
                return Ok(ListFormat::SpecKit);
            }
            if let Some(f) = tasks_md::detect(text) {
                return Ok(f);
            }
        }
        Ok(ListFormat::Markdown)
    }

    /// Reads `text` as this format (not [`ListFormat::Markdown`], which `Prd::parse` reads).
    pub(super) fn read(self, text: &str) -> Result<Parts, ParseError> {
        match self {
            ListFormat::Markdown => unreachable!("Prd::parse reads markdown PRDs"),
            ListFormat::Ralph | ListFormat::RalphTui => ralph::read(text),
            ListFormat::Taskmaster => taskmaster::read(text),
            ListFormat::SpecKit => tasks_md::read_spec_kit(text),
            ListFormat::Kiro => tasks_md::read_kiro(text),
        }
    }

    /// The text a done marker is written with: the box's character, `true`/`false`, or
    /// Taskmaster's status string.
    pub(super) fn marker(self, checked: bool) -> &'static str {
        match (self, checked) {
            (ListFormat::Ralph | ListFormat::RalphTui, true) => "true",
            (ListFormat::Ralph | ListFormat::RalphTui, false) => "false",
            (ListFormat::Taskmaster, true) => "\"done\"",
            (ListFormat::Taskmaster, false) => "\"pending\"",
            (_, true) => "x",
            (_, false) => " ",
        }
    }

    /// The files beside a task list at `path` that its workers and verifier read as context:
    /// Kiro's requirements.md and design.md, Spec Kit's spec.md and plan.md, ralph's
    /// progress.txt. Only those that exist.
    pub fn context_files(self, path: &Path) -> Vec<PathBuf> {
        let names: &[&str] = match self {
            ListFormat::Kiro => &["requirements.md", "design.md"],
            ListFormat::SpecKit => &["spec.md", "plan.md"],
            ListFormat::Ralph | ListFormat::RalphTui => &["progress.txt"],
            ListFormat::Markdown | ListFormat::Taskmaster => &[],
        };
        names
            .iter()
            .map(|n| path.with_file_name(n))
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
            .collect()
    }

    /// ralph's `progress.txt` beside a `prd.json`: the log each attempt is appended to.
    pub fn progress_log(self, path: &Path) -> Option<PathBuf> {
        matches!(self, ListFormat::Ralph | ListFormat::RalphTui)
            .then(|| path.with_file_name("progress.txt"))
    }
}

/// Whether a file named like a companion is one: `progress.txt` always; the others when a
/// `tasks.md` sits beside them or they are in a `specs` folder.
fn is_companion(path: &Path, name: &str) -> bool {
    if name == "progress.txt" {
        return true;
    }
    let in_specs = path
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .is_some_and(|n| n == "specs");
    in_specs || path.with_file_name("tasks.md").is_file()
}

fn detect_json(path: &Path, text: &str) -> Result<ListFormat, String> {
    let doc = json::parse(text).map_err(|e| {
        let lines = LineIndex::new(text);
        format!(
            "{}:{}: not valid JSON: {}",
            path.display(),
            lines.line_of(e.offset),
            e.message
        )
    })?;
    if doc.get("userStories").is_some() {
        let tui = doc.get("name").is_some()
            || doc.get("metadata").is_some()
            || doc
                .get("userStories")
                .and_then(json::Node::as_array)
                .is_some_and(|s| s.iter().any(|u| u.get("completionNotes").is_some()));
        return Ok(if tui {
            ListFormat::RalphTui
        } else {
            ListFormat::Ralph
        });
    }
    if taskmaster::tasks_of(&doc).is_some() {
        return Ok(ListFormat::Taskmaster);
    }
    Err(format!(
        "{} is JSON but no task list prdloop reads: ralph's prd.json has `userStories`, Taskmaster's tasks.json has `tasks` (under a tag such as `master`)",
        path.display()
    ))
}

/// The PRD of a text read as `list` (not markdown): its parts, indexed, parents linked;
/// a duplicate id is refused at its line.
pub(super) fn assemble(text: String, list: ListFormat) -> Result<Prd, ParseError> {
    let parts = list.read(&text)?;
    let mut prd = Prd {
        span: None,
        front: FrontMatter::defaults(),
        criteria: parts.criteria,
        warnings: parts.warnings,
        title: parts.title,
        context: parts.context.filter(|c| !c.trim().is_empty()),
        list,
        index: HashMap::new(),
        other_boxes: parts.other_boxes,
        isa_body: false,
        fog: Vec::new(),
        misplaced: None,
        text,
    };
    for (i, c) in prd.criteria.iter().enumerate() {
        if let Some(&first) = prd.index.get(&c.id) {
            return Err(ParseError {
                line: c.line,
                message: format!(
                    "duplicate id {}, first defined at line {}",
                    c.id, prd.criteria[first].line
                ),
            });
        }
        prd.index.insert(c.id.clone(), i);
    }
    prd.link_splits();
    Ok(prd)
}

/// A JSON value's line, for messages and `plan`.
pub(super) fn line_at(lines: &LineIndex, node: &json::Node) -> usize {
    lines.line_of(node.span.start)
}

/// A reader's error at a JSON value.
pub(super) fn json_error(lines: &LineIndex, at: usize, message: String) -> ParseError {
    ParseError {
        line: lines.line_of(at),
        message,
    }
}

/// Parses a JSON text, the error at its line.
pub(super) fn parse_json(text: &str) -> Result<json::Node, ParseError> {
    json::parse(text).map_err(|e| {
        json_error(
            &LineIndex::new(text),
            e.offset,
            format!("not valid JSON: {}", e.message),
        )
    })
}

/// A criterion as a format reads it, the markdown-only parts left empty.
pub(super) fn criterion(id: String, description: String, line: usize) -> Criterion {
    Criterion {
        domain: id.clone(),
        id,
        description,
        verify: None,
        checked: false,
        line,
        anti: false,
        antecedent: false,
        leaves: Vec::new(),
        after: Vec::new(),
        inline_probe: None,
        probe: None,
        notes: Vec::new(),
        optional: false,
        marker: 0..0,
    }
}

/// The Verify method of a format's check strings (acceptance criteria, a `testStrategy`):
/// a command when every string names one under the Verify rules
/// ([`super::verify::named_check`]), joined with `&&`; else the agent's, with why.
pub(super) fn checks_verify(strings: &[String]) -> Option<super::Verify> {
    if strings.is_empty() {
        return None;
    }
    let method = strings.join("; ");
    let mut codes = Vec::new();
    for s in strings {
        match super::verify::named_check(s) {
            Ok(code) => codes.push(code),
            Err(why) => {
                return Some(super::Verify {
                    kind: "Test".into(),
                    method,
                    code: None,
                    not_single: Some(format!("`{}` {why}: the agent checks it", s.trim())),
                });
            }
        }
    }
    // Several commands run as one only when none holds shell operators of its own.
    if codes.len() > 1
        && let Some(c) = codes.iter().find(|c| c.contains([';', '|', '&', '\n']))
    {
        return Some(super::Verify {
            kind: "Test".into(),
            method,
            code: None,
            not_single: Some(format!(
                "`{c}` holds shell operators and cannot be joined with the story's other commands: the agent checks them"
            )),
        });
    }
    Some(super::Verify {
        kind: "Test".into(),
        method,
        code: Some(codes.join(" && ")),
        not_single: None,
    })
}

#[cfg(test)]
mod tests;

/// How much of a context file a prompt holds (its end, for an append-only log).
const CONTEXT_CAP: usize = 64 * 1024;

/// What a worker and the verifier read beside a criterion in these formats: its notes
/// (acceptance criteria, details, test strategy), then the files its format links to
/// ([`ListFormat::context_files`]), each under its own heading; empty for a markdown PRD.
pub fn background(prd: &super::Prd, path: &Path, c: &Criterion) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for n in &c.notes {
        let _ = writeln!(out, "- {n}");
    }
    if prd.list_format() == ListFormat::Kiro {
        out.push_str(&ears_checks(path, c));
    }
    for file in prd.list_format().context_files(path) {
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        // An append-only log is read from its end, the others from their start.
        let log = name == "progress.txt";
        let Ok((text, cut)) = read_capped(&file, log) else {
            continue;
        };
        let cut = match (cut, log) {
            (false, _) => "",
            (true, true) => " (its last 64 KiB)",
            (true, false) => " (its first 64 KiB)",
        };
        let _ = writeln!(out, "\n## {name}, beside the task list{cut}\n");
        let _ = writeln!(out, "{}", text.trim_end());
    }
    out
}

/// What a Kiro task's `_Requirements:_` name in the `requirements.md` beside it, under its
/// own heading: the EARS criteria to make true and to check, one a line (a ref the file does
/// not hold said so); empty when the task names none or there is no such file.
fn ears_checks(path: &Path, c: &Criterion) -> String {
    use std::fmt::Write;
    let refs = requirements::refs_of(&c.notes);
    let file = path.with_file_name("requirements.md");
    if refs.is_empty() || !std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file()) {
        return String::new();
    }
    let Ok((text, _)) = read_capped(&file, false) else {
        return String::new();
    };
    let mut out = String::from(
        "\n## What to check: the acceptance criteria its Requirements name (requirements.md)\n\n",
    );
    for (r, found) in requirements::resolve(&text, &refs) {
        if found.is_empty() {
            let _ = writeln!(out, "- {r}: not in requirements.md");
        }
        for f in found {
            let _ = writeln!(out, "- {f}");
        }
    }
    out
}

/// At most [`CONTEXT_CAP`] bytes of a file, from its end or its start (never more read), and
/// whether it was cut.
fn read_capped(path: &Path, from_end: bool) -> std::io::Result<(String, bool)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let cap = CONTEXT_CAP as u64;
    if from_end && len > cap {
        f.seek(SeekFrom::Start(len - cap))?;
    }
    let mut bytes = Vec::new();
    f.take(cap).read_to_end(&mut bytes)?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), len > cap))
}
