//! Small text helpers for messages: the first or last non-empty line of an output, and a text
//! folded onto one line of bounded length.

/// The first line that is not blank, trimmed ("" when there is none).
pub fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// The last line that is not blank, trimmed.
pub fn last_line(s: &str) -> Option<&str> {
    s.lines().rev().map(str::trim).find(|l| !l.is_empty())
}

/// Whitespace runs folded to one space, cut at `max` characters with an ellipsis.
/// `s` without control characters other than newlines and tabs (an agent's escape
/// sequences and bells), for text shown on a terminal.
pub fn visible(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

/// `s` with every control character (newlines too) made a space: for one-line text.
pub fn controls_to_spaces(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

pub fn one_line(s: &str, max: usize) -> String {
    // Control characters (an agent's escape sequences, bells) never reach a terminal.
    let flat: String = controls_to_spaces(s)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_pass() {
        assert_eq!(
            one_line("a\u{1b}[2J\u{1b}[?25lb\u{7}c", 100),
            "a [2J [?25lb c"
        );
    }

    #[test]
    fn lines_and_folding() {
        assert_eq!(first_line("\n  \n a \nb"), "a");
        assert_eq!(last_line("a\n b \n\n"), Some("b"));
        assert_eq!(last_line(" \n"), None);
        assert_eq!(one_line("a\n  b", 10), "a b");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }
}
