//! `--commit`: a passed criterion's change, alone, as a commit on HEAD, with the user's index
//! following it (what they staged kept).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::Isolation;
use super::git::Git;
use super::repo_path::RepoPath;

/// Paths as literal pathspecs (no globbing of `*`, `?`, `[`).
fn literal(paths: &[RepoPath]) -> Vec<std::ffi::OsString> {
    paths.iter().map(|p| p.after(":(literal)")).collect()
}

impl Isolation {
    /// `--commit`: the landed change alone (not the user's other uncommitted edits) as a
    /// commit on HEAD; the index entries of its files follow HEAD unless the user has staged
    /// something in them. `Err`: why it was not committed (the change is in the checkout
    /// either way; nothing else changed).
    pub(super) fn commit(
        &self,
        base: &str,
        a: &str,
        files: &[RepoPath],
        message: &str,
    ) -> std::result::Result<String, String> {
        let e = |e: anyhow::Error| format!("{e:#}");
        let head = self.repo.commit_of("HEAD").ok_or("no HEAD commit")?;
        let tree = self.commit_tree(&head, base, a).ok_or(
            "its change cannot be separated from your uncommitted edits next to it".to_string(),
        )?;
        if self.repo.tree_of(&head).ok().as_deref() == Some(tree.as_str()) {
            return Err("HEAD holds its change already".into());
        }
        let git_dir = self.repo.git_dir().map_err(e)?;
        if git_dir.join("index.lock").exists() {
            return Err("another git process holds the index (index.lock)".into());
        }
        // Files whose index entries the user changed: left as they are.
        let staged: Vec<RepoPath> = {
            let (out, _) = self
                .repo
                .cmd()
                .args(&["diff", "--cached", "--name-only", "-z", &head, "--"])
                .args(&literal(files))
                .output()
                .map_err(e)?;
            out.split(|b| *b == 0)
                .filter(|s| !s.is_empty())
                .map(RepoPath::from_bytes)
                .collect()
        };
        let ident = self.repo.text(&["var", "GIT_COMMITTER_IDENT"]).is_ok();
        let args = ["commit-tree", &tree, "-p", &head, "-m", message];
        let mut c = self.repo.cmd().args(&args);
        if !ident {
            c = c.as_self();
        }
        let commit = c.text().map_err(e)?;
        // The index entries, all decided before anything is written: where the user staged
        // something, the change merged into what they staged; elsewhere the commit's.
        let mut info = Vec::new();
        for f in files {
            let line = if staged.contains(f) {
                self.merge_staged(&head, &commit, f).map_err(|why| {
                    format!(
                        "your staged changes to {f} and the criterion's could not be combined in the index ({why})"
                    )
                })?
            } else {
                index_line(&self.repo, &commit, f).map_err(e)?
            };
            info.extend_from_slice(&line);
        }
        let step = CommitStep {
            head: head.clone(),
            commit: commit.clone(),
            index_info: info,
        };
        step.save(&self.common).map_err(e)?;
        // The index in one write, then HEAD: a crash between them is finished by the next run
        // or `prdloop clean` from the step's record.
        step.finish(&self.repo)
            .map_err(|err| format!("the index and HEAD could not be updated: {err:#}"))?;
        step.done(&self.common);
        Ok(commit)
    }

    /// The index entry of `path`, which the user changed from `old` (HEAD before the commit),
    /// gets the commit's change too: `git merge-file` of the three versions.
    fn merge_staged(
        &self,
        old: &str,
        commit: &str,
        path: &RepoPath,
    ) -> std::result::Result<Vec<u8>, String> {
        let e = |e: anyhow::Error| format!("{e:#}");
        let blob = |rev: std::ffi::OsString| -> std::result::Result<Vec<u8>, String> {
            let (out, _) = self
                .repo
                .cmd()
                .args(&["cat-file", "blob"])
                .arg(&rev)
                .output()
                .map_err(e)?;
            Ok(out)
        };
        let mode = self
            .repo
            .cmd()
            .args(&["ls-files", "-s", "--"])
            .args(&literal(std::slice::from_ref(path)))
            .text()
            .map_err(e)?;
        let mode = mode
            .split_whitespace()
            .next()
            .ok_or("it is not in the index")?;
        let dir = tempfile::tempdir_in(&self.scratch).map_err(|x| x.to_string())?;
        let write = |name: &str, bytes: Vec<u8>| -> std::result::Result<PathBuf, String> {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).map_err(|x| x.to_string())?;
            Ok(p)
        };
        let ours = write("ours", blob(path.after(":"))?)?;
        let base = write("base", blob(path.after(&format!("{old}:")))?)?;
        let theirs = write("theirs", blob(path.after(&format!("{commit}:")))?)?;
        let (merged, conflicts) = self
            .repo
            .cmd()
            .arg("merge-file")
            .arg("-p")
            .arg(&ours)
            .arg(&base)
            .arg(&theirs)
            .ok_codes(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
            .output()
            .map_err(e)?;
        if conflicts != 0 {
            return Err("they overlap".into());
        }
        let sha = {
            let (out, _) = self
                .repo
                .cmd()
                .args(&["hash-object", "-w", "--stdin"])
                .input(&merged)
                .output()
                .map_err(e)?;
            String::from_utf8_lossy(&out).trim().to_string()
        };
        let mut line = format!("{mode} {sha}\t").into_bytes();
        line.extend_from_slice(path.as_bytes());
        line.push(0);
        Ok(line)
    }

    /// HEAD's tree with the attempt's change (from `base` to `a`) in it: a three-way merge
    /// where git has `merge-tree --merge-base` (2.40), else the patch applied to HEAD's tree.
    fn commit_tree(&self, head: &str, base: &str, a: &str) -> Option<String> {
        if Git::version().is_ok_and(|v| v >= (2, 40)) {
            let (out, code) = self
                .repo
                .cmd()
                .args(&["merge-tree", "--write-tree", "--no-messages"])
                .arg(&format!("--merge-base={base}"))
                .args(&[head, a])
                .ok_codes(&[1])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out);
            let tree = text.lines().next().unwrap_or_default().trim().to_string();
            return (code == 0 && !tree.is_empty()).then_some(tree);
        }
        let index = tempfile::Builder::new()
            .prefix("index-")
            .tempfile_in(&self.scratch)
            .ok()?
            .into_temp_path();
        let _ = std::fs::remove_file(&index);
        let patch = self.repo.patch(base, a, &self.exclude).ok()?;
        self.repo
            .cmd()
            .args(&["read-tree", head])
            .index(&index)
            .run()
            .ok()?;
        self.repo
            .cmd()
            .args(&["apply", "--cached", "--whitespace=nowarn", "-"])
            .input(&patch)
            .index(&index)
            .run()
            .ok()?;
        self.repo.cmd().arg("write-tree").index(&index).text().ok()
    }
}

/// `git update-index -z --index-info`'s line for `path` as commit `rev` has it (a removal
/// where it has none).
fn index_line(repo: &Git, rev: &str, path: &RepoPath) -> Result<Vec<u8>> {
    let entry = super::transaction::entries(repo, rev, std::slice::from_ref(path))?.remove(path);
    Ok(super::transaction::index_info(path, entry.as_ref()))
}

/// `--commit`'s last step, recorded before it is taken: the index entries of the landed
/// files, then HEAD from `head` to `commit`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CommitStep {
    head: String,
    commit: String,
    /// NUL-separated `update-index --index-info` lines (bytes: paths need not be UTF-8).
    #[serde(with = "super::repo_path::bytes")]
    index_info: Vec<u8>,
}

impl CommitStep {
    fn path(common: &Path) -> PathBuf {
        common.join("prdloop").join("commit.json")
    }

    /// Whether a crash left one to finish.
    pub fn pending(common: &Path) -> bool {
        Self::path(common).exists()
    }

    fn save(&self, common: &Path) -> Result<()> {
        let p = Self::path(common);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d)?;
        }
        crate::fsutil::write_atomic(&p, &serde_json::to_vec(self)?)
    }

    fn done(&self, common: &Path) {
        let _ = std::fs::remove_file(Self::path(common));
    }

    /// The index, then HEAD. Idempotent: taken again after a crash it changes nothing more.
    fn finish(&self, repo: &Git) -> Result<()> {
        if repo.commit_of("HEAD").as_deref() != Some(self.head.as_str()) {
            anyhow::bail!("HEAD is no longer {}", self.head);
        }
        repo.cmd()
            .args(&["update-index", "-z", "--index-info"])
            .input(&self.index_info)
            .run()?;
        repo.cmd()
            .args(&[
                "update-ref",
                "-m",
                "prdloop: criterion passed",
                "HEAD",
                &self.commit,
                &self.head,
            ])
            .run()
    }

    /// Finishes a `--commit` a crash interrupted; what was done.
    pub fn recover(repo: &Git, common: &Path) -> Result<Option<String>> {
        let p = Self::path(common);
        let Ok(bytes) = std::fs::read(&p) else {
            return Ok(None);
        };
        let step: CommitStep = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not prdloop's record of a commit", p.display()))?;
        let head = repo.commit_of("HEAD");
        let msg = if head.as_deref() == Some(step.commit.as_str()) {
            // HEAD moved: the index was written before it.
            None
        } else if head.as_deref() == Some(step.head.as_str()) {
            step.finish(repo)?;
            Some(format!(
                "an interrupted --commit was finished: HEAD is {}",
                &step.commit[..step.commit.len().min(10)]
            ))
        } else {
            Some(format!(
                "an interrupted --commit ({}) was left alone: HEAD moved since",
                &step.commit[..step.commit.len().min(10)]
            ))
        };
        step.done(common);
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_step_cut_short_is_finished_with_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let g = Git::new(dir.path());
        g.cmd().args(&["init", "-q"]).run().unwrap();
        std::fs::write(dir.path().join("a"), "a\n").unwrap();
        g.cmd().args(&["add", "a"]).run().unwrap();
        let tree = g.text(&["write-tree"]).unwrap();
        let head = g.commit_tree(&tree, &[], "one").unwrap();
        g.pin("HEAD", &head).unwrap();
        // The landed file, committed on HEAD, as the step would write it.
        std::fs::write(dir.path().join("new"), "n\n").unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let snap = g.snapshot(&head, &[], scratch.path()).unwrap();
        let commit = g
            .commit_tree(&g.tree_of(&snap).unwrap(), &[&head], "ISC-1")
            .unwrap();
        let step = CommitStep {
            head: head.clone(),
            commit: commit.clone(),
            index_info: index_line(&g, &commit, &"new".into()).unwrap(),
        };
        let common = dir.path().join(".git");
        step.save(&common).unwrap();
        // The crash came before the index was written: the landed file looks like a staged
        // deletion relative to the commit. Recovery finishes both.
        let msg = CommitStep::recover(&g, &common).unwrap().unwrap();
        assert!(msg.contains("finished"), "{msg}");
        assert_eq!(g.commit_of("HEAD").unwrap(), commit);
        assert_eq!(g.text(&["status", "--porcelain"]).unwrap(), "");
        assert!(!CommitStep::pending(&common));
        // Again: nothing to do.
        assert_eq!(CommitStep::recover(&g, &common).unwrap(), None);
    }
}
