//! What only LifeOS's ISA files have: the `## Test Strategy` table of probes, tombstones of
//! dropped claims, inline probes and `(after: ...)` dependencies in a claim's text.

use super::verify::{HowVerified, not_a_command};

/// Probe types whose `tool` cell is a command the runner runs (ISAFormat v2.18.0).
pub const PROBE_COMMAND_TYPES: [&str; 4] = ["bash", "curl", "bun-test", "bun-property"];

/// One row of `## Test Strategy`: `isc | type | check | threshold | tool | anchors_to |
/// severity` (the last two optional), as LifeOS's parser reads it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// 1-based line of the row.
    pub line: usize,
    pub kind: String,
    pub check: String,
    pub threshold: String,
    /// The `tool` cell without the backticks around it (markdown formatting, as LifeOS reads
    /// it); a cell that starts with a code span and goes on in prose holds only the span's
    /// content here.
    pub tool: String,
    /// The prose after the `tool` cell's code span (`(recursive hash …)`): for the agent.
    pub tool_note: Option<String>,
    /// The `tool` cell holds a code span that does not start it (`Bash `bun test``): what to
    /// run is not said plainly, so nothing is run.
    pub tool_unclear: bool,
    pub anchors_to: Option<String>,
    /// `severity: critical`: its failure means the product is down.
    pub critical: bool,
    /// The row has more cells than its header (a shell pipe in a cell shifted them): it is
    /// shown to the agent, never run.
    pub shifted: bool,
}

impl Probe {
    /// Who decides it: the runner when its type is a command type and the `tool` cell holds a
    /// whole command; else the agent, with the probe in the prompt.
    pub fn how(&self) -> HowVerified<'_> {
        let agent = |why: String| HowVerified::Agent { why };
        if !PROBE_COMMAND_TYPES
            .iter()
            .any(|t| t.eq_ignore_ascii_case(self.kind.trim()))
        {
            return agent(format!(
                "its Test Strategy probe is of type `{}`, which needs judgement",
                self.kind
            ));
        }
        if self.shifted {
            return agent("its Test Strategy row has more cells than the header (a `|` in a cell shifted them)".into());
        }
        if self.tool_unclear {
            return agent(format!(
                "the probe's tool cell `{}` does not start with the command's code span",
                self.tool
            ));
        }
        // `bash`, `curl`, `bun test` alone name the tool, not the command (which the check
        // cell then describes): run bare, `bash` would pass on empty input.
        const BARE_TOOLS: [&str; 11] = [
            "bash", "sh", "zsh", "curl", "bun", "bun test", "bunx", "node", "npm", "npx", "deno",
        ];
        if self.tool.is_empty()
            || BARE_TOOLS
                .iter()
                .any(|t| t.eq_ignore_ascii_case(self.tool.trim()))
        {
            return agent(format!(
                "the probe's tool cell `{}` names a tool, not a command",
                self.tool
            ));
        }
        match not_a_command(&self.tool) {
            Some(why) => agent(why),
            None => HowVerified::Command(&self.tool),
        }
    }

    /// The probe as one line for a worker's prompt.
    pub fn describe(&self) -> String {
        let mut s = format!("{} probe: {}", self.kind, self.check);
        if !self.threshold.is_empty() {
            s.push_str(&format!("; threshold: {}", self.threshold));
        }
        if !self.tool.is_empty() {
            s.push_str(&format!("; tool: {}", self.tool));
        }
        if let Some(note) = &self.tool_note {
            s.push_str(&format!(" {note}"));
        }
        if self.critical {
            s.push_str(" (severity: critical)");
        }
        s
    }
}

/// The unresolved entries of a `## Not yet specified` section: its lines that hold text (an
/// HTML comment, an all-italic placeholder such as `*None yet.*` and `none` do not).
pub fn fog_lines(section: &str, first_line: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_comment = false;
    for (n, line) in section.lines().enumerate() {
        let mut t = line.trim();
        if in_comment {
            if t.contains("-->") {
                in_comment = false;
            }
            continue;
        }
        if t.starts_with("<!--") {
            in_comment = !t.contains("-->");
            continue;
        }
        t = t
            .strip_prefix("- ")
            .or_else(|| t.strip_prefix("* "))
            .unwrap_or(t)
            .trim();
        let placeholder = t.is_empty()
            || (t.len() > 1
                && ((t.starts_with('*') && t.ends_with('*'))
                    || (t.starts_with('_') && t.ends_with('_'))))
            || ["none", "(none)", "n/a", "—", "-"]
                .iter()
                .any(|p| t.trim_end_matches('.').eq_ignore_ascii_case(p));
        if !placeholder {
            out.push(first_line + n);
        }
    }
    out
}

/// A dropped claim's text after its id: `[DROPPED — see Decisions]` (any case, any dash).
pub fn is_tombstone(rest: &str) -> bool {
    let t = rest.trim_start().trim_start_matches("**").trim_start();
    t.get(..8)
        .is_some_and(|p| p.eq_ignore_ascii_case("[DROPPED"))
        || t.get(..9)
            .is_some_and(|p| p.eq_ignore_ascii_case("~~DROPPED"))
}

/// An inline probe in a claim's text: `(probe: ...)` or `Probe: ...` (to the end, or to a
/// `[` note).
pub fn inline_probe(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = lower.find("(probe:") {
        let rest = &text[i + "(probe:".len()..];
        let end = rest.find(')').unwrap_or(rest.len());
        return Some(rest[..end].trim().to_string()).filter(|s| !s.is_empty());
    }
    let i = lower.find("probe:")?;
    if i > 0 && lower.as_bytes()[i - 1].is_ascii_alphanumeric() {
        return None;
    }
    let rest = &text[i + "probe:".len()..];
    // Inside parentheses (`(… — probe: x)`), the probe ends at the closing one.
    let in_parens = text[..i].rfind('(') > text[..i].rfind(')');
    let end = match (rest.find(" ["), in_parens.then(|| rest.find(')')).flatten()) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).unwrap_or(rest.len()),
    };
    Some(rest[..end].trim().to_string()).filter(|s| !s.is_empty())
}

/// The ids of `(after: ISC-8)` / `(after: ISC-3, ISC-4)` in a claim's text.
/// `(after: …)` inside a code span is text, not a dependency.
pub fn after_ids(text: &str) -> Vec<String> {
    let lower = super::verify::blank_code_spans(text).to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find("(after:") {
        let start = from + i + "(after:".len();
        let end = text[start..].find(')').map_or(text.len(), |e| start + e);
        out.extend(
            text[start..end]
                .split([',', ' '])
                .map(|p| p.trim().trim_matches('`'))
                .filter(|p| !p.is_empty())
                .map(str::to_string),
        );
        from = end;
    }
    out
}

/// A v3 line's ` | After: ISC-AUTH-1, ISC-DB-2` segments: the byte ranges of each (from its
/// ` |` to the next ` | ` or the end), with the ids they name.
pub fn after_segments(text: &str) -> (Vec<std::ops::Range<usize>>, Vec<String>) {
    const SEP: &str = "| after:";
    let lower = super::verify::blank_code_spans(text).to_ascii_lowercase();
    let (mut ranges, mut ids) = (Vec::new(), Vec::new());
    let mut from = 0;
    while let Some(i) = lower[from..].find(SEP) {
        let at = from + i;
        let start = at + SEP.len();
        let end = text[start..].find(" | ").map_or(text.len(), |e| start + e);
        // The segment starts at the space before its pipe, when there is one.
        let begin = if text[..at].ends_with(' ') {
            at - 1
        } else {
            at
        };
        ranges.push(begin..end);
        ids.extend(
            text[start..end]
                .split([',', ' '])
                .map(|p| p.trim().trim_matches('`').trim_end_matches('.'))
                .filter(|p| !p.is_empty())
                .map(str::to_string),
        );
        from = end;
    }
    (ranges, ids)
}

/// Splits a table row into cells at unescaped pipes (`\|` is a pipe inside a cell).
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim();
    let inner = inner.strip_prefix('|').unwrap_or(inner);
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cur.push('|');
                chars.next();
            }
            '|' => out.push(std::mem::take(&mut cur).trim().to_string()),
            _ => cur.push(c),
        }
    }
    out.push(cur.trim().to_string());
    out
}

/// A `tool` cell read: the command (a leading code span's content, or the cell), the prose
/// after the span, and whether a code span sits elsewhere in it.
fn tool_cell(cell: &str) -> (String, Option<String>, bool) {
    let t = cell.trim();
    match super::verify::leading_code_span(t) {
        Some((code, len)) => {
            let rest = t[len..].trim();
            (code, (!rest.is_empty()).then(|| rest.to_string()), false)
        }
        None => (t.to_string(), None, t.contains('`')),
    }
}

/// A Test Strategy column, by its header's name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Column {
    Isc,
    Kind,
    Check,
    Threshold,
    Tool,
    AnchorsTo,
    Severity,
}

/// ISAFormat's column order, for a header that names none of them.
const POSITIONAL: [Column; 7] = [
    Column::Isc,
    Column::Kind,
    Column::Check,
    Column::Threshold,
    Column::Tool,
    Column::AnchorsTo,
    Column::Severity,
];

fn column(name: &str) -> Option<Column> {
    let n = name
        .trim()
        .trim_matches('*')
        .to_ascii_lowercase()
        .replace([' ', '-'], "_");
    Some(match n.as_str() {
        "isc" | "id" | "claim" | "claims" | "isc_id" => Column::Isc,
        "type" | "kind" | "probe" | "probe_type" => Column::Kind,
        "check" | "checks" => Column::Check,
        "threshold" => Column::Threshold,
        "tool" | "tools" => Column::Tool,
        "anchors_to" | "anchors" | "anchor" => Column::AnchorsTo,
        "severity" => Column::Severity,
        _ => return None,
    })
}

/// The columns of a header row: by name when it names them, else in ISAFormat's order.
fn columns(header: &[String]) -> Vec<Option<Column>> {
    let named: Vec<Option<Column>> = header.iter().map(|h| column(h)).collect();
    if named.iter().any(Option::is_some) {
        named
    } else {
        POSITIONAL.iter().copied().map(Some).collect()
    }
}

/// The ids a row's first cell names: an id, several (`ISC-5, ISC-15`), a bare number when
/// the file uses `ISC-N`, or a range (`1–7`, `ISC-1–9`, `14..24`).
fn row_ids(cell: &str, ids: &[String]) -> Vec<String> {
    let known = |id: &str| ids.iter().any(|i| i == id);
    let mut out = Vec::new();
    for part in cell.split(',') {
        let p = part.trim().trim_matches('*').trim_matches('`').trim();
        if p.is_empty() {
            continue;
        }
        if known(p) {
            out.push(p.to_string());
            continue;
        }
        let bare = p.strip_prefix("ISC-").unwrap_or(p);
        if let Ok(n) = bare.parse::<u64>() {
            let id = format!("ISC-{n}");
            if known(&id) {
                out.push(id);
            }
            continue;
        }
        let range = ["–", "—", "..", "-"]
            .iter()
            .find_map(|sep| bare.split_once(sep));
        if let Some((a, b)) = range
            && let (Ok(a), Ok(b)) = (
                a.trim().parse::<u64>(),
                b.trim().trim_start_matches("ISC-").parse::<u64>(),
            )
            && a <= b
            && b - a < 10_000
        {
            out.extend((a..=b).map(|n| format!("ISC-{n}")).filter(|id| known(id)));
        }
    }
    out
}

/// The probes of a `## Test Strategy` section's table, by claim id. `first_line` is the
/// section's first line in the file; `ids` the file's criterion ids.
pub fn read_test_strategy(
    section: &str,
    first_line: usize,
    ids: &[String],
) -> Vec<(String, Probe)> {
    let mut out = Vec::new();
    let mut header: Option<(usize, Vec<Option<Column>>)> = None;
    for (n, line) in section.lines().enumerate() {
        if !line.trim_start().starts_with('|') {
            // Any other line ends the table, a blank one too (as in CommonMark): the next
            // table is read by its own header.
            header = None;
            continue;
        }
        let row = cells(line);
        let Some((width, cols)) = &header else {
            header = Some((row.len(), columns(&row)));
            continue;
        };
        let width = *width;
        if row
            .iter()
            .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
        {
            continue; // the separator row
        }
        let at = |want: Column| cols.iter().position(|c| *c == Some(want));
        let cell = |want: Column| {
            at(want)
                .and_then(|i| row.get(i))
                .cloned()
                .unwrap_or_default()
        };
        let (tool, tool_note, tool_unclear) = tool_cell(&cell(Column::Tool));
        let anchors = cell(Column::AnchorsTo);
        let probe = Probe {
            line: first_line + n,
            kind: cell(Column::Kind),
            check: cell(Column::Check),
            threshold: cell(Column::Threshold),
            tool,
            tool_note,
            tool_unclear,
            anchors_to: (!anchors.is_empty()).then_some(anchors),
            critical: cell(Column::Severity)
                .trim()
                .eq_ignore_ascii_case("critical"),
            shifted: row.len() > width.max(5),
        };
        for id in row_ids(&cell(Column::Isc), ids) {
            out.push((id, probe.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Two tables a blank line apart: the second is read by its own header row.
    #[test]
    fn a_blank_line_ends_a_table() {
        let t = "\n| isc | type | check | threshold | tool |\n|---|---|---|---|---|\n| ISC-1 | bash | exits 0 | exit 0 | `true` |\n\n| tool | isc |\n|---|---|\n| `test -d .` | ISC-2 |\n";
        let p = read_test_strategy(t, 1, &ids(&["ISC-1", "ISC-2"]));
        let got: Vec<(&str, &str)> = p
            .iter()
            .map(|(id, probe)| (id.as_str(), probe.tool.as_str()))
            .collect();
        assert_eq!(got, [("ISC-1", "true"), ("ISC-2", "test -d .")]);
        assert_eq!(p[1].1.line, 8);
    }

    #[test]
    fn table_rows_become_probes() {
        let t = "\n| isc | type | check | threshold | tool | anchors_to | severity |\n|---|---|---|---|---|---|---|\n| ISC-1 | bash | exits 0 | exit 0 | `false` | literal | critical |\n| 2–3 | manual | look | ok | Browser |\n| ISC-4 | bash | `a \\| b` | x | `grep -q x f` |\n";
        let p = read_test_strategy(t, 10, &ids(&["ISC-1", "ISC-2", "ISC-3", "ISC-4"]));
        let got: Vec<&str> = p.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(got, ["ISC-1", "ISC-2", "ISC-3", "ISC-4"]);
        let one = &p[0].1;
        assert_eq!(
            (one.line, one.tool.as_str(), one.critical),
            (13, "false", true)
        );
        assert_eq!(one.how(), HowVerified::Command("false"));
        let bare = Probe {
            tool: "bash".into(),
            ..one.clone()
        };
        assert!(matches!(bare.how(), HowVerified::Agent { why } if why.contains("names a tool")));
        assert!(matches!(p[1].1.how(), HowVerified::Agent { why } if why.contains("manual")));
        assert_eq!(p[3].1.check, "`a | b`");
        assert_eq!(p[3].1.how(), HowVerified::Command("grep -q x f"));
    }

    #[test]
    fn a_tool_cell_runs_only_its_code_span() {
        let t = "| isc | type | check | threshold | tool |\n|-|-|-|-|-|\n| ISC-1 | bash | hashes | same | `bun run test:readonly` (recursive hash of the tree) |\n| ISC-2 | bash | b | c | Bash `bun test` |\n";
        let p = read_test_strategy(t, 1, &ids(&["ISC-1", "ISC-2"]));
        let one = &p[0].1;
        assert_eq!(one.how(), HowVerified::Command("bun run test:readonly"));
        assert_eq!(
            one.tool_note.as_deref(),
            Some("(recursive hash of the tree)")
        );
        assert!(one.describe().contains("(recursive hash of the tree)"));
        assert!(
            matches!(p[1].1.how(), HowVerified::Agent { why } if why.contains("does not start")),
            "{:?}",
            p[1].1.how()
        );
    }

    #[test]
    fn a_table_is_read_by_its_header() {
        // No threshold column: `tool` is the fourth cell, `anchors_to` the fifth.
        let t = "| ISC | Type | Check | Tool | Anchors_to |\n|---|---|---|---|---|\n| ISC-1 | bash | exits 0 | `make check` | derived: the build |\n| ISC-2 | bash | lit | `true` | literal |\n";
        let p = read_test_strategy(t, 1, &ids(&["ISC-1", "ISC-2"]));
        assert_eq!(p[0].1.how(), HowVerified::Command("make check"));
        assert_eq!(p[0].1.threshold, "");
        assert_eq!(p[0].1.anchors_to.as_deref(), Some("derived: the build"));
        assert_eq!(p[1].1.how(), HowVerified::Command("true"));
        // Columns in another order.
        let t = "| tool | isc | type | severity |\n|-|-|-|-|\n| `ls` | ISC-1 | bash | critical |\n";
        let p = read_test_strategy(t, 1, &ids(&["ISC-1"]));
        assert_eq!(p[0].1.how(), HowVerified::Command("ls"));
        assert!(p[0].1.critical);
    }

    #[test]
    fn after_inside_a_code_span_is_text() {
        assert!(after_ids("prints `(after: ISC-9)` in the log").is_empty());
        assert_eq!(after_ids("`(after: x)` then (after: ISC-2)"), ["ISC-2"]);
        assert!(
            after_segments("A | Verify: CLI: `grep '| after: ISC-9' f`")
                .1
                .is_empty()
        );
    }

    #[test]
    fn shifted_rows_are_never_run() {
        let t = "| isc | type | check | threshold | tool |\n|-|-|-|-|-|\n| ISC-1 | bash | a | b | `ls -a` | c | d | e |\n";
        let p = read_test_strategy(t, 1, &ids(&["ISC-1"]));
        assert!(p[0].1.shifted);
        assert!(matches!(p[0].1.how(), HowVerified::Agent { .. }));
    }

    #[test]
    fn fog() {
        let s =
            "\n*None yet.*\n\n<!-- a\nnote -->\n- Which venue? (blocked on the owner)\n- none\n";
        assert_eq!(fog_lines(s, 10), [15]);
        assert!(fog_lines("\n_Empty._\n", 1).is_empty());
    }

    #[test]
    fn text_conventions() {
        assert!(is_tombstone(" [DROPPED — see Decisions]"));
        assert!(is_tombstone("[dropped - merged into ISC-3]"));
        assert!(!is_tombstone("dropped frames are counted"));
        assert_eq!(
            inline_probe("no leak (ISC-18 variant — probe: curl it, see 403)").as_deref(),
            Some("curl it, see 403")
        );
        assert_eq!(
            inline_probe("Signup works. Probe: Grep `x` in `app/`. [2026: done]").as_deref(),
            Some("Grep `x` in `app/`.")
        );
        assert_eq!(inline_probe("no probes here"), None);
        assert_eq!(after_ids("B (after: ISC-8, ISC-9) c"), ["ISC-8", "ISC-9"]);
        let line = "Login works | Verify: CLI: `make t` | After: ISC-AUTH-1, `ISC-DB-2`";
        let (ranges, ids) = after_segments(line);
        assert_eq!(ids, ["ISC-AUTH-1", "ISC-DB-2"]);
        assert_eq!(&line[ranges[0].clone()], " | After: ISC-AUTH-1, `ISC-DB-2`");
        let (_, ids) = after_segments("A | after: ISC-1 | Verify: CLI: `x`");
        assert_eq!(ids, ["ISC-1"]);
    }
}
