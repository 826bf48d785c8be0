//! The book's command-line reference (`docs/book/src/reference/cli.md`), rendered from the
//! same clap definitions as `--help`, the man pages and the completions, so it cannot say
//! other than the program. A test compares the committed page with this rendering.

use clap::{Arg, Command};

use super::config::documented;

/// The reference page: the program, then each command (and its own commands), in the order
/// `--help` lists them.
pub fn markdown() -> String {
    let mut root = documented().disable_help_subcommand(true);
    root.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         Generated from prdloop's command-line definitions, as `--help` is: do not edit by hand.\n\
         After changing a flag, write it anew with\n\
         `PRDLOOP_BLESS=1 cargo test --test it docs::cli_reference`.\n",
    );
    command(&root, &mut out);
    out
}

fn command(cmd: &Command, out: &mut String) {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    out.push_str(&format!("\n## `{name}`\n\n"));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        out.push_str(&prose(&about.to_string()));
        out.push_str("\n\n");
    }
    let usage = cmd.clone().render_usage().to_string();
    out.push_str(&format!("```text\n{}\n```\n", usage.trim_end()));
    let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    if !subs.is_empty() {
        out.push_str("\nCommands:\n\n");
        for sub in &subs {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let anchor = format!("{name} {}", sub.get_name()).replace(' ', "-");
            out.push_str(&format!(
                "- [`{}`](#{anchor}): {}\n",
                sub.get_name(),
                prose(&about)
            ));
        }
    }
    let args: Vec<&Arg> = cmd.get_arguments().filter(|a| !a.is_hide_set()).collect();
    if !args.is_empty() {
        out.push_str("\nArguments and options:\n\n");
        for arg in args {
            out.push_str(&argument(arg));
        }
    }
    if let Some(after) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        out.push_str(&format!(
            "\n```text\n{}\n```\n",
            after.to_string().trim_end()
        ));
    }
    for sub in subs {
        command(sub, out);
    }
}

/// One list item: the flag as typed, its help, then its env twin, default and values.
fn argument(arg: &Arg) -> String {
    let takes_values = arg.get_action().takes_values();
    let values = arg
        .get_value_names()
        .map(|names| {
            names
                .iter()
                .map(|n| format!("<{n}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|_| takes_values)
        .unwrap_or_default();
    let mut forms = Vec::new();
    if let Some(short) = arg.get_short() {
        forms.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        forms.push(format!("--{long}"));
    }
    let mut flag = forms.join(", ");
    if flag.is_empty() {
        flag = if arg.is_required_set() {
            values
        } else {
            format!("[{values}]")
        };
    } else if !values.is_empty() {
        flag = format!("{flag} {values}");
    }
    if matches!(arg.get_action(), clap::ArgAction::Append)
        || arg.get_num_args().is_some_and(|r| r.max_values() > 1)
    {
        flag.push_str("...");
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut item = format!("- `{flag}`: {}", indent(&prose(help.trim())));
    let mut facts = Vec::new();
    if let Some(env) = arg.get_env() {
        facts.push(format!("env `{}`", env.to_string_lossy()));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if !defaults.is_empty() && takes_values && !arg.is_hide_default_value_set() {
        facts.push(format!("default `{}`", defaults.join(",")));
    }
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !possible.is_empty() && !arg.is_hide_possible_values_set() {
        facts.push(format!("values {}", possible.join(", ")));
    }
    if !facts.is_empty() {
        item.push_str(&format!("\n  ({})", facts.join("; ")));
    }
    item.push('\n');
    item
}

/// Help text as markdown: `<` outside code spans would open an HTML tag and `*` emphasis, so
/// both are escaped there; code spans are kept as they are.
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, part) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
        } else {
            out.push_str(&part.replace('<', "&lt;").replace('*', "\\*"));
        }
    }
    out
}

/// Continuation lines of a list item, indented under it.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n  ")
        .replace("\n  \n", "\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_and_flag_is_in_the_reference() {
        let page = markdown();
        assert!(page.starts_with("# Command-line reference\n"));
        let mut root = documented().disable_help_subcommand(true);
        root.build();
        for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
            assert!(
                page.contains(&format!("\n## `prdloop {}`\n", sub.get_name())),
                "{}",
                sub.get_name()
            );
        }
        assert!(page.contains("- `--max-cost <USD>`"), "{page}");
        assert!(page.contains("env `PRDLOOP_MAX_COST`"));
    }

    #[test]
    fn help_text_is_escaped_outside_code_spans_only() {
        assert_eq!(prose("a <PRD> `<PRD> *x*` *"), "a &lt;PRD> `<PRD> *x*` \\*");
    }
}
