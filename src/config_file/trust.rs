//! Which of a repository's config files the user trusts.
//!
//! A repository's `prdloop.toml` (or `.config/prdloop.toml`) and a PRD's `prdloop:` map come
//! with the repository: a clone, a pull, or a worker's landed work. Their keys that run
//! commands, send data out or weaken a safety ([`GUARDED`]) apply only once the user has
//! trusted what that file says for them (`prdloop trust FILE`), as direnv's `allow` and
//! mise's `trust` do; until then they are left out, and the command says which and why. The
//! user's own file (`~/.config/prdloop/config.toml`) is the user's word and always applies.
//!
//! What is trusted is a [`Fingerprint`]: the SHA-256 of the file's path and of every guarded
//! setting it makes (key, value, profile), so a PRD's boxes and front matter may change
//! while its map stays trusted, and any change to a guarded value needs trust again. The
//! trusted fingerprints are kept in `trusted` beside the user's config file, outside every
//! repository and every folder a sandboxed worker may write.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::{Scope, Setting};

/// Keys that run a command, send data out, write outside the run's folders, or weaken a
/// safety (the sandbox, isolation, the deletion guard, the checks, the agent's
/// permissions). Every key is either here or in [`UNGUARDED`] (a unit test checks it), so a
/// new flag is decided on.
pub const GUARDED: &[&str] = &[
    // Programs and commands.
    "agent-bin",
    "claude-bin",
    "agent-arg",
    "claude-arg",
    "setup",
    "notify",
    "verifier",
    "mix",
    "escalate",
    "verify-types",
    // Data sent out, files written or served outside the run's own folders.
    "notify-url",
    "junit",
    "serve",
    "serve-port",
    "state-dir",
    "workdir",
    // `import -o`: the file it writes.
    "output",
    // Safeties.
    "sandbox",
    "sandbox-allow",
    "isolation",
    "allow-deletions",
    "allowed-tools",
    "permission-mode",
    "no-verify",
    "network",
    "check-allow",
    "pass-env",
    // Pushes to origin and writes on GitHub.
    "pr",
];

/// Keys that only tune the run (limits, output, scheduling), which a repository's file may
/// set without being trusted.
pub const UNGUARDED: &[&str] = &[
    "agent",
    "agents",
    "best-of",
    "color",
    "commit",
    "dry-run",
    "escalate-after",
    "fallback",
    "force",
    "json",
    "keep-worktrees",
    "kill-grace",
    "max-bundle-size",
    "max-cost",
    "max-iterations",
    "max-time",
    "max-turns",
    "max-wait",
    "max-workers",
    "model",
    "no-write",
    "notify-on",
    "progress",
    "recheck",
    "retry-backoff",
    "rounds",
    "select",
    "shards",
    "stall",
    "stuck-after",
    "timeout",
    "verbose",
    "verify-timeout",
    "voice-id",
    "with-children",
    // Only adds files a tick may not change.
    "protect",
    // `import`: which issues it reads, and how long it waits for GitHub's rate limit.
    "label",
    "milestone",
    "issue",
    "rate-limit-wait",
    // Only with --pr: where its pull request goes, and whether as a draft.
    "pr-base",
    "draft",
];

/// Whether a key needs its file trusted.
pub fn is_guarded(key: &str) -> bool {
    GUARDED.contains(&key)
}

/// Whether settings from this scope need trust: the repository's file and a PRD's map.
pub fn needs_trust(scope: Scope) -> bool {
    matches!(scope, Scope::Project | Scope::Prd)
}

/// What the user trusts of one file: its path and its guarded settings, hashed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fingerprint(String);

impl Fingerprint {
    /// The fingerprint of `file`'s guarded settings: its top-level ones (`base`) and each
    /// profile's, in a fixed order.
    pub(super) fn of<'a>(
        file: &Path,
        base: &'a [Setting],
        profiles: impl Iterator<Item = (&'a String, &'a Vec<Setting>)>,
    ) -> Fingerprint {
        let mut h = Sha256::new();
        let mut put = |bytes: &[u8]| {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        put(file.as_os_str().as_encoded_bytes());
        let mut lines: Vec<String> = Vec::new();
        let mut add = |profile: &str, settings: &[Setting]| {
            for s in settings.iter().filter(|s| is_guarded(&s.key)) {
                lines.push(format!("{profile}\0{}\0{}", s.key, s.value.to_toml()));
            }
        };
        add("", base);
        for (name, settings) in profiles {
            add(name, settings);
        }
        lines.sort();
        for l in &lines {
            put(l.as_bytes());
        }
        Fingerprint(format!("{:x}", h.finalize()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The trusted fingerprints, as kept in the user's `trusted` file: one `<sha256> <path>`
/// line each.
#[derive(Debug, Clone, Default)]
pub struct TrustStore {
    file: Option<PathBuf>,
    entries: BTreeSet<(Fingerprint, PathBuf)>,
}

impl TrustStore {
    /// Where the user's trusted fingerprints are: `trusted` beside the user's config file.
    pub fn default_file() -> Option<PathBuf> {
        super::Sources::user_file().and_then(|f| f.parent().map(|d| d.join("trusted")))
    }

    /// The user's store (empty when there is none yet, or no home to keep it in).
    pub fn load_default() -> Result<TrustStore> {
        match Self::default_file() {
            Some(f) => TrustStore::load(&f),
            None => Ok(TrustStore::default()),
        }
    }

    /// Reads a store; a missing file is an empty store, a malformed line an error naming it.
    pub fn load(file: &Path) -> Result<TrustStore> {
        let mut store = TrustStore {
            file: Some(file.to_path_buf()),
            entries: BTreeSet::new(),
        };
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(store),
            Err(e) => {
                return Err(e).with_context(|| format!("failed to read `{}`", file.display()));
            }
        };
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((hash, path)) = line.split_once(' ').filter(|(h, p)| {
                h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) && !p.is_empty()
            }) else {
                bail!(
                    "{}:{}: not a trusted file's line (`<sha256> <path>`); remove the line or \
                     the file, then trust the files again with `prdloop trust FILE`",
                    file.display(),
                    i + 1
                );
            };
            store
                .entries
                .insert((Fingerprint(hash.to_string()), PathBuf::from(path)));
        }
        Ok(store)
    }

    /// Whether `file`'s settings as they are now (`print`) are trusted.
    pub fn trusts(&self, file: &Path, print: &Fingerprint) -> bool {
        self.entries.contains(&(print.clone(), file.to_path_buf()))
    }

    /// Whether some content of `file` was trusted once.
    pub fn knows(&self, file: &Path) -> bool {
        self.entries.iter().any(|(_, p)| p == file)
    }

    /// Trusts `file` as it is now, in place of what was trusted of it before.
    pub fn trust(&mut self, file: &Path, print: Fingerprint) {
        self.forget(file);
        self.entries.insert((print, file.to_path_buf()));
    }

    /// Forgets every content of `file`; whether there was any.
    pub fn forget(&mut self, file: &Path) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(_, p)| p != file);
        self.entries.len() != before
    }

    /// The trusted files, each once, in order.
    pub fn files(&self) -> Vec<&Path> {
        let set: BTreeSet<&Path> = self.entries.iter().map(|(_, p)| p.as_path()).collect();
        set.into_iter().collect()
    }

    /// Writes the store back (whole or not at all).
    pub fn save(&self) -> Result<()> {
        let Some(file) = &self.file else {
            bail!("no place to keep trusted files: neither XDG_CONFIG_HOME nor HOME is set");
        };
        let mut text = String::from(
            "# Config files whose commands and safety settings prdloop applies (`prdloop trust`).\n",
        );
        for (print, path) in &self.entries {
            text.push_str(&format!("{} {}\n", print.0, path.display()));
        }
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("failed to create `{}`", dir.display()))?;
        }
        crate::fsutil::write_atomic(file, text.as_bytes())
    }

    /// Where the store is kept.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_file::{Keys, Value};

    #[test]
    fn every_key_is_guarded_or_not_and_none_is_both() {
        for key in Keys::new().keys.keys() {
            let g = GUARDED.contains(&key.as_str());
            let u = UNGUARDED.contains(&key.as_str());
            assert!(
                g ^ u,
                "`{key}`: decide whether a repository's file may set it untrusted (GUARDED or UNGUARDED in trust.rs)"
            );
        }
        let keys = Keys::new();
        for k in GUARDED.iter().chain(UNGUARDED) {
            assert!(keys.keys.contains_key(*k), "`{k}` is no key any more");
        }
    }

    fn setting(key: &str, value: &str) -> Setting {
        Setting {
            key: key.into(),
            value: Value::One(value.into()),
            line: 1,
        }
    }

    #[test]
    fn a_fingerprint_changes_with_a_guarded_value_only() {
        let f = Path::new("/r/prdloop.toml");
        let none = std::iter::empty();
        let a = Fingerprint::of(
            f,
            &[setting("sandbox", "off"), setting("timeout", "1m")],
            none,
        );
        let b = Fingerprint::of(
            f,
            &[setting("timeout", "9m"), setting("sandbox", "off")],
            std::iter::empty(),
        );
        assert_eq!(a, b, "order and unguarded keys do not matter");
        let c = Fingerprint::of(f, &[setting("sandbox", "auto")], std::iter::empty());
        assert_ne!(a, c);
        let other = Fingerprint::of(
            Path::new("/s/prdloop.toml"),
            &[setting("sandbox", "off")],
            std::iter::empty(),
        );
        assert_ne!(a, other, "the path is part of it");
        let profiles = [("ci".to_string(), vec![setting("sandbox", "off")])];
        let d = Fingerprint::of(f, &[], profiles.iter().map(|(n, s)| (n, s)));
        assert_ne!(a, d, "a profile's setting is not the top level's");
    }

    #[test]
    fn the_store_reads_back_what_it_wrote_and_names_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prdloop").join("trusted");
        let mut s = TrustStore::load(&file).unwrap();
        let p = Fingerprint::of(
            Path::new("/r/prdloop.toml"),
            &[setting("setup", "make")],
            std::iter::empty(),
        );
        s.trust(Path::new("/r/prdloop.toml"), p.clone());
        s.save().unwrap();
        let back = TrustStore::load(&file).unwrap();
        assert!(back.trusts(Path::new("/r/prdloop.toml"), &p));
        assert!(!back.trusts(Path::new("/q/prdloop.toml"), &p));
        let mut again = back.clone();
        assert!(again.forget(Path::new("/r/prdloop.toml")));
        assert!(!again.knows(Path::new("/r/prdloop.toml")));
        std::fs::write(&file, "# c\nnot a line\n").unwrap();
        let e = TrustStore::load(&file).unwrap_err().to_string();
        assert!(e.contains("trusted:2:"), "{e}");
    }
}
