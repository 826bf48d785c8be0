//! Everything that depends on the operating system: process groups and signals to them,
//! whether a process lives, the signals that interrupt a run, and finding a program on PATH.
//! prdloop runs on Unix (Linux and macOS); another platform gets its own module here.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

use std::path::{Path, PathBuf};

/// Finds an agent program: a path is checked as given; a bare name is looked up on PATH.
/// Returns the resolved path, or a message saying what is wrong. `flag` names the option
/// that sets it, for the message.
pub fn find_program(program: &str, flag: &str) -> Result<PathBuf, String> {
    if program.is_empty() {
        return Err(format!("the agent program is empty ({flag})"));
    }
    if program.contains('/') {
        let p = Path::new(program);
        let meta = std::fs::metadata(p)
            .map_err(|_| format!("the agent program `{}` does not exist", p.display()))?;
        if !meta.is_file() {
            return Err(format!("the agent program `{}` is not a file", p.display()));
        }
        if !is_executable(&meta) {
            return Err(format!(
                "the agent program `{}` is not executable (chmod +x?)",
                p.display()
            ));
        }
        return Ok(p.to_path_buf());
    }
    which::which(program).map_err(|_| {
        format!("the agent program `{program}` is not on PATH; install it or point {flag} at it")
    })
}

/// The async runtime the commands that run processes use.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")
}
