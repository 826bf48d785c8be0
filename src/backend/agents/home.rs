//! A sandboxed worker's private agent home: the variable that points an agent at a folder
//! of its own instead of the user's (`CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `GEMINI_CLI_HOME`),
//! and the few files of the user's real folder its login needs there (credentials and
//! settings, never the whole folder). The worker (`crate::worker::home`) makes one per
//! process; the user's own folders then stay read-only to workers.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Agent;

/// How to give one agent a private home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeLayout {
    /// The variable set to the private home's top.
    pub var: &'static str,
    /// The agent's own folder inside that top (`""`: the top itself; gemini: `.gemini`).
    pub sub: &'static str,
    /// Each file copied in: the user's real file, and its name in the agent's folder. A file
    /// that does not exist is left out.
    pub files: Vec<(PathBuf, &'static str)>,
}

impl Agent {
    /// How a worker of this agent gets a private home, for a user whose home is `home` and
    /// whose environment is `var` (which says where the real folders are). `None`: the agent
    /// has no variable for it (opencode, cursor, amp, a `command`), so its own folders stay
    /// as they are ([`Agent::state_dirs`]).
    pub fn home_layout(
        self,
        var: &dyn Fn(&str) -> Option<OsString>,
        home: &Path,
    ) -> Option<HomeLayout> {
        let set = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let from = |dir: &Path, names: &[&'static str]| -> Vec<(PathBuf, &'static str)> {
            names.iter().map(|n| (dir.join(n), *n)).collect()
        };
        match self {
            Agent::Claude => {
                // Claude's settings file is `~/.claude.json`, or `.claude.json` in
                // CLAUDE_CONFIG_DIR when that is set (as it is in the private home).
                let moved = set("CLAUDE_CONFIG_DIR");
                let real = moved.clone().unwrap_or_else(|| home.join(".claude"));
                let mut files = from(&real, &[".credentials.json", "settings.json"]);
                let config = moved.as_deref().unwrap_or(home).join(".claude.json");
                files.push((config, ".claude.json"));
                Some(HomeLayout {
                    var: "CLAUDE_CONFIG_DIR",
                    sub: "",
                    files,
                })
            }
            Agent::Codex => {
                let real = set("CODEX_HOME").unwrap_or_else(|| home.join(".codex"));
                Some(HomeLayout {
                    var: "CODEX_HOME",
                    sub: "",
                    files: from(&real, &["auth.json", "config.toml"]),
                })
            }
            Agent::Gemini => {
                let real = set("GEMINI_CLI_HOME")
                    .unwrap_or_else(|| home.to_path_buf())
                    .join(".gemini");
                Some(HomeLayout {
                    var: "GEMINI_CLI_HOME",
                    sub: ".gemini",
                    files: from(
                        &real,
                        &[
                            "settings.json",
                            "oauth_creds.json",
                            "google_accounts.json",
                            "installation_id",
                            ".env",
                        ],
                    ),
                })
            }
            Agent::Opencode | Agent::Cursor | Agent::Amp | Agent::Command => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codex_and_gemini_get_a_home_with_their_login_files_only() {
        let none = |_: &str| None;
        let home = Path::new("/home/u");
        let c = Agent::Claude.home_layout(&none, home).unwrap();
        assert_eq!(c.var, "CLAUDE_CONFIG_DIR");
        assert_eq!(
            c.files,
            vec![
                (
                    PathBuf::from("/home/u/.claude/.credentials.json"),
                    ".credentials.json"
                ),
                (
                    PathBuf::from("/home/u/.claude/settings.json"),
                    "settings.json"
                ),
                (PathBuf::from("/home/u/.claude.json"), ".claude.json"),
            ]
        );
        // Where the environment moved the real folder, the files come from there.
        let moved = |k: &str| match k {
            "CLAUDE_CONFIG_DIR" => Some("/cfg/claude".into()),
            "CODEX_HOME" => Some("/cfg/codex".into()),
            "GEMINI_CLI_HOME" => Some("/cfg/g".into()),
            _ => None,
        };
        let c = Agent::Claude.home_layout(&moved, home).unwrap();
        assert!(
            c.files
                .contains(&(PathBuf::from("/cfg/claude/.claude.json"), ".claude.json"))
        );
        let x = Agent::Codex.home_layout(&moved, home).unwrap();
        assert_eq!(x.var, "CODEX_HOME");
        assert!(
            x.files
                .contains(&(PathBuf::from("/cfg/codex/auth.json"), "auth.json"))
        );
        let g = Agent::Gemini.home_layout(&moved, home).unwrap();
        assert_eq!((g.var, g.sub), ("GEMINI_CLI_HOME", ".gemini"));
        assert!(g.files.contains(&(
            PathBuf::from("/cfg/g/.gemini/settings.json"),
            "settings.json"
        )));
        for a in [Agent::Opencode, Agent::Cursor, Agent::Amp, Agent::Command] {
            assert_eq!(a.home_layout(&none, home), None, "{a}");
        }
    }
}
