//! The names of a session's log files, in one place: the launch writes them, `prdloop logs`
//! reads them back. `iter<I>-<ID>-attempt<A>[-retry<R>][-sample<S>][-verify|-verifier].log`,
//! the id as a file name part ([`crate::text::file_safe`]).

use std::fmt;

/// Whose log it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// The worker's own output.
    Worker,
    /// The runner's check of its claimed PASS.
    Verify,
    /// The independent verifier's review.
    Verifier,
    /// `--setup`, run in the lane the attempt made anew.
    Setup,
}

/// One log file's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogName {
    pub iteration: u64,
    /// The criterion, as a file name part.
    pub id: String,
    pub attempt: u32,
    /// A try of the same attempt after an agent failure (0: the first).
    pub retry: u32,
    /// Best-of-N: the sample, from 1.
    pub sample: Option<u32>,
    pub kind: LogKind,
}

impl LogName {
    /// The worker log of criterion `id` (as written in the PRD).
    pub fn worker(
        iteration: u64,
        id: &str,
        attempt: u32,
        retry: u32,
        sample: Option<u32>,
    ) -> LogName {
        LogName {
            iteration,
            id: crate::text::file_safe(id),
            attempt,
            retry,
            sample,
            kind: LogKind::Worker,
        }
    }

    /// The same attempt's log of another kind.
    pub fn of_kind(&self, kind: LogKind) -> LogName {
        LogName {
            kind,
            ..self.clone()
        }
    }

    /// Whether it is a log of criterion `id` (as written in the PRD).
    pub fn is_of(&self, id: &str) -> bool {
        self.id == crate::text::file_safe(id)
    }

    /// The attempt's name among the criterion's, as its pinned ref has it
    /// (`refs/prdloop/<session>/<id>/<name>`): `3`, `3-retry1`, `3-s2`.
    pub fn attempt_name(&self) -> String {
        let mut s = self.attempt.to_string();
        if self.retry > 0 {
            s.push_str(&format!("-retry{}", self.retry));
        }
        if let Some(k) = self.sample {
            s.push_str(&format!("-s{k}"));
        }
        s
    }

    /// The name without `.log`.
    pub fn stem(&self) -> String {
        let mut s = format!("iter{}-{}-attempt{}", self.iteration, self.id, self.attempt);
        if self.retry > 0 {
            s.push_str(&format!("-retry{}", self.retry));
        }
        if let Some(k) = self.sample {
            s.push_str(&format!("-sample{k}"));
        }
        match self.kind {
            LogKind::Worker => {}
            LogKind::Verify => s.push_str("-verify"),
            LogKind::Verifier => s.push_str("-verifier"),
            LogKind::Setup => s.push_str("-setup"),
        }
        s
    }

    /// Reads a file name back; `None` for a file that is not a log of this shape.
    pub fn parse(file_name: &str) -> Option<LogName> {
        let name = file_name.strip_suffix(".log")?;
        let rest = name.strip_prefix("iter")?;
        let (iteration, rest) = rest.split_once('-')?;
        let (id, tail) = rest.rsplit_once("-attempt")?;
        if id.is_empty() {
            return None;
        }
        let mut parts = tail.split('-');
        let attempt = parts.next()?.parse().ok()?;
        let mut n = LogName {
            iteration: iteration.parse().ok()?,
            id: id.to_string(),
            attempt,
            retry: 0,
            sample: None,
            kind: LogKind::Worker,
        };
        for p in parts {
            match p {
                "verify" if n.kind == LogKind::Worker => n.kind = LogKind::Verify,
                "verifier" if n.kind == LogKind::Worker => n.kind = LogKind::Verifier,
                "setup" if n.kind == LogKind::Worker => n.kind = LogKind::Setup,
                _ if n.kind != LogKind::Worker => return None,
                p => {
                    if let Some(r) = p.strip_prefix("retry") {
                        n.retry = r.parse().ok().filter(|r| *r > 0)?;
                    } else if let Some(k) = p.strip_prefix("sample") {
                        n.sample = Some(k.parse().ok()?);
                    } else {
                        return None;
                    }
                }
            }
        }
        Some(n)
    }
}

impl fmt::Display for LogName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.log", self.stem())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_as_the_launch_writes_them() {
        let n = LogName::worker(3, "ISC-A-1", 2, 0, None);
        assert_eq!(n.to_string(), "iter3-ISC-A-1-attempt2.log");
        assert_eq!(
            LogName::worker(1, "ISC-A-1", 1, 2, Some(3))
                .of_kind(LogKind::Verifier)
                .to_string(),
            "iter1-ISC-A-1-attempt1-retry2-sample3-verifier.log"
        );
        assert_eq!(LogName::parse("attempts.jsonl"), None);
        assert_eq!(
            LogName::worker(1, "X", 3, 1, None).attempt_name(),
            "3-retry1"
        );
        assert_eq!(
            LogName::worker(1, "X", 3, 0, Some(2)).attempt_name(),
            "3-s2"
        );
        assert_eq!(
            LogName::parse("iter1-ISC-A-1-attempt1-others-ISC-B-1-verify.log"),
            None
        );
        let long = format!("ISC-{}", "L".repeat(258));
        let n = LogName::worker(1, &long, 1, 0, None);
        assert!(n.to_string().len() < 120);
        assert!(LogName::parse(&n.to_string()).unwrap().is_of(&long));
    }

    proptest! {
        #[test]
        fn every_name_reads_back_as_written(
            iteration in 0u64..1000,
            id in "[A-Za-z0-9 ./_-]{1,300}",
            attempt in 1u32..100,
            retry in 0u32..5,
            sample in proptest::option::of(1u32..9),
            kind in 0u8..3,
        ) {
            let kind = [LogKind::Worker, LogKind::Verify, LogKind::Verifier][kind as usize];
            let n = LogName::worker(iteration, &id, attempt, retry, sample).of_kind(kind);
            let back = LogName::parse(&n.to_string());
            prop_assert_eq!(back.as_ref(), Some(&n));
            prop_assert!(back.unwrap().is_of(&id));
        }
    }
}
