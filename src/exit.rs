//! How prdloop ends: [`Exit`], each variant with its number in one place ([`Exit::code`]).
//! Documented in `--help` and the README.

/// How a command ended. Its number is the process's exit code ([`Exit::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exit {
    /// Every criterion passes (or: the command did what was asked).
    Success,
    /// The loop ended without completing: iteration limit, stall limit, paused or stopped by
    /// request; `verify` found failing criteria.
    Failure,
    /// Usage or input error: a bad flag, a malformed PRD, a missing agent binary, PAI's folders
    /// unknown (neither `PAI_DIR` nor `HOME` set), `--sandbox on` where it cannot be had.
    Usage,
    /// Another live loop holds this PRD's lock.
    Locked,
    /// Only `Verify: Custom` criteria still fail: a person must check them.
    Blocked,
    /// The agent cannot work at all (authentication, billing, or the agent program cannot be
    /// started); retrying cannot help.
    AgentFatal,
    /// A file or folder could not be read or written (permissions, a full disk, a read-only
    /// folder): the environment failed, not the input.
    Io,
    /// `merge` refused a bundle: not of this PRD, commit or split, or tampered with (the
    /// message names the file and the field); nothing was changed.
    Refused,
    /// Waiting for answers: what is left is parked on questions workers asked (and `Verify:
    /// Custom` criteria); `prdloop answer` un-parks them for the next run.
    Questions,
    /// `audit` could re-check no tick: none has a receipt of a command that is still the
    /// criterion's Verify method (ticked by hand, no state folder, the methods changed).
    Unchecked,
    /// GitHub or `origin` refused or failed: an HTTP error from the tracker's API (the message
    /// names the status, the repository and what to do), or `--pr`'s push refused (the
    /// remote branch moved elsewhere; nothing is force-pushed).
    Remote,
    /// Interrupted by Ctrl-C or SIGTERM; the PRD is left `loopStatus: paused`.
    Interrupted,
    /// The exit code of the program prdloop ran in the foreground (`-m interactive` passes
    /// claude's on).
    Child(u8),
}

impl Exit {
    /// The process's exit code: the one place the numbers are written.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Locked => 3,
            Exit::Blocked => 4,
            Exit::AgentFatal => 5,
            Exit::Io => 6,
            Exit::Refused => 7,
            Exit::Questions => 8,
            Exit::Unchecked => 9,
            Exit::Remote => 10,
            Exit::Interrupted => 130,
            Exit::Child(code) => code,
        }
    }

    /// How bad it is, for the one exit code of several runs (the worst wins): an error (I/O,
    /// then GitHub's or origin's, then a refused bundle, then usage or input) > interrupted > the agent cannot work >
    /// another loop holds a PRD's lock (it did not run) > not completed > waiting for answers
    /// > blocked > success.
    fn severity(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Blocked => 1,
            Exit::Questions => 2,
            Exit::Unchecked => 3,
            Exit::Failure => 4,
            Exit::Locked => 5,
            Exit::AgentFatal => 6,
            Exit::Interrupted => 7,
            Exit::Usage => 8,
            Exit::Refused => 9,
            Exit::Remote => 10,
            Exit::Io => 11,
            // Another program's code: unknown, so an error.
            Exit::Child(0) => 0,
            Exit::Child(_) => 12,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.code())
    }
}

/// In `--json` and the state: the number.
impl serde::Serialize for Exit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.code())
    }
}

/// The text for `--help`.
pub const HELP: &str = "\
Exit codes (the book's reference has each in full):
  0    success: every criterion passes
  1    ended without completing (a limit reached, paused, stopped); verify: a check fails
  2    usage or input error (a bad flag, PRD or agent binary: the message names it)
  3    another running loop holds the PRD's lock
  4    blocked: only `Verify: Custom` criteria fail, a person must check them
  5    the agent cannot work (authentication or billing failure, or it cannot start)
  6    a file or folder could not be read or written (permissions, disk full)
  7    `merge` refused a bundle (not of this PRD, or tampered with); nothing changed
  8    waiting for answers to workers' questions: `prdloop answer PRD ID TEXT`
  9    `audit` could re-check no tick (ticked by hand, no receipt, or a stale one)
  10   GitHub or origin refused (`import`, `run --pr`; nothing is force-pushed)
  130  interrupted (Ctrl-C or SIGTERM); the PRD is left paused
Several PRDs: the worst wins (6 > 10 > 7 > 2 > 130 > 5 > 3 > 1 > 9 > 8 > 4 > 0).";

/// The worst of several runs' endings ([`Exit::severity`]); success when there are none.
pub fn worst(ends: impl IntoIterator<Item = Exit>) -> Exit {
    ends.into_iter()
        .max_by_key(|e| e.severity())
        .unwrap_or(Exit::Success)
}

/// The ending an error means: an I/O failure anywhere in its chain (a file or folder that
/// could not be read or written) is [`Exit::Io`]; GitHub's or origin's refusal
/// ([`crate::tracker::HttpError`], [`crate::tracker::Refusal`]) is [`Exit::Remote`]; every
/// other error is bad input, [`Exit::Usage`].
pub fn code_of(e: &anyhow::Error) -> Exit {
    if e.chain().any(|c| {
        c.downcast_ref::<crate::tracker::HttpError>().is_some()
            || c.downcast_ref::<crate::tracker::Refusal>().is_some()
    }) {
        Exit::Remote
    } else if e
        .chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some())
    {
        Exit::Io
    } else {
        Exit::Usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn io_failures_and_input_errors_get_their_own_codes() {
        let io: anyhow::Result<()> =
            Err(std::io::Error::other("disk full")).context("failed to write `PRD.md`");
        assert_eq!(code_of(&io.unwrap_err()), Exit::Io);
        assert_eq!(
            code_of(&anyhow::anyhow!("PRD.md:3: duplicate id")),
            Exit::Usage
        );
        let remote: anyhow::Result<()> = Err(crate::tracker::HttpError {
            status: Some(404),
            message: "GitHub 404 for o/r".into(),
        })
        .context("import");
        assert_eq!(code_of(&remote.unwrap_err()), Exit::Remote);
    }

    #[test]
    fn the_worst_code_of_several_runs_wins() {
        use Exit::*;
        assert_eq!(worst([]), Success);
        assert_eq!(worst([Success, Blocked, Success]), Blocked);
        assert_eq!(worst([Blocked, Failure]), Failure);
        assert_eq!(worst([Failure, AgentFatal, Locked]), AgentFatal);
        assert_eq!(worst([AgentFatal, Interrupted]), Interrupted);
        assert_eq!(worst([Interrupted, Usage]), Usage);
        assert_eq!(worst([Usage, Io, Success]), Io);
        assert_eq!(worst([Usage, Refused]), Refused);
        assert_eq!(worst([Refused, Remote]), Remote);
        assert_eq!(worst([Remote, Io]), Io);
        assert_eq!(worst([Blocked, Questions, Success]), Questions);
        assert_eq!(worst([Questions, Failure]), Failure);
        assert_eq!(worst([Questions, Unchecked]), Unchecked);
        assert_eq!(worst([Unchecked, Failure]), Failure);
    }

    #[test]
    fn the_help_lists_every_code() {
        use Exit::*;
        for e in [
            Success,
            Failure,
            Usage,
            Locked,
            Blocked,
            AgentFatal,
            Io,
            Refused,
            Questions,
            Unchecked,
            Remote,
            Interrupted,
        ] {
            let line = format!("\n  {:<5}", e.code());
            assert!(
                HELP.contains(&line),
                "{e:?} ({}) is not in --help",
                e.code()
            );
        }
    }
}
