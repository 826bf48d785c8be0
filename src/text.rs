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

/// `s` without control characters other than newlines and tabs (an agent's escape
/// sequences and bells), and with bidirectional controls shown escaped ([`bidi_escape`]),
/// for text shown on a terminal.
pub fn visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if let Some(e) = bidi_escape(c) {
            out.push_str(&e);
        } else if !c.is_control() || c == '\n' || c == '\t' {
            out.push(c);
        }
    }
    out
}

/// `s` with every control character (newlines too) made a space, and bidirectional controls
/// shown escaped: for one-line text.
pub fn controls_to_spaces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match bidi_escape(c) {
            Some(e) => out.push_str(&e),
            None if c.is_control() => out.push(' '),
            None => out.push(c),
        }
    }
    out
}

/// A bidirectional control (an embedding, override or isolate, a directional mark) as
/// `<U+202E>`: shown, never obeyed, so that text a worker wrote cannot reorder what is
/// around it on the screen. `None` for any other character.
pub fn bidi_escape(c: char) -> Option<String> {
    let bidi = matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
    );
    bidi.then(|| format!("<U+{:04X}>", c as u32))
}

/// Whitespace runs folded to one space, cut at `max` characters with an ellipsis.
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

/// `text` cut to at most `max` bytes (on a character boundary), with `note` after it when it
/// was cut.
pub fn cut_to(mut text: String, max: usize, note: &str) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(note);
    }
    text
}

/// An id as a file or ref name part: characters outside `[A-Za-z0-9._-]` become `_`, and
/// one longer than 80 bytes is cut to 64 with a hash of the whole (`-h1a2b3c4d5e6f7a8b`),
/// so that two long ids never share a name and one id always gets the same.
pub fn file_safe(id: &str) -> String {
    const MAX: usize = 80;
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    // `.` may not start a ref name component nor `..` appear in one.
    let clean = clean.replace("..", "__");
    let clean = match clean.strip_prefix('.') {
        Some(rest) => format!("_{rest}"),
        None => clean,
    };
    if clean.len() <= MAX && clean == id {
        return clean;
    }
    if clean.len() <= MAX {
        return format!("{clean}-h{:016x}", fnv1a(id.as_bytes()));
    }
    format!("{}-h{:016x}", &clean[..64], fnv1a(id.as_bytes()))
}

/// FNV-1a, 64 bits: stable across Rust versions and runs (std's hasher is not), enough to tell
/// ids, paths and texts apart in names (a ref, a lock file); not a digest.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_the_published_function() {
        // The reference vectors of FNV-1a 64.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn control_characters_never_pass() {
        assert_eq!(
            one_line("a\u{1b}[2J\u{1b}[?25lb\u{7}c", 100),
            "a [2J [?25lb c"
        );
    }

    #[test]
    fn bidirectional_controls_are_shown_escaped() {
        let q = "is it \u{202E}evil\u{202C} or \u{2066}x\u{2069}?\u{200F}";
        let want = "is it <U+202E>evil<U+202C> or <U+2066>x<U+2069>?<U+200F>";
        assert_eq!(one_line(q, 200), want);
        assert_eq!(visible(q), want);
        assert_eq!(visible("a\nb\u{202D}"), "a\nb<U+202D>");
        assert_eq!(bidi_escape('a'), None);
    }

    #[test]
    fn lines_and_folding() {
        assert_eq!(first_line("\n  \n a \nb"), "a");
        assert_eq!(last_line("a\n b \n\n"), Some("b"));
        assert_eq!(last_line(" \n"), None);
        assert_eq!(one_line("a\n  b", 10), "a b");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }

    #[test]
    fn ids_become_safe_names_consistently() {
        assert_eq!(file_safe("ISC-AUTH-1"), "ISC-AUTH-1");
        assert_eq!(file_safe("ISC-157.5"), "ISC-157.5");
        let long = format!("ISC-{}", "X".repeat(258));
        let a = file_safe(&long);
        assert!(a.len() <= 90, "{a}");
        assert_eq!(a, file_safe(&long));
        assert_ne!(a, file_safe(&format!("{long}Y")));
        // Odd characters are replaced, and the name keeps a hash of the id as written.
        let odd = file_safe("ISC A/1");
        assert!(odd.starts_with("ISC_A_1-h"), "{odd}");
        assert_ne!(odd, file_safe("ISC_A_1"));
        assert!(!file_safe("..x").starts_with('.'));
    }
}
