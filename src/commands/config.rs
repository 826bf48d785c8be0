//! `prdloop config`, `prdloop completions` and `prdloop man`: what the command line is made
//! of, for people and shells.

use std::path::Path;

use anyhow::{Context, Result};
use clap::{Command, CommandFactory, ValueHint};

use crate::cli::Cli;
pub use crate::config_file::Origin;
use crate::config_file::{Keys, Settings, Value};
use crate::exit::Exit;
use crate::{exit, report};

/// Every setting that has a value for a command given no flags, in key order: a `PRDLOOP_*`
/// variable, else the files' setting, else the default.
pub fn in_effect(settings: &Settings) -> Vec<(String, Value, Origin)> {
    let keys = Keys::new();
    let mut out = Vec::new();
    for (name, key) in &keys.keys {
        let env = key.env.as_deref().and_then(|e| {
            std::env::var(e)
                .ok()
                .filter(|v| !v.is_empty())
                .map(|v| (e, v))
        });
        let got = match (env, settings.values.get(name), &key.default) {
            (Some((var, v)), _, _) => {
                let value = match &key.default {
                    Some(Value::Flag(_)) => Value::Flag(!matches!(
                        v.to_ascii_lowercase().as_str(),
                        "0" | "false" | "no" | "off" | "n" | "f"
                    )),
                    Some(Value::Many(_)) => {
                        Value::Many(v.split('\n').map(str::to_string).collect())
                    }
                    _ if matches!(settings.values.get(name), Some((Value::Many(_), _))) => {
                        Value::Many(v.split('\n').map(str::to_string).collect())
                    }
                    _ => Value::One(v),
                };
                Some((value, Origin::Env(var.to_string())))
            }
            (None, Some((v, place)), _) => Some((v.clone(), Origin::File(place.clone()))),
            (None, None, Some(d)) => Some((d.clone(), Origin::Default)),
            (None, None, None) => None,
        };
        if let Some((value, origin)) = got {
            out.push((name.clone(), value, origin));
        }
    }
    out
}

/// The settings in effect as TOML lines; with `show_origin`, each with a comment saying
/// where it comes from.
pub fn render(settings: &Settings, show_origin: bool) -> String {
    let lines: Vec<(String, Origin)> = in_effect(settings)
        .into_iter()
        .map(|(k, v, o)| (format!("{k} = {}", v.to_toml()), o))
        .collect();
    let width = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (line, origin) in lines {
        if show_origin {
            out.push_str(&format!("{line:<width$}  # {origin}\n"));
        } else {
            out.push_str(&line);
            out.push('\n');
        }
    }
    // What an untrusted file says but does not apply: as comments, so the output still
    // reads back as the settings in effect.
    for i in &settings.ignored {
        out.push_str(&format!(
            "# ignored, its file is not trusted (`prdloop trust {}`): {} = {}  # {}\n",
            i.place.file.display(),
            i.key,
            i.value.to_toml(),
            i.place
        ));
    }
    out
}

/// `prdloop config [--show-origin]`. A `PRDLOOP_*` value that `run` would refuse is an
/// error here too, naming the variable (exit 2, after the listing).
pub fn show(settings: &Settings, show_origin: bool) -> Result<Exit> {
    report::stdout(&render(settings, show_origin)).context("failed to write to stdout")?;
    let keys = Keys::new();
    let refused = keys.env_errors();
    for (_, message) in &refused {
        report::error(message);
    }
    Ok(if refused.is_empty() {
        exit::Exit::Success
    } else {
        exit::Exit::Usage
    })
}

/// The command line as completions and man pages describe it: the clap definitions, with
/// what kind of value each option takes (files, folders, programs) for the shells.
pub fn documented() -> Command {
    fn hint(cmd: Command) -> Command {
        cmd.mut_args(|a| {
            let hint = match a
                .get_value_names()
                .and_then(|n| n.first())
                .map(|n| n.as_str())
            {
                Some("DIR") => ValueHint::DirPath,
                Some("FILE") | Some("PRD") => ValueHint::FilePath,
                Some("PATH") => ValueHint::CommandName,
                Some("CMD") => ValueHint::CommandString,
                Some("URL") => ValueHint::Url,
                _ => return a,
            };
            a.value_hint(hint)
        })
        .mut_subcommands(hint)
    }
    hint(Cli::command())
}

/// `prdloop completions SHELL`: the script on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<Exit> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut documented(), "prdloop", &mut script);
    let mut out = std::io::stdout().lock();
    match std::io::Write::write_all(&mut out, &script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(e).context("failed to write to stdout");
        }
        _ => {}
    }
    Ok(exit::Exit::Success)
}

/// Every man page: `prdloop.1`, and `prdloop-<command>.1` for each command, rendered.
pub fn man_pages() -> Result<Vec<(String, Vec<u8>)>> {
    fn walk(cmd: Command, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            walk(sub, out)?;
        }
        let man = clap_mangen::Man::new(cmd);
        let mut page = Vec::new();
        man.render(&mut page)
            .context("failed to render a man page")?;
        out.push((man.get_filename(), page));
        Ok(())
    }
    let mut cmd = documented().disable_help_subcommand(true);
    cmd.build();
    let mut pages = Vec::new();
    walk(cmd, &mut pages)?;
    pages.reverse();
    Ok(pages)
}

/// `prdloop man DIR`: writes the man pages there, each whole or not at all.
pub fn write_man_pages(dir: &Path) -> Result<Exit> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("failed to create `{}`", dir.display()))?;
    let pages = man_pages()?;
    for (name, page) in &pages {
        crate::fsutil::write_atomic(&dir.join(name), page)?;
    }
    report::eline(&format!(
        "wrote {} man pages in {}",
        pages.len(),
        dir.display()
    ));
    Ok(exit::Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn a_man_page_for_the_program_and_each_command() {
        let pages = man_pages().unwrap();
        let commands = Cli::command().get_subcommands().count();
        assert_eq!(pages.len(), commands + 1);
        assert_eq!(pages[0].0, "prdloop.1");
        for (name, page) in &pages {
            let text = String::from_utf8_lossy(page);
            assert!(
                text.starts_with(".ie \\n(.g .ds Aq") || text.contains("\n.TH "),
                "{name}"
            );
        }
    }

    #[test]
    fn completions_generate_for_every_shell_with_value_hints() {
        for shell in clap_complete::Shell::value_variants() {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut documented(), "prdloop", &mut script);
            let text = String::from_utf8(script).unwrap();
            assert!(text.contains("max-cost"), "{shell}");
        }
        let mut zsh = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Zsh,
            &mut documented(),
            "prdloop",
            &mut zsh,
        );
        // Folders complete as folders, programs as commands.
        let zsh = String::from_utf8(zsh).unwrap();
        assert!(zsh.contains(":DIR:_files -/'"), "{zsh}");
        assert!(zsh.contains(":PATH:_command_names -e'"), "{zsh}");
    }
}
