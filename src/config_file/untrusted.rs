//! What an untrusted file's layer leaves out ([`trust`](super::trust)): its guarded settings,
//! the warnings that name them, and what `prdloop trust` shows and fingerprints of a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::read::{prd_tree, toml_tree};
use super::trust::{self, Fingerprint, TrustStore};
use super::{Keys, Layer, Place, Scope, Setting, Settings, Value};

/// A guarded setting of an untrusted file, left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Ignored {
    pub key: String,
    pub value: Value,
    pub place: Place,
    /// The file was trusted once, with other values.
    pub changed: bool,
}

/// The guarded settings an untrusted layer left out: whether it was trusted once with other
/// values, its top-level ones and each profile's.
type LeftOut = (bool, Vec<Setting>, BTreeMap<String, Vec<Setting>>);

impl Layer {
    /// What the user must trust of this layer.
    pub(super) fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.file, &self.base, self.profiles.iter())
    }

    /// Takes the guarded settings out of a repository's file or PRD map that `trusted` does
    /// not trust as it is now; `None` when nothing was taken.
    pub(super) fn untrusted_part(&mut self, trusted: &TrustStore) -> Option<LeftOut> {
        if !trust::needs_trust(self.scope) || trusted.trusts(&self.file, &self.fingerprint()) {
            return None;
        }
        let split = |v: &mut Vec<Setting>| -> Vec<Setting> {
            let (out, keep): (Vec<_>, Vec<_>) = std::mem::take(v)
                .into_iter()
                .partition(|s| trust::is_guarded(&s.key));
            *v = keep;
            out
        };
        let base = split(&mut self.base);
        let mut profiles = BTreeMap::new();
        for (name, ss) in &mut self.profiles {
            let out = split(ss);
            if !out.is_empty() {
                profiles.insert(name.clone(), out);
            }
        }
        if base.is_empty() && profiles.is_empty() {
            return None;
        }
        Some((trusted.knows(&self.file), base, profiles))
    }
}

/// One file's settings as `prdloop trust` shows and fingerprints them.
#[derive(Debug, Clone)]
pub struct Trustable {
    pub file: PathBuf,
    /// Its guarded settings: key, value, line, profile.
    pub guarded: Vec<(String, Value, usize, Option<String>)>,
    pub fingerprint: Fingerprint,
}

/// Reads a repository's config file or a PRD's `prdloop:` map (by the file's extension) for
/// `prdloop trust`: every key checked as a run would.
pub fn trustable(file: &Path) -> Result<Trustable> {
    let file = std::path::absolute(file)
        .with_context(|| format!("failed to resolve `{}`", file.display()))?;
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("failed to read `{}`", file.display()))?;
    let keys = Keys::new();
    let is_prd = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"));
    let layer = if is_prd {
        let Some(entries) = prd_tree(&text, &file)? else {
            bail!(
                "{}: its front matter has no `prdloop:` map: nothing to trust",
                file.display()
            );
        };
        let dir = file.parent().unwrap_or(Path::new("/"));
        Layer::new(&keys, Scope::Prd, &file, dir, entries)?
    } else {
        let dir = crate::config::default_workdir(&file);
        Layer::new(&keys, Scope::Project, &file, &dir, toml_tree(&text, &file)?)?
    };
    let mut guarded = Vec::new();
    let base = layer.base.iter().map(|s| (s, None));
    let profiles = layer
        .profiles
        .iter()
        .flat_map(|(n, ss)| ss.iter().map(move |s| (s, Some(n.clone()))));
    for (s, p) in base.chain(profiles) {
        if trust::is_guarded(&s.key) {
            guarded.push((s.key.clone(), s.value.clone(), s.line, p));
        }
    }
    guarded.sort_by_key(|g| g.2);
    Ok(Trustable {
        fingerprint: layer.fingerprint(),
        file,
        guarded,
    })
}

impl Settings {
    /// The warnings for the settings left out: one per untrusted file.
    pub fn ignored_warnings(&self) -> Vec<Untrusted> {
        let mut by_file: Vec<Untrusted> = Vec::new();
        for i in &self.ignored {
            let key = (i.key.clone(), i.place.line);
            match by_file.iter_mut().find(|u| u.file == i.place.file) {
                Some(u) => u.left_out.push(key),
                None => by_file.push(Untrusted {
                    file: i.place.file.clone(),
                    changed: i.changed,
                    left_out: vec![key],
                }),
            }
        }
        by_file
    }
}

/// The warning about one untrusted file: what it sets that runs commands or weakens safety
/// was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    pub file: PathBuf,
    /// It was trusted once, with other values.
    pub changed: bool,
    /// The keys left out, with their lines, in the file's order.
    pub left_out: Vec<(String, usize)>,
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self
            .left_out
            .iter()
            .map(|(key, line)| format!("`{key}` (line {line})"))
            .collect();
        write!(
            f,
            "{} is not trusted{}, so prdloop ignores what it sets that runs commands or \
             weakens safety: {}; if you have read it, `prdloop trust {}` applies them",
            self.file.display(),
            if self.changed {
                " (its settings changed since you trusted it)"
            } else {
                ""
            },
            items.join(", "),
            self.file.display()
        )
    }
}
