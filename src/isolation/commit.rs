//! `--commit`: a passed criterion's change, alone, as a commit on HEAD, with the user's index
//! following it (what they staged kept).

use std::path::PathBuf;

use super::Isolation;
use super::git::Git;

/// Paths as literal pathspecs (no globbing of `*`, `?`, `[`).
fn literal(paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| format!(":(literal){p}")).collect()
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
        files: &[String],
        message: &str,
    ) -> std::result::Result<String, String> {
        let e = |e: anyhow::Error| format!("{e:#}");
        let head = self.repo.commit_of("HEAD").ok_or("no HEAD commit")?;
        let tree = self.commit_tree(&head, base, a).ok_or(
            "its change cannot be separated from your uncommitted edits next to it".to_string(),
        )?;
        let git_dir = self.repo.git_dir().map_err(e)?;
        if git_dir.join("index.lock").exists() {
            return Err("another git process holds the index (index.lock)".into());
        }
        // Files whose index entries the user changed: left as they are.
        let staged: Vec<String> = {
            let (out, _) = self
                .repo
                .cmd()
                .args(&["diff", "--cached", "--name-only", "-z", &head, "--"])
                .args(&literal(files))
                .output()
                .map_err(e)?;
            String::from_utf8_lossy(&out)
                .split('\0')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        };
        let ident = self.repo.text(&["var", "GIT_COMMITTER_IDENT"]).is_ok();
        let args = ["commit-tree", &tree, "-p", &head, "-m", message];
        let mut c = self.repo.cmd().args(&args);
        if !ident {
            c = c.as_self();
        }
        let commit = c.text().map_err(e)?;
        self.repo
            .cmd()
            .args(&[
                "update-ref",
                "-m",
                "prdloop: criterion passed",
                "HEAD",
                &commit,
                &head,
            ])
            .run()
            .map_err(e)?;
        // Where the user staged something, the change is merged into what they staged.
        for f in &staged {
            if let Err(why) = self.merge_staged(&head, &commit, f) {
                let _ = self
                    .repo
                    .cmd()
                    .args(&["update-ref", "-m", "prdloop: undo", "HEAD", &head, &commit])
                    .run();
                return Err(format!(
                    "your staged changes to {f} and the criterion's could not be combined in the index ({why})"
                ));
            }
        }
        let follow: Vec<String> = files
            .iter()
            .filter(|f| !staged.contains(f))
            .cloned()
            .collect();
        if !follow.is_empty()
            && let Err(err) = self
                .repo
                .cmd()
                .args(&["reset", "-q", "--"])
                .args(&literal(&follow))
                .run()
        {
            // The index could not follow: HEAD goes back, so that nothing looks reverted.
            let _ = self
                .repo
                .cmd()
                .args(&["update-ref", "-m", "prdloop: undo", "HEAD", &head, &commit])
                .run();
            return Err(format!("the index could not be updated: {err:#}"));
        }
        Ok(commit)
    }

    /// The index entry of `path`, which the user changed from `old` (HEAD before the commit),
    /// gets the commit's change too: `git merge-file` of the three versions.
    fn merge_staged(&self, old: &str, commit: &str, path: &str) -> std::result::Result<(), String> {
        let e = |e: anyhow::Error| format!("{e:#}");
        let blob = |rev: String| -> std::result::Result<Vec<u8>, String> {
            let (out, _) = self
                .repo
                .cmd()
                .args(&["cat-file", "blob", &rev])
                .output()
                .map_err(e)?;
            Ok(out)
        };
        let mode = self
            .repo
            .cmd()
            .args(&["ls-files", "-s", "--"])
            .args(&literal(&[path.to_string()]))
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
        let ours = write("ours", blob(format!(":{path}"))?)?;
        let base = write("base", blob(format!("{old}:{path}"))?)?;
        let theirs = write("theirs", blob(format!("{commit}:{path}"))?)?;
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
        self.repo
            .cmd()
            .args(&[
                "update-index",
                "--cacheinfo",
                &format!("{mode},{sha},{path}"),
            ])
            .run()
            .map_err(e)
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
