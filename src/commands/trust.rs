//! `prdloop trust [FILE] [--forget | --list]`: which of a repository's config files may run
//! commands and weaken safety ([`crate::config_file::trust`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cli::TrustArgs;
use crate::config_file::trust::TrustStore;
use crate::config_file::{PROJECT_FILE, Sources, trustable};
use crate::exit::Exit;
use crate::report;

/// The file `trust` works on: the one named, else this repository's `prdloop.toml`.
fn file_of(args: &TrustArgs) -> Result<PathBuf> {
    if let Some(f) = &args.file {
        return std::path::absolute(f)
            .with_context(|| format!("failed to resolve `{}`", f.display()));
    }
    let dir = Sources::find(None)
        .project_dir
        .context("no current folder")?;
    let candidates = [
        dir.join(PROJECT_FILE),
        dir.join(".config").join(PROJECT_FILE),
    ];
    match candidates.iter().find(|p| p.is_file()) {
        Some(p) => Ok(p.clone()),
        None => bail!(
            "no {PROJECT_FILE} in {} (nor in its .config/): name the file to trust, a \
             prdloop.toml or a PRD whose `prdloop:` map you trust",
            dir.display()
        ),
    }
}

/// `prdloop trust`.
pub fn trust(args: &TrustArgs) -> Result<Exit> {
    let mut store = TrustStore::load_default()?;
    if args.list {
        return list(&store);
    }
    let file = file_of(args)?;
    if args.forget {
        if store.forget(&file) {
            store.save()?;
            report::stdout(&format!("no longer trusted: {}\n", file.display()))?;
        } else {
            report::stdout(&format!("{} was not trusted\n", file.display()))?;
        }
        return Ok(Exit::Success);
    }
    let t = trustable(&file)?;
    if t.guarded.is_empty() {
        report::stdout(&format!(
            "nothing to trust: {} sets no key that runs commands or weakens safety (its \
             settings apply as they are)\n",
            t.file.display()
        ))?;
        return Ok(Exit::Success);
    }
    let already = store.trusts(&t.file, &t.fingerprint);
    store.trust(&t.file, t.fingerprint.clone());
    store.save()?;
    let mut out = format!(
        "{} {}; these settings of it now apply:\n",
        if already {
            "already trusted:"
        } else {
            "trusted:"
        },
        t.file.display()
    );
    for (key, value, line, profile) in &t.guarded {
        let at = profile
            .as_ref()
            .map_or(String::new(), |p| format!(" [profile.{p}]"));
        out.push_str(&format!(
            "  line {line}{at}: {key} = {}\n",
            crate::text::visible(&value.to_toml())
        ));
    }
    out.push_str(&format!(
        "a change to any of them needs `prdloop trust` again (kept in {})\n",
        store.file().map_or("?".into(), |f| f.display().to_string())
    ));
    report::stdout(&out)?;
    Ok(Exit::Success)
}

/// `prdloop trust --list`.
fn list(store: &TrustStore) -> Result<Exit> {
    let files = store.files();
    if files.is_empty() {
        report::stdout("no file is trusted\n")?;
        return Ok(Exit::Success);
    }
    let mut out = String::new();
    for f in files {
        let state = match trustable(Path::new(f)) {
            Ok(t) if store.trusts(f, &t.fingerprint) => "trusted".to_string(),
            Ok(_) => "changed since it was trusted: its guarded settings are ignored".into(),
            Err(e) => format!("cannot be read now: {e:#}"),
        };
        out.push_str(&format!("{}  {state}\n", f.display()));
    }
    report::stdout(&out)?;
    Ok(Exit::Success)
}
