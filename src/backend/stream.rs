//! A worker's stdout read line by line by its agent's reader (see [`super::contract::Reader`])
//! into an [`Outcome`], with what the worker is doing while it works and the tool calls the
//! stuck watch counts. Plain-text formats keep the tail of stdout. Tolerates unknown events,
//! non-JSON lines and invalid UTF-8.

use super::claude::command::OutputFormat;
use super::contract::{Reader, Seen};
use super::outcome::{Activity, Outcome};
use super::stuck::ToolCall;

/// Most bytes of text kept for the text output formats.
pub(super) const TEXT_TAIL: usize = 64 * 1024;
/// Most QUESTION lines kept from text that scrolled out of the tail.
const ASKED_KEPT: usize = 16;

/// Parses a worker's stdout line by line.
#[derive(Debug)]
pub struct StreamParser {
    format: OutputFormat,
    /// The tail of stdout, for the text formats.
    text: Vec<u8>,
    /// Text formats: bytes fed, and bytes cut off the front of `text`, so far.
    fed: usize,
    dropped: usize,
    /// Text formats: each QUESTION line as it came (where it began in the fed bytes, the
    /// line bounded), so that one which scrolls out of the kept tail, however long, is
    /// still asked.
    asked: Vec<(usize, String)>,
    reader: Box<dyn Reader>,
    seen: Seen,
}

impl StreamParser {
    pub fn new(format: OutputFormat) -> Self {
        StreamParser {
            format,
            text: Vec::new(),
            fed: 0,
            dropped: 0,
            asked: Vec::new(),
            reader: format.agent().backend().reader(),
            seen: Seen::default(),
        }
    }

    fn is_text(&self) -> bool {
        matches!(self.format, OutputFormat::Text | OutputFormat::ResultLines)
    }

    /// The tool calls read since the last call, in order.
    pub fn take_calls(&mut self) -> Vec<ToolCall> {
        self.seen.take_calls()
    }

    /// What the worker is doing now, when that changed since the last call (display only).
    pub fn take_activity(&mut self) -> Option<Activity> {
        self.seen.take_activity()
    }

    /// Feeds one line of stdout (without its `\n`).
    pub fn feed_line(&mut self, line: &[u8]) {
        if self.is_text() {
            if self.asked.len() < ASKED_KEPT && line.windows(9).any(|w| w == b"QUESTION:") {
                let text = String::from_utf8_lossy(line);
                if let Some(q) = super::verdict::question_lines(&text).pop() {
                    self.asked
                        .push((self.fed, format!("QUESTION: {} {}", q.id, q.text)));
                }
            }
            self.text.extend_from_slice(line);
            self.text.push(b'\n');
            self.fed += line.len() + 1;
            if self.text.len() > 2 * TEXT_TAIL {
                let cut = self.text.len() - TEXT_TAIL;
                self.text.drain(..cut);
                self.dropped += cut;
            }
            return;
        }
        let trimmed = line.trim_ascii();
        if !trimmed.is_empty() {
            self.reader.line(&mut self.seen, trimmed);
        }
    }

    pub fn finish(mut self) -> Outcome {
        let mut o = std::mem::take(&mut self.seen.outcome);
        o.agent = self.format.agent();
        if self.is_text() {
            // The questions whose line began in what was cut off, bounded, then the tail.
            let mut text: String = self
                .asked
                .iter()
                .filter(|(at, _)| *at < self.dropped)
                .map(|(_, q)| format!("{q}\n"))
                .collect();
            text.push_str(&String::from_utf8_lossy(&self.text));
            o.final_text = (!text.trim().is_empty()).then_some(text);
        }
        self.reader.finish(&mut o);
        o
    }
}
