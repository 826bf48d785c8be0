//! Questions in the run: a worker's `QUESTION:` parks its criterion (no worker starts for it,
//! the other lanes go on); the PRD's question book on disk is the record, read at the start
//! and again when it changes, so an answer given meanwhile (`prdloop answer`, the dashboard)
//! un-parks the criterion in this run, and one given later reaches the next run.

use std::path::{Path, PathBuf};

use super::{Core, Now};
use crate::questions::{Book, Question};
use crate::run::event::{Effects, Flush, RunEvent};

/// The PRD's questions as the run knows them, and where their book is (the book on disk is
/// the record; the dispatcher writes and reads it).
#[derive(Debug)]
pub(in crate::run) struct Questions {
    book: Book,
    path: PathBuf,
}

impl Questions {
    pub fn at(path: PathBuf) -> Questions {
        Questions {
            book: Book::default(),
            path,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every question, open and answered.
    pub fn all(&self) -> &[Question] {
        &self.book.questions
    }

    /// The criterion's open question.
    pub fn open(&self, id: &str) -> Option<&Question> {
        self.book.open(id)
    }

    fn open_ids(&self) -> Vec<String> {
        self.book
            .open_questions()
            .map(|q| q.criterion.clone())
            .collect()
    }

    /// The criterion's answered questions, oldest first.
    pub fn answered(&self, id: &str) -> Vec<&Question> {
        self.book.answered(id)
    }

    /// The answer to the criterion's last answered question.
    fn answer(&self, id: &str) -> String {
        self.answered(id)
            .last()
            .and_then(|q| q.answer.clone())
            .unwrap_or_default()
    }

    fn ask(&mut self, q: Question) {
        self.book.ask(q);
    }

    /// The book as it is on disk now. A question this run asked that did not reach the file
    /// (it could not be written) stays open: only an answer un-parks.
    fn take(&mut self, mut book: Book) {
        for q in self.book.open_questions() {
            if !book
                .questions
                .iter()
                .any(|b| b.criterion == q.criterion && b.asked_at == q.asked_at)
            {
                book.questions.push(q.clone());
            }
        }
        self.book = book;
    }
}

impl Core {
    /// Whether a criterion waits for a person's answer.
    pub fn parked(&self, id: &str) -> bool {
        self.questions.open(id).is_some()
    }

    /// The open questions of the run's criteria, in the PRD's order: (criterion, question).
    pub fn open_questions(&self) -> Vec<(String, String)> {
        self.doc
            .criteria
            .iter()
            .filter_map(|c| {
                self.questions
                    .open(&c.id)
                    .map(|q| (c.id.clone(), q.question.clone()))
            })
            .collect()
    }

    /// A worker asked about its criterion: it parks, and that is said. Returns the question,
    /// for the caller to file in the question book (`Effect::Ask`) after the attempt's record.
    pub(in crate::run) fn asked(
        &mut self,
        id: &str,
        question: &str,
        now: Now,
        r: &mut Effects,
    ) -> Question {
        let q = Question {
            criterion: id.to_string(),
            question: question.to_string(),
            asked_at: now.ms,
            session: self.session.clone(),
            answer: None,
            answered_at: None,
        };
        self.questions.ask(q.clone());
        self.schedule.park(id);
        r.say(RunEvent::Asked {
            id: id.to_string(),
            question: question.to_string(),
            prd: self.cfg.prd_path.clone(),
        });
        r.flush(Flush::Soon);
        q
    }

    /// The book as it is on disk now: criteria answered meanwhile are worked on again (in
    /// this iteration, if one runs; else the next one takes them).
    pub(in crate::run) fn questions_read(&mut self, book: Book) -> Effects {
        let mut r = Effects::default();
        let was_open = self.questions.open_ids();
        self.questions.take(book);
        for id in was_open {
            if self.questions.open(&id).is_some() {
                continue;
            }
            let answer = self.questions.answer(&id);
            r.say(RunEvent::Answered {
                id: id.clone(),
                answer,
            });
            if self.ledger.passing(&id) {
                continue;
            }
            self.schedule.unpark(&id);
        }
        r.flush(Flush::Soon);
        r
    }
}
