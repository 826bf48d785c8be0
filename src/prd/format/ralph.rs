//! snarktank/ralph's `prd.json` and ralph-tui's: `{project | name, description, userStories:
//! [{id, title, description, acceptanceCriteria, priority, passes, notes, dependsOn?}]}`. A
//! story is a criterion, done when `"passes": true`; the lowest `priority` goes first.

use super::json::{Node, Value};
use super::{Parts, checks_verify, criterion, json_error, line_at, parse_json};
use crate::prd::{LineIndex, ParseError};

pub(super) fn read(text: &str) -> Result<Parts, ParseError> {
    let doc = parse_json(text)?;
    let lines = LineIndex::new(text);
    let err = |node: &Node, m: String| json_error(&lines, node.span.start, m);
    let stories = doc
        .get("userStories")
        .and_then(Node::as_array)
        .ok_or_else(|| err(&doc, "`userStories` must be a list of stories".into()))?;
    let mut read: Vec<(f64, crate::prd::Criterion)> = Vec::new();
    for (n, story) in stories.iter().enumerate() {
        let Some(id) = story.get("id").and_then(Node::as_id) else {
            return Err(err(story, format!("story {} has no `id`", n + 1)));
        };
        if let Some((_, first)) = read.iter().find(|(_, c)| c.id == id) {
            return Err(err(
                story,
                format!(
                    "duplicate story id {id}, first defined at line {}",
                    first.line
                ),
            ));
        }
        let passes = story.get("passes").ok_or_else(|| {
            err(
                story,
                format!("{id} has no `passes` (true or false): prdloop marks a story done there"),
            )
        })?;
        let Value::Bool(done) = passes.value else {
            return Err(err(passes, format!("{id}: `passes` must be true or false")));
        };
        let text_of = |key: &str| story.get(key).and_then(Node::as_str).unwrap_or("").trim();
        let title = [text_of("title"), text_of("name")]
            .into_iter()
            .find(|t| !t.is_empty())
            .unwrap_or(text_of("description"));
        let mut c = criterion(id.clone(), title.to_string(), line_at(&lines, story));
        c.checked = done;
        c.marker = passes.span.clone();
        let acceptance: Vec<String> = strings(story.get("acceptanceCriteria"));
        if title != text_of("description") && !text_of("description").is_empty() {
            c.notes.push(text_of("description").to_string());
        }
        c.notes
            .extend(acceptance.iter().map(|a| format!("Acceptance: {a}")));
        for key in ["notes", "completionNotes"] {
            if !text_of(key).is_empty() {
                c.notes.push(format!("{key}: {}", text_of(key)));
            }
        }
        c.verify = checks_verify(&acceptance);
        c.after = strings(story.get("dependsOn"));
        let priority = story
            .get("priority")
            .and_then(|p| match &p.value {
                Value::Number(n) => n.parse::<f64>().ok(),
                _ => None,
            })
            .unwrap_or(f64::INFINITY);
        read.push((priority, c));
    }
    // The lowest priority first; the order written among equals (dependencies come after,
    // from the graph).
    read.sort_by(|a, b| a.0.total_cmp(&b.0));
    let title = ["project", "name"]
        .iter()
        .filter_map(|k| doc.get(k).and_then(Node::as_str))
        .find(|t| !t.trim().is_empty())
        .map(str::to_string);
    Ok(Parts {
        title,
        criteria: read.into_iter().map(|(_, c)| c).collect(),
        context: doc
            .get("description")
            .and_then(Node::as_str)
            .map(str::to_string),
        ..Parts::default()
    })
}

/// A list of strings (numbers as written), or none.
pub(super) fn strings(node: Option<&Node>) -> Vec<String> {
    node.and_then(Node::as_array)
        .map(|a| a.iter().filter_map(Node::as_id).collect())
        .unwrap_or_default()
}
