//! Named exit codes. Documented in `--help` and the README.

/// Every criterion passes (or: the command did what was asked).
pub const SUCCESS: u8 = 0;
/// The loop ended without completing: iteration limit, stall limit, paused or stopped by
/// request; `verify` found failing criteria.
pub const FAILURE: u8 = 1;
/// Usage or input error: a bad flag, a malformed PRD, a missing agent binary, PAI's folders
/// unknown (neither `PAI_DIR` nor `HOME` set).
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
/// Interrupted by Ctrl-C or SIGTERM; the PRD is left `loopStatus: paused`.
pub const INTERRUPTED: u8 = 130;

/// The text for `--help`.
pub const HELP: &str = "\
Exit codes:
  0    success: every criterion passes
  1    the loop ended without completing (iteration, stall, cost, time or wait limit;
       paused or stopped); `verify`: a runnable criterion fails
  2    usage or input error (bad flag, malformed PRD, missing agent binary,
       neither PAI_DIR nor HOME set)
  3    another running loop holds the PRD's lock
  4    blocked: only `Verify: Custom` criteria fail, a person must check them
  5    the agent cannot work (authentication or billing failure, or it cannot start)
  6    a file or folder could not be read or written (permissions, disk full)
  130  interrupted (Ctrl-C or SIGTERM); the PRD is left paused";

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
}
