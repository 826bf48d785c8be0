//! What a sandboxed worker must not get of the user's secrets: the environment variables it
//! does not inherit ([`SECRET_ENV`] and [`carries_a_password`], unless its agent needs one or
//! `--pass-env` lets it through) and the files under `$HOME` it cannot read
//! ([`secret_paths`]). The sandbox reads everything else: [`readable_beneath`] lists what it
//! may read instead of `/`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A variable, or a family of them, a sandboxed worker's environment drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretVar {
    /// This one name.
    Name(&'static str),
    /// Every name that starts so (`AWS_`).
    Prefix(&'static str),
    /// Every name that ends so (`_KEY`).
    Suffix(&'static str),
    /// Every name with this in it (`TOKEN`).
    Within(&'static str),
}

impl SecretVar {
    fn matches(self, name: &str) -> bool {
        let upper = name.to_ascii_uppercase();
        match self {
            SecretVar::Name(n) => upper == n,
            SecretVar::Prefix(p) => upper.starts_with(p),
            SecretVar::Suffix(p) => upper.ends_with(p),
            SecretVar::Within(p) => upper.contains(p),
        }
    }
}

/// What a sandboxed worker's environment drops: agent sockets (ssh, gpg, the D-Bus session
/// bus, which reaches the keyring), cloud credentials, and every name that says it holds a
/// token, a secret, a password or a key (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`,
/// `*_KEY`, `*_PAT`, `*CREDENTIALS*`, `*DATABASE_URL`): the agents' API keys among them, which
/// only a worker of that agent keeps ([`crate::backend::Agent::key_vars`]). Names are compared
/// without case.
pub const SECRET_ENV: &[SecretVar] = {
    use SecretVar::{Name, Prefix, Suffix, Within};
    &[
        Name("SSH_AUTH_SOCK"),
        Name("SSH_AGENT_PID"),
        Name("GPG_AGENT_INFO"),
        Name("DBUS_SESSION_BUS_ADDRESS"),
        Prefix("AWS_"),
        Prefix("AZURE_"),
        Prefix("ARM_CLIENT_"),
        Name("KUBECONFIG"),
        Name("DOCKER_AUTH_CONFIG"),
        Within("TOKEN"),
        Within("SECRET"),
        Within("PASSWORD"),
        Within("PASSWD"),
        Within("CREDENTIALS"),
        Suffix("_KEY"),
        Suffix("_PAT"),
        Suffix("DATABASE_URL"),
    ]
};

/// Whether a variable's value is a URL with a password in it (`postgres://user:pw@host/db`,
/// as `REDIS_URL` or a proxy's may be).
pub fn carries_a_password(value: &str) -> bool {
    let Some((_, rest)) = value.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(user, _)| user.contains(':'))
}

/// The names among `present` (the runner's environment, names and values) a sandboxed worker
/// does not get: those [`SECRET_ENV`] lists and those whose value [`carries_a_password`],
/// except the ones in `keep` (its agent's own, `--pass-env`).
pub fn env_to_drop(
    present: impl IntoIterator<Item = (OsString, OsString)>,
    keep: &[&str],
) -> Vec<String> {
    present
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
        .filter(|(k, v)| {
            SECRET_ENV.iter().any(|s| s.matches(k)) || v.to_str().is_some_and(carries_a_password)
        })
        .map(|(k, _)| k)
        .filter(|k| !keep.contains(&k.as_str()))
        .collect()
}

/// The files and folders under `$HOME` a sandboxed worker cannot read: keys, cloud and forge
/// logins, password stores.
pub const SECRET_FILES: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".docker/config.json",
    ".kube",
    ".npmrc",
    ".yarnrc.yml",
    ".vault-token",
    ".config/hub",
    ".terraform.d/credentials.tfrc.json",
    ".azure",
    ".config/gcloud",
    ".pgpass",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
    ".local/share/keyrings",
    SIGN_IN_DIR,
];

/// Where `run --serve` leaves the dashboard's sign-in address (under `$HOME`) when its
/// stderr is not a terminal: among [`SECRET_FILES`], so no sandboxed worker reads it.
pub const SIGN_IN_DIR: &str = ".local/state/prdloop/sign-in";

/// The files of an agent's private home that are its login (claude's `.credentials.json`,
/// codex's `auth.json`, gemini's `oauth_creds.json` and `.env`, which may hold its key).
pub const AGENT_LOGINS: &[&str] = &[".credentials.json", "auth.json", "oauth_creds.json", ".env"];

/// The agents' logins where the user keeps them (their folders, as the environment `var`
/// moves them): no sandboxed worker reads them, whatever its agent, as a worker's own agent
/// gets a copy in its private home (made by the runner, outside the sandbox).
fn agent_logins(var: &dyn Fn(&str) -> Option<OsString>, home: &Path) -> Vec<PathBuf> {
    crate::backend::Agent::ALL
        .iter()
        .filter_map(|a| a.home_layout(var, home))
        .flat_map(|l| l.files)
        .filter(|(_, name)| AGENT_LOGINS.contains(name))
        .map(|(real, _)| real)
        .collect()
}

/// [`SECRET_FILES`] and the agents' logins ([`AGENT_LOGINS`]) under `home`, and where the
/// environment (`var`) moves some of them (`GNUPGHOME`, `$XDG_CONFIG_HOME/gh`,
/// `$XDG_CONFIG_HOME/gcloud`, `CARGO_HOME`, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`,
/// `GEMINI_CLI_HOME`).
pub fn secret_paths(var: &dyn Fn(&str) -> Option<OsString>, home: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = SECRET_FILES.iter().map(|p| home.join(p)).collect();
    v.extend(agent_logins(var, home));
    let set = |k: &str| var(k).filter(|d| !d.is_empty()).map(PathBuf::from);
    v.extend(set("GNUPGHOME"));
    if let Some(c) = set("XDG_CONFIG_HOME") {
        v.extend(["gh", "gcloud", "git/credentials"].map(|p| c.join(p)));
    }
    if let Some(c) = set("CARGO_HOME") {
        v.extend(["credentials", "credentials.toml"].map(|p| c.join(p)));
    }
    v
}

/// What may be read beneath `root` so that nothing in `hidden` (absolute paths) can: every
/// entry of `root`, except a hidden one, and in place of each entry that holds a hidden path,
/// that entry's own entries by the same rule. A symbolic link is left out when where it leads
/// is hidden, in a hidden folder or holds one. Folders that cannot be listed give nothing.
pub fn readable_beneath(root: &Path, hidden: &[PathBuf]) -> Vec<PathBuf> {
    // A hidden path that is a link hides where it leads too.
    let mut hide: Vec<PathBuf> = hidden.to_vec();
    hide.extend(hidden.iter().filter_map(|h| std::fs::canonicalize(h).ok()));
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if hide.iter().any(|h| path.starts_with(h)) {
                continue;
            }
            if hide.iter().any(|h| h.starts_with(&path)) {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    todo.push(path);
                }
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                let Ok(to) = std::fs::canonicalize(&path) else {
                    continue;
                };
                if hide.iter().any(|h| to.starts_with(h) || h.starts_with(&to)) {
                    continue;
                }
            }
            out.push(path);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_drops_credentials_and_keeps_what_is_passed() {
        let names = [
            "PATH",
            "HOME",
            "SSH_AUTH_SOCK",
            "GPG_AGENT_INFO",
            "DBUS_SESSION_BUS_ADDRESS",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_PROFILE",
            "AZURE_CLIENT_SECRET",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GEMINI_API_KEY",
            "SLACK_TOKEN",
            "SENTRY_AUTH_TOKEN",
            "DATABASE_URL",
            "HOMEBREW_GITHUB_API_TOKEN",
            "CODECOV_TOKEN",
            "DOCKER_PASSWORD",
            "GITLAB_PAT",
            "npm_config__authToken",
            "REDIS_URL",
            "EDITOR_URL",
            "LANG",
            "KEYBOARD",
        ];
        let value = |n: &str| match n {
            "REDIS_URL" => "redis://default:pw@cache:6379/0",
            "EDITOR_URL" => "https://user@example.com/a:b@c",
            _ => "x",
        };
        let present = names.map(|n| (OsString::from(n), OsString::from(value(n))));
        let not_secret = ["PATH", "HOME", "EDITOR_URL", "LANG", "KEYBOARD"];
        let want: Vec<&str> = names
            .into_iter()
            .filter(|n| !not_secret.contains(n))
            .collect();
        assert_eq!(env_to_drop(present.clone(), &[]), want);
        let dropped = env_to_drop(present, &["AWS_PROFILE", "GH_TOKEN", "ANTHROPIC_API_KEY"]);
        for kept in ["AWS_PROFILE", "GH_TOKEN", "ANTHROPIC_API_KEY"] {
            assert!(!dropped.iter().any(|k| k == kept), "{kept}");
        }
        assert!(dropped.iter().any(|k| k == "AWS_SECRET_ACCESS_KEY"));
        assert!(dropped.iter().any(|k| k == "OPENAI_API_KEY"));
    }

    #[test]
    fn a_password_in_a_url_is_seen() {
        assert!(carries_a_password("postgres://u:pw@h/db"));
        assert!(carries_a_password("http://u:p@proxy:3128"));
        assert!(!carries_a_password("http://proxy:3128"));
        assert!(!carries_a_password("https://u@h/x:y@z"));
        assert!(!carries_a_password("u:pw@h"));
    }

    #[test]
    fn secret_files_follow_their_environment_variables() {
        let var = |k: &str| match k {
            "GNUPGHOME" => Some("/keys/gpg".into()),
            "XDG_CONFIG_HOME" => Some("/cfg".into()),
            _ => None,
        };
        let p = secret_paths(&var, Path::new("/home/u"));
        for want in [
            "/home/u/.ssh",
            "/home/u/.config/gh",
            "/keys/gpg",
            "/cfg/gh",
            "/home/u/.npmrc",
            "/home/u/.vault-token",
            "/home/u/.docker/config.json",
            "/home/u/.kube",
            "/home/u/.claude/.credentials.json",
            "/home/u/.codex/auth.json",
            "/home/u/.gemini/oauth_creds.json",
            "/home/u/.gemini/.env",
        ] {
            assert!(p.contains(&PathBuf::from(want)), "{want}: {p:?}");
        }
    }

    #[test]
    fn what_may_be_read_is_everything_but_the_hidden_paths() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        for d in [
            "etc",
            "home/u/.ssh",
            "home/u/.config/gh",
            "home/u/.config/nvim",
            "home/v",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in ["home/u/notes", "home/u/.netrc", "home/u/.ssh/id_rsa"] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        // Links that lead into a secret, or to a folder holding one, are left out; links
        // beneath a readable entry need nothing (the kernel checks where they lead).
        let link = |to: &str, at: &str| {
            std::os::unix::fs::symlink(root.join(to), root.join(at)).unwrap();
        };
        link("home/u/.ssh", "home/u/keys");
        link("home", "home/u/all");
        link("home/u/notes", "home/u/n");
        link("home", "etc/homes");
        let home = root.join("home/u");
        let mut got = readable_beneath(root, &secret_paths(&|_| None, &home));
        got.sort();
        let want: Vec<PathBuf> = [
            "etc",
            "home/u/.config/nvim",
            "home/u/n",
            "home/u/notes",
            "home/v",
        ]
        .iter()
        .map(|p| root.join(p))
        .collect();
        assert_eq!(got, want);
    }
}
