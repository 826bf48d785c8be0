//! Taskmaster's `.taskmaster/tasks/tasks.json`: `{TAG: {tasks: [{id, title, description,
//! details, testStrategy, priority, dependencies, status, subtasks: [{id, …, status}]}]}}`
//! (or, before tags, `{tasks: [...]}`). A task or subtask is a criterion, subtasks addressed
//! `<task>.<sub>`; done is `"status": "done"`, `cancelled` a tombstone, `deferred` set aside;
//! a task with subtasks is their parent. High priority goes first.

use super::json::{Node, Value};
use super::{Parts, checks_verify, criterion, json_error, line_at, parse_json};
use crate::prd::{Criterion, LineIndex, OtherBox, ParseError, Warning};

/// The tag read when the file has several (Taskmaster's default).
const DEFAULT_TAG: &str = "master";

/// The task list of a Taskmaster file, and its tag: the root's `tasks`, or the `master` tag's
/// (else the first tag's).
pub(super) fn tasks_of(doc: &Node) -> Option<(Option<&str>, &[Node])> {
    if let Some(tasks) = doc.get("tasks").and_then(Node::as_array) {
        return Some((None, tasks));
    }
    let tags = doc.as_object()?;
    fn tasks(n: &Node) -> Option<&[Node]> {
        n.get("tasks").and_then(Node::as_array)
    }
    tags.iter()
        .find(|(k, v)| k == DEFAULT_TAG && tasks(v).is_some())
        .or_else(|| tags.iter().find(|(_, v)| tasks(v).is_some()))
        .and_then(|(k, v)| Some((Some(k.as_str()), tasks(v)?)))
}

pub(super) fn read(text: &str) -> Result<Parts, ParseError> {
    let doc = parse_json(text)?;
    let lines = LineIndex::new(text);
    let Some((tag, tasks)) = tasks_of(&doc) else {
        return Err(json_error(
            &lines,
            0,
            "no `tasks` list (at the top, or under a tag such as `master`)".into(),
        ));
    };
    let mut parts = Parts::default();
    if let Some(tag) = tag {
        let others: Vec<&str> = doc
            .as_object()
            .unwrap_or_default()
            .iter()
            .filter(|(k, v)| k != tag && v.get("tasks").is_some())
            .map(|(k, _)| k.as_str())
            .collect();
        if !others.is_empty() {
            parts.warnings.push(Warning {
                line: 1,
                message: format!(
                    "only the tag `{tag}` is read; the tasks of {} are not",
                    others.join(", ")
                ),
            });
        }
        parts.context = doc
            .get(tag)
            .and_then(|t| t.get("metadata"))
            .and_then(|m| m.get("description"))
            .and_then(Node::as_str)
            .map(str::to_string);
    }
    let mut groups: Vec<(u8, Vec<Criterion>)> = Vec::new();
    let mut seen: Vec<(String, usize)> = Vec::new();
    for task in tasks {
        let id = id_of(task, &lines)?;
        let mut group = Vec::new();
        let rank = match task.get("priority").and_then(Node::as_str) {
            Some(p) if p.eq_ignore_ascii_case("high") => 0,
            Some(p) if p.eq_ignore_ascii_case("low") => 2,
            _ => 1,
        };
        let deps = |node: &Node, sibling_of: Option<&str>| -> Vec<String> {
            super::ralph::strings(node.get("dependencies"))
                .into_iter()
                .map(|d| match sibling_of {
                    Some(p) if d.bytes().all(|b| b.is_ascii_digit()) => format!("{p}.{d}"),
                    _ => d,
                })
                .collect()
        };
        entry(
            task,
            id.clone(),
            &id,
            deps(task, None),
            &lines,
            &mut parts,
            &mut group,
            &mut seen,
        )?;
        for sub in task
            .get("subtasks")
            .and_then(Node::as_array)
            .unwrap_or_default()
        {
            let sub_id = format!("{id}.{}", id_of(sub, &lines)?);
            let after = deps(sub, Some(&id));
            entry(
                sub, sub_id, &id, after, &lines, &mut parts, &mut group, &mut seen,
            )?;
        }
        groups.push((rank, group));
    }
    groups.sort_by_key(|(rank, _)| *rank);
    parts.criteria = groups.into_iter().flat_map(|(_, g)| g).collect();
    parts.title = tag.map(|t| format!("Taskmaster tasks ({t})"));
    Ok(parts)
}

fn id_of(node: &Node, lines: &LineIndex) -> Result<String, ParseError> {
    node.get("id")
        .and_then(Node::as_id)
        .filter(|id| !id.is_empty() && !id.contains(char::is_whitespace))
        .ok_or_else(|| json_error(lines, node.span.start, "a task without an `id`".into()))
}

/// One task or subtask: a criterion, or (cancelled, deferred) a box that is not worked on.
#[allow(clippy::too_many_arguments)]
fn entry(
    node: &Node,
    id: String,
    domain: &str,
    after: Vec<String>,
    lines: &LineIndex,
    parts: &mut Parts,
    group: &mut Vec<Criterion>,
    seen: &mut Vec<(String, usize)>,
) -> Result<(), ParseError> {
    let line = line_at(lines, node);
    if let Some((_, first)) = seen.iter().find(|(s, _)| *s == id) {
        return Err(ParseError {
            line,
            message: format!("duplicate task id {id}, first defined at line {first}"),
        });
    }
    seen.push((id.clone(), line));
    let status = node.get("status").ok_or_else(|| ParseError {
        line,
        message: format!("task {id} has no `status`: prdloop marks a task done there"),
    })?;
    let Value::String(state) = &status.value else {
        return Err(ParseError {
            line: line_at(lines, status),
            message: format!("task {id}: `status` must be a string such as \"pending\""),
        });
    };
    let text_of = |key: &str| node.get(key).and_then(Node::as_str).unwrap_or("").trim();
    let title = text_of("title").to_string();
    let state = state.trim().to_ascii_lowercase();
    if state == "cancelled" || state == "deferred" {
        if state == "deferred" {
            parts.warnings.push(Warning {
                line,
                message: format!(
                    "task {id} is deferred: it is not worked on, what needs it waits, and the list is not complete while it is"
                ),
            });
        }
        parts.other_boxes.push(OtherBox {
            line,
            id: Some(id),
            checked: false,
            tombstone: state == "cancelled",
            deferred: state == "deferred",
            text: title,
        });
        return Ok(());
    }
    let mut c = criterion(id, title, line);
    c.domain = domain.to_string();
    c.checked = state == "done";
    c.marker = status.span.clone();
    c.after = after;
    for key in ["description", "details", "testStrategy"] {
        if !text_of(key).is_empty() {
            c.notes.push(format!("{key}: {}", text_of(key)));
        }
    }
    let strategy = text_of("testStrategy");
    if !strategy.is_empty() {
        c.verify = checks_verify(&[strategy.to_string()]);
    }
    group.push(c);
    Ok(())
}
