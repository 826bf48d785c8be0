//! The reports a run writes for CI at its end: JUnit, GitHub Actions' annotations and job
//! summary.

use super::*;

/// The reports a run writes for CI at its end.
#[derive(Debug, Clone, Default)]
pub struct CiConfig {
    /// `--junit FILE`.
    pub junit: Option<PathBuf>,
    /// Set when running on GitHub Actions (`GITHUB_ACTIONS=true`).
    pub github: Option<GithubConfig>,
    /// The PRD's path as reports name it: relative to the GitHub workspace or the workers'
    /// folder when it is inside one, else as given.
    pub prd_file: String,
}

#[derive(Debug, Clone, Default)]
pub struct GithubConfig {
    /// `$GITHUB_STEP_SUMMARY`: the job summary to append to.
    pub step_summary: Option<PathBuf>,
}

impl CiConfig {
    /// From `--junit` and the environment (`GITHUB_ACTIONS`, `GITHUB_STEP_SUMMARY`,
    /// `GITHUB_WORKSPACE`).
    pub fn new(junit: Option<PathBuf>, prd: &Path, workdir: &Path) -> CiConfig {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        let github =
            (std::env::var(env::GITHUB_ACTIONS).as_deref() == Ok("true")).then(|| GithubConfig {
                step_summary: var(env::GITHUB_STEP_SUMMARY).map(PathBuf::from),
            });
        let workspace = var(env::GITHUB_WORKSPACE).map(PathBuf::from);
        let prd_file = [workspace.as_deref(), Some(workdir)]
            .into_iter()
            .flatten()
            .find_map(|base| relative_to(prd, base))
            .unwrap_or_else(|| prd.to_path_buf());
        CiConfig {
            junit,
            github,
            prd_file: prd_file.to_string_lossy().replace('\\', "/"),
        }
    }
}

/// `path` relative to `base` when it is inside it (comparing canonical paths too).
fn relative_to(path: &Path, base: &Path) -> Option<PathBuf> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    path.strip_prefix(base)
        .ok()
        .map(Path::to_path_buf)
        .or_else(|| {
            canon(path)
                .strip_prefix(canon(base))
                .ok()
                .map(Path::to_path_buf)
        })
        .filter(|p| !p.as_os_str().is_empty())
}
