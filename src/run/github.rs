//! The run as GitHub Actions shows it: workflow commands (an iteration's group, an error
//! annotation per criterion still failing) and the Markdown job summary, from `RunEvent`s.

use std::fmt::Write as _;

use super::event::{Row, RowState, Summary};
use crate::report;

/// GitHub shows at most this many error annotations per step.
pub const MAX_ANNOTATIONS: usize = 10;
/// The job summary's limit per step is 1 MiB; stay well under it.
const SUMMARY_BUDGET: usize = 1000 * 1000;
/// The longest failure reason an annotation or a table cell carries.
const REASON_CHARS: usize = 2000;
const CELL_CHARS: usize = 200;

/// A workflow command's data: `%`, CR and LF escaped (actions/toolkit's `escapeData`).
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value: as data, and `:` and `,` too (`escapeProperty`).
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The line that opens an iteration's group.
pub fn group(iteration: u64, passing: usize, total: usize) -> String {
    escape_data(&format!(
        "::group::iteration {iteration} ({passing}/{total} passing)"
    ))
}

pub const END_GROUP: &str = "::endgroup::";

fn cut(s: &str, chars: usize) -> String {
    match s.char_indices().nth(chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn reason(r: &Row) -> String {
    r.last_failure
        .clone()
        .or_else(|| r.failures.last().cloned())
        .unwrap_or_else(|| "not passing: no attempt finished in this run".into())
}

/// One `::error` per criterion still failing, at its line in the PRD; past the limit, the
/// first nine and one saying how many more.
pub fn annotations(s: &Summary, prd_file: &str) -> Vec<String> {
    let failing: Vec<&Row> = s
        .rows
        .iter()
        .filter(|r| r.state == RowState::Fail)
        .collect();
    let shown = if failing.len() > MAX_ANNOTATIONS {
        MAX_ANNOTATIONS - 1
    } else {
        failing.len()
    };
    let mut out: Vec<String> = failing[..shown]
        .iter()
        .map(|r| {
            format!(
                "::error file={},line={},title={}::{}",
                escape_property(prd_file),
                r.line,
                escape_property(&r.id),
                escape_data(&cut(&reason(r), REASON_CHARS))
            )
        })
        .collect();
    if failing.len() > shown {
        let rest: Vec<&str> = failing[shown..].iter().map(|r| r.id.as_str()).collect();
        out.push(format!(
            "::error file={},title={}::{}",
            escape_property(prd_file),
            escape_property(&format!("{} more failing criteria", rest.len())),
            escape_data(&format!(
                "{} more criteria still fail ({}); GitHub shows {MAX_ANNOTATIONS} annotations per step: see the job summary",
                rest.len(),
                rest.join(", ")
            ))
        ));
    }
    // Questions waiting for a person: warnings (GitHub keeps its own count of those).
    for r in s
        .rows
        .iter()
        .filter(|r| r.state == RowState::Parked)
        .take(MAX_ANNOTATIONS)
    {
        out.push(format!(
            "::warning file={},line={},title={}::{}",
            escape_property(prd_file),
            r.line,
            escape_property(&format!("{} asks", r.id)),
            escape_data(&cut(
                &format!(
                    "{} (answer: prdloop answer <PRD> {} \"<answer>\")",
                    r.question.as_deref().unwrap_or_default(),
                    r.id
                ),
                REASON_CHARS
            ))
        ));
    }
    out
}

/// Text for a Markdown table cell: one line, nothing read as markup, HTML or a table border.
fn cell(s: &str) -> String {
    let mut out = String::new();
    for ch in crate::text::one_line(s, CELL_CHARS).chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' => out.push_str("&#124;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '~' => {
                out.push('\\');
                out.push(ch);
            }
            c => out.push(c),
        }
    }
    out
}

fn state(r: &Row) -> String {
    match &r.state {
        RowState::Pass(e) => format!("✅ pass ({})", e.word()),
        RowState::NeedsPerson => "⏸️ needs a person".into(),
        RowState::Parked => format!("❓ asks: {}", r.question.as_deref().unwrap_or_default()),
        RowState::Fail => "❌ fail".into(),
        RowState::Waiting(on) => format!("⏳ waiting for {on}"),
    }
}

/// The job summary: the outcome, then a table of the criteria. It stays under GitHub's
/// 1 MiB per step by leaving rows out (and saying so).
pub fn step_summary(s: &Summary, prd_file: &str) -> String {
    // A blank line first: what an earlier step appended may not end its last line.
    let mut head = String::from("\n");
    let _ = writeln!(head, "## prdloop: {}\n", cell(&s.title));
    let _ = writeln!(head, "**{}**\n", cell(&s.headline));
    let _ = writeln!(
        head,
        "{}/{} criteria passing · {} iteration(s) · {} · ${:.4} · tokens {} in, {} out · PRD `{}`\n",
        s.passing,
        s.total,
        s.iterations,
        report::duration(s.elapsed),
        s.cost,
        s.usage.input_tokens,
        s.usage.output_tokens,
        prd_file.replace('`', "'")
    );
    head.push_str("| Criterion | Line | State | Attempts | Cost | Last failure |\n");
    head.push_str("| --- | ---: | --- | ---: | ---: | --- |\n");
    let mut rows = String::new();
    let mut left_out = 0;
    for r in &s.rows {
        let anti = if r.anti { " (anti)" } else { "" };
        let failure = match r.state {
            RowState::Fail => cell(&reason(r)),
            _ => String::new(),
        };
        let line = format!(
            "| {}{anti} | {} | {} | {} | ${:.4} | {failure} |\n",
            cell(&r.id),
            r.line,
            state(r),
            r.attempts,
            r.cost
        );
        if head.len() + rows.len() + line.len() > SUMMARY_BUDGET {
            left_out += 1;
        } else {
            rows.push_str(&line);
        }
    }
    let mut out = head + &rows;
    if left_out > 0 {
        let _ = writeln!(
            out,
            "\n{left_out} more criteria left out: the job summary holds at most 1 MiB."
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_command_escaping_follows_the_toolkit() {
        assert_eq!(escape_data("50% a:b,c\r\nd"), "50%25 a:b,c%0D%0Ad");
        assert_eq!(escape_property("50% a:b,c\r\nd"), "50%25 a%3Ab%2Cc%0D%0Ad");
        assert_eq!(group(2, 1, 3), "::group::iteration 2 (1/3 passing)");
    }

    #[test]
    fn table_cells_hold_no_markup_and_one_line() {
        assert_eq!(
            cell("a | <b>\n*x* [l](u) `c` \\"),
            "a &#124; &lt;b&gt; \\*x\\* \\[l\\](u) \\`c\\` \\\\"
        );
        assert_eq!(cell(&"é".repeat(300)).chars().count(), CELL_CHARS + 1);
    }
}
