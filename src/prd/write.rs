//! Changing a PRD on disk from a command that runs once (`verify`, `merge`, `pause`, `stop`):
//! the change is a function applied to the PRD as it is on disk, so that an edit made by
//! someone else is never written over. The new text is swapped in with
//! `renameat2(RENAME_EXCHANGE)` (Linux), which hands back exactly the file it replaced; when
//! that is not the text the change was applied to, someone wrote in between, and the change
//! is applied again to their text and swapped in again. Elsewhere the file is compared just
//! before the rename. The run's own writer (`run::prd_writer`) works the same way and also
//! keeps replaced files open between its writes, for programs writing into them late.

use std::io::{Read, Seek};
use std::path::Path;

use anyhow::Result;

use super::Prd;
use crate::fsutil::Staged;

/// How many times the change is applied again because the file changed under it.
const LAPS: usize = 4;

/// Applies `change` to the PRD at `path` and writes it when the text changed; returns the PRD
/// as written (or as found, when nothing changed). `change` may be called more than once,
/// each time on the newest text. A PRD that does not parse (or stops parsing) is an error
/// naming the file and line, and nothing is written.
pub fn update(path: &Path, mut change: impl FnMut(&mut Prd) -> Result<()>) -> Result<Prd> {
    // `base`: the text the change is applied to (the newest seen of others'); `on_disk`: what
    // the file should hold right now (`base`, or what our last swap put there).
    let mut base = read(path)?;
    let mut on_disk = base.clone();
    for lap in 0..=LAPS {
        let mut doc = super::parse_file(path, base.clone())?;
        change(&mut doc)?;
        if doc.text() == on_disk {
            return Ok(doc);
        }
        if lap == LAPS {
            // Still changing: their newest text, with the change, replaces what the last
            // swap put there (which was made on an older text).
            Staged::new(path, doc.text().as_bytes())?.persist()?;
            tracing::warn!(
                "{} kept changing while prdloop wrote it; its newest text was kept, with \
                 prdloop's change applied",
                path.display()
            );
            return Ok(doc);
        }
        let staged = Staged::new(path, doc.text().as_bytes())?;
        match staged.exchange() {
            Ok(Some(mut old)) => match read_back(&mut old) {
                // `old` is exactly the file ours replaced: someone wrote it in between.
                Some(replaced) if replaced != on_disk => {
                    tracing::info!("{} changed while it was written; again", path.display());
                    base = replaced;
                    on_disk = doc.text().to_string();
                }
                _ => return Ok(doc),
            },
            Ok(None) => return Ok(doc),
            Err(staged) => {
                let now = read(path)?;
                if now != on_disk {
                    drop(staged);
                    base = now.clone();
                    on_disk = now;
                    continue;
                }
                staged.persist()?;
                return Ok(doc);
            }
        }
    }
    unreachable!("the last lap returns")
}

fn read(path: &Path) -> Result<String> {
    let doc = super::load(path)?;
    Ok(doc.text().to_string())
}

/// An open file's whole content, read from its start.
pub(crate) fn read_back(file: &mut std::fs::File) -> Option<String> {
    file.rewind().ok()?;
    let mut s = String::new();
    file.read_to_string(&mut s).ok()?;
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRD: &str =
        "---\nprd: true\nid: PRD-1\n---\n\n## CRITERIA\n\n- [ ] ISC-A-1: a\n- [ ] ISC-A-2: b\n";

    #[test]
    fn an_edit_made_while_the_change_is_applied_is_kept_and_the_change_applied_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("PRD.md");
        std::fs::write(&path, PRD).unwrap();
        let mut calls = 0;
        let doc = update(&path, |doc| {
            calls += 1;
            if calls == 1 {
                // Someone saves between prdloop's read and its write.
                let theirs = PRD.replace(
                    "- [ ] ISC-A-2: b\n",
                    "- [ ] ISC-A-2: b\n- [ ] ISC-A-3: theirs\n",
                );
                std::fs::write(&path, theirs).unwrap();
            }
            doc.set_checked("ISC-A-1", true);
            Ok(())
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, doc.text());
        assert!(text.contains("- [x] ISC-A-1: a\n"), "{text}");
        assert!(
            text.contains("- [ ] ISC-A-3: theirs\n"),
            "their line was lost: {text}"
        );
        assert_eq!(calls, 2);
    }

    #[test]
    fn nothing_is_written_when_nothing_changes_and_a_broken_prd_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("PRD.md");
        std::fs::write(&path, PRD).unwrap();
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        update(&path, |_| Ok(())).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            before
        );
        let broken = "---\nprd: true\nid: [unclosed\n---\n- [ ] ISC-A-1: a\n";
        std::fs::write(&path, broken).unwrap();
        let e = update(&path, |doc| {
            doc.set_checked("ISC-A-1", true);
            Ok(())
        })
        .unwrap_err();
        assert!(format!("{e:#}").contains("PRD.md"), "{e:#}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
    }
}
