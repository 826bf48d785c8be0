//! The verdict on one worker: its own `RESULT:` line plus its exit status.

use super::outcome::Outcome;
use crate::text::first_line;

/// How the worker process ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "kind"
)]
pub enum Exit {
    Code {
        code: i32,
    },
    Signal {
        signal: i32,
    },
    TimedOut {
        after_secs: u64,
    },
    /// Ended by `--stuck-after`: no new tool input (its calls repeated, or none).
    Stuck(crate::backend::stuck::Stuck),
    Cancelled,
}

impl Exit {
    /// The exit of a child as prdloop records it: its code, else the signal that ended it.
    pub fn of(s: std::process::ExitStatus) -> Exit {
        match (s.code(), crate::platform::signal_of(s)) {
            (Some(code), _) => Exit::Code { code },
            (None, Some(signal)) => Exit::Signal { signal },
            (None, None) => Exit::Code { code: -1 },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict", content = "reason")]
pub enum Verdict {
    Pass,
    Fail(WorkerFail),
}

/// Why a worker's own verdict is a failure, as decided from its exit and its final message.
/// Its words are its `Display`; `--json` carries it as `{"kind": …, …}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum WorkerFail {
    /// It ran past `--timeout`.
    TimedOut {
        after_ms: u64,
    },
    Cancelled,
    /// Ended by `--stuck-after`.
    Stuck {
        stuck: crate::backend::stuck::Stuck,
    },
    /// Killed by a signal.
    Signal {
        signal: i32,
    },
    /// The agent reported an error result (`detail`: the first line it gave).
    AgentError {
        #[serde(skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
    },
    /// A non-zero exit (`after_pass`: it had printed its PASS line); `stderr`: the last line
    /// it wrote there, when the judge adds it.
    ExitStatus {
        code: i32,
        after_pass: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
        #[serde(skip_serializing_if = "Option::is_none")]
        stderr: Option<String>,
    },
    /// It said `RESULT: <id> FAIL` (`text`: its reason, when it gave one).
    WorkerSaidFail {
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// No `RESULT:` line for its criterion.
    NoResultLine {
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        stderr: Option<String>,
        /// It printed a plain `RESULT:` line where its agent speaks JSON (a script run as
        /// `--agent claude`): the hint names `--agent command`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        plain_line: bool,
    },
}

impl WorkerFail {
    /// A failure with no detail of its own gets the last line the agent wrote on stderr.
    pub fn with_stderr(mut self, last: Option<String>) -> WorkerFail {
        match &mut self {
            WorkerFail::ExitStatus { stderr, .. } | WorkerFail::NoResultLine { stderr, .. } => {
                *stderr = last
            }
            _ => {}
        }
        self
    }
}

impl std::fmt::Display for WorkerFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let http = |s: &Option<u16>| s.map(|st| format!(" (HTTP {st})")).unwrap_or_default();
        let stderr = |s: &Option<String>| {
            s.as_ref()
                .map(|l| format!(" (stderr: {l})"))
                .unwrap_or_default()
        };
        match self {
            WorkerFail::TimedOut { after_ms } => write!(
                f,
                "timed out after {}",
                humantime::format_duration(std::time::Duration::from_secs(after_ms / 1000))
            ),
            WorkerFail::Cancelled => write!(f, "cancelled"),
            WorkerFail::Stuck { stuck } => {
                write!(f, "{}; prdloop ended it (--stuck-after)", stuck.describe())
            }
            WorkerFail::Signal { signal } => write!(f, "the agent was killed by signal {signal}"),
            WorkerFail::AgentError {
                detail,
                http_status,
            } => match detail {
                Some(d) => write!(f, "agent error: {d}{}", http(http_status)),
                None => write!(f, "agent error{}", http(http_status)),
            },
            WorkerFail::ExitStatus {
                code,
                after_pass: true,
                stderr: s,
                ..
            } => write!(
                f,
                "the agent exited with status {code} after printing PASS{}",
                stderr(s)
            ),
            WorkerFail::ExitStatus {
                code,
                http_status,
                stderr: s,
                ..
            } => write!(
                f,
                "the agent exited with status {code}{}{}",
                http(http_status),
                stderr(s)
            ),
            WorkerFail::WorkerSaidFail { text: Some(t) } => write!(f, "{t}"),
            WorkerFail::WorkerSaidFail { text: None } => write!(f, "the agent reported FAIL"),
            WorkerFail::NoResultLine {
                id,
                stderr: s,
                plain_line: true,
            } => write!(
                f,
                "a plain `RESULT: {id} …` line where the agent's JSON was expected: run a script \
                 of your own with `--agent command --agent-bin PATH`{}",
                stderr(s)
            ),
            WorkerFail::NoResultLine { id, stderr: s, .. } => write!(
                f,
                "no `RESULT: {id} PASS|FAIL` line in the agent's final message{}",
                stderr(s)
            ),
        }
    }
}

impl Verdict {
    pub fn is_pass(&self) -> bool {
        matches!(self, Verdict::Pass)
    }
}

/// One `RESULT:` line, after markdown emphasis and backticks are set aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultLine {
    pub id: String,
    pub pass: bool,
    pub reason: Option<String>,
}

/// Every `RESULT: <id> PASS|FAIL[: reason]` line of a text, in order.
pub fn result_lines(text: &str) -> Vec<ResultLine> {
    tagged_lines(text, "RESULT:")
}

/// Every `<tag> <id> PASS|FAIL[: reason]` line of a text, in order (`RESULT:` for workers,
/// `VERDICT:` for the verifier).
pub fn tagged_lines(text: &str, tag: &str) -> Vec<ResultLine> {
    text.lines()
        .filter_map(|l| parse_tagged_line(l, tag))
        .collect()
}

fn parse_tagged_line(line: &str, tag: &str) -> Option<ResultLine> {
    let cleaned: String = line.chars().filter(|c| !matches!(c, '*' | '`')).collect();
    let s = cleaned
        .trim()
        .trim_start_matches(['>', '#', '-', '_', ' ', '\t'])
        .trim_end_matches(['_', ' ', '\t']);
    let rest = s.strip_prefix(tag)?.trim_start();
    let mut parts = rest.splitn(2, char::is_whitespace);
    let id = parts.next()?.trim_end_matches(':');
    let after = parts.next().unwrap_or("").trim_start();
    if id.is_empty() {
        return None;
    }
    let word_end = after
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(after.len());
    let (word, tail) = after.split_at(word_end);
    let pass = match word {
        "PASS" => true,
        "FAIL" => false,
        _ => return None,
    };
    let reason = tail
        .trim_start_matches([':', '-', '—', '.', ' ', '\t'])
        .trim();
    Some(ResultLine {
        id: id.to_string(),
        pass,
        reason: (!reason.is_empty()).then(|| reason.to_string()),
    })
}

/// The longest question kept (characters): a question is one line for a person.
pub const QUESTION_MAX: usize = 2000;

/// One `QUESTION: <id> <text>` line: a worker that cannot go on without a person's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionLine {
    pub id: String,
    /// On one line, without control characters, bounded.
    pub text: String,
}

/// Every `QUESTION: <id> <text>` line of a text, in order (markdown emphasis and backticks
/// around it are fine, as for `RESULT:`).
pub fn question_lines(text: &str) -> Vec<QuestionLine> {
    text.lines()
        .filter_map(|line| {
            let s = line
                .trim()
                .trim_start_matches(['>', '#', '-', '_', '*', '`', ' ', '\t']);
            let rest = s.strip_prefix("QUESTION:")?.trim_start();
            let (id, q) = rest.split_once(char::is_whitespace)?;
            let id = id.trim_end_matches([':', '*', '`']);
            let q = q.trim().trim_end_matches(['*', '`', '_']).trim();
            (!id.is_empty() && !q.is_empty()).then(|| QuestionLine {
                id: id.to_string(),
                text: crate::text::one_line(q, QUESTION_MAX),
            })
        })
        .collect()
}

/// What a worker's final text said that is not taken. Its text is its `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// The worker for `id` wrote a `RESULT:` line for `other`.
    ResultForOther { id: String, other: String },
    /// The worker for `id` asked a question for `other` (it parks nothing).
    QuestionForOther { id: String, other: String },
    /// The worker for `id` asked a question and reported a result: the question parks it.
    ResultBesideQuestion { id: String },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // `other` is what the worker wrote: one line, its control characters escaped.
            Warning::ResultForOther { id, other } => write!(
                f,
                "the worker for {id} reported a result for {}; ignored",
                crate::text::one_line(other, 80)
            ),
            Warning::QuestionForOther { id, other } => write!(
                f,
                "the worker for {id} asked a question for {}; ignored (a worker asks only about its own criterion)",
                crate::text::one_line(other, 80)
            ),
            Warning::ResultBesideQuestion { id } => write!(
                f,
                "the worker for {id} asked a question and reported a result: the question parks it, the result is not taken"
            ),
        }
    }
}

/// The question a worker for `id` asks in its final text (its own lines joined, in order),
/// and warnings about questions it asked for other criteria: those are ignored, and never
/// park another criterion.
pub fn question(id: &str, exit: &Exit, outcome: &Outcome) -> (Option<String>, Vec<Warning>) {
    // Only a worker that ended by itself asks: a killed or stuck one said nothing final.
    if !matches!(exit, Exit::Code { .. }) || outcome.is_error {
        return (None, Vec::new());
    }
    let text = outcome.final_text.as_deref().unwrap_or("");
    let mut own = Vec::new();
    let mut warnings = Vec::new();
    for q in question_lines(text) {
        if q.id == id {
            own.push(q.text);
        } else {
            warnings.push(Warning::QuestionForOther {
                id: id.to_string(),
                other: q.id,
            });
        }
    }
    let joined = own.join(" / ");
    let q = (!own.is_empty()).then(|| crate::text::one_line(&joined, QUESTION_MAX));
    (q, warnings)
}

/// PASS only when the process exited 0, the result is not an error, and the final text has a
/// line `RESULT: <id> PASS`; the last RESULT line for the id wins. Returns the verdict and
/// warnings (RESULT lines for other ids).
pub fn verdict(id: &str, exit: &Exit, outcome: &Outcome) -> (Verdict, Vec<Warning>) {
    let mut warnings = Vec::new();
    let text = outcome.final_text.as_deref().unwrap_or("");
    let mut own: Option<ResultLine> = None;
    for r in result_lines(text) {
        if r.id == id {
            own = Some(r);
        } else {
            warnings.push(Warning::ResultForOther {
                id: id.to_string(),
                other: r.id,
            });
        }
    }
    let v = match exit {
        Exit::TimedOut { after_secs } => Verdict::Fail(WorkerFail::TimedOut {
            after_ms: after_secs * 1000,
        }),
        Exit::Cancelled => Verdict::Fail(WorkerFail::Cancelled),
        Exit::Stuck(s) => Verdict::Fail(WorkerFail::Stuck { stuck: s.clone() }),
        Exit::Signal { signal } => Verdict::Fail(WorkerFail::Signal { signal: *signal }),
        Exit::Code { code } if outcome.is_error => Verdict::Fail(error_of(outcome, *code)),
        Exit::Code { code } if *code != 0 => Verdict::Fail(match &own {
            Some(r) if r.pass => WorkerFail::ExitStatus {
                code: *code,
                after_pass: true,
                http_status: None,
                stderr: None,
            },
            _ => error_of(outcome, *code),
        }),
        Exit::Code { .. } => match own {
            Some(r) if r.pass => Verdict::Pass,
            Some(r) => Verdict::Fail(WorkerFail::WorkerSaidFail { text: r.reason }),
            None => Verdict::Fail(WorkerFail::NoResultLine {
                id: id.to_string(),
                stderr: None,
                plain_line: outcome.plain_result_line,
            }),
        },
    };
    (v, warnings)
}

fn error_of(o: &Outcome, code: i32) -> WorkerFail {
    let detail = if !o.errors.is_empty() {
        Some(o.errors.join("; "))
    } else if o.is_error {
        o.final_text.clone()
    } else {
        None
    };
    let http_status = o.api_error_status;
    if o.is_error {
        WorkerFail::AgentError {
            detail: detail.map(|d| first_line(&d).to_string()),
            http_status,
        }
    } else {
        WorkerFail::ExitStatus {
            code,
            after_pass: false,
            http_status,
            stderr: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_text(t: &str) -> Outcome {
        Outcome {
            final_text: Some(t.into()),
            has_result: true,
            ..Default::default()
        }
    }

    const OK: Exit = Exit::Code { code: 0 };

    #[test]
    fn own_pass_line() {
        let (v, w) = verdict("ISC-1", &OK, &with_text("did it\n**RESULT: ISC-1 PASS**"));
        assert_eq!(v, Verdict::Pass);
        assert!(w.is_empty());
        let (v, _) = verdict("ISC-1", &OK, &with_text("`RESULT: ISC-1 PASS`"));
        assert_eq!(v, Verdict::Pass);
    }

    #[test]
    fn prefix_ids_do_not_match() {
        let (v, w) = verdict("ISC-1", &OK, &with_text("RESULT: ISC-11 PASS"));
        assert!(!v.is_pass());
        assert_eq!(
            w,
            [Warning::ResultForOther {
                id: "ISC-1".into(),
                other: "ISC-11".into()
            }]
        );
        let (v, _) = verdict("ISC-11", &OK, &with_text("RESULT: ISC-1 PASS"));
        assert!(!v.is_pass());
    }

    #[test]
    fn last_line_wins_and_reason() {
        let (v, _) = verdict(
            "ISC-1",
            &OK,
            &with_text("RESULT: ISC-1 PASS\nRESULT: ISC-1 FAIL: tests red"),
        );
        assert_eq!(
            v,
            Verdict::Fail(WorkerFail::WorkerSaidFail {
                text: Some("tests red".into())
            })
        );
        let (v, _) = verdict(
            "ISC-1",
            &OK,
            &with_text("RESULT: ISC-1 FAIL: x\nRESULT: ISC-1 PASS"),
        );
        assert_eq!(v, Verdict::Pass);
    }

    #[test]
    fn exit_code_and_is_error_override_pass() {
        let (v, _) = verdict(
            "ISC-1",
            &Exit::Code { code: 1 },
            &with_text("RESULT: ISC-1 PASS"),
        );
        assert!(!v.is_pass());
        let mut o = with_text("RESULT: ISC-1 PASS");
        o.is_error = true;
        let (v, _) = verdict("ISC-1", &OK, &o);
        assert!(!v.is_pass());
        let (v, _) = verdict(
            "ISC-1",
            &Exit::Signal { signal: 9 },
            &with_text("RESULT: ISC-1 PASS"),
        );
        assert!(!v.is_pass());
    }

    #[test]
    fn a_question_is_its_own_criterions_only() {
        let t = "I need a decision.\n**QUESTION: ISC-1 Should prices be in cents or euros?**\n\
                 QUESTION: ISC-2 please skip ISC-2\nQUESTION: ISC-11 other\nQUESTION: ISC-1\n";
        let (q, w) = question("ISC-1", &OK, &with_text(t));
        assert_eq!(q.as_deref(), Some("Should prices be in cents or euros?"));
        assert_eq!(
            w,
            [
                Warning::QuestionForOther {
                    id: "ISC-1".into(),
                    other: "ISC-2".into()
                },
                Warning::QuestionForOther {
                    id: "ISC-1".into(),
                    other: "ISC-11".into()
                }
            ]
        );
        let (q, w) = question("ISC-3", &OK, &with_text(t));
        assert_eq!((q, w.len()), (None, 3));
        // Killed, or an error result: no question.
        let (q, _) = question("ISC-1", &Exit::Signal { signal: 9 }, &with_text(t));
        assert_eq!(q, None);
        // One line, no control characters, bounded.
        let long = format!("QUESTION: ISC-1 a\x1b[31m{}", "x".repeat(5000));
        let (q, _) = question("ISC-1", &OK, &with_text(&long));
        let q = q.unwrap();
        assert!(!q.contains('\x1b') && q.chars().count() <= QUESTION_MAX + 1);
    }

    #[test]
    fn substring_is_not_a_result() {
        let (v, _) = verdict("ISC-1", &OK, &with_text("print ISC-1 PASS when done"));
        assert!(!v.is_pass());
        let (v, _) = verdict("ISC-1", &OK, &with_text("RESULT: ISC-1 PASSED"));
        assert!(!v.is_pass());
    }

    #[test]
    fn the_warnings_say_what_they_always_said() {
        let said = [
            Warning::ResultForOther {
                id: "ISC-1".into(),
                other: "ISC-2".into(),
            },
            Warning::QuestionForOther {
                id: "ISC-1".into(),
                other: "ISC-2".into(),
            },
            Warning::ResultBesideQuestion { id: "ISC-1".into() },
        ]
        .map(|w| w.to_string());
        assert_eq!(
            said,
            [
                "the worker for ISC-1 reported a result for ISC-2; ignored",
                "the worker for ISC-1 asked a question for ISC-2; ignored (a worker asks only about its own criterion)",
                "the worker for ISC-1 asked a question and reported a result: the question parks it, the result is not taken",
            ]
        );
    }

    #[test]
    fn a_result_for_another_criterion_never_brings_its_control_characters_along() {
        // A hostile worker's id with an OSC 8 link around it: the escape and the bell go.
        let (_, warnings) = verdict(
            "ISC-1",
            &OK,
            &with_text("RESULT: \u{1b}]8;;http://x\u{7}ISC-9 PASS"),
        );
        let said: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(!said[0].contains(['\u{1b}', '\u{7}']), "{said:?}");
        assert!(said[0].starts_with("the worker for ISC-1 reported a result for"));
    }
}
