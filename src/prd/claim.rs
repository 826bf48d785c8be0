//! Reading one claim line's text: its kind prefix (`Anti:`, `Antecedent:`), its id (bold or
//! not) and whether a task item reads like a criterion at all.

use super::*;

/// What kind a prefix says a claim is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Anti,
    Antecedent,
}

/// `Anti: rest` / `Antecedent: rest` (any case, optionally bold) → the kind and `rest`.
pub(super) fn strip_kind(raw: &str) -> (Option<Kind>, &str) {
    for (word, kind) in [("antecedent", Kind::Antecedent), ("anti", Kind::Anti)] {
        for (open, close) in [("", ":"), ("**", ":**"), ("**", "**:")] {
            let Some(after_open) = raw.strip_prefix(open) else {
                continue;
            };
            if after_open.len() >= word.len()
                && after_open.is_char_boundary(word.len())
                && after_open[..word.len()].eq_ignore_ascii_case(word)
                && let Some(rest) = after_open[word.len()..].strip_prefix(close)
            {
                return (Some(kind), rest.trim_start());
            }
        }
    }
    (None, raw)
}

/// Whether a task item's text reads like a criterion: an `Anti:`/`Antecedent:` prefix, or a
/// first word like an id (`ISC…`, `C1`, `EQ-12`, bold or not).
pub(super) fn criterion_like(raw: &str) -> bool {
    let (kind, rest) = strip_kind(raw);
    if kind.is_some() {
        return true;
    }
    let word = rest
        .trim_start_matches('*')
        .split([':', ' ', '*'])
        .next()
        .unwrap_or("");
    looks_like_isc(word) || id::is_legacy_id(word)
}

/// The start of a line, for naming it in a message.
pub(super) fn one_line_start(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

pub(super) fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|t| !t.trim().is_empty())
}

pub(super) fn fm_err(e: frontmatter::FmError) -> ParseError {
    ParseError {
        line: e.line,
        message: e.message,
    }
}

pub(super) fn first_word(s: &str) -> &str {
    s.split([':', ' ']).next().unwrap_or(s)
}

pub(super) fn looks_like_isc(s: &str) -> bool {
    let s = s.trim_start_matches('*');
    s.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("ISC"))
}

/// `ID: rest` → (`ID`, `rest`), where ID has no spaces. A bold id, `**ID:** rest` or
/// `**ID**: rest`, gives the same pair: some authors bold their ids.
pub(super) fn split_id(raw: &str) -> Option<(&str, &str)> {
    if let Some(inner) = raw.strip_prefix("**") {
        let colon = inner.find(':')?;
        let (cand, after) = (&inner[..colon], &inner[colon + 1..]);
        let (cand, rest) = match after.strip_prefix("**") {
            Some(rest) => (cand, rest),
            None => (cand.strip_suffix("**")?, after),
        };
        return plain_id(cand).then_some((cand, rest));
    }
    if let Some(colon) = raw.find(':') {
        let cand = &raw[..colon];
        if plain_id(cand) {
            return Some((cand, &raw[colon + 1..]));
        }
        // LifeOS before v5.3.0: `ISC-1 [F]: text`, `ISC-1 [F][grep]: text` (category tags).
        if let Some((id, tags)) = cand.split_once(' ')
            && plain_id(id)
            && is_tag_run(tags)
        {
            return Some((id, &raw[colon + 1..]));
        }
    }
    // `ID — rest` (LifeOS allows an em dash, or an en dash, for the colon).
    let space = raw.find(' ')?;
    let cand = &raw[..space];
    let after = raw[space..].trim_start();
    let rest = after
        .strip_prefix('—')
        .or_else(|| after.strip_prefix('–'))?;
    plain_id(cand).then_some((cand, rest))
}

/// `[F]`, `[F][grep]`: one or more bracketed words.
pub(super) fn is_tag_run(s: &str) -> bool {
    let mut rest = s.trim();
    if rest.is_empty() {
        return false;
    }
    while let Some(r) = rest.strip_prefix('[') {
        let Some(end) = r.find(']') else {
            return false;
        };
        let word = &r[..end];
        if word.is_empty() || !word.chars().all(|c| c.is_ascii_alphanumeric()) {
            return false;
        }
        rest = &r[end + 1..];
    }
    rest.is_empty()
}

pub(super) fn plain_id(cand: &str) -> bool {
    !cand.is_empty() && !cand.contains(char::is_whitespace) && !cand.contains('*')
}
