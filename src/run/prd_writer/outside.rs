//! What someone else changed in the PRD during the run: boxes, tombstones, pause/stop.

use super::*;

/// Warns about boxes changed by someone else and notes pause/stop requests. A box whose state
/// on disk is one prdloop itself read or wrote during the run (`seen`) is no outside edit: an
/// editor saved a copy made before prdloop's last write. It is restored without a word.
pub(super) fn outside_edits(
    core: &Core,
    disk: &Prd,
    path: &Path,
    seen: &HashMap<String, u8>,
) -> SyncReport {
    let mut r = SyncReport {
        changed_on_disk: true,
        ..SyncReport::default()
    };
    for c in core
        .doc()
        .criteria
        .iter()
        .filter(|c| disk.is_tombstone(&c.id))
    {
        r.warnings.push(
            Warning::Dropped {
                path: path.to_path_buf(),
                id: c.id.clone(),
            }
            .into(),
        );
    }
    for c in &disk.criteria {
        let known = core.ledger().get(&c.id).map(|rec| rec.passing);
        let ours = seen.get(&c.id).is_some_and(|s| s & bit(c.checked) != 0);
        if let Some(known) = known
            && known != c.checked
            && !ours
        {
            r.warnings.push(
                Warning::BoxRestored {
                    path: path.to_path_buf(),
                    line: c.line,
                    id: c.id.clone(),
                    ticked: c.checked,
                }
                .into(),
            );
        }
    }
    let ours = core.doc().front.loop_status.as_deref();
    let theirs = disk.front.loop_status.as_deref();
    if theirs != ours {
        r.request = match theirs {
            Some("paused") => Some(End::PausedByRequest),
            Some("stopped") => Some(End::StoppedByRequest),
            _ => None,
        };
    }
    r
}
