//! What each running worker's agent is doing now, published for the dashboard: the run's
//! one hook for it. The live view reads the workers' activity cells in memory; a dashboard
//! in another process (`prdloop serve`) cannot, and a worker's log reaches the disk in
//! blocks. So the run keeps `<log folder>/activity-<lane>-<sample>.json` per running worker,
//! rewritten (atomically) half a second after its activity changes (so at most twice a
//! second, and never for a worker that ends sooner), and removed when the worker ends (or the run's runtime goes; a run killed outright leaves it, and the
//! dashboard reads it only for a lane its live run says is busy with that criterion).

use std::collections::HashSet;
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
    /// The files (lane, sample) this run has used: one left by an earlier run (killed
    /// outright) is removed before the first worker of its lane and sample, not before each.
    used: HashSet<(usize, u32)>,
}

impl Publisher {
    pub fn new(log_dir: PathBuf) -> Publisher {
        Publisher {
            log_dir,
            used: HashSet::new(),
        }
    }

    /// Follows a worker's activity cell until the worker ends (on the run's runtime).
    pub fn watch(
        &mut self,
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
        if self.used.insert((lane, sample)) {
            // None left by an earlier run (one killed outright). After that, each worker's
            // file is removed when the worker ends (or the run's runtime drops its task).
            let _ = std::fs::remove_file(&file);
        }
        tokio::spawn(async move {
            // Removed only once written: an instant worker costs no file system call.
            let mut gone = RemoveOnDrop {
                file: file.clone(),
                written: false,
            };
            // What the worker said before this task subscribed counts as a change.
            if *cell.borrow() != Activity::default() {
                cell.mark_changed();
            }
            // A change is written THROTTLE after it, with whatever is the activity then: so
            // at most twice a second, and a worker that ends within THROTTLE of its first
            // word (as an instant one does) never makes the file (each made and replaced
            // file costs the file system an inode).
            while cell.changed().await.is_ok() {
                tokio::time::sleep(THROTTLE).await;
                if cell.has_changed().is_err() {
                    break;
                }
                let a = cell.borrow_and_update().clone();
                // Display only: a write that fails costs the dashboard a line, nothing else,
                // and nothing of it need survive a crash (so it is not synced). A small file,
                // written here (not on another thread) so that no write can come after the
                // removal.
                if a == Activity::default() {
                    if gone.written {
                        let _ = std::fs::remove_file(&file);
                        gone.written = false;
                    }
                } else {
                    let now = LaneActivity {
                        criterion: criterion.clone(),
                        log: log.clone(),
                        doing: a.doing,
                        tokens: a.tokens,
                    };
                    let json = serde_json::to_vec(&now).unwrap_or_default();
                    // A failed write may still have left the file: removed at the end too.
                    let _ = crate::fsutil::write_replace_unsynced(&file, &json);
                    gone.written = true;
                }
            }
        });
    }
}

/// A worker's file, removed when its task ends if it was written.
struct RemoveOnDrop {
    file: PathBuf,
    written: bool,
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if self.written {
            let _ = std::fs::remove_file(&self.file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_workers_activity_is_on_disk_while_it_runs_and_gone_after() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Publisher::new(dir.path().to_path_buf());
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
        // Said, but not for THROTTLE yet: still nothing written.
        tokio::time::sleep(THROTTLE / 2).await;
        assert!(
            !path(dir.path(), 1, 0).exists(),
            "written before the activity lasted"
        );
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

    #[tokio::test]
    async fn a_worker_that_ends_within_the_throttle_never_makes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Publisher::new(dir.path().to_path_buf());
        let (tx, rx) = watch::channel(Activity::default());
        // Said before the publisher looked: counts too.
        tx.send_replace(Activity {
            doing: "Read: src/lib.rs".into(),
            tokens: Some(10),
        });
        p.watch(2, 0, "ISC-A-2", Path::new("/l/x.log"), rx);
        tokio::time::sleep(THROTTLE / 5).await;
        assert!(!path(dir.path(), 2, 0).exists(), "written at once");
        drop(tx);
        for _ in 0..(2 * THROTTLE.as_millis() / 20) {
            assert!(
                !path(dir.path(), 2, 0).exists(),
                "written for an instant worker"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_file_an_earlier_run_left_is_gone_once_its_lane_runs_a_worker() {
        let dir = tempfile::tempdir().unwrap();
        let stale = path(dir.path(), 4, 0);
        std::fs::write(&stale, b"{}").unwrap();
        let mut p = Publisher::new(dir.path().to_path_buf());
        let (tx, rx) = watch::channel(Activity::default());
        p.watch(4, 0, "ISC-A-4", Path::new("/l/z.log"), rx);
        assert!(!stale.exists(), "an earlier run's file still shows");
        drop(tx);
    }

    #[tokio::test]
    async fn what_a_worker_said_before_it_was_watched_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Publisher::new(dir.path().to_path_buf());
        let (tx, rx) = watch::channel(Activity::default());
        tx.send_replace(Activity {
            doing: "Read: src/lib.rs".into(),
            tokens: None,
        });
        p.watch(3, 1, "ISC-A-3", Path::new("/l/y.log"), rx);
        let mut seen = None;
        for _ in 0..200 {
            seen = read(dir.path(), 3, 1);
            if seen.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(seen.map(|a| a.doing), Some("Read: src/lib.rs".to_string()));
        drop(tx);
    }
}
