//! `prdloop answer <PRD> [<id> <text>]`: answers the question a worker asked about a
//! criterion (which un-parks it: the loop running on the PRD takes it up again within a
//! second, or the next run does), or lists the open questions. The dashboard's answer form
//! calls [`questions::send`], as this command does.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::exit::Exit;
use crate::questions::{self, Question, book_of, send};
use crate::report::json::Version;
use crate::{exit, outln, report};

pub fn answer(s: &crate::config::AnswerSettings) -> Result<Exit> {
    let (path, state_dir, json) = (&s.prd, &s.state_dir, s.json);
    let (id, text) = (s.id.as_deref(), s.text.as_deref());
    let (Some(id), Some(text)) = (id, text) else {
        if id.is_some() {
            report::error(format!(
                "give the answer too: prdloop answer {} {} \"<answer>\"",
                path.display(),
                id.unwrap_or_default()
            ));
            return Ok(exit::Exit::Usage);
        }
        return list(path, state_dir, json);
    };
    let (answered, holder) = send(path, state_dir, id, text)?;
    let q = match answered {
        Ok(q) => q,
        Err(e) => {
            report::error(format!("{}: {e}; nothing changed", path.display()));
            return Ok(exit::Exit::Usage);
        }
    };
    let report = Answered {
        criterion: &q.criterion,
        question: &q.question,
        answer: q.answer.as_deref(),
        running: holder.as_ref().map(|h| h.session_id.as_str()),
        version: Version,
    };
    let mut out = String::new();
    if json {
        report::json::push_report_line(&mut out, &report)?;
    } else {
        report.text(&mut out, path);
    }
    report::stdout(&out)?;
    Ok(exit::Exit::Success)
}

/// The question answered, and the session of the loop running on the PRD (`null`: none).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Answered<'a> {
    criterion: &'a str,
    question: &'a str,
    answer: Option<&'a str>,
    running: Option<&'a str>,
    version: Version,
}

impl Answered<'_> {
    fn text(&self, out: &mut String, prd: &Path) {
        outln!(
            out,
            "answered {}'s question ({}):",
            self.criterion,
            crate::text::one_line(self.question, 200)
        );
        match self.running {
            Some(session) => outln!(
                out,
                "the loop running on it (session {session}) works on {} again within a second, with the answer in its prompt",
                self.criterion
            ),
            None => outln!(
                out,
                "no loop runs on it now: the next `prdloop run` (or `resume`) of {} works on {} with the answer in its prompt",
                prd.display(),
                self.criterion
            ),
        }
    }
}

/// A question of `answer PRD --json`'s list: as the questions book keeps it, with the version
/// of its shape.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    question: &'a Question,
    version: Version,
}

/// The open questions (and the answered ones, with `--json`).
fn list(prd: &Path, state_dir: &Path, json: bool) -> Result<Exit> {
    let (path, _) = book_of(prd, state_dir)?;
    let book = questions::read(&path)?;
    if json {
        let listed: Vec<Listed> = book
            .questions
            .iter()
            .map(|question| Listed {
                question,
                version: Version,
            })
            .collect();
        report::stdout(&format!("{}\n", serde_json::to_string(&listed)?))?;
        return Ok(exit::Exit::Success);
    }
    let mut out = String::new();
    let open: Vec<&Question> = book.open_questions().collect();
    if open.is_empty() {
        outln!(out, "no question of {} waits for an answer", prd.display());
    }
    for q in open {
        outln!(
            out,
            "{}: {}\n  prdloop answer {} {} \"<answer>\"",
            q.criterion,
            crate::text::one_line(&q.question, 500),
            crate::backend::claude::shell_quote(&prd.display().to_string()),
            q.criterion
        );
    }
    report::stdout(&out)?;
    Ok(exit::Exit::Success)
}
