//! Finishing or rolling back a landing that a crash interrupted, from its journal.

use std::path::Path;

use anyhow::{Context, Result};

use super::*;

/// Finishes or rolls back a landing a crash interrupted in the checkout at `top`; what was
/// done, for the user. A journal that cannot be read is an error (an I/O one: exit 6) that
/// names every temporary file the landing left in the checkout: nothing may land on a
/// checkout half-changed.
pub fn recover(journal: &Path, top: &Path) -> Result<Option<String>> {
    let bytes = match std::fs::read(journal) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e).with_context(|| format!("could not read {}", journal.display()));
        }
    };
    let j: Journal = match serde_json::from_slice(&bytes) {
        Ok(j) => j,
        Err(e) => return Err(damaged(journal, top, e)),
    };
    let top = Git::new(&j.top);
    recover_journal(&top, journal, &j).map(Some)
}

/// The error of a landing journal that cannot be read, naming what the landing left.
fn damaged(journal: &Path, top: &Path, why: serde_json::Error) -> anyhow::Error {
    let left = leftovers(top);
    let listed = if left.is_empty() {
        "it left no temporary file in the checkout".to_string()
    } else {
        format!(
            "it left these in the checkout, each either new content not yet in place or the \
             old content of a file already replaced: {}",
            left.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let io = std::io::Error::new(std::io::ErrorKind::InvalidData, why);
    anyhow::Error::new(io).context(format!(
        "the landing journal {} is damaged (cut short or overwritten), so the landing it \
         records can be neither finished nor rolled back and nothing more lands on the \
         checkout; {listed}. Compare them with your files (`git status`), keep what you \
         want, then remove them and the journal",
        journal.display()
    ))
}

/// Every file or folder named `.prdloop-landing-*` under `top` (not inside `.git`, never
/// through a symbolic link).
pub(super) fn leftovers(top: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![top.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let path = e.path();
            if name.as_encoded_bytes().starts_with(b".prdloop-landing-") {
                found.push(path);
            } else if name != ".git" && e.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(path);
            }
        }
    }
    found.sort();
    found
}

pub(super) fn recover_journal(top: &Git, journal: &Path, j: &Journal) -> Result<String> {
    if j.phase == Phase::Staging {
        remove_temporaries(j);
        std::fs::remove_file(journal)
            .with_context(|| format!("could not remove {}", journal.display()))?;
        return Ok(format!(
            "an interrupted landing of {} was rolled back (it had not begun to change files)",
            j.label
        ));
    }
    let mut skipped = Vec::new();
    for &i in &order(&j.ops) {
        let op = &j.ops[i];
        let target = j.top.join(op.change.path.as_path());
        let temp_holds = hash_file(top, &op.change.path, &op.temp)?;
        let at_target = hash_file(top, &op.change.path, &target)?;
        match &op.change.after {
            None => {
                if matches(&at_target, &op.change.before) {
                    std::fs::rename(&target, &op.temp)
                        .with_context(|| format!("could not remove {}", target.display()))?;
                    remove_empty_parents(&j.top, &target);
                } else if at_target.is_some() {
                    skipped.push(op.change.path.lossy());
                }
            }
            Some(_) => {
                if matches(&at_target, &op.change.after) {
                    continue;
                }
                if !matches(&temp_holds, &op.change.after) {
                    skipped.push(op.change.path.lossy());
                    continue;
                }
                if let Some(parent) = target.parent() {
                    prepare_parent(&j.top, parent)?;
                }
                if matches(&at_target, &op.change.before) && at_target.is_some() {
                    exchange(&op.temp, &target)?;
                } else if at_target.is_none() {
                    rename_new(&op.temp, &target)?;
                } else {
                    skipped.push(op.change.path.lossy());
                }
            }
        }
    }
    finish(j, journal)?;
    let mut msg = format!(
        "an interrupted landing of {} was finished ({} file(s))",
        j.label,
        j.ops.len()
    );
    if !skipped.is_empty() {
        msg.push_str(&format!(
            "; left alone because they changed since: {}",
            skipped.join(", ")
        ));
    }
    Ok(msg)
}
