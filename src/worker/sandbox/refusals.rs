//! What a sandboxed worker's output tells of the writes the sandbox refused it
//! ([`Refusals`]), and the warning that says so ([`Refused`]).

use std::path::Path;

use super::rules::Rules;

/// Refused writes a sandboxed worker's output tells of: lines that say "Permission denied",
/// `EACCES`, `os error 13` or "Read-only file system" and name an absolute path outside the
/// worker's writable set. A heuristic: a program that fails silently is not seen, and a
/// denial for another reason (a file's own permissions) that names such a path is counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refusals {
    /// Lines seen.
    pub lines: u32,
    /// The paths they name, first seen first, each once (at most [`MAX_PATHS`]).
    pub paths: Vec<String>,
    /// The connections its proxy refused (`--network agent`).
    pub net: crate::worker::network::NetRefusals,
}

/// The most paths [`Refusals`] keeps.
pub const MAX_PATHS: usize = 8;

const DENIED: &[&str] = &[
    "permission denied",
    "eacces",
    "os error 13",
    "read-only file system",
];

impl Refusals {
    /// Looks at one line of output.
    pub fn see(&mut self, rules: &Rules, line: &[u8]) {
        if line.len() > 64 * 1024 {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let lower = text.to_ascii_lowercase();
        if !DENIED.iter().any(|d| lower.contains(d)) {
            return;
        }
        let outside: Vec<&str> = paths_in(&text)
            .filter(|p| !rules.allows(Path::new(p)))
            .collect();
        if outside.is_empty() {
            return;
        }
        self.lines += 1;
        for p in outside {
            if self.paths.len() < MAX_PATHS && !self.paths.iter().any(|q| q == p) {
                self.paths.push(p.to_string());
            }
        }
    }

    /// The warning for the attempt, when there were any.
    pub fn warning(&self, id: &str) -> Option<Refused> {
        (self.lines > 0).then(|| Refused {
            id: id.to_string(),
            lines: self.lines,
            paths: self.paths.clone(),
        })
    }
}

/// The warning that the sandbox refused criterion `id`'s worker writes outside its lane: how
/// many lines of its output say so, and the paths they name. Its text is its `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub id: String,
    pub lines: u32,
    pub paths: Vec<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the sandbox refused {}'s worker writes outside its lane ({} line(s) of its output say so: {})",
            self.id,
            self.lines,
            self.paths.join(", ")
        )
    }
}

/// The absolute paths a line of text names: runs of path characters that start with `/`
/// (quotes, backquotes, colons, commas, brackets, whitespace and JSON escapes end them).
fn paths_in(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\''
                    | '`'
                    | ':'
                    | ','
                    | '('
                    | ')'
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '\\'
                    | '<'
                    | '>'
                    | ';'
                    | '='
            )
    })
    .filter(|t| t.starts_with('/') && t.len() > 1)
    .map(|t| t.trim_end_matches(['.', '!', '?']))
}
