//! Tree entries: what a tree holds at a path (mode and object), the changes between two
//! trees, and `git update-index --index-info` records: the one home of reading `ls-tree`,
//! used by the transaction, the guards, undo and `--commit`.

use std::collections::BTreeMap;

use anyhow::Result;

use crate::isolation::git::Git;
use crate::isolation::repo_path::RepoPath;

/// A mode and object as git's trees hold them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub mode: u32,
    pub oid: String,
}

pub(super) const SYMLINK: u32 = 0o120000;
pub(super) const GITLINK: u32 = 0o160000;
pub(super) const EXECUTABLE: u32 = 0o100755;

impl Entry {
    pub(crate) fn is_link(&self) -> bool {
        self.mode == SYMLINK
    }
}

/// One path the change touches.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    pub path: RepoPath,
    pub before: Option<Entry>,
    pub after: Option<Entry>,
}

/// The paths that differ between two trees, with both sides' entries.
pub fn changes(repo: &Git, before: &str, after: &str) -> Result<Vec<Change>> {
    let (out, _) = repo
        .cmd()
        .args(&["diff-tree", "-r", "-z", "--no-renames", before, after])
        .output()?;
    let mut v = Vec::new();
    let mut parts = out.split(|b| *b == 0);
    while let Some(meta) = parts.next() {
        if meta.is_empty() {
            continue;
        }
        let Some(path) = parts.next() else { break };
        let meta = String::from_utf8_lossy(meta);
        let f: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if f.len() < 5 {
            continue;
        }
        let entry = |mode: &str, oid: &str| -> Option<Entry> {
            let mode = u32::from_str_radix(mode, 8).ok()?;
            (mode != 0).then(|| Entry {
                mode,
                oid: oid.to_string(),
            })
        };
        v.push(Change {
            path: RepoPath::from_bytes(path),
            before: entry(f[0], f[2]),
            after: entry(f[1], f[3]),
        });
    }
    Ok(v)
}

/// Up to how many paths [`entries`] names on git's command line.
const FEW: usize = 100;

/// The entries of `paths` in commit or tree `rev` (a path it does not hold is absent).
pub fn entries(repo: &Git, rev: &str, paths: &[RepoPath]) -> Result<BTreeMap<RepoPath, Entry>> {
    let mut map = BTreeMap::new();
    if paths.is_empty() {
        return Ok(map);
    }
    // A few paths are looked up by name; many by reading the whole tree once (as many
    // pathspecs would make a command line too long, and git's matching of them slow).
    let many = paths.len() > FEW;
    let literal: Vec<std::ffi::OsString> = if many {
        Vec::new()
    } else {
        paths.iter().map(|p| p.after(":(literal)")).collect()
    };
    let wanted: std::collections::HashSet<&RepoPath> = paths.iter().collect();
    let (out, _) = repo
        .cmd()
        .args(&["ls-tree", "-r", "-z", "--full-tree", rev, "--"])
        .args(&literal)
        .output()?;
    for rec in out.split(|b| *b == 0) {
        // `<mode> <type> <oid>\t<path>`: the path is bytes.
        let Some(tab) = rec.iter().position(|b| *b == b'\t') else {
            continue;
        };
        let (meta, path) = (
            String::from_utf8_lossy(&rec[..tab]),
            RepoPath::from_bytes(&rec[tab + 1..]),
        );
        if many && !wanted.contains(&path) {
            continue;
        }
        let f: Vec<&str> = meta.split(' ').collect();
        if let (Some(mode), Some(oid)) = (f.first(), f.get(2))
            && let Ok(mode) = u32::from_str_radix(mode, 8)
        {
            map.insert(
                path,
                Entry {
                    mode,
                    oid: oid.to_string(),
                },
            );
        }
    }
    Ok(map)
}

/// `git update-index -z --index-info`'s record setting `path` to `entry` (removing it when
/// there is none).
pub fn index_info(path: &RepoPath, entry: Option<&Entry>) -> Vec<u8> {
    let mut v = match entry {
        Some(e) => format!("{:o} {}\t", e.mode, e.oid),
        None => format!("0 {}\t", "0".repeat(40)),
    }
    .into_bytes();
    v.extend_from_slice(path.as_bytes());
    v.push(0);
    v
}
