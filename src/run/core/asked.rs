//! Questions in the run: a worker's `QUESTION:` parks its criterion (no worker starts for it,
//! the other lanes go on); the PRD's question book on disk is the record, read at the start
//! and again when it changes, so an answer given meanwhile (`prdloop answer`, the dashboard)
//! un-parks the criterion in this run, and one given later reaches the next run.

use super::{Core, Now};
use crate::questions::{Book, Question};
use crate::run::event::{Flush, Response, RunEvent};

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

    /// A worker asked about its criterion: it parks.
    pub(in crate::run) fn asked(&mut self, id: &str, question: &str, now: Now) -> Response {
        let mut r = Response::default();
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
        r.asked.push(q);
        r.say(RunEvent::Asked {
            id: id.to_string(),
            question: question.to_string(),
            prd: self.cfg.prd_path.clone(),
        });
        r.flush(Flush::Soon);
        r
    }

    /// The book as it is on disk now: criteria answered meanwhile are worked on again (in
    /// this iteration, if one runs; else the next one takes them).
    pub(in crate::run) fn questions_read(&mut self, book: Book) -> Response {
        let mut r = Response::default();
        let was_open: Vec<String> = self
            .questions
            .open_questions()
            .map(|q| q.criterion.clone())
            .collect();
        // A question this run asked that did not reach the file (it could not be written)
        // stays open: only an answer un-parks.
        let mut book = book;
        for q in self.questions.open_questions() {
            if !book
                .questions
                .iter()
                .any(|b| b.criterion == q.criterion && b.asked_at == q.asked_at)
            {
                book.questions.push(q.clone());
            }
        }
        self.questions = book;
        for id in was_open {
            if self.questions.open(&id).is_some() {
                continue;
            }
            let answer = self
                .questions
                .answered(&id)
                .last()
                .and_then(|q| q.answer.clone())
                .unwrap_or_default();
            r.say(RunEvent::Answered {
                id: id.clone(),
                answer,
            });
            if self.ledger.passing(&id) {
                continue;
            }
            if let Some(c) = self.doc.criterion(&id) {
                self.schedule.unpark(&id, &c.domain, self.rounds.is_open());
            }
        }
        r.flush(Flush::Soon);
        r
    }
}
