//! Writing for people: styled text, decided per stream. Styles always produce ANSI codes;
//! each stream (anstream's `AutoStream`) keeps them on a terminal and strips them elsewhere,
//! or when `NO_COLOR` is set, so `prdloop status > file` never writes escapes;
//! `CLICOLOR_FORCE` keeps them in pipes too, and `--color always|never` decides for every
//! stream ([`set_color`]). A closed or
//! full stream never stops prdloop: the writes here ignore their errors.

use std::io::Write;

use anstyle::{AnsiColor, Style};

fn paint(style: Style, s: &str) -> String {
    format!("{style}{s}{style:#}")
}

pub fn green(s: &str) -> String {
    paint(AnsiColor::Green.on_default(), s)
}
pub fn red(s: &str) -> String {
    paint(AnsiColor::Red.on_default(), s)
}
pub fn yellow(s: &str) -> String {
    paint(AnsiColor::Yellow.on_default(), s)
}
pub fn bold(s: &str) -> String {
    paint(Style::new().bold(), s)
}
pub fn dim(s: &str) -> String {
    paint(Style::new().dimmed(), s)
}

/// `--color`, for every stream from now on: `auto` leaves it to each stream (a terminal,
/// `NO_COLOR`, `CLICOLOR_FORCE`), `always` and `never` decide for all of them.
pub fn set_color(choice: anstream::ColorChoice) {
    choice.write_global();
    if choice != anstream::ColorChoice::Auto {
        // The live view's measuring and styling library decides for itself otherwise.
        let on = choice != anstream::ColorChoice::Never;
        console::set_colors_enabled(on);
        console::set_colors_enabled_stderr(on);
    }
}

/// Whether stderr shows colour (for the diagnostics logger, which writes there).
pub fn stderr_color() -> bool {
    anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// One line on stderr, in one write: stderr is not buffered, and the stream that takes the
/// colours out writes each piece between two of them by itself (six writes for a worker's
/// line, which another process writing to the same terminal could split). A broken or full
/// stderr is ignored: the run goes on.
pub fn eline(s: &str) {
    let mut line = Vec::with_capacity(s.len() + 1);
    {
        let choice = anstream::AutoStream::choice(&std::io::stderr());
        let mut styled = anstream::AutoStream::new(&mut line, choice);
        let _ = styled.write_all(s.as_bytes());
        let _ = styled.write_all(b"\n");
    }
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(&line);
    let _ = err.flush();
}

pub fn warn(msg: impl std::fmt::Display) {
    eline(&format!("{} {msg}", yellow("warning:")));
}

pub fn error(msg: impl std::fmt::Display) {
    eline(&format!("{} {msg}", red("error:")));
}

/// Writes product output to stdout; a closed pipe (`prdloop status | head`) is not an error.
pub fn stdout(s: &str) -> std::io::Result<()> {
    let mut out = anstream::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
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

/// `writeln!` into a `String` buffer of product output.
pub mod json;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn styles_are_ansi_and_strip_to_plain_text() {
        let s = green("PASS");
        assert_ne!(s, "PASS");
        let mut plain = anstream::StripStream::new(Vec::new());
        plain.write_all(s.as_bytes()).unwrap();
        assert_eq!(plain.into_inner(), b"PASS");
    }
}
