//! Criterion ids: what is an id, its domain (PAI's rule) and whether it is an anti-criterion.

/// True for `ISC-` followed by one or more ASCII letters, digits and dashes.
pub fn is_isc_id(s: &str) -> bool {
    match s.strip_prefix("ISC-") {
        Some(rest) => {
            !rest.is_empty()
                && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && rest.bytes().any(|b| b.is_ascii_alphanumeric())
        }
        None => false,
    }
}

/// True for a legacy id: `C<digits>` or `A<digits>`.
pub fn is_legacy_id(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some('C' | 'A'))
        && s.len() > 1
        && s[1..].bytes().all(|b| b.is_ascii_digit())
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

/// Anti-criteria: `ISC-A<digits>` (flat), `ISC-A-<digits>` (v4 flat) or `ISC-A-...`
/// (grouped); legacy `A<digits>`.
/// Unlike PAI's `startsWith("ISC-A")`, ISC-AUTH-1 and ISC-API-2 are not anti-criteria.
pub fn is_anti(id: &str) -> bool {
    if let Some(rest) = id.strip_prefix("ISC-A") {
        return rest.starts_with('-')
            || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()));
    }
    id.len() > 1 && id.starts_with('A') && id[1..].bytes().all(|b| b.is_ascii_digit())
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
    fn ids() {
        assert!(is_isc_id("ISC-C1"));
        assert!(is_isc_id("ISC-A-PARSE-1"));
        assert!(!is_isc_id("ISC-"));
        assert!(!is_isc_id("ISC-ÜNI-1"));
        assert!(!is_isc_id("ISC-A B"));
        assert!(is_legacy_id("C1"));
        assert!(is_legacy_id("A12"));
        assert!(!is_legacy_id("C"));
        assert!(!is_legacy_id("B1"));
    }
}
