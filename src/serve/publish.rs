//! What each running worker's agent is doing now, published for the dashboard: the run's
//! one hook for it. The live view reads the workers' activity cells in memory; a dashboard
//! in another process (`prdloop serve`) cannot, and a worker's log reaches the disk in
//! blocks. So the run keeps `<log folder>/activity-<lane>-<sample>.json` per running worker,
//! rewritten (atomically) when its activity changes, at most twice a second, and removed
//! when the worker ends (or the run's runtime goes; a run killed outright leaves it, and the
//! dashboard reads it only for a lane its live run says is busy with that criterion).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::backend::Activity;

/// The least time between two writes of a worker's file.
const THROTTLE: Duration = Duration::from_millis(500);

/// A running worker's activity file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LaneActivity {
    pub criterion: String,
    /// Its log's file name.
    pub log: String,
    pub doing: String,
    #[serde(default)]
    pub tokens: Option<u64>,
}

/// The file of a lane's sample (0 without best-of-N).
pub fn path(log_dir: &Path, lane: usize, sample: u32) -> PathBuf {
    log_dir.join(format!("activity-{lane}-{sample}.json"))
}

/// Reads a lane's activity file; `None` when there is none (or it does not parse).
pub fn read(log_dir: &Path, lane: usize, sample: u32) -> Option<LaneActivity> {
    serde_json::from_slice(&std::fs::read(path(log_dir, lane, sample)).ok()?).ok()
}

/// Publishes the activity of the workers the run starts.
pub struct Publisher {
    log_dir: PathBuf,
}

impl Publisher {
    pub fn new(log_dir: PathBuf) -> Publisher {
        Publisher { log_dir }
    }

    /// Follows a worker's activity cell until the worker ends (on the run's runtime).
    pub fn watch(
        &self,
        lane: usize,
        sample: u32,
        criterion: &str,
        log: &Path,
        mut cell: watch::Receiver<Activity>,
    ) {
        let file = path(&self.log_dir, lane, sample);
        let criterion = criterion.to_string();
        let log = log
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        tokio::spawn(async move {
            // Removed when the worker ends, and also when the run's runtime drops this task.
            let _gone = RemoveOnDrop(file.clone());
            loop {
                let a = cell.borrow_and_update().clone();
                // Display only: a write that fails costs the dashboard a line, nothing else,
                // and nothing of it need survive a crash (so it is not synced). A small file,
                // written here (not on another thread) so that no write can come after the
                // removal. Nothing to show yet (a worker that has not said what it does, as
                // an instant one never does): no file, and none left by an earlier run.
                if a == Activity::default() {
                    let _ = std::fs::remove_file(&file);
                } else {
                    let now = LaneActivity {
                        criterion: criterion.clone(),
                        log: log.clone(),
                        doing: a.doing,
                        tokens: a.tokens,
                    };
                    let json = serde_json::to_vec(&now).unwrap_or_default();
                    let _ = crate::fsutil::write_replace_unsynced(&file, &json);
                }
                if cell.changed().await.is_err() {
                    break;
                }
                tokio::time::sleep(THROTTLE).await;
            }
        });
    }
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_workers_activity_is_on_disk_while_it_runs_and_gone_after() {
        let dir = tempfile::tempdir().unwrap();
        let p = Publisher::new(dir.path().to_path_buf());
        let (tx, rx) = watch::channel(Activity::default());
        p.watch(
            1,
            0,
            "ISC-A-1",
            Path::new("/l/iter1-ISC-A-1-attempt1.log"),
            rx,
        );
        // Nothing said yet: nothing written.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !path(dir.path(), 1, 0).exists(),
            "written before any activity"
        );
        tx.send_replace(Activity {
            doing: "Bash: cargo test".into(),
            tokens: Some(1200),
        });
        let want = LaneActivity {
            criterion: "ISC-A-1".into(),
            log: "iter1-ISC-A-1-attempt1.log".into(),
            doing: "Bash: cargo test".into(),
            tokens: Some(1200),
        };
        let mut seen = None;
        for _ in 0..200 {
            seen = read(dir.path(), 1, 0);
            if seen.as_ref() == Some(&want) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(seen, Some(want));
        drop(tx);
        for _ in 0..200 {
            if !path(dir.path(), 1, 0).exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the activity file outlived its worker");
    }
}
