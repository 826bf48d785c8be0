//! Finding PRDs and ISAs: a path, or an id searched for in PAI's and LifeOS's locations
//! (`$LIFEOS_DIR`, else `$PAI_DIR`: `MEMORY/WORK/<slug>/{PRD,ISA}.md`, `PRD-*.md`, `ISA-*.md`
//! and `tasks/*/` below them; `$PROJECTS_DIR/<project>/ISA.md` and `.prd/{PRD,ISA}-*.md`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// PAI's directories, resolved once from the environment by the config layer.
#[derive(Debug, Clone)]
pub struct Locations {
    /// `$LIFEOS_DIR`, else `$PAI_DIR`, default `~/.claude`.
    pub pai_dir: PathBuf,
    /// `$PROJECTS_DIR`, default `~/Projects`.
    pub projects_dir: PathBuf,
}

impl Locations {
    /// The places searched, as globs, for messages.
    pub fn describe(&self) -> String {
        let w = self.pai_dir.join("MEMORY/WORK");
        format!(
            "{w}/*/{{PRD,ISA}}-*.md, {w}/*/{{PRD,ISA}}.md, {w}/*/tasks/*/{{PRD,ISA}}-*.md, {p}/*/ISA.md and {p}/*/.prd/{{PRD,ISA}}-*.md",
            w = w.display(),
            p = self.projects_dir.display()
        )
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

fn prd_files(dir: &Path, bare_prd_md: bool) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            p.is_file()
                && (((name.starts_with("PRD-") || name.starts_with("ISA-"))
                    && name.ends_with(".md"))
                    || (bare_prd_md && (name == "PRD.md" || name == "ISA.md")))
        })
        .collect();
    v.sort();
    v
}

/// Every PRD file in PAI's locations.
pub fn candidates(loc: &Locations) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for work in subdirs(&loc.pai_dir.join("MEMORY/WORK")) {
        out.extend(prd_files(&work, true));
        for task in subdirs(&work.join("tasks")) {
            out.extend(prd_files(&task, false));
        }
    }
    for project in subdirs(&loc.projects_dir) {
        let isa = project.join("ISA.md");
        if isa.is_file() {
            out.push(isa);
        }
        out.extend(prd_files(&project.join(".prd"), false));
    }
    out
}

/// The id a file answers to: v3 `id`, v4/ISA `slug`; an ISA without a slug answers to its
/// folder's name (LifeOS derives the slug from it).
fn front_id(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let from_front = super::frontmatter::locate(&text)
        .ok()
        .flatten()
        .and_then(|span| super::frontmatter::read(&text, &span).ok())
        .and_then(|read| read.front.id().map(str::to_string));
    let isa = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("ISA"));
    from_front.or_else(|| {
        isa.then(|| path.parent()?.file_name()?.to_str().map(str::to_string))
            .flatten()
    })
}

/// Resolves a PRD argument: an existing path, or a PRD id searched for in PAI's locations
/// (by file name `<id>.md` or the front matter's id: v3 `id`, v4 `slug`).
pub fn resolve(arg: &str, loc: &Locations) -> Result<PathBuf> {
    let path = Path::new(arg);
    if path.exists() {
        if path.is_dir() {
            bail!("`{arg}` is a directory; give the PRD file inside it");
        }
        // Symlinks resolved: one PRD has one lock and one state, whatever path names it.
        return std::fs::canonicalize(path)
            .or_else(|_| std::path::absolute(path))
            .with_context(|| format!("failed to resolve the path `{arg}`"));
    }
    let looks_like_path = arg.contains(std::path::MAIN_SEPARATOR)
        || arg.contains('/')
        || arg.to_ascii_lowercase().ends_with(".md");
    if looks_like_path || arg.is_empty() {
        bail!("no PRD file at `{arg}`");
    }
    let matches: Vec<PathBuf> = candidates(loc)
        .into_iter()
        .filter(|p| {
            p.file_stem().and_then(|s| s.to_str()) == Some(arg)
                || front_id(p).as_deref() == Some(arg)
        })
        .collect();
    match matches.len() {
        0 => bail!(
            "`{arg}` is neither a file nor the id of a PRD in {}",
            loc.describe()
        ),
        1 => Ok(matches.into_iter().next().expect("one match")),
        _ => {
            let list: Vec<String> = matches
                .iter()
                .map(|p| format!("  {}", p.display()))
                .collect();
            bail!(
                "the PRD id `{arg}` is ambiguous; it matches:\n{}\ngive the path instead",
                list.join("\n")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_v4_prd_by_its_slug_and_a_v3_prd_by_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let loc = Locations {
            pai_dir: dir.path().join("pai"),
            projects_dir: dir.path().join("projects"),
        };
        let slug = "20260224-020000_webhook-retry";
        let v4 = loc.pai_dir.join("MEMORY/WORK").join(slug);
        std::fs::create_dir_all(&v4).unwrap();
        std::fs::write(
            v4.join("PRD.md"),
            format!("---\ntask: Webhook retry\nslug: {slug}\nphase: build\n---\n"),
        )
        .unwrap();
        let v3 = loc.projects_dir.join("app/.prd");
        std::fs::create_dir_all(&v3).unwrap();
        std::fs::write(
            v3.join("PRD-x.md"),
            "---\nid: PRD-20260101-x\ntask: not the id\n---\n",
        )
        .unwrap();
        let found = resolve(slug, &loc).unwrap();
        assert!(found.ends_with(format!("{slug}/PRD.md")), "{found:?}");
        let found = resolve("PRD-20260101-x", &loc).unwrap();
        assert!(found.ends_with("app/.prd/PRD-x.md"), "{found:?}");
        assert!(resolve("not the id", &loc).is_err());
    }

    #[test]
    fn finds_isas_in_their_homes() {
        let dir = tempfile::tempdir().unwrap();
        let loc = Locations {
            pai_dir: dir.path().join("lifeos"),
            projects_dir: dir.path().join("projects"),
        };
        let work = loc.pai_dir.join("MEMORY/WORK/20260701-thing");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            work.join("ISA.md"),
            "---\nphase: climbing\nprogress: 0/1\n---\n",
        )
        .unwrap();
        let project = loc.projects_dir.join("surface");
        std::fs::create_dir_all(project.join(".prd")).unwrap();
        std::fs::write(
            project.join("ISA.md"),
            "---\nslug: surface\nphase: climbing\n---\n",
        )
        .unwrap();
        std::fs::write(
            project.join(".prd/ISA-auth.md"),
            "---\nslug: surface-auth\n---\n",
        )
        .unwrap();
        let all = candidates(&loc);
        assert_eq!(all.len(), 3, "{all:?}");
        // No slug: the folder's name.
        assert!(
            resolve("20260701-thing", &loc)
                .unwrap()
                .ends_with("20260701-thing/ISA.md")
        );
        assert!(
            resolve("surface", &loc)
                .unwrap()
                .ends_with("surface/ISA.md")
        );
        assert!(
            resolve("surface-auth", &loc)
                .unwrap()
                .ends_with(".prd/ISA-auth.md")
        );
        assert!(
            resolve("ISA-auth", &loc)
                .unwrap()
                .ends_with(".prd/ISA-auth.md")
        );
    }
}
