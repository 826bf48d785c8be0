//! What a sandboxed worker must not get of the user's secrets: the environment variables it
//! does not inherit ([`SECRET_ENV`], unless its agent needs one or `--pass-env` lets it
//! through) and the files under `$HOME` it cannot read ([`secret_paths`]). The sandbox reads
//! everything else: [`readable_beneath`] lists what it may read instead of `/`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A variable, or a family of them, a sandboxed worker's environment drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretVar {
    /// This one name.
    Name(&'static str),
    /// Every name that starts so (`AWS_`).
    Prefix(&'static str),
}

impl SecretVar {
    fn matches(self, name: &str) -> bool {
        match self {
            SecretVar::Name(n) => name == n,
            SecretVar::Prefix(p) => name.starts_with(p),
        }
    }
}

/// What a sandboxed worker's environment drops: agent sockets (ssh, gpg, the D-Bus session
/// bus, which reaches the keyring), cloud credentials, forge and registry tokens.
pub const SECRET_ENV: &[SecretVar] = {
    use SecretVar::{Name, Prefix};
    &[
        Name("SSH_AUTH_SOCK"),
        Name("SSH_AGENT_PID"),
        Name("GPG_AGENT_INFO"),
        Name("DBUS_SESSION_BUS_ADDRESS"),
        Prefix("AWS_"),
        Name("GOOGLE_APPLICATION_CREDENTIALS"),
        Name("CLOUDSDK_AUTH_ACCESS_TOKEN"),
        Prefix("AZURE_"),
        Prefix("ARM_CLIENT_"),
        Name("DIGITALOCEAN_ACCESS_TOKEN"),
        Name("HCLOUD_TOKEN"),
        Name("CLOUDFLARE_API_TOKEN"),
        Name("VAULT_TOKEN"),
        Name("KUBECONFIG"),
        Name("GH_TOKEN"),
        Name("GITHUB_TOKEN"),
        Name("GH_ENTERPRISE_TOKEN"),
        Name("GITHUB_ENTERPRISE_TOKEN"),
        Name("GITLAB_TOKEN"),
        Name("GL_TOKEN"),
        Name("NPM_TOKEN"),
        Name("NODE_AUTH_TOKEN"),
        Name("CARGO_REGISTRY_TOKEN"),
        Name("TWINE_PASSWORD"),
        Name("PYPI_TOKEN"),
        Name("DOCKER_AUTH_CONFIG"),
        Name("HF_TOKEN"),
    ]
};

/// The names among `present` (the runner's environment) a sandboxed worker does not get:
/// those [`SECRET_ENV`] lists, except the ones in `keep` (its agent's own, `--pass-env`).
pub fn env_to_drop(present: impl IntoIterator<Item = OsString>, keep: &[&str]) -> Vec<String> {
    present
        .into_iter()
        .filter_map(|k| k.into_string().ok())
        .filter(|k| SECRET_ENV.iter().any(|s| s.matches(k)) && !keep.contains(&k.as_str()))
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

/// [`SECRET_FILES`] under `home`, and where the environment (`var`) moves some of them
/// (`GNUPGHOME`, `$XDG_CONFIG_HOME/gh`, `$XDG_CONFIG_HOME/gcloud`, `CARGO_HOME`).
pub fn secret_paths(var: &dyn Fn(&str) -> Option<OsString>, home: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = SECRET_FILES.iter().map(|p| home.join(p)).collect();
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
            "LANG",
        ];
        let present = names.map(OsString::from);
        // All but these four are secrets.
        let not_secret = ["PATH", "HOME", "ANTHROPIC_API_KEY", "LANG"];
        let want: Vec<&str> = names
            .into_iter()
            .filter(|n| !not_secret.contains(n))
            .collect();
        assert_eq!(env_to_drop(present.clone(), &[]), want);
        let dropped = env_to_drop(present, &["AWS_PROFILE", "GH_TOKEN"]);
        assert!(
            !dropped
                .iter()
                .any(|k| k == "AWS_PROFILE" || k == "GH_TOKEN")
        );
        assert!(dropped.iter().any(|k| k == "AWS_SECRET_ACCESS_KEY"));
    }

    #[test]
    fn secret_files_follow_their_environment_variables() {
        let var = |k: &str| match k {
            "GNUPGHOME" => Some("/keys/gpg".into()),
            "XDG_CONFIG_HOME" => Some("/cfg".into()),
            _ => None,
        };
        let p = secret_paths(&var, Path::new("/home/u"));
        for want in ["/home/u/.ssh", "/home/u/.config/gh", "/keys/gpg", "/cfg/gh"] {
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
