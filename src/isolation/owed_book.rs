//! The book of owed landings (see [`super::owed`]): what a landing is owed, kept as one file
//! per landing in `prdloop/owed/` beside the landing journal, until its bookkeeping is written.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// What the caller of a landing asks to be kept with it (see the module's comment).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Credit {
    /// The attempt's base and commit, and the commit message `--commit` gives it.
    pub base: String,
    pub attempt: String,
    pub message: String,
    /// The run's own record of the pass (the isolation does not read it).
    pub record: serde_json::Value,
}

/// A landing whose bookkeeping is not known to be written.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Owed {
    /// Its file's name in the folder (from its undo point's).
    pub name: String,
    /// The PRD and session it was landed for (as the undo point names them).
    pub prd: Option<String>,
    pub session: Option<String>,
    /// What landed: a criterion's id.
    pub label: String,
    pub files: Vec<super::repo_path::RepoPath>,
    /// Its undo point's ref.
    pub undo: String,
    pub credit: Credit,
}

/// The folder of a repository's owed landings, beside its landing journal.
pub fn dir(journal: &Path) -> PathBuf {
    journal.with_file_name("owed")
}

fn path(journal: &Path, name: &str) -> PathBuf {
    dir(journal).join(format!("{name}.json"))
}

/// Keeps `owed` (durably: the landing's journal is removed after this).
pub(super) fn keep(journal: &Path, owed: &Owed) -> Result<()> {
    let d = dir(journal);
    std::fs::create_dir_all(&d).with_context(|| format!("could not create {}", d.display()))?;
    crate::fsutil::write_atomic(
        &path(journal, &owed.name),
        &serde_json::to_vec_pretty(owed)?,
    )
}

/// The bookkeeping of `name` is written: it is owed no more.
pub fn settle(journal: &Path, name: &str) -> Result<()> {
    let p = path(journal, name);
    remove(&p).with_context(|| format!("could not remove {}", p.display()))
}

/// [`settle`], where a record that would not go is a warning.
pub fn settle_or_warn(journal: &Path, name: &str) -> Result<(), super::Warning> {
    let p = path(journal, name);
    remove(&p).map_err(|e| super::Warning::not_removed(p, &e))
}

/// Removes the record at `p`; none there is done.
fn remove(p: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The landings owed to the PRD at `prd` (compared as files, not as spellings of a path),
/// oldest first. One that cannot be read is an error (an I/O one: exit 6) naming its file:
/// a pass it holds would otherwise be worked for again, on a checkout that has it.
pub fn owed_to(journal: &Path, prd: &Path) -> Result<Vec<Owed>> {
    let d = dir(journal);
    let Ok(rd) = std::fs::read_dir(&d) else {
        return Ok(Vec::new());
    };
    let same = |p: &str| {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        canon(Path::new(p)) == canon(prd)
    };
    let mut found = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let bytes = std::fs::read(&p).with_context(|| format!("could not read {}", p.display()))?;
        let owed: Owed = serde_json::from_slice(&bytes).map_err(|why| {
            anyhow::Error::new(std::io::Error::new(std::io::ErrorKind::InvalidData, why)).context(
                format!(
                    "{} is damaged: it records a landing whose pass was not yet written to its \
                     PRD; compare your files with what that criterion asks, tick it by hand if \
                     it holds, then remove the file",
                    p.display()
                ),
            )
        })?;
        if owed.prd.as_deref().is_some_and(same) {
            found.push(owed);
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owed(name: &str, prd: &Path) -> Owed {
        Owed {
            name: name.into(),
            prd: Some(prd.display().to_string()),
            session: Some("s".into()),
            label: "ISC-1".into(),
            files: vec!["a".into()],
            undo: format!("refs/prdloop-undo/{name}"),
            credit: Credit {
                base: "b".into(),
                attempt: "a".into(),
                message: "ISC-1: a".into(),
                record: serde_json::json!({"criterion": "ISC-1"}),
            },
        }
    }

    #[test]
    fn owed_landings_are_kept_per_prd_until_settled() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("prdloop").join("landing.json");
        let (mine, other) = (dir.path().join("PRD.md"), dir.path().join("OTHER.md"));
        std::fs::write(&mine, "").unwrap();
        keep(&journal, &owed("2", &mine)).unwrap();
        keep(&journal, &owed("1", &mine)).unwrap();
        keep(&journal, &owed("3", &other)).unwrap();
        let names = |v: Vec<Owed>| v.into_iter().map(|o| o.name).collect::<Vec<_>>();
        // The same file by another spelling of its path.
        let spelled = dir.path().join(".").join("PRD.md");
        assert_eq!(names(owed_to(&journal, &spelled).unwrap()), ["1", "2"]);
        settle(&journal, "1").unwrap();
        settle(&journal, "1").unwrap();
        assert_eq!(names(owed_to(&journal, &mine).unwrap()), ["2"]);
        assert_eq!(names(owed_to(&journal, &other).unwrap()), ["3"]);
    }

    #[test]
    fn a_damaged_owed_landing_is_an_io_error_naming_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("prdloop").join("landing.json");
        std::fs::create_dir_all(super::dir(&journal)).unwrap();
        std::fs::write(path(&journal, "7"), "{\"name\": ").unwrap();
        let e = owed_to(&journal, &dir.path().join("PRD.md")).unwrap_err();
        assert!(format!("{e:#}").contains("7.json is damaged"), "{e:#}");
        assert_eq!(crate::exit::code_of(&e), crate::exit::Exit::Io);
    }
}
