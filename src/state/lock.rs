//! The per-PRD loop lock: who holds it (its JSON), where it and the request file live (a
//! folder shared by every state folder, keyed by the PRD's real path), taking it over from a
//! dead holder.

use super::*;

/// Who holds a PRD's loop lock: the JSON text of the lock file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LockInfo {
    pub pid: u32,
    pub host: String,
    pub session_id: String,
    pub prd: String,
    /// The holder's state folder, where its state file is (so a run that takes over from a
    /// crashed holder marks the right file inactive, whatever its own state folder). Empty in
    /// records written before the lock moved out of the state folder.
    #[serde(default)]
    pub state_dir: String,
}

impl LockInfo {
    /// This process as the holder of `prd`'s lock for `session`.
    pub fn new(session: &str, prd: &Path, state_dir: &Path) -> LockInfo {
        LockInfo {
            pid: std::process::id(),
            host: nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_default(),
            session_id: session.to_string(),
            prd: prd.display().to_string(),
            // Absolute, so that a run elsewhere finds it (`--state-dir` may be relative).
            state_dir: std::path::absolute(state_dir)
                .unwrap_or_else(|_| state_dir.to_path_buf())
                .display()
                .to_string(),
        }
    }

    /// Who holds a lock, for messages.
    pub fn describe(holder: Option<&LockInfo>) -> String {
        match holder {
            Some(h) if h.host.is_empty() => format!("session {} (pid {})", h.session_id, h.pid),
            Some(h) => format!("session {} (pid {} on {})", h.session_id, h.pid, h.host),
            None => "another prdloop".into(),
        }
    }

    /// The holder's state folder when it is not `ours`, for messages.
    pub fn other_state_dir(&self, ours: &Path) -> Option<&str> {
        let ours = std::path::absolute(ours).unwrap_or_else(|_| ours.to_path_buf());
        (!self.state_dir.is_empty() && Path::new(&self.state_dir) != ours)
            .then_some(self.state_dir.as_str())
    }
}

/// The per-PRD loop lock: an OS file lock on `<lock dir>/<hash of the PRD's real path>.lock`
/// (see [`lock_dir`]), which the OS drops when the holder dies; the file's text names the
/// holder. Keyed by the PRD and not kept in the state folder, so that runs with different
/// `--state-dir`, `PAI_DIR` or `HOME` still exclude each other.
#[derive(Debug)]
pub struct PrdLock {
    file: File,
    pub path: PathBuf,
}

pub enum LockOutcome {
    Acquired {
        lock: PrdLock,
        /// The holder recorded by a previous run that ended without releasing (crashed).
        stale: Option<LockInfo>,
    },
    Busy(Option<LockInfo>),
}

/// A stable short hash (FNV-1a) of the PRD's absolute path, for the lock file name.
pub fn path_hash(p: &Path) -> String {
    format!(
        "{:016x}",
        crate::text::fnv1a(p.as_os_str().as_encoded_bytes())
    )
}

/// A stable short hash (FNV-1a) of a text.
pub fn text_hash(s: &str) -> String {
    format!("{:016x}", crate::text::fnv1a(s.as_bytes()))
}

/// The folder of this user's loop locks and pause/stop requests: `/tmp/prdloop-<uid>`,
/// private (0700). It does not depend on HOME, PAI_DIR, TMPDIR or `--state-dir`, so every
/// prdloop run of the user finds the same lock for a PRD. Only when that folder cannot be
/// used (no writable /tmp, or the folder there is not this user's own) does it fall back to
/// `<std::env::temp_dir()>/prdloop-<uid>`; runs that fall back under different TMPDIRs do not
/// see each other. Chosen once per process, so a run's lock and its request file stay together.
/// The sessions of every live loop of this user (the PRD locks held now), whatever PRD.
pub fn live_sessions() -> std::collections::BTreeSet<String> {
    let Ok(dir) = lock_dir() else {
        return Default::default();
    };
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "lock"))
                .filter_map(|e| holder_of(&e.path(), Path::new("")).ok().flatten())
                .map(|l| l.session_id)
                .collect()
        })
        .unwrap_or_default()
}

pub fn lock_dir() -> Result<PathBuf> {
    static CHOSEN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(dir) = CHOSEN.get() {
        return Ok(dir.clone());
    }
    let name = format!("prdloop-{}", crate::platform::user_id());
    let primary = Path::new("/tmp").join(&name);
    let dir = match crate::platform::private_dir(&primary) {
        Ok(()) => primary,
        Err(first) => {
            let fallback = std::env::temp_dir().join(&name);
            if fallback == primary {
                return Err(first.context("no folder for the PRD locks"));
            }
            tracing::warn!(
                "{first:#}; keeping the PRD locks in `{}`",
                fallback.display()
            );
            crate::platform::private_dir(&fallback).context("no folder for the PRD locks")?;
            fallback
        }
    };
    Ok(CHOSEN.get_or_init(|| dir).clone())
}

/// The PRD's real path (symlinks resolved), which keys its lock. Callers pass canonical paths
/// already; this makes sure of it.
fn lock_key(prd: &Path) -> PathBuf {
    std::fs::canonicalize(prd)
        .or_else(|_| std::path::absolute(prd))
        .unwrap_or_else(|_| prd.to_path_buf())
}

/// The key of a PRD in the shared folders: a hash of its real path (its lock, its request
/// file, its question book).
pub fn prd_key(prd: &Path) -> String {
    path_hash(&lock_key(prd))
}

/// The lock file of a PRD.
pub fn lock_path(prd: &Path) -> Result<PathBuf> {
    Ok(lock_dir()?.join(format!("{}.lock", path_hash(&lock_key(prd)))))
}

/// The file through which `prdloop pause|stop` asks the loop running on a PRD to pause or
/// stop (besides setting `loopStatus` in the PRD, as PAI did). It sits beside the PRD's lock,
/// so a request reaches the loop whatever state folder either side was given. When no lock
/// folder can be had, the path it would have (nothing will be found there).
pub fn request_path(prd: &Path) -> PathBuf {
    let dir = lock_dir().unwrap_or_else(|_| {
        Path::new("/tmp").join(format!("prdloop-{}", crate::platform::user_id()))
    });
    dir.join(format!("{}.request", path_hash(&lock_key(prd))))
}

/// Who holds a PRD's lock, without taking it or changing the lock file. `Ok(None)` when no
/// live loop holds it.
pub fn lock_holder(prd: &Path) -> Result<Option<LockInfo>> {
    holder_of(&lock_path(prd)?, prd)
}

/// Who holds the lock file at `path` (of the PRD `prd`), by its advisory lock.
fn holder_of(path: &Path, prd: &Path) -> Result<Option<LockInfo>> {
    let path = path.to_path_buf();
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("failed to open `{}`", path.display())),
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(None)
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            Ok(Some(serde_json::from_str(&text).unwrap_or(LockInfo {
                pid: 0,
                host: String::new(),
                session_id: "(unknown)".into(),
                prd: prd.display().to_string(),
                state_dir: String::new(),
            })))
        }
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("failed to check the lock `{}`", path.display()))
        }
    }
}

impl PrdLock {
    pub fn acquire(prd: &Path, info: &LockInfo) -> Result<LockOutcome> {
        let path = lock_path(prd)?;
        // A release removes the file while holding it, so the file we locked may be one
        // nobody else can find any more: then try again on the file the path names now.
        let mut file = loop {
            let mut file = File::options()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
                .with_context(|| format!("failed to open the lock file `{}`", path.display()))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    let mut text = String::new();
                    let _ = file.read_to_string(&mut text);
                    return Ok(LockOutcome::Busy(serde_json::from_str(&text).ok()));
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("failed to lock `{}`", path.display()));
                }
            }
            let ours = file.metadata()?;
            if std::fs::metadata(&path).is_ok_and(|now| crate::platform::same_file(&ours, &now)) {
                break file;
            }
        };
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let stale: Option<LockInfo> = serde_json::from_str(&text).ok();
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(serde_json::to_string(info)?.as_bytes())?;
        file.sync_all()?;
        Ok(LockOutcome::Acquired {
            lock: PrdLock { file, path },
            stale,
        })
    }

    /// Removes the lock file and any pause/stop request left for this holder, then releases
    /// the lock: nothing is left behind in the shared folder. (A run that opened the file a
    /// moment before and locks it next finds that the path no longer names it, and tries
    /// again.) A crashed holder's file stays, with its record, for the run that takes over.
    pub fn release(self) {
        let _ = std::fs::remove_file(self.path.with_extension("request"));
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod lock_tests {
    use super::*;

    fn holder(session: &str, prd: &Path) -> LockInfo {
        LockInfo::new(session, prd, Path::new("/state/a"))
    }

    #[test]
    fn one_lock_per_real_path_whatever_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("PRD.md");
        std::fs::write(&real, "x").unwrap();
        let link = dir.path().join("link.md");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let dotted = dir.path().join(".").join("PRD.md");
        assert_eq!(lock_path(&link).unwrap(), lock_path(&real).unwrap());
        assert_eq!(lock_path(&dotted).unwrap(), lock_path(&real).unwrap());
        assert_eq!(request_path(&link), request_path(&real));
        assert_eq!(
            lock_path(&real).unwrap().parent(),
            Some(&*lock_dir().unwrap())
        );

        let LockOutcome::Acquired { lock, stale } =
            PrdLock::acquire(&real, &holder("one", &real)).unwrap()
        else {
            panic!("a fresh PRD's lock is free");
        };
        assert_eq!(stale, None);
        let LockOutcome::Busy(Some(h)) = PrdLock::acquire(&link, &holder("two", &link)).unwrap()
        else {
            panic!("the symlink reaches the same lock");
        };
        assert_eq!(h.session_id, "one");
        assert_eq!(h.state_dir, "/state/a");
        assert_eq!(lock_holder(&link).unwrap().unwrap().session_id, "one");
        let path = lock.path.clone();
        std::fs::write(request_path(&real), "pause").unwrap();
        lock.release();
        assert_eq!(lock_holder(&real).unwrap(), None);
        assert!(!path.exists(), "a released lock leaves no file");
        assert!(!request_path(&real).exists(), "nor a request");
        let LockOutcome::Acquired { lock, stale } =
            PrdLock::acquire(&link, &holder("two", &link)).unwrap()
        else {
            panic!("a released lock is free");
        };
        assert_eq!(stale, None, "a clean release leaves no stale holder");
        lock.release();
    }

    #[test]
    fn a_lock_file_removed_while_waiting_is_not_taken() {
        let dir = tempfile::tempdir().unwrap();
        let prd = dir.path().join("PRD.md");
        std::fs::write(&prd, "x").unwrap();
        let LockOutcome::Acquired { lock, .. } =
            PrdLock::acquire(&prd, &holder("one", &prd)).unwrap()
        else {
            panic!("free");
        };
        // Someone opened the file just before the holder released it (removing it).
        let late = File::open(&lock.path).unwrap();
        lock.release();
        let LockOutcome::Acquired { lock: second, .. } =
            PrdLock::acquire(&prd, &holder("two", &prd)).unwrap()
        else {
            panic!("free again");
        };
        // The late opener gets the old file's lock, but that file is not the PRD's lock any
        // more: acquiring through the path sees the live holder.
        late.try_lock().unwrap();
        let LockOutcome::Busy(Some(h)) = PrdLock::acquire(&prd, &holder("three", &prd)).unwrap()
        else {
            panic!("the second holder still holds it");
        };
        assert_eq!(h.session_id, "two");
        second.release();
    }

    #[test]
    fn the_lock_folder_is_private() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = lock_dir().unwrap();
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.uid(), crate::platform::user_id());
        assert_eq!(meta.permissions().mode() & 0o077, 0);
    }

    #[test]
    fn old_records_without_a_state_folder_still_parse() {
        let h: LockInfo =
            serde_json::from_str(r#"{"pid":7,"host":"h","session_id":"s","prd":"/p"}"#).unwrap();
        assert_eq!(h.state_dir, "");
        assert_eq!(h.other_state_dir(Path::new("/x")), None);
    }
}
