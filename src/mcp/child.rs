//! Running this prdloop's own command line as a child: each tool is the command it stands for,
//! so its parsers, config files (and their trust rules), environment, lock and exit codes are
//! those of the command line. [`Outcome`] is what came back; [`Outcome::result`] makes it the
//! tool's result.

use std::ffi::OsString;
use std::process::Stdio;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

/// At most this much of a command's stdout or stderr is kept for a tool's result.
const KEEP: u64 = 4 << 20;

/// What the server's own command line gave that each command it runs takes too: `--profile`
/// (as `PRDLOOP_PROFILE`, which a child's own config files then read as a shell's would) and
/// the verbosity (`-v`s).
#[derive(Debug, Clone, Default)]
pub struct Globals {
    pub profile: Option<String>,
    pub verbose: u8,
}

impl Globals {
    /// The prdloop command the tools run: this very binary, `argv` its subcommand and words.
    pub fn prdloop(&self, argv: &[OsString]) -> std::io::Result<tokio::process::Command> {
        let mut c = tokio::process::Command::new(std::env::current_exe()?);
        c.args(self.argv(argv));
        if let Some(p) = &self.profile {
            c.env(crate::env::PROFILE, p);
        }
        // Its messages are read by a program: no colour codes.
        c.env(crate::env::COLOR, "never").stdin(Stdio::null());
        Ok(c)
    }

    /// `argv` with the `-v`s after its subcommand (global flags come after it).
    fn argv(&self, argv: &[OsString]) -> Vec<OsString> {
        let mut out = argv.to_vec();
        if self.verbose > 0 && !out.is_empty() {
            out.insert(1, format!("-{}", "v".repeat(self.verbose.into())).into());
        }
        out
    }

    /// Runs a command to its end, its output captured.
    pub async fn run(&self, argv: &[OsString]) -> std::io::Result<Outcome> {
        let mut child = self
            .prdloop(argv)?
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let (stdout, stderr) =
            tokio::try_join!(read_all(child.stdout.take()), read_all(child.stderr.take()))?;
        let status = child.wait().await?;
        Ok(Outcome {
            code: status.code(),
            stdout,
            stderr,
        })
    }
}

/// How a command ended.
#[derive(Debug)]
pub struct Outcome {
    /// The exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// A pipe's text, up to [`KEEP`] bytes (the rest is drained, so the child never blocks).
pub async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> std::io::Result<String> {
    let mut buf = Vec::new();
    if let Some(mut p) = pipe {
        (&mut p).take(KEEP).read_to_end(&mut buf).await?;
        tokio::io::copy(&mut p, &mut tokio::io::sink()).await?;
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The `--json` output: one JSON value, or one per line (`null` when it is not JSON).
pub fn parse_json(stdout: &str) -> Value {
    if stdout.trim().is_empty() {
        return Value::Null;
    }
    if let Ok(v) = serde_json::from_str::<Value>(stdout) {
        return v;
    }
    let lines: Result<Vec<Value>, _> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect();
    lines.map(Value::Array).unwrap_or(Value::Null)
}

impl Outcome {
    /// The tool's result: the output as text and, as `structuredContent`, `{exitCode,
    /// output, message}` (`output` the `--json` output, where the command has one); an error
    /// result when the command did not exit 0.
    pub fn result(&self, json_output: bool) -> CallToolResult {
        let code = self.code.unwrap_or(-1);
        let message = self.stderr.trim().to_string();
        let output = if json_output {
            parse_json(&self.stdout)
        } else {
            Value::String(self.stdout.clone())
        };
        // The output, then stderr: an error's message, or a success's warnings (an untrusted
        // config file's ignored settings, say), which a client reading the text must see too.
        let mut text = self.stdout.trim_end().to_string();
        if !message.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&message);
        }
        if code != 0 || self.stdout.trim().is_empty() {
            text.push_str(&format!("\n(exit code {code})"));
        }
        let structured = json!({"exitCode": code, "output": output, "message": message});
        let mut r = if code == 0 {
            CallToolResult::success(vec![ContentBlock::text(text.trim_start().to_string())])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text.trim_start().to_string())])
        };
        r.structured_content = Some(structured);
        r
    }
}

/// An error result for a call that could not be made (bad input, the program not started).
pub fn refused(message: String, code: u8) -> CallToolResult {
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
        "{message}\n(exit code {code})"
    ))]);
    r.structured_content = Some(json!({"exitCode": code, "message": message}));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_verbosity_follows_the_subcommand() {
        let words = |g: &Globals| -> Vec<String> {
            g.argv(&["plan".into(), "--json".into(), "PRD.md".into()])
                .into_iter()
                .map(|w| w.into_string().unwrap())
                .collect()
        };
        assert_eq!(words(&Globals::default()), ["plan", "--json", "PRD.md"]);
        let vv = Globals {
            profile: None,
            verbose: 2,
        };
        assert_eq!(words(&vv), ["plan", "-vv", "--json", "PRD.md"]);
    }

    #[test]
    fn json_lines_are_an_array_and_text_is_null() {
        assert_eq!(parse_json("{\"a\":1}\n"), json!({"a": 1}));
        assert_eq!(
            parse_json("{\"a\":1}\n{\"b\":2}\n"),
            json!([{"a": 1}, {"b": 2}])
        );
        assert_eq!(parse_json("not json\n"), Value::Null);
        assert_eq!(parse_json(""), Value::Null);
    }

    #[test]
    fn a_successful_commands_text_has_its_warnings() {
        let o = Outcome {
            code: Some(0),
            stdout: "{\"agents\":1}\n".into(),
            stderr: "warning: prdloop.toml is not trusted\n".into(),
        };
        let r = o.result(true);
        assert_eq!(r.is_error, Some(false));
        let text = &r.content[0].as_text().unwrap().text;
        assert_eq!(text, "{\"agents\":1}\nwarning: prdloop.toml is not trusted");
    }

    #[test]
    fn a_failed_command_is_an_error_with_its_message_and_code() {
        let o = Outcome {
            code: Some(2),
            stdout: String::new(),
            stderr: "error: no.md: not found\n".into(),
        };
        let r = o.result(true);
        assert_eq!(r.is_error, Some(true));
        let s = r.structured_content.unwrap();
        assert_eq!(s["exitCode"], 2);
        assert_eq!(s["message"], "error: no.md: not found");
    }
}
