//! The rules on the exec trampoline's command line: [`Rules::to_args`] writes them,
//! [`Rules::take_args`] reads them back.

use std::ffi::OsString;
use std::path::PathBuf;

use super::rules::Rules;
use crate::worker::network::Reach;

/// The flag that starts the rules on the trampoline's command line, and the ones each path
/// follows; `--` ends them.
const RULES_ARG: &str = "--sandbox";
const WRITE_ARG: &str = "--write";
const HIDE_ARG: &str = "--hide";
const CONNECT_ARG: &str = "--connect";
const NO_TCP_ARG: &str = "--no-tcp";
const COUNT_ARG: &str = "--count-connects";
const END_ARG: &str = "--";

impl Rules {
    /// The rules as the trampoline reads them: `--sandbox --write P … --hide P …
    /// [--no-tcp | --connect PORT …] --`.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = vec![OsString::from(RULES_ARG)];
        for p in &self.writable {
            args.push(WRITE_ARG.into());
            args.push(p.into());
        }
        for p in &self.hidden {
            args.push(HIDE_ARG.into());
            args.push(p.into());
        }
        // Fail closed: rules that limit the network but were never given their proxy's port
        // (spawned some other way than `worker::start`) allow no TCP at all.
        let connect = match (&self.connect, &self.reach) {
            (None, Reach::Open) => None,
            (None, _) => Some(&[][..]),
            (Some(ports), _) => Some(&ports[..]),
        };
        match connect {
            None => {}
            Some([]) => args.push(NO_TCP_ARG.into()),
            Some(ports) => {
                for p in ports {
                    args.push(CONNECT_ARG.into());
                    args.push(p.to_string().into());
                }
            }
        }
        if connect.is_some()
            && let Some(name) = &self.count_connects
        {
            args.push(COUNT_ARG.into());
            args.push(name.into());
        }
        args.push(END_ARG.into());
        args
    }

    /// Reads rules from the front of the trampoline's arguments when they are there; the
    /// arguments after them are left in `args`. `Err`: they start but are malformed.
    pub fn take_args(
        args: &mut std::iter::Peekable<impl Iterator<Item = OsString>>,
    ) -> Result<Option<Rules>, String> {
        if args.peek().is_none_or(|a| a != RULES_ARG) {
            return Ok(None);
        }
        args.next();
        let mut rules = Rules::default();
        loop {
            match args.next() {
                Some(a) if a == END_ARG => return Ok(Some(rules)),
                Some(a) if a == NO_TCP_ARG => rules.connect = Some(Vec::new()),
                Some(a) if a == CONNECT_ARG => {
                    let port = args.next().and_then(|p| p.to_str()?.parse::<u16>().ok());
                    let Some(port) = port else {
                        return Err(format!("{CONNECT_ARG} needs a port"));
                    };
                    rules.connect.get_or_insert_with(Vec::new).push(port);
                }
                Some(a) if a == COUNT_ARG => {
                    let Some(name) = args.next().and_then(|n| n.into_string().ok()) else {
                        return Err(format!("{COUNT_ARG} needs a name"));
                    };
                    rules.count_connects = Some(name);
                }
                Some(a) if a == WRITE_ARG || a == HIDE_ARG => {
                    let Some(p) = args.next() else {
                        return Err(format!("{} needs a path", a.to_string_lossy()));
                    };
                    let to = if a == WRITE_ARG {
                        &mut rules.writable
                    } else {
                        &mut rules.hidden
                    };
                    to.push(PathBuf::from(p));
                }
                Some(a) => {
                    return Err(format!(
                        "unexpected `{}` in the sandbox rules",
                        a.to_string_lossy()
                    ));
                }
                None => return Err(format!("the sandbox rules do not end with `{END_ARG}`")),
            }
        }
    }
}
