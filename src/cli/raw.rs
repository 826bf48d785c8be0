//! What is read from the raw arguments before (or instead of) clap: PAI's form of the PRD
//! without `-p`, whether a run wants `--json` (for its one `end` event on a bad command
//! line), and `--color` for clap's own messages.

use super::*;

/// The message for PAI's form with the PRD given without `-p` (`prdloop -m loop two.md`),
/// which clap alone would report as an unknown subcommand. `None` when that is not the case.
pub fn pai_form_hint(args: &[std::ffi::OsString]) -> Option<String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    // Which options take a value, so that a value is not taken for the stray PRD.
    let takes_value = |arg: &str| {
        cmd.get_arguments().any(|a| {
            let named = match arg.strip_prefix("--") {
                Some(long) => {
                    a.get_long() == Some(long)
                        || a.get_all_aliases().into_iter().flatten().any(|x| x == long)
                }
                None => arg.len() == 2 && a.get_short() == arg.chars().nth(1),
            };
            named && a.get_action().takes_values()
        })
    };
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut mode = None;
    let mut stray = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let value = || inline.clone().or_else(|| args.get(i + 1).cloned());
        if name == "-p" || name == "--prd" {
            return None;
        }
        if name == "-m" || name == "--mode" {
            mode = value();
        } else if a.starts_with("-m") && a.len() > 2 && !a.starts_with("--") {
            mode = Some(a[2..].to_string());
        } else if !a.starts_with('-') && stray.is_none() {
            stray = Some(a.clone());
        }
        if inline.is_none() && a.starts_with('-') && (takes_value(name) || name == "-m") {
            i += 1;
        }
        i += 1;
    }
    let (mode, prd) = (mode?, stray?);
    let sub = match mode.as_str() {
        "loop" => "run",
        "interactive" => "interactive",
        _ => return None,
    };
    Some(format!(
        "`-m {mode}` takes the PRD with `-p`: `prdloop -m {mode} -p {prd}`, or `prdloop {sub} {prd}`"
    ))
}

/// Whether the command line asks for `run`, `resume` or `-m loop` with `--json` (or
/// `PRDLOOP_JSON`), judged from the raw arguments: for a usage error, which clap reports before
/// anything is parsed, to still end with an `end` event.
pub fn wants_json_run(args: &[std::ffi::OsString], json_env: Option<&std::ffi::OsStr>) -> bool {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let json = args.iter().any(|a| a == "--json")
        || json_env.is_some_and(|v| {
            let v = v.to_string_lossy().to_ascii_lowercase();
            !["", "0", "false", "no", "off", "n", "f"].contains(&v.as_str())
        });
    let run = matches!(
        args.iter()
            .find(|a| !a.starts_with('-'))
            .map(String::as_str),
        Some("run" | "resume")
    ) || args
        .iter()
        .any(|a| a == "-m" || a == "--mode" || a.starts_with("-m") || a.starts_with("--mode="));
    json && run
}

/// `--color` (or `PRDLOOP_COLOR`) as the raw arguments give it, for what is printed before
/// they are parsed (clap's usage errors, help); `auto` when absent or not a choice.
pub fn color_asked(args: &[std::ffi::OsString], env_value: Option<&std::ffi::OsStr>) -> ColorArg {
    let mut given = None;
    let mut args = args.iter().map(|a| a.to_string_lossy());
    while let Some(a) = args.next() {
        if a == "--" {
            break;
        }
        if let Some(v) = a.strip_prefix("--color=") {
            given = Some(v.to_string());
        } else if a == "--color" {
            given = args.next().map(|v| v.into_owned());
        }
    }
    let value = given.or_else(|| env_value.map(|v| v.to_string_lossy().into_owned()));
    value
        .and_then(|v| ColorArg::from_str(&v, true).ok())
        .unwrap_or_default()
}
