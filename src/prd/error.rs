//! What reading a PRD can say about it: warnings, and the error that makes it unusable.

/// A warning about the document: something that looks meant but is not read, or is read
/// differently from how it may look (a front matter key set twice).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    pub line: usize,
    pub message: String,
}

/// An error that makes the document unusable, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl ParseError {
    /// `path:line: message`, the form every message about a PRD takes.
    pub fn at(&self, path: &std::path::Path) -> String {
        format!("{}:{}: {}", path.display(), self.line, self.message)
    }
}
