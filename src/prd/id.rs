//! Criterion ids: what is an id, its domain (PAI's rule) and whether it is an anti-criterion.

/// True for `ISC-` followed by one or more ASCII letters, digits and dashes, optionally
/// split (LifeOS): `ISC-157.5`, `ISC-1.2.3`, each part after a dot digits only.
pub fn is_isc_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("ISC-") else {
        return false;
    };
    let mut parts = rest.split('.');
    let head = parts.next().unwrap_or("");
    !head.is_empty()
        && head.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && head.bytes().any(|b| b.is_ascii_alphanumeric())
        && parts.all(all_digits)
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// True for a short id (PAI's legacy `C<digits>`/`A<digits>`, LifeOS's `C1`, `A3`, `EQ-12`):
/// one to four capital letters, an optional dash, digits, and optional `.N` splits.
pub fn is_legacy_id(s: &str) -> bool {
    let letters = s.bytes().take_while(u8::is_ascii_uppercase).count();
    if !(1..=4).contains(&letters) {
        return false;
    }
    let rest = &s[letters..];
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let mut parts = rest.split('.');
    parts.next().is_some_and(all_digits) && parts.all(all_digits)
}

/// The parent of a split id: `ISC-157.5` → `ISC-157`, `ISC-1.2.3` → `ISC-1.2`.
pub fn parent(id: &str) -> Option<&str> {
    let dot = id.rfind('.')?;
    all_digits(&id[dot + 1..]).then(|| &id[..dot])
}

/// The phase letter of an id written `ISC-<letter><digits>` (`ISC-B3` → `B`).
pub fn phase_letter(id: &str) -> Option<u8> {
    let rest = id.strip_prefix("ISC-")?;
    let rest = rest.split('.').next()?;
    let (first, digits) = rest.split_at_checked(1)?;
    let b = first.as_bytes()[0];
    (b.is_ascii_uppercase() && all_digits(digits)).then_some(b)
}

/// The domain of an id: what lies between `ISC-` and its last `-<digits>`
/// (ISC-AUTH-1 → AUTH, ISC-A-AUTH-2 → A-AUTH). An id without that shape is its own domain
/// (ISC-C1, and v4's flat ISC-1). v4's flat anti-criteria ISC-A-1, ISC-A-2... share the domain
/// `A`, as in PAI: they go to one lane, one after another.
pub fn domain(id: &str) -> &str {
    if let Some(rest) = id.strip_prefix("ISC-")
        && let Some(dash) = rest.rfind('-')
    {
        let (head, tail) = (&rest[..dash], &rest[dash + 1..]);
        if !head.is_empty() && !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) {
            return head;
        }
    }
    id
}

/// Anti-criteria by id: `ISC-A<digits>` (flat), `ISC-A-<digits>` (v4 flat) or `ISC-A-...`
/// (grouped); legacy `A<digits>`. `phase_letters` is the file's convention: when its ids use
/// `ISC-B1`, `ISC-D8`... as phase letters, `ISC-A1` is phase A, not anti (see
/// [`uses_phase_letters`]).
/// Unlike PAI's `startsWith("ISC-A")`, ISC-AUTH-1 and ISC-API-2 are not anti-criteria.
pub fn is_anti_in(id: &str, phase_letters: bool) -> bool {
    let id = id.split('.').next().unwrap_or(id);
    if let Some(rest) = id.strip_prefix("ISC-A") {
        return rest.starts_with('-') || (!phase_letters && all_digits(rest));
    }
    id.len() > 1 && id.starts_with('A') && all_digits(&id[1..])
}

/// Anti by id with PAI's convention (`ISC-A1` is anti).
pub fn is_anti(id: &str) -> bool {
    is_anti_in(id, false)
}

/// Whether a file's ids use `ISC-<letter><digits>` as phase letters: some letter other than
/// PAI's `A` (anti) and `C` (criterion) is used that way.
pub fn uses_phase_letters<'a>(ids: impl IntoIterator<Item = &'a str>) -> bool {
    ids.into_iter()
        .filter_map(phase_letter)
        .any(|l| l != b'A' && l != b'C')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_follow_pai() {
        assert_eq!(domain("ISC-AUTH-1"), "AUTH");
        assert_eq!(domain("ISC-A-AUTH-2"), "A-AUTH");
        assert_eq!(domain("ISC-AUTH-API-12"), "AUTH-API");
        assert_eq!(domain("ISC-C1"), "ISC-C1");
        assert_eq!(domain("ISC-A1"), "ISC-A1");
        assert_eq!(domain("C2"), "C2");
        assert_eq!(domain("ISC-X-"), "ISC-X-");
    }

    #[test]
    fn v4_flat_ids() {
        assert!(is_isc_id("ISC-1") && is_isc_id("ISC-A-1"));
        assert_eq!(domain("ISC-1"), "ISC-1");
        assert_eq!(domain("ISC-12"), "ISC-12");
        assert_eq!(domain("ISC-A-1"), "A");
        assert_eq!(domain("ISC-A-12"), "A");
        assert!(is_anti("ISC-A-1"));
        assert!(!is_anti("ISC-1"));
        assert!(!is_anti("ISC-12"));
    }

    #[test]
    fn anti_criteria() {
        assert!(is_anti("ISC-A1"));
        assert!(is_anti("ISC-A12"));
        assert!(is_anti("ISC-A-AUTH-1"));
        assert!(is_anti("A3"));
        assert!(!is_anti("ISC-AUTH-1"));
        assert!(!is_anti("ISC-API-2"));
        assert!(!is_anti("ISC-A"));
        assert!(!is_anti("ISC-C1"));
        assert!(!is_anti("C1"));
    }

    #[test]
    fn split_and_short_ids() {
        assert!(is_isc_id("ISC-157.5") && is_isc_id("ISC-1.2.3"));
        assert!(!is_isc_id("ISC-1.") && !is_isc_id("ISC-.1") && !is_isc_id("ISC-1.a"));
        assert_eq!(parent("ISC-157.5"), Some("ISC-157"));
        assert_eq!(parent("ISC-1.2.3"), Some("ISC-1.2"));
        assert_eq!(parent("ISC-1"), None);
        assert!(is_legacy_id("EQ-12") && is_legacy_id("C1.2") && is_legacy_id("A3"));
        assert!(!is_legacy_id("ABCDE1") && !is_legacy_id("EQ-") && !is_legacy_id("c1"));
    }

    #[test]
    fn phase_letters_are_not_anti() {
        let ids = ["ISC-A1", "ISC-B1", "ISC-D8"];
        assert!(uses_phase_letters(ids));
        assert!(!is_anti_in("ISC-A1", true));
        assert!(is_anti_in("ISC-A-1", true));
        assert!(!uses_phase_letters(["ISC-A1", "ISC-C1", "ISC-AUTH-1"]));
        assert!(is_anti_in("ISC-A1", false));
    }

    #[test]
    fn ids() {
        assert!(is_isc_id("ISC-C1"));
        assert!(is_isc_id("ISC-A-PARSE-1"));
        assert!(!is_isc_id("ISC-"));
        assert!(!is_isc_id("ISC-ÜNI-1"));
        assert!(!is_isc_id("ISC-A B"));
        assert!(is_legacy_id("C1"));
        assert!(is_legacy_id("A12"));
        assert!(!is_legacy_id("C"));
        assert!(is_legacy_id("B1"));
    }
}
