//! Questions a worker asked a person (`QUESTION: <id> <text>`) and their answers, per PRD:
//! `<state dir>/questions/<hash of the PRD's real path>.json`. A question parks its criterion
//! (no worker starts for it) until `prdloop answer` (or the dashboard) answers it; the answer
//! goes into the criterion's next prompts. The book outlives the run that asked, so a later
//! `prdloop run` or `resume` of the PRD finds both. The run and `answer` change it under a
//! file lock, each writing it whole (atomically).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::fsutil::write_atomic;

/// The longest answer kept (characters).
pub const ANSWER_MAX: usize = 4000;
/// Answers of one criterion its prompt carries, the latest ones.
pub const ANSWERS_IN_PROMPT: usize = 5;

pub use crate::state::Question;

/// Every question asked on one PRD, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Book {
    #[serde(default)]
    pub prd: String,
    #[serde(default)]
    pub questions: Vec<Question>,
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnswerError {
    #[error("{id} has no open question{}", open_list(.open))]
    NoQuestion { id: String, open: Vec<String> },
    #[error("the answer is empty")]
    Empty,
}

fn open_list(open: &[String]) -> String {
    if open.is_empty() {
        "; no question of this PRD waits for an answer".into()
    } else {
        format!("; the open ones are: {}", open.join(", "))
    }
}

impl Book {
    /// The criterion's open question.
    pub fn open(&self, id: &str) -> Option<&Question> {
        self.questions
            .iter()
            .find(|q| q.criterion == id && q.open())
    }

    /// Every open question.
    pub fn open_questions(&self) -> impl Iterator<Item = &Question> {
        self.questions.iter().filter(|q| q.open())
    }

    /// The criterion's answered questions, the latest [`ANSWERS_IN_PROMPT`], oldest first.
    pub fn answered(&self, id: &str) -> Vec<&Question> {
        let all: Vec<&Question> = self
            .questions
            .iter()
            .filter(|q| q.criterion == id && !q.open())
            .collect();
        all[all.len().saturating_sub(ANSWERS_IN_PROMPT)..].to_vec()
    }

    /// A worker asked: the criterion's open question, replaced if it had one.
    pub fn ask(&mut self, q: Question) {
        match self
            .questions
            .iter_mut()
            .find(|o| o.criterion == q.criterion && o.open())
        {
            Some(open) => *open = q,
            None => self.questions.push(q),
        }
    }

    /// A person answered the criterion's open question.
    pub fn answer(&mut self, id: &str, text: &str, now_ms: u64) -> Result<Question, AnswerError> {
        let text = crate::text::visible(text.trim());
        if text.trim().is_empty() {
            return Err(AnswerError::Empty);
        }
        let open: Vec<String> = self.open_questions().map(|q| q.criterion.clone()).collect();
        let Some(q) = self
            .questions
            .iter_mut()
            .find(|q| q.criterion == id && q.open())
        else {
            return Err(AnswerError::NoQuestion {
                id: id.to_string(),
                open,
            });
        };
        q.answer = Some(crate::text::cut_to(text, ANSWER_MAX, " …"));
        q.answered_at = Some(now_ms);
        Ok(q.clone())
    }
}

/// Where the book of the PRD at `prd` lives in `state_dir`.
pub fn book_path(state_dir: &Path, prd: &Path) -> PathBuf {
    state_dir
        .join("questions")
        .join(format!("{}.json", crate::state::prd_key(prd)))
}

/// The book at `path` (empty when there is none, or it cannot be read: for showing; what
/// writes it uses [`read`]).
pub fn load(path: &Path) -> Book {
    read(path).unwrap_or_default()
}

/// The book at `path` (empty when there is none). A book that cannot be read or parsed is an
/// error (an I/O one, naming the file and where it broke): it is never written over, so the
/// questions and answers in it are not lost.
pub fn read(path: &Path) -> Result<Book> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Book::default()),
        Err(e) => return Err(e).with_context(|| format!("failed to read `{}`", path.display())),
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::Error::new(std::io::Error::new(std::io::ErrorKind::InvalidData, e)).context(
            format!(
                "the question book `{}` cannot be read: it is kept as it is (fix or remove it)",
                path.display()
            ),
        )
    })
}

/// Changes the book at `path` under its lock and writes it whole; returns what `change`
/// returned.
pub fn update<T>(path: &Path, prd: &Path, change: impl FnOnce(&mut Book) -> T) -> Result<T> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .with_context(|| format!("failed to create `{}`", dir.display()))?;
    let lock_path = path.with_extension("lock");
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("failed to open `{}`", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("failed to lock `{}`", lock_path.display()))?;
    let mut book = match read(path) {
        Ok(b) => b,
        Err(e) => {
            let _ = lock.unlock();
            return Err(e);
        }
    };
    book.prd = prd.display().to_string();
    let out = change(&mut book);
    let bytes = serde_json::to_vec_pretty(&book)?;
    let written = write_atomic(path, &bytes);
    let _ = lock.unlock();
    written?;
    Ok(out)
}

/// The question book of the PRD at `prd`: the running loop's (in its state folder), else
/// the one in `state_dir`.
pub fn book_of(prd: &Path, state_dir: &Path) -> Result<(PathBuf, Option<crate::state::LockInfo>)> {
    let holder = crate::state::lock_holder(prd)?;
    let dir = holder
        .as_ref()
        .map(|h| PathBuf::from(&h.state_dir))
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or_else(|| state_dir.to_path_buf());
    Ok((book_path(&dir, prd), holder))
}

/// Answers `id`'s open question. The outer error is I/O; the inner one, an answer not taken.
pub fn send(
    prd: &Path,
    state_dir: &Path,
    id: &str,
    text: &str,
) -> Result<(
    Result<Question, AnswerError>,
    Option<crate::state::LockInfo>,
)> {
    let (path, holder) = book_of(prd, state_dir)?;
    let now = crate::clock::now_ms();
    let answered = update(&path, prd, |b| b.answer(id, text, now))?;
    Ok((answered, holder))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str, text: &str) -> Question {
        Question {
            criterion: id.into(),
            question: text.into(),
            asked_at: 1,
            session: "s".into(),
            answer: None,
            answered_at: None,
        }
    }

    #[test]
    fn one_open_question_per_criterion_and_answers_kept() {
        let dir = tempfile::tempdir().unwrap();
        let prd = dir.path().join("PRD.md");
        let path = book_path(&dir.path().join("state"), &prd);
        update(&path, &prd, |b| {
            b.ask(q("ISC-1", "cents?"));
            b.ask(q("ISC-1", "cents or euros?"));
            b.ask(q("ISC-2", "which port?"));
        })
        .unwrap();
        let book = load(&path);
        assert_eq!(book.open_questions().count(), 2);
        assert_eq!(book.open("ISC-1").unwrap().question, "cents or euros?");
        let err = update(&path, &prd, |b| b.answer("ISC-3", "x", 5))
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "ISC-3 has no open question; the open ones are: ISC-1, ISC-2"
        );
        assert_eq!(
            update(&path, &prd, |b| b.answer("ISC-1", "  ", 5)).unwrap(),
            Err(AnswerError::Empty)
        );
        update(&path, &prd, |b| b.answer("ISC-1", "cents\x1b[2J", 5))
            .unwrap()
            .unwrap();
        let book = load(&path);
        assert!(book.open("ISC-1").is_none());
        assert_eq!(
            book.answered("ISC-1")[0].answer.as_deref(),
            Some("cents[2J")
        );
        // A new question after the answer: the answer is kept.
        update(&path, &prd, |b| b.ask(q("ISC-1", "and rounding?"))).unwrap();
        let book = load(&path);
        assert_eq!(book.answered("ISC-1").len(), 1);
        assert!(book.open("ISC-1").is_some());
    }

    #[test]
    fn a_book_that_cannot_be_read_is_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        let prd = dir.path().join("PRD.md");
        let path = book_path(&dir.path().join("state"), &prd);
        update(&path, &prd, |b| b.ask(q("ISC-1", "cents?"))).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.insert(1, b'#');
        std::fs::write(&path, &bytes).unwrap();
        let e = update(&path, &prd, |b| b.answer("ISC-1", "cents", 5)).unwrap_err();
        assert_eq!(crate::exit::code_of(&e), crate::exit::Exit::Io);
        let msg = format!("{e:#}");
        assert!(
            msg.contains("cannot be read") && msg.contains("line 1"),
            "{msg}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        let e = send(&prd, &dir.path().join("state"), "ISC-1", "cents").unwrap_err();
        assert!(format!("{e:#}").contains("kept as it is"));
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }
}
