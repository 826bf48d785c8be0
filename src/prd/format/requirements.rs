//! Kiro's `requirements.md`: `### Requirement N` sections, each with its numbered
//! `Acceptance Criteria` in EARS form (`WHEN … THEN the system SHALL …`). A task's
//! `_Requirements: 1.2, 2_` names them: `1.2` is requirement 1's second criterion, `2` all of
//! requirement 2's. These are what a worker must make true and the verifier checks.

/// The requirement ids a task's notes name (`Requirements: 1.2, 2.3`), in order, once each.
pub(super) fn refs_of(notes: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in notes {
        let Some((key, rest)) = n.split_once(':') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("requirements") {
            continue;
        }
        for word in rest.split([',', ' ', ';']).map(str::trim) {
            let word = word.trim_end_matches('.');
            let ok = !word.is_empty()
                && word
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            if ok && !out.iter().any(|w| w == word) {
                out.push(word.to_string());
            }
        }
    }
    out
}

/// Each of `refs` with the acceptance criteria of `text` it names (`N.M` one, `N` all of
/// requirement N's, as `N.M: text`); an empty list for a ref the file does not hold.
pub(super) fn resolve(text: &str, refs: &[String]) -> Vec<(String, Vec<String>)> {
    let all = criteria(text);
    refs.iter()
        .map(|r| {
            let found = all
                .iter()
                .filter(|(req, n, _)| match r.split_once('.') {
                    Some((a, b)) => a == req && b == n,
                    None => r == req,
                })
                .map(|(req, n, t)| format!("{req}.{n}: {t}"))
                .collect();
            (r.clone(), found)
        })
        .collect()
}

/// Every acceptance criterion of the file: (requirement, number, text).
fn criteria(text: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    let mut req: Option<String> = None;
    let mut in_criteria = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            let h = t.trim_start_matches('#').trim();
            if let Some(n) = requirement_number(h) {
                req = Some(n);
                in_criteria = false;
                continue;
            }
            if h.to_ascii_lowercase().starts_with("acceptance criteria") {
                in_criteria = req.is_some();
            } else if t.starts_with("## ") || t.starts_with("# ") {
                req = None;
                in_criteria = false;
            }
            continue;
        }
        let bare = t.trim_matches('*').trim_end_matches(':').trim();
        if bare.eq_ignore_ascii_case("acceptance criteria") {
            in_criteria = req.is_some();
            continue;
        }
        let (Some(r), true) = (&req, in_criteria) else {
            continue;
        };
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        match t[digits..].strip_prefix(['.', ')']) {
            Some(rest) if digits > 0 && rest.starts_with(' ') => {
                out.push((r.clone(), t[..digits].to_string(), rest.trim().to_string()));
            }
            // An item's wrapped line.
            _ if !t.is_empty() && line.starts_with([' ', '\t']) => {
                if let Some(last) = out.last_mut().filter(|l| &l.0 == r) {
                    last.2.push(' ');
                    last.2.push_str(t);
                }
            }
            _ => {}
        }
    }
    out
}

/// `Requirement 3` / `Requirement 3: Sign-in` → `3`.
fn requirement_number(heading: &str) -> Option<String> {
    let rest = heading
        .get(..11)
        .filter(|w| w.eq_ignore_ascii_case("requirement"))
        .map(|_| heading[11..].trim_start())?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let after = &rest[digits..];
    (digits > 0 && (after.is_empty() || after.starts_with([':', ' ', '.', '-', '—'])))
        .then(|| rest[..digits].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_name_one_criterion_or_a_whole_requirement() {
        let text = "# Requirements Document\n\n## Requirements\n\n### Requirement 1: Sign-in\n\n**User Story:** As a user, I want 1. this\n\n#### Acceptance Criteria\n\n1. WHEN a user signs in THEN the system SHALL start a session\n2. IF the password is wrong\n   THEN the system SHALL answer 401\n\n### Requirement 2\n\n**Acceptance Criteria**\n\n1. WHILE signed in the system SHALL show the albums\n";
        let refs = refs_of(&[
            "Write it".to_string(),
            "Requirements: 1.2, 2, 3.1".to_string(),
        ]);
        assert_eq!(refs, ["1.2", "2", "3.1"]);
        assert_eq!(
            resolve(text, &refs),
            [
                (
                    "1.2".to_string(),
                    vec![
                        "1.2: IF the password is wrong THEN the system SHALL answer 401"
                            .to_string()
                    ]
                ),
                (
                    "2".to_string(),
                    vec!["2.1: WHILE signed in the system SHALL show the albums".to_string()]
                ),
                ("3.1".to_string(), vec![]),
            ]
        );
    }
}
