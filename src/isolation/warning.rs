//! What cleaning up after workers could not do: the warnings of the lanes, the pool and the
//! landings' bookkeeping. `prdloop clean` prints them (and lists them in `--json`); a run
//! says them as it ends or sweeps.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// One warning of the isolation layer. Its text is its `Display`; `--json` gives its fields,
/// `kind` and that text as `message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    remote = "Self",
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Warning {
    /// A file or folder that would not go (a lane, the pool folder, an owed landing's record):
    /// the file system's error.
    NotRemoved { path: PathBuf, error: String },
    /// A dead run's lane left where it is: what it held could not be pinned first.
    LeftInPlace { lane: PathBuf, error: String },
    /// The repository's lock could not be taken: nothing was swept.
    NotLocked { error: String },
    /// A landing a crash interrupted could not be put right (a damaged journal).
    NotRecovered { error: String },
}

impl Warning {
    /// `path` would not go: `error` is the file system's.
    pub fn not_removed(path: impl Into<PathBuf>, error: &std::io::Error) -> Warning {
        Warning::NotRemoved {
            path: path.into(),
            error: error.to_string(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::NotRemoved { path, error } => {
                write!(f, "could not remove {}: {error}", path.display())
            }
            Warning::LeftInPlace { lane, error } => write!(
                f,
                "left {} in place: its changes could not be saved: {error}",
                lane.display()
            ),
            Warning::NotLocked { error } | Warning::NotRecovered { error } => f.write_str(error),
        }
    }
}

impl Serialize for Warning {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        crate::report::json::warning(
            Warning::serialize(self, serde_json::value::Serializer),
            self.to_string(),
            s,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_json_has_the_kind_the_fields_and_the_text() {
        let w = Warning::not_removed(
            "/r/.git/prdloop/lanes/s",
            &std::io::Error::from_raw_os_error(13),
        );
        assert_eq!(
            w.to_string(),
            "could not remove /r/.git/prdloop/lanes/s: Permission denied (os error 13)"
        );
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::json!({
                "kind": "not_removed",
                "path": "/r/.git/prdloop/lanes/s",
                "error": "Permission denied (os error 13)",
                "message": "could not remove /r/.git/prdloop/lanes/s: Permission denied (os error 13)",
            })
        );
        let left = Warning::LeftInPlace {
            lane: "/p/lane-2".into(),
            error: "no tree".into(),
        };
        assert_eq!(
            serde_json::to_value(&left).unwrap()["kind"],
            "left_in_place"
        );
    }
}
