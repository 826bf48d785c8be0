//! What the user sees on stderr: warnings, progress lines, colour when it is wanted.

use std::io::IsTerminal;
use std::sync::OnceLock;

use crate::env;

static COLOR: OnceLock<bool> = OnceLock::new();

/// Colour only on a terminal, and never when NO_COLOR is set.
pub fn color() -> bool {
    *COLOR.get_or_init(|| {
        std::io::stderr().is_terminal()
            && std::env::var_os(env::NO_COLOR).is_none_or(|v| v.is_empty())
    })
}

fn paint(code: &str, s: &str) -> String {
    if color() {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

pub fn green(s: &str) -> String {
    paint("32", s)
}
pub fn red(s: &str) -> String {
    paint("31", s)
}
pub fn yellow(s: &str) -> String {
    paint("33", s)
}
pub fn bold(s: &str) -> String {
    paint("1", s)
}
pub fn dim(s: &str) -> String {
    paint("2", s)
}

pub fn warn(msg: impl std::fmt::Display) {
    eprintln!("{} {msg}", yellow("warning:"));
}

pub fn error(msg: impl std::fmt::Display) {
    eprintln!("{} {msg}", red("error:"));
}

/// A progress bar of `width` cells.
pub fn bar(passing: usize, total: usize, width: usize) -> String {
    let filled = (passing * width + total / 2)
        .checked_div(total)
        .unwrap_or(0)
        .min(width);
    format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled))
}

/// A duration as `1m 05s`, `12.3s`.
pub fn duration(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1}s")
    } else if s < 3600.0 {
        format!("{}m {:02}s", d.as_secs() / 60, d.as_secs() % 60)
    } else {
        format!("{}h {:02}m", d.as_secs() / 3600, (d.as_secs() % 3600) / 60)
    }
}

/// Writes product output to stdout; a closed pipe (`prdloop status | head`) is not an error.
pub fn stdout(s: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut lock = std::io::stdout().lock();
    match lock.write_all(s.as_bytes()).and_then(|_| lock.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

/// `writeln!` into a `String` buffer of product output.
#[macro_export]
macro_rules! outln {
    ($buf:expr) => {{
        $buf.push('\n');
    }};
    ($buf:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($buf, $($arg)*);
    }};
}
