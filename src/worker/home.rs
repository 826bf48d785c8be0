//! A sandboxed worker's private agent home ([`crate::backend::agents::HomeLayout`]): a fresh
//! folder of its own in the temp folder (mode 0700, removed when the worker ends), holding
//! copies of the files its agent's login needs. The worker's agent is pointed at it by its
//! variable, and it is the only agent folder the worker may write: the user's real one
//! (`~/.claude`, where PAI keeps its PRDs and prdloop its state) stays read-only to it.

use std::path::Path;

use crate::backend::agents::HomeLayout;

/// A private home made for one worker process.
#[derive(Debug)]
pub struct PrivateHome {
    dir: tempfile::TempDir,
    var: &'static str,
}

impl PrivateHome {
    /// A new home after `layout`: its agent folder made, the login files that exist copied
    /// in (a copy, so nothing the worker writes there reaches the user's).
    pub fn make(layout: &HomeLayout) -> std::io::Result<PrivateHome> {
        let dir = tempfile::Builder::new().prefix("prdloop-home-").tempdir()?;
        let own = dir.path().join(layout.sub);
        std::fs::create_dir_all(&own)?;
        for (from, name) in &layout.files {
            if from.is_file() {
                std::fs::copy(from, own.join(name))?;
            }
        }
        Ok(PrivateHome {
            dir,
            var: layout.var,
        })
    }

    /// Its top (what the worker may write, and the variable's value).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The variable that points the agent at it, and its value.
    pub fn env(&self) -> (&'static str, &Path) {
        (self.var, self.dir.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_home_holds_copies_of_the_login_files_and_goes_when_dropped() {
        let real = tempfile::tempdir().unwrap();
        std::fs::write(real.path().join("auth.json"), "{\"k\":1}").unwrap();
        let layout = HomeLayout {
            var: "GEMINI_CLI_HOME",
            sub: ".gemini",
            files: vec![
                (real.path().join("auth.json"), "oauth_creds.json"),
                (real.path().join("missing.json"), "settings.json"),
            ],
        };
        let home = PrivateHome::make(&layout).unwrap();
        let top = home.path().to_path_buf();
        assert_eq!(home.env(), ("GEMINI_CLI_HOME", top.as_path()));
        assert!(!top.starts_with(real.path()));
        let copy = top.join(".gemini/oauth_creds.json");
        assert_eq!(std::fs::read_to_string(&copy).unwrap(), "{\"k\":1}");
        assert!(!top.join(".gemini/settings.json").exists());
        // Written by the worker: the user's file stays as it was.
        std::fs::write(&copy, "forged").unwrap();
        assert_eq!(
            std::fs::read_to_string(real.path().join("auth.json")).unwrap(),
            "{\"k\":1}"
        );
        drop(home);
        assert!(!top.exists());
    }
}
