//! What a run takes its orders from in a PRD: its criteria's lines (their text and Verify
//! methods, apart from their boxes) and its `prdloop:` map. Without lanes every worker writes
//! the PRD's folder, so an attempt that changed them is found by comparing the PRD with the
//! text from before it ([`tampered`]), and those lines are put back as they were.

use super::Prd;
use super::format::ListFormat;

/// What an attempt changed of a PRD's orders, and the PRD's text with them put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tampered {
    /// What changed, in words: `ISC-B-1`, `the prdloop: map`.
    pub what: Vec<String>,
    /// `now` with the changed criterion lines as in `before` (each keeping its box as it
    /// is now) and the `prdloop:` map as in `before`; added and removed criteria are left as
    /// they are, and are no change of orders (a person may have made them: the run admits
    /// a new criterion as it admits a person's).
    pub restored: String,
}

/// What `now` changed of `before`'s orders; `None` when nothing did, or when either text
/// does not parse (the run's writer refuses a broken PRD on its own). Line by line in a
/// Markdown list; in other formats the change is found and nothing is put back.
pub fn tampered(before: &str, now: &str) -> Option<Tampered> {
    if only_boxes_differ(before, now) {
        return None;
    }
    let (b, n) = (Prd::parse(before).ok()?, Prd::parse(now).ok()?);
    let line_based =
        b.list_format() == ListFormat::Markdown && n.list_format() == ListFormat::Markdown;
    let blines: Vec<&str> = before.split_inclusive('\n').collect();
    let mut lines: Vec<String> = now.split_inclusive('\n').map(str::to_string).collect();
    let (bstarts, nstarts) = (starts(&blines), starts(&lines_ref(&lines)));
    let mut what = Vec::new();
    for c in &b.criteria {
        let Some(m) = n.criterion(&c.id) else {
            continue;
        };
        let (Some(was), Some(is)) = (
            unboxed(before, &blines, &bstarts, c),
            unboxed(now, &lines_ref(&lines), &nstarts, m),
        ) else {
            continue;
        };
        if was.0 == is.0 {
            continue;
        }
        what.push(c.id.clone());
        if line_based {
            // The line from before, with the box as it is now (the run's own tick stays).
            let mut line = blines[c.line - 1].to_string();
            if let (Some(at), Some(mark)) = (was.1, now.get(m.marker.clone()))
                && line.is_char_boundary(at)
                && line.is_char_boundary(at + c.marker.len())
            {
                line.replace_range(at..at + c.marker.len(), mark);
            }
            lines[m.line - 1] = line;
        }
    }
    let mut restored = lines.concat();
    let (map_was, map_is) = (
        super::frontmatter::prdloop_map_text(before),
        super::frontmatter::prdloop_map_text(now),
    );
    if map_was != map_is {
        what.push("the prdloop: map".into());
        if let Some(text) = with_map(&restored, map_was.as_deref()) {
            restored = text;
        }
    }
    (!what.is_empty()).then_some(Tampered { what, restored })
}

/// Whether `now` is `before` but for boxes ticked or unticked and front matter other than the
/// `prdloop:` map (what the run itself writes while workers run): then no order changed, and
/// neither text need be parsed. Its front matter as many lines long, each later line the same
/// or the same but for one box's mark (`[ ]`, `[x]`). Line by line, without allocating: the
/// check made after every attempt is a comparison of the two texts, not two parses.
pub fn only_boxes_differ(before: &str, now: &str) -> bool {
    if before == now {
        return true;
    }
    let body = |t: &str| {
        super::frontmatter::locate(t)
            .ok()
            .map(|s| s.map_or(0, |s| s.body_start))
    };
    let (Some(bb), Some(nb)) = (body(before), body(now)) else {
        return false;
    };
    if before[..bb].matches('\n').count() != now[..nb].matches('\n').count()
        || super::frontmatter::prdloop_map_text(before) != super::frontmatter::prdloop_map_text(now)
    {
        return false;
    }
    let (mut a, mut b) = (before[bb..].split('\n'), now[nb..].split('\n'));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x == y || box_moved(x, y) => {}
            _ => return false,
        }
    }
}

/// Whether two lines differ in one box's mark only.
fn box_moved(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut diff = (0..a.len()).filter(|&i| a[i] != b[i]);
    let (Some(i), None) = (diff.next(), diff.next()) else {
        return false;
    };
    let mark = |c: u8| matches!(c, b' ' | b'x' | b'X');
    i > 0 && i + 1 < a.len() && a[i - 1] == b'[' && a[i + 1] == b']' && mark(a[i]) && mark(b[i])
}

fn lines_ref(lines: &[String]) -> Vec<&str> {
    lines.iter().map(String::as_str).collect()
}

/// Where each line starts (a byte offset), and where the text ends.
fn starts(lines: &[&str]) -> Vec<usize> {
    let mut at = 0;
    let mut v = Vec::with_capacity(lines.len() + 1);
    for l in lines {
        v.push(at);
        at += l.len();
    }
    v.push(at);
    v
}

/// A criterion's line with its box left out, and where the box is in the line (`starts`:
/// the lines' offsets, so that each criterion costs its line, not the text before it).
fn unboxed(
    text: &str,
    lines: &[&str],
    starts: &[usize],
    c: &super::Criterion,
) -> Option<(String, Option<usize>)> {
    let line = *lines.get(c.line.checked_sub(1)?)?;
    let start = starts[c.line - 1];
    let end = start + line.len();
    if c.marker.start >= start && c.marker.end <= end && text.get(c.marker.clone()).is_some() {
        let at = c.marker.start - start;
        let mut s = line.to_string();
        s.replace_range(at..at + c.marker.len(), "");
        Some((s, Some(at)))
    } else {
        Some((line.to_string(), None))
    }
}

/// `text` with its front matter's `prdloop:` block(s) replaced by `map` (taken out when
/// `None`); `None` when it has no front matter to put it in.
fn with_map(text: &str, map: Option<&str>) -> Option<String> {
    let span = super::frontmatter::locate(text).ok()??;
    let yaml = &text[span.content.clone()];
    let mut kept = String::new();
    let mut inside = false;
    for line in yaml.split_inclusive('\n') {
        let top_level = line.starts_with(|c: char| !c.is_whitespace() && c != '#');
        if top_level {
            inside = line
                .strip_prefix("prdloop")
                .is_some_and(|r| r.trim_start().starts_with(':'));
        }
        if !inside {
            kept.push_str(line);
        }
    }
    if !kept.is_empty() && !kept.ends_with('\n') {
        kept.push('\n');
    }
    if let Some(m) = map {
        kept.push_str(m);
    }
    Some(format!(
        "{}{}{}",
        &text[..span.content.start],
        kept,
        &text[span.content.end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRD: &str = "---\nprd: true\nid: PRD-1\nstatus: IN_PROGRESS\n---\n\n# T\n\n## IDEAL STATE CRITERIA (Verification Criteria)\n\n- [ ] ISC-A-1: a | Verify: CLI: `test -f a`\n- [ ] ISC-B-1: b | Verify: CLI: `test -f b`\n";

    #[test]
    fn a_changed_verify_is_put_back_and_the_runs_ticks_stay() {
        assert_eq!(tampered(PRD, PRD), None);
        // The run ticked ISC-A-1: no change of orders.
        let ticked = PRD.replace("- [ ] ISC-A-1", "- [x] ISC-A-1");
        assert_eq!(tampered(PRD, &ticked), None);
        // A worker made ISC-B-1's check `true`, while the run ticked ISC-A-1.
        let bent = ticked.replace("`test -f b`", "`true`");
        let t = tampered(PRD, &bent).unwrap();
        assert_eq!(t.what, vec!["ISC-B-1"]);
        assert_eq!(t.restored, ticked);
        // Its box as it is now.
        let both = bent.replace("- [ ] ISC-B-1", "- [x] ISC-B-1");
        let t = tampered(PRD, &both).unwrap();
        assert!(
            t.restored
                .contains("- [x] ISC-B-1: b | Verify: CLI: `test -f b`"),
            "{}",
            t.restored
        );
    }

    #[test]
    fn the_runs_own_writes_are_told_apart_by_a_comparison_at_any_size() {
        // 20,000 criteria, each ticked by the run, and its progress in the front matter: no
        // change of orders, found line by line (two parses, and a sum of the lines before
        // each criterion, took seconds at this size).
        let mut big = String::from("---\nid: PRD-1\nstatus: IN_PROGRESS\n---\n\n## CRITERIA\n\n");
        for i in 0..20_000 {
            big.push_str(&format!("- [ ] ISC-D{}-{}: instant\n", i % 100, i / 100));
        }
        let ticked = big
            .replace("- [ ]", "- [x]")
            .replace("status: IN_PROGRESS", "status: COMPLETE");
        let t = std::time::Instant::now();
        for _ in 0..10 {
            assert_eq!(tampered(&big, &ticked), None);
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        // A line changed beyond its box is still found among them.
        let bent = ticked.replacen("ISC-D7-150: instant", "ISC-D7-150: anything", 1);
        assert_eq!(tampered(&big, &bent).unwrap().what, vec!["ISC-D7-150"]);
        // So is the prdloop: map, and a box turned into something else.
        assert!(!only_boxes_differ(
            &big,
            &big.replace("status:", "prdloop: {}\nstatus:")
        ));
        assert!(!box_moved("- [ ] a", "- [?] a"));
        assert!(!box_moved("- [ ] a", "- [x] b"));
        assert!(box_moved("- [ ] a", "- [x] a"));
    }

    #[test]
    fn a_prdloop_map_added_is_taken_out_and_added_criteria_are_left() {
        let mapped = PRD.replace(
            "status: IN_PROGRESS\n",
            "status: IN_PROGRESS\nprdloop:\n  sandbox: off\n  setup: evil\n",
        );
        let t = tampered(PRD, &mapped).unwrap();
        assert_eq!(t.what, vec!["the prdloop: map"]);
        assert_eq!(t.restored, PRD);
        let with = PRD.replace(
            "status: IN_PROGRESS\n",
            "prdloop:\n  agents: 2\nstatus: IN_PROGRESS\n",
        );
        let changed = with.replace("agents: 2", "agents: 2\n  sandbox: off");
        let t = tampered(&with, &changed).unwrap();
        assert_eq!(t.what, vec!["the prdloop: map"]);
        assert!(
            t.restored.contains("prdloop:\n  agents: 2\n"),
            "{}",
            t.restored
        );
        assert!(!t.restored.contains("sandbox: off"), "{}", t.restored);
        let added = format!("{PRD}- [ ] ISC-C-1: c | Verify: CLI: `true`\n");
        assert_eq!(tampered(PRD, &added), None);
    }
}
