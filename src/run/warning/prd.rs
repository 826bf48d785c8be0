//! What a sync of the PRD (`run::prd_writer`) warns about: the file broken or lost criteria,
//! edits by others it undid or could not merge (kept aside, nothing lost). Here and not in
//! `prd_writer`, which reads the run's core: the run's events carry these.

use std::fmt;
use std::path::PathBuf;

/// Why the PRD cannot be read or written during a run. Said once while it stays so: a sync
/// that finds the same again says nothing new.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrdBroken {
    /// It cannot be read any more: deleted, moved or replaced.
    Gone {
        path: std::path::PathBuf,
        why: Unreadable,
    },
    /// It was edited into a state that does not parse: the parser's error, at its line.
    Unparsable {
        path: std::path::PathBuf,
        error: crate::prd::ParseError,
    },
}

impl std::fmt::Display for PrdBroken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrdBroken::Gone { path, why } => write!(
                f,
                "{} cannot be read any more ({why}): it was deleted, moved or replaced during the run",
                path.display()
            ),
            PrdBroken::Unparsable { path, error } => f.write_str(&error.at(path)),
        }
    }
}

/// Why the PRD's path holds no file to read.
#[derive(Debug, Clone, Eq)]
pub enum Unreadable {
    /// Something else is there (a folder).
    NotAFile,
    /// Reading it failed: the error's kind and OS code (what makes it the same failure again)
    /// and its text.
    Io {
        kind: std::io::ErrorKind,
        code: Option<i32>,
        text: String,
    },
}

impl From<&std::io::Error> for Unreadable {
    fn from(e: &std::io::Error) -> Unreadable {
        Unreadable::Io {
            kind: e.kind(),
            code: e.raw_os_error(),
            text: e.to_string(),
        }
    }
}

/// The same failure is the same kind with the same OS code; the text is how it is said.
impl PartialEq for Unreadable {
    fn eq(&self, other: &Unreadable) -> bool {
        match (self, other) {
            (Unreadable::NotAFile, Unreadable::NotAFile) => true,
            (
                Unreadable::Io { kind, code, .. },
                Unreadable::Io {
                    kind: k, code: c, ..
                },
            ) => kind == k && code == c,
            _ => false,
        }
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::NotAFile => f.write_str("it is not a file any more"),
            Unreadable::Io { text, .. } => f.write_str(text),
        }
    }
}

/// One warning of the PRD's writer. Its text is its `Display`, which the run says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// The PRD cannot be read or written (newly so).
    Broken(PrdBroken),
    /// Criteria of the run are missing from the PRD on disk.
    Vanished { path: PathBuf, ids: Vec<String> },
    /// A criterion was dropped by its author (a tombstone now).
    Dropped { path: PathBuf, id: String },
    /// A box prdloop manages was changed by someone else: restored.
    BoxRestored {
        path: PathBuf,
        line: usize,
        id: String,
        /// It was ticked (else unticked) outside prdloop.
        ticked: bool,
    },
    /// An edit by someone else that could not be brought into the PRD, kept in `aside`.
    KeptAside {
        path: PathBuf,
        edit: Unmerged,
        aside: PathBuf,
    },
    /// Such an edit, which could not be kept aside either: its text is in the warning.
    NotKeptAside {
        path: PathBuf,
        edit: Unmerged,
        error: String,
        text: String,
    },
}

/// Why an edit by someone else did not come into the PRD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmerged {
    /// Lines written late (into a replaced file, or dropped by a save) that could not be
    /// added: the PRD would not parse or could not be appended to.
    NotAdded,
    /// A change made while prdloop wrote the file that extends no text prdloop knew.
    Conflicting,
}

impl fmt::Display for Unmerged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unmerged::NotAdded => "could not be added",
            Unmerged::Conflicting => "made while prdloop wrote the file could not be merged",
        })
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Broken(broken @ PrdBroken::Gone { .. }) => {
                write!(f, "{broken}; no new workers start")
            }
            Warning::Broken(broken @ PrdBroken::Unparsable { .. }) => write!(
                f,
                "{broken} — the PRD was edited into a broken state; prdloop will not write it until it parses"
            ),
            Warning::Vanished { path, ids } => write!(
                f,
                "{}: {} disappeared from the PRD during the run; prdloop does not write it and starts no new worker",
                path.display(),
                ids.join(", ")
            ),
            Warning::Dropped { path, id } => write!(
                f,
                "{}: {id} was dropped (a tombstone now) during the run; it is no longer worked on or counted",
                path.display()
            ),
            Warning::BoxRestored {
                path,
                line,
                id,
                ticked,
            } => write!(
                f,
                "{}:{line}: the box of {id} was {} outside prdloop during the run; restored (prdloop alone ticks the boxes it manages)",
                path.display(),
                if *ticked { "ticked" } else { "unticked" }
            ),
            Warning::KeptAside { path, edit, aside } => write!(
                f,
                "{}: an edit {edit}; your text is kept in {}",
                path.display(),
                aside.display()
            ),
            Warning::NotKeptAside {
                path,
                edit,
                error,
                text,
            } => write!(
                f,
                "{}: an edit {edit} and could not be kept aside ({error}); it was:\n{text}",
                path.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts are the ones the run has always said (the tests of races and edits match
    /// parts of them).
    #[test]
    fn each_says_what_it_always_said() {
        let p = PathBuf::from("/w/PRD.md");
        let said = [
            Warning::Broken(PrdBroken::Gone {
                path: p.clone(),
                why: Unreadable::NotAFile,
            }),
            Warning::Broken(PrdBroken::Unparsable {
                path: p.clone(),
                error: crate::prd::ParseError {
                    line: 3,
                    message: "bad".into(),
                },
            }),
            Warning::Vanished {
                path: p.clone(),
                ids: vec!["ISC-1".into(), "ISC-2".into()],
            },
            Warning::Dropped {
                path: p.clone(),
                id: "ISC-1".into(),
            },
            Warning::BoxRestored {
                path: p.clone(),
                line: 9,
                id: "ISC-1".into(),
                ticked: false,
            },
            Warning::KeptAside {
                path: p.clone(),
                edit: Unmerged::Conflicting,
                aside: "/w/PRD.md.prdloop-kept-1".into(),
            },
            Warning::NotKeptAside {
                path: p,
                edit: Unmerged::NotAdded,
                error: "disk full".into(),
                text: "- [ ] ISC-9: x\n".into(),
            },
        ]
        .map(|w| w.to_string());
        assert_eq!(
            said,
            [
                "/w/PRD.md cannot be read any more (it is not a file any more): it was deleted, moved or replaced during the run; no new workers start",
                "/w/PRD.md:3: bad — the PRD was edited into a broken state; prdloop will not write it until it parses",
                "/w/PRD.md: ISC-1, ISC-2 disappeared from the PRD during the run; prdloop does not write it and starts no new worker",
                "/w/PRD.md: ISC-1 was dropped (a tombstone now) during the run; it is no longer worked on or counted",
                "/w/PRD.md:9: the box of ISC-1 was unticked outside prdloop during the run; restored (prdloop alone ticks the boxes it manages)",
                "/w/PRD.md: an edit made while prdloop wrote the file could not be merged; your text is kept in /w/PRD.md.prdloop-kept-1",
                "/w/PRD.md: an edit could not be added and could not be kept aside (disk full); it was:\n- [ ] ISC-9: x\n",
            ]
        );
    }

    /// The same failure to read is said once: its kind and code decide, not its words.
    #[test]
    fn the_same_failure_is_the_same_whatever_its_words() {
        let gone = |text: &str| Unreadable::Io {
            kind: std::io::ErrorKind::NotFound,
            code: Some(2),
            text: text.into(),
        };
        assert_eq!(
            gone("No such file or directory (os error 2)"),
            gone("other words")
        );
        assert_ne!(
            Unreadable::from(&std::io::Error::from_raw_os_error(13)),
            gone("x")
        );
        assert_ne!(Unreadable::NotAFile, gone("x"));
    }
}
