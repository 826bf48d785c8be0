//! Where a setting in effect comes from: the command line, a `PRDLOOP_*` variable, a config
//! file's line, or the default.

use std::collections::BTreeMap;
use std::ffi::OsString;

use clap::{Arg, ArgMatches, Command};

use super::{Place, Settings};

/// Where a setting in effect comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Origin {
    #[default]
    Default,
    /// Its flag on the command line.
    CommandLine(String),
    /// A `PRDLOOP_*` variable.
    Env(String),
    /// A config file's line.
    File(Place),
}

impl Origin {
    /// Where it came from, in words, when that is worth saying: not for the default, nor for
    /// the flag itself on the command line.
    pub fn named(&self) -> Option<String> {
        match self {
            Origin::Default | Origin::CommandLine(_) => None,
            o => Some(o.to_string()),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::CommandLine(flag) => write!(f, "--{flag}"),
            Origin::Env(name) => write!(f, "env:{name}"),
            Origin::File(place) => place.fmt(f),
        }
    }
}

/// Where each flag of the command line `args` (as `cmd` reads them) got a value that is not
/// its built-in default: the command line, a `PRDLOOP_*` variable or a file's setting.
pub(super) fn origins(
    mut cmd: Command,
    args: &[OsString],
    settings: &Settings,
) -> BTreeMap<String, Origin> {
    use clap::parser::ValueSource;
    let mut out = BTreeMap::new();
    let Ok(matches) = cmd.try_get_matches_from_mut(args) else {
        return out;
    };
    each_flag(&cmd, &matches, |arg, long, m| {
        let origin = match m.value_source(arg.get_id().as_str()) {
            Some(ValueSource::CommandLine) => Origin::CommandLine(long.to_string()),
            Some(ValueSource::EnvVariable) => Origin::Env(
                arg.get_env()
                    .map(|e| e.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
            Some(ValueSource::DefaultValue) => match settings.values.get(long) {
                Some((_, place)) => Origin::File(place.clone()),
                None => return,
            },
            _ => return,
        };
        // The subcommand's own flag wins over the top level's twin.
        out.insert(long.to_string(), origin);
    });
    out
}

/// Calls `f` with each long flag of `cmd` and the matches it was read into, the top level
/// first, then down the subcommands `matches` chose.
pub(super) fn each_flag(
    cmd: &Command,
    matches: &ArgMatches,
    mut f: impl FnMut(&Arg, &str, &ArgMatches),
) {
    let mut level = (cmd, matches);
    loop {
        let (c, m) = level;
        for arg in c.get_arguments() {
            if let Some(long) = arg.get_long() {
                f(arg, long, m);
            }
        }
        match m
            .subcommand()
            .and_then(|(name, sub)| c.find_subcommand(name).map(|sc| (sc, sub)))
        {
            Some(next) => level = next,
            None => break,
        }
    }
}
