//! Named exit codes. Documented in `--help` and the README.

/// Every criterion passes (or: the command did what was asked).
pub const SUCCESS: u8 = 0;
/// The loop ended without completing: iteration limit, stall limit, paused or stopped by
/// request; `verify` found failing criteria.
pub const FAILURE: u8 = 1;
/// Usage or input error: a bad flag, a malformed PRD, a missing agent binary, PAI's folders
/// unknown (neither `PAI_DIR` nor `HOME` set), `--sandbox on` where it cannot be had.
pub const USAGE: u8 = 2;
/// Another live loop holds this PRD's lock.
pub const LOCKED: u8 = 3;
/// Only `Verify: Custom` criteria still fail: a person must check them.
pub const BLOCKED: u8 = 4;
/// The agent cannot work at all (authentication, billing, or the agent program cannot be
/// started); retrying cannot help.
pub const AGENT_FATAL: u8 = 5;
/// A file or folder could not be read or written (permissions, a full disk, a read-only
/// folder): the environment failed, not the input.
pub const IO: u8 = 6;
/// `merge` refused a bundle: not of this PRD, commit or split, or tampered with (the message
/// names the file and the field); nothing was changed.
pub const REFUSED: u8 = 7;
/// Waiting for answers: what is left is parked on questions workers asked (and `Verify:
/// Custom` criteria); `prdloop answer` un-parks them for the next run.
pub const QUESTIONS: u8 = 8;
/// Interrupted by Ctrl-C or SIGTERM; the PRD is left `loopStatus: paused`.
pub const INTERRUPTED: u8 = 130;

/// The text for `--help`.
pub const HELP: &str = "\
Exit codes:
  0    success: every criterion passes
  1    the loop ended without completing (iteration, stall, cost, time or wait limit;
       paused or stopped); `verify`: a runnable criterion fails
  2    usage or input error (bad flag, malformed PRD, missing agent binary,
       neither PAI_DIR nor HOME set, --sandbox on without a kernel sandbox)
  3    another running loop holds the PRD's lock
  4    blocked: only `Verify: Custom` criteria fail, a person must check them
  5    the agent cannot work (authentication or billing failure, or it cannot start)
  6    a file or folder could not be read or written (permissions, disk full)
  7    `merge` refused a bundle (not of this PRD, commit or split, or tampered with);
       nothing was changed
  8    waiting for answers: only criteria parked on a worker's question (and Custom
       ones) are left; `prdloop answer PRD ID TEXT`, then run again
  130  interrupted (Ctrl-C or SIGTERM); the PRD is left paused
With several PRDs (`run A.md B.md`, --with-children) the exit code is the worst of
theirs: 6 > 7 > 2 > 130 > 5 > 3 > 1 > 8 > 4 > 0.";

/// How bad an exit code is, for the one exit code of several PRDs run at once (the worst
/// wins): an error (I/O, then a refused bundle, then usage or input) > interrupted > the agent cannot work > another
/// loop holds a PRD's lock (it did not run) > not completed > waiting for answers > blocked >
/// success.
pub fn severity(code: u8) -> u8 {
    match code {
        SUCCESS => 0,
        BLOCKED => 1,
        QUESTIONS => 2,
        FAILURE => 3,
        LOCKED => 4,
        AGENT_FATAL => 5,
        INTERRUPTED => 6,
        USAGE => 7,
        REFUSED => 8,
        IO => 9,
        // Unknown codes count as errors.
        _ => 10,
    }
}

/// The worst of several runs' exit codes ([`severity`]); success when there are none.
pub fn worst(codes: impl IntoIterator<Item = u8>) -> u8 {
    codes
        .into_iter()
        .max_by_key(|c| severity(*c))
        .unwrap_or(SUCCESS)
}

/// The exit code an error means: an I/O failure anywhere in its chain (a file or folder that
/// could not be read or written) is [`IO`]; every other error is bad input, [`USAGE`].
pub fn code_of(e: &anyhow::Error) -> u8 {
    if e.chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some())
    {
        IO
    } else {
        USAGE
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
        assert_eq!(code_of(&io.unwrap_err()), IO);
        assert_eq!(code_of(&anyhow::anyhow!("PRD.md:3: duplicate id")), USAGE);
    }

    #[test]
    fn the_worst_code_of_several_runs_wins() {
        assert_eq!(worst([]), SUCCESS);
        assert_eq!(worst([SUCCESS, BLOCKED, SUCCESS]), BLOCKED);
        assert_eq!(worst([BLOCKED, FAILURE]), FAILURE);
        assert_eq!(worst([BLOCKED, QUESTIONS, SUCCESS]), QUESTIONS);
        assert_eq!(worst([QUESTIONS, FAILURE]), FAILURE);
        assert_eq!(worst([FAILURE, AGENT_FATAL, LOCKED]), AGENT_FATAL);
        assert_eq!(worst([AGENT_FATAL, INTERRUPTED]), INTERRUPTED);
        assert_eq!(worst([INTERRUPTED, USAGE]), USAGE);
        assert_eq!(worst([USAGE, IO, SUCCESS]), IO);
        assert_eq!(worst([USAGE, REFUSED]), REFUSED);
    }
}
