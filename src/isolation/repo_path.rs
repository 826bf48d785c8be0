//! A file's path in a repository as git has it: bytes, not text. A name need not be UTF-8
//! (a Latin-1 `caf\xe9.txt`); read from git's `-z` output as bytes and handed to the file
//! system and back to git as bytes, it lands under its own name. Text only in messages.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A path from the top of a checkout, `/`-separated, as git's trees and index hold it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoPath(Vec<u8>);

impl RepoPath {
    pub fn from_bytes(bytes: &[u8]) -> RepoPath {
        RepoPath(bytes.to_vec())
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The path for the file system (relative: join it to the top of the checkout).
    pub fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.0))
    }

    /// `prefix` followed by the path, as one argument (`--path=…`, `:(literal)…`, `rev:…`).
    pub fn after(&self, prefix: &str) -> OsString {
        let mut v = prefix.as_bytes().to_vec();
        v.extend_from_slice(&self.0);
        OsStr::from_bytes(&v).to_owned()
    }

    /// Whether it is `dir` or beneath it.
    pub fn is_in(&self, dir: &[u8]) -> bool {
        self.0
            .strip_prefix(dir)
            .is_some_and(|rest| rest.first() == Some(&b'/'))
    }

    /// Shown to a person (bytes that are not UTF-8 as U+FFFD).
    pub fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl From<&str> for RepoPath {
    fn from(s: &str) -> RepoPath {
        RepoPath(s.as_bytes().to_vec())
    }
}

impl std::fmt::Display for RepoPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl std::fmt::Debug for RepoPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", OsStr::from_bytes(&self.0))
    }
}

/// As JSON: a string when the bytes are UTF-8 (as every path was written before), else
/// `{"bytes": [...]}`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum Stored {
    Text(String),
    Bytes { bytes: Vec<u8> },
}

impl serde::Serialize for RepoPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        bytes::serialize(&self.0, s)
    }
}

impl<'de> serde::Deserialize<'de> for RepoPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RepoPath, D::Error> {
        bytes::deserialize(d).map(RepoPath)
    }
}

/// `#[serde(with = "bytes")]` for bytes kept as JSON: text when they are UTF-8.
pub mod bytes {
    use super::Stored;

    pub fn serialize<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        use serde::Serialize;
        match std::str::from_utf8(b) {
            Ok(t) => Stored::Text(t.to_string()).serialize(s),
            Err(_) => Stored::Bytes { bytes: b.to_vec() }.serialize(s),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        use serde::Deserialize;
        Ok(match Stored::deserialize(d)? {
            Stored::Text(t) => t.into_bytes(),
            Stored::Bytes { bytes } => bytes,
        })
    }
}

/// Shown to a person, each lossily.
pub fn lossy(paths: &[RepoPath]) -> Vec<String> {
    paths.iter().map(RepoPath::lossy).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_not_utf8_keeps_its_bytes_through_json() {
        let latin = RepoPath::from_bytes(b"dir/caf\xe9.txt");
        let json = serde_json::to_string(&latin).unwrap();
        assert_eq!(serde_json::from_str::<RepoPath>(&json).unwrap(), latin);
        let plain = RepoPath::from("dir/a.txt");
        assert_eq!(serde_json::to_string(&plain).unwrap(), "\"dir/a.txt\"");
        assert_eq!(
            serde_json::from_str::<RepoPath>("\"dir/a.txt\"").unwrap(),
            plain
        );
        assert_eq!(latin.as_path().as_os_str().as_bytes(), b"dir/caf\xe9.txt");
        assert!(latin.is_in(b"dir") && !latin.is_in(b"di"));
        assert_eq!(latin.lossy(), "dir/caf\u{fffd}.txt");
    }
}
