//! Finishing or rolling back a landing that a crash interrupted, from its journal.

use std::path::Path;

use anyhow::{Context, Result};

use super::*;

/// Finishes or rolls back a landing a crash interrupted; what was done, for the user.
pub fn recover(journal: &Path) -> Result<Option<String>> {
    let Ok(bytes) = std::fs::read(journal) else {
        return Ok(None);
    };
    let j: Journal = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a landing journal", journal.display()))?;
    let top = Git::new(&j.top);
    recover_journal(&top, journal, &j).map(Some)
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
        let target = j.top.join(&op.change.path);
        let temp_holds = hash_file(top, &op.change.path, &op.temp)?;
        let at_target = hash_file(top, &op.change.path, &target)?;
        match &op.change.after {
            None => {
                if matches(&at_target, &op.change.before) {
                    std::fs::rename(&target, &op.temp)
                        .with_context(|| format!("could not remove {}", target.display()))?;
                    remove_empty_parents(&j.top, &target);
                } else if at_target.is_some() {
                    skipped.push(op.change.path.clone());
                }
            }
            Some(_) => {
                if matches(&at_target, &op.change.after) {
                    continue;
                }
                if !matches(&temp_holds, &op.change.after) {
                    skipped.push(op.change.path.clone());
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
                    skipped.push(op.change.path.clone());
                }
            }
        }
    }
    finish(j, journal);
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
