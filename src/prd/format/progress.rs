//! ralph's `progress.txt` beside a `prd.json`: an append-only log that each iteration reads
//! (it is given to workers as context) and appends to. prdloop appends one entry per attempt,
//! shaped as ralph's are (`## <time> - <story id>`, bullets, `---`), in one write, to the
//! file only when it is a regular file already there (never through a symlink).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::ListFormat;

/// The progress log of a run's task list.
#[derive(Debug, Clone)]
pub struct ProgressLog {
    path: PathBuf,
}

impl ProgressLog {
    /// The log beside the task list at `prd`, when its format keeps one and it exists.
    pub fn beside(list: ListFormat, prd: &Path) -> Option<ProgressLog> {
        let path = list.progress_log(prd)?;
        std::fs::symlink_metadata(&path)
            .is_ok_and(|m| m.is_file())
            .then_some(ProgressLog { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the entry of one attempt at `id`, finished at `at_ms` (Unix milliseconds):
    /// its `lines` as bullets.
    pub fn append(&self, id: &str, at_ms: u64, lines: &[String]) -> std::io::Result<()> {
        let mut f = open_append(&self.path)?;
        let mut entry = String::new();
        // An entry starts on a line of its own.
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() > 0)
            && !ends_with_newline(&self.path)
        {
            entry.push('\n');
        }
        entry.push_str(&entry_text(id, at_ms, lines));
        f.write_all(entry.as_bytes())?;
        f.sync_data()
    }
}

/// `## 2026-01-12 10:14 UTC - US-001`, the bullets, `---`.
fn entry_text(id: &str, at_ms: u64, lines: &[String]) -> String {
    let at = jiff::Timestamp::from_millisecond(at_ms as i64)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default();
    let mut out = format!("\n## {at} - {id}\n");
    for l in lines {
        // One bullet per line: a reason of several lines stays inside its entry.
        out.push_str(&format!("- {}\n", l.trim().replace('\n', "\n  ")));
    }
    out.push_str("---\n");
    out
}

fn ends_with_newline(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return true;
    };
    let mut last = [0u8; 1];
    f.seek(SeekFrom::End(-1)).is_ok() && f.read_exact(&mut last).is_ok() && last[0] == b'\n'
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(nix::libc::O_NOFOLLOW);
    }
    o.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_appended_as_ralph_writes_them_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let prd = dir.path().join("prd.json");
        assert!(
            ProgressLog::beside(ListFormat::Ralph, &prd).is_none(),
            "no file, no log"
        );
        let path = dir.path().join("progress.txt");
        std::fs::write(&path, "# Ralph Progress Log\n---").unwrap();
        assert!(ProgressLog::beside(ListFormat::Taskmaster, &prd).is_none());
        let log = ProgressLog::beside(ListFormat::Ralph, &prd).unwrap();
        log.append(
            "US-002",
            1_767_225_600_000,
            &["passed".into(), "a\nb".into()],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Ralph Progress Log\n---\n\n## 2026-01-01 00:00:00 UTC - US-002\n- passed\n- a\n  b\n---\n"
        );
        #[cfg(unix)]
        {
            let target = dir.path().join("elsewhere.txt");
            std::fs::write(&target, "theirs\n").unwrap();
            std::fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(&target, &path).unwrap();
            assert!(ProgressLog::beside(ListFormat::Ralph, &prd).is_none());
            assert!(log.append("US-002", 0, &[]).is_err());
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs\n");
        }
    }
}
