//! Issue trackers in, pull requests out: which repository (`github:OWNER/REPO`), its issues
//! as prdloop reads them, the PRD built from them ([`import`]), the pull request's body
//! ([`pull`]), and the GitHub API client ([`github`]).

pub mod github;
pub mod import;
pub mod pull;

pub use github::{Client, HttpError};

/// `origin` refused `--pr`'s push, or the branch there moved elsewhere: the message says which
/// and what to do. Like [`HttpError`], its exit code is 10.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// A GitHub repository, as `github:OWNER/REPO` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub owner: String,
    pub name: String,
}

impl Repo {
    /// Reads `github:OWNER/REPO` (the form `import` takes and the front matter's `tracker:`
    /// records).
    pub fn parse(s: &str) -> Result<Repo, String> {
        let Some(rest) = s.strip_prefix("github:") else {
            return Err(format!(
                "`{s}` is not a tracker: write github:OWNER/REPO (GitHub is the one tracker read)"
            ));
        };
        let (owner, name) = rest.split_once('/').unwrap_or((rest, ""));
        let part_ok = |p: &str| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        if !part_ok(owner) || !part_ok(name) {
            return Err(format!(
                "`{s}` is not github:OWNER/REPO (owner and repository: letters, digits, `-`, `_`, `.`)"
            ));
        }
        Ok(Repo {
            owner: owner.into(),
            name: name.into(),
        })
    }

    /// The repository of a git remote's URL on github.com (`https://github.com/o/r.git`,
    /// `git@github.com:o/r.git`, `ssh://git@github.com/o/r`); `None` for any other URL.
    pub fn from_remote_url(url: &str) -> Option<Repo> {
        let url = url.trim();
        let path = [
            "https://github.com/",
            "ssh://git@github.com/",
            "git@github.com:",
        ]
        .iter()
        .find_map(|p| url.strip_prefix(p))?;
        let path = path.trim_end_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        Repo::parse(&format!("github:{path}")).ok()
    }

    /// `github:OWNER/REPO`.
    pub fn tracker(&self) -> String {
        format!("github:{self}")
    }
}

impl std::fmt::Display for Repo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// An issue as the import reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub open: bool,
    /// GitHub lists pull requests among the issues; those are never imported.
    pub pull_request: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracker_is_github_owner_slash_repo() {
        let r = Repo::parse("github:acme/widgets.rs").unwrap();
        assert_eq!((r.owner.as_str(), r.name.as_str()), ("acme", "widgets.rs"));
        assert_eq!(r.tracker(), "github:acme/widgets.rs");
        for bad in [
            "acme/widgets",
            "gitlab:acme/w",
            "github:acme",
            "github:acme/",
            "github:/w",
            "github:a/b/c",
            "github:a/..",
            "github:a/b?x=1",
        ] {
            assert!(Repo::parse(bad).is_err(), "{bad} was read");
        }
    }

    #[test]
    fn the_repository_of_a_github_remote() {
        let want = Some(Repo::parse("github:o/r").unwrap());
        for url in [
            "https://github.com/o/r.git",
            "https://github.com/o/r",
            "git@github.com:o/r.git",
            "ssh://git@github.com/o/r/",
        ] {
            assert_eq!(Repo::from_remote_url(url), want, "{url}");
        }
        assert_eq!(Repo::from_remote_url("/tmp/origin.git"), None);
        assert_eq!(Repo::from_remote_url("https://gitlab.com/o/r"), None);
    }
}
