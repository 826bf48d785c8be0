//! `run --pr`: the run's work as a pull request. The run works on a branch of its own,
//! `prdloop/<prd-id>`, checked out in a git worktree under the state folder (the user's
//! checkout, index and current branch are never touched), with `--commit` on; then the
//! branch is pushed to `origin` (never forced: when origin's branch moved elsewhere, it says
//! so and stops, exit 10), and the pull request it opened before is updated, or one is opened.
//! Hooked before and after the run, not inside the loop.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use serde::Serialize;

use super::warning::Warning;
use crate::config::{PullRequest, RunSettings};
use crate::exit::Exit;
use crate::isolation::git::Git;
use crate::prd::Prd;
use crate::prd::lookup::{self, Locations};
use crate::report::json::Version;
use crate::tracker::{Client, Refusal, Repo, pull};
use crate::{outln, report};

/// How long `--pr` waits for GitHub's rate limit.
const RATE_LIMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

pub fn run(prd_arg: &str, opts: &RunSettings, loc: Result<Locations>) -> Result<Exit> {
    let pr = opts.pr.clone().expect("run --pr");
    let loc = loc?;
    let user_prd = lookup::resolve(prd_arg, &loc)?;
    let user_prd = std::fs::canonicalize(&user_prd)
        .with_context(|| format!("failed to read PRD at `{}`", user_prd.display()))?;
    let doc = crate::commands::load_prd(&user_prd)?;
    let mut setup = match Setup::of(&user_prd, &doc, &pr, opts) {
        Ok(s) => s,
        Err(Bad(message)) => {
            report::error(message);
            return Ok(Exit::Usage);
        }
    };
    let wt_prd = setup.prepare(&user_prd, opts, &loc)?;
    let code = super::run::run(
        &wt_prd.display().to_string(),
        &opts.on_pull_request_branch(),
        Ok(loc.clone()),
    )?;
    if !worth_a_pull_request(code) {
        report::warn(Warning::NotPushed {
            exit: code,
            branch: setup.branch.clone(),
        });
        return Ok(code);
    }
    let wt = Git::new(&setup.worktree);
    let after = crate::commands::load_prd(&wt_prd)?;
    let (passing, total) = after.progress();
    commit_prd(
        &wt,
        &setup.rel,
        &format!("{}: {passing}/{total} criteria pass", setup.id),
    )?;
    setup.push(&wt)?;
    let paths = opts.paths(&wt_prd, &loc)?;
    let (receipts, questions) = evidence(&paths.state_dir, &wt_prd);
    let client = Client::from_env(setup.repo.clone(), RATE_LIMIT_WAIT)?;
    let title = pull::title(&after);
    let body = pull::body(&after, &receipts, &questions);
    let (pull, verb) = match client.pull_for_head(&setup.branch)? {
        Some(p) => (
            client.update_pull(p.number, &title, &body)?,
            Action::Updated,
        ),
        None => (
            client.open_pull(&setup.branch, &setup.base, &title, &body, pr.draft)?,
            Action::Opened,
        ),
    };
    ask_questions(&client, &after, &questions, &wt_prd)?;
    let report = Opened {
        action: verb,
        number: pull.number,
        url: pull.url,
        head: setup.branch,
        base: setup.base,
        version: Version,
    };
    let mut out = String::new();
    if opts.json {
        // One more JSON line after the run's `end` event.
        report::json::push_report_line(&mut out, &report)?;
    } else {
        report.text(&mut out);
    }
    report::stdout(&out)?;
    Ok(code)
}

/// Whether the pull request was opened now or updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Action {
    Opened,
    Updated,
}

/// The pull request a `--pr` run opened or updated: its `--json` line is `pull_request`.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename = "pull_request", rename_all = "camelCase")]
struct Opened {
    action: Action,
    number: u64,
    url: String,
    head: String,
    base: String,
    version: Version,
}

impl Opened {
    fn text(&self, out: &mut String) {
        let verb = match self.action {
            Action::Opened => "opened",
            Action::Updated => "updated",
        };
        outln!(
            out,
            "pull request #{} {verb}: {} ({} → {})",
            self.number,
            self.url,
            self.head,
            self.base
        );
    }
}

/// Whether a run that ended so has work to show: it ran to an end of its own (all passing,
/// a limit, blocked on a person or waiting for answers), not an error, an interruption or
/// another loop's lock.
fn worth_a_pull_request(code: Exit) -> bool {
    matches!(
        code,
        Exit::Success | Exit::Failure | Exit::Blocked | Exit::Questions
    )
}

/// A reason `--pr` cannot start, for the user (exit 2).
struct Bad(String);

/// Where the pull request's work happens.
struct Setup {
    /// The PRD's id: the branch's name.
    id: String,
    branch: String,
    base: String,
    repo: Repo,
    /// The user's repository (its top level).
    user: Git,
    /// The PRD's path inside the repository.
    rel: PathBuf,
    worktree: PathBuf,
}

impl Setup {
    fn of(prd: &Path, doc: &Prd, pr: &PullRequest, opts: &RunSettings) -> Result<Setup, Bad> {
        if opts.dry_run || opts.shard.is_some() {
            return Err(Bad(
                "--pr pushes what a whole run did: leave out --dry-run and --shard".into(),
            ));
        }
        if opts.workdir().is_some() {
            return Err(Bad(
                "--pr works in a worktree of its own, on the PRD's repository: leave out --workdir"
                    .into(),
            ));
        }
        let Some(id) = doc.id().map(str::to_string) else {
            let why = match doc.list_format() {
                crate::prd::ListFormat::Markdown => {
                    "this PRD has no id (v3 `id:`, v4 `slug:`)".to_string()
                }
                other => format!(
                    "a {} task list has none (no front matter): --pr runs PAI PRDs and ISAs",
                    other.name()
                ),
            };
            return Err(Bad(format!(
                "{}: --pr names its branch prdloop/<id>, and {why}",
                prd.display()
            )));
        };
        let branch = format!("prdloop/{id}");
        let dir = prd.parent().unwrap_or(Path::new("."));
        let top = Git::new(dir)
            .text(&["rev-parse", "--show-toplevel"])
            .map_err(|_| {
                Bad(format!(
                    "{}: --pr needs the PRD in a git repository with an `origin` remote",
                    prd.display()
                ))
            })?;
        let top = std::fs::canonicalize(&top).unwrap_or_else(|_| PathBuf::from(&top));
        let user = Git::new(&top);
        if user
            .text(&["check-ref-format", "--branch", &branch])
            .is_err()
        {
            return Err(Bad(format!(
                "{}: its id `{id}` makes no branch name (`{branch}`): give it an id of letters, digits and dashes",
                prd.display()
            )));
        }
        let rel = prd
            .strip_prefix(&top)
            .map_err(|_| Bad(format!("{} is not inside {}", prd.display(), top.display())))?
            .to_path_buf();
        let origin = user.text(&["remote", "get-url", "origin"]).map_err(|_| {
            Bad(format!(
                "{}: --pr pushes to `origin`, and this repository has none: `git remote add origin URL`",
                top.display()
            ))
        })?;
        let repo = match &doc.front.tracker {
            Some(t) => Repo::parse(t.trim()).map_err(|e| Bad(format!("{}: {e}", prd.display())))?,
            None => Repo::from_remote_url(&origin).ok_or_else(|| {
                Bad(format!(
                    "{}: which GitHub repository gets the pull request? origin ({origin}) is not on github.com and the front matter has no `tracker: github:OWNER/REPO`",
                    prd.display()
                ))
            })?,
        };
        let base = match &pr.base {
            Some(b) => b.clone(),
            None => user
                .text(&["symbolic-ref", "--short", "-q", "HEAD"])
                .ok()
                .filter(|b| !b.is_empty())
                .ok_or_else(|| {
                    Bad("--pr: HEAD is detached, so no branch is the pull request's base: give --pr-base BRANCH".into())
                })?,
        };
        let worktree = PathBuf::new();
        Ok(Setup {
            id,
            branch,
            base,
            repo,
            user,
            rel,
            worktree,
        })
    }

    /// Brings the branch to where the work goes on (origin's, when it is ahead), checks it
    /// out in a fresh worktree and puts the PRD there: the user's text with the branch's
    /// ticks. Returns the worktree's PRD.
    fn prepare(&mut self, user_prd: &Path, opts: &RunSettings, loc: &Locations) -> Result<PathBuf> {
        let paths = opts.paths(user_prd, loc)?;
        let folder = format!(
            "{}-{}",
            self.id
                .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_"),
            short_hash(&self.user.dir.display().to_string())
        );
        self.worktree = paths.state_dir.join("pull-requests").join(folder);
        let local = self.user.commit_of(&format!("refs/heads/{}", self.branch));
        let remote = self.fetch_remote()?;
        let start = match (&local, &remote) {
            (Some(l), Some(r)) if l == r || self.is_ancestor(r, l) => l.clone(),
            (Some(l), Some(r)) if self.is_ancestor(l, r) => r.clone(),
            (Some(_), Some(_)) => return Err(self.moved().into()),
            (Some(l), None) => l.clone(),
            (None, Some(r)) => r.clone(),
            (None, None) => self
                .user
                .commit_of(&self.base)
                .ok_or_else(|| anyhow!("--pr-base `{}` names no commit here", self.base))?,
        };
        if self.worktree.exists() {
            // prdloop's own copy: what was committed in it is on the branch.
            let wt = self.worktree.display().to_string();
            let _ = self.user.text(&["worktree", "remove", "--force", &wt]);
            if self.worktree.exists() {
                std::fs::remove_dir_all(&self.worktree)
                    .with_context(|| format!("failed to remove `{wt}`"))?;
            }
        }
        let _ = self.user.text(&["worktree", "prune"]);
        let refname = format!("refs/heads/{}", self.branch);
        let zero = "0".repeat(start.len());
        let old = local.as_deref().unwrap_or(&zero);
        self.user.text(&["update-ref", &refname, &start, old])?;
        if let Some(dir) = self.worktree.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("failed to create `{}`", dir.display()))?;
        }
        self.user.text(&[
            "worktree",
            "add",
            "--quiet",
            &self.worktree.display().to_string(),
            &self.branch,
        ])?;
        let wt_prd = self.worktree.join(&self.rel);
        let theirs = std::fs::read_to_string(user_prd)
            .with_context(|| format!("failed to read PRD at `{}`", user_prd.display()))?;
        let text = with_ticks_of(
            user_prd,
            &theirs,
            std::fs::read_to_string(&wt_prd).ok().as_deref(),
        )
        .map_err(|e| anyhow!("{}: {e}", user_prd.display()))?;
        if let Some(dir) = wt_prd.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("failed to create `{}`", dir.display()))?;
        }
        crate::fsutil::write_atomic(&wt_prd, text.as_bytes())?;
        commit_prd(
            &Git::new(&self.worktree),
            &self.rel,
            &format!("{}: the PRD", self.id),
        )?;
        Ok(wt_prd)
    }

    /// Origin's commit of the branch, fetched; `None` when origin has no such branch.
    fn fetch_remote(&self) -> Result<Option<String>> {
        let refname = format!("refs/heads/{}", self.branch);
        let listed = self
            .user
            .text(&["ls-remote", "origin", &refname])
            .map_err(|e| Refusal(format!("could not read origin's {}: {e:#}", self.branch)))?;
        let Some(commit) = listed.split_whitespace().next().map(str::to_string) else {
            return Ok(None);
        };
        self.user
            .text(&["fetch", "--quiet", "--no-tags", "origin", &refname])
            .map_err(|e| Refusal(format!("could not fetch origin's {}: {e:#}", self.branch)))?;
        Ok(Some(commit))
    }

    fn is_ancestor(&self, a: &str, b: &str) -> bool {
        self.user
            .cmd()
            .args(&["merge-base", "--is-ancestor", a, b])
            .ok_codes(&[1])
            .output()
            .is_ok_and(|(_, code)| code == 0)
    }

    fn moved(&self) -> Refusal {
        Refusal(format!(
            "origin's {b} moved elsewhere: it has commits the local {b} lacks, and the local one has commits it lacks. prdloop never force-pushes; merge origin's {b} into the local one (or delete one of them) and run again",
            b = self.branch
        ))
    }

    /// Pushes the branch (never forced).
    fn push(&self, wt: &Git) -> Result<()> {
        let spec = format!("refs/heads/{b}:refs/heads/{b}", b = self.branch);
        match wt.text(&["push", "--quiet", "origin", &spec]) {
            Ok(_) => Ok(()),
            Err(e) => {
                let moved = self
                    .fetch_remote()
                    .ok()
                    .flatten()
                    .zip(wt.commit_of("HEAD"))
                    .is_some_and(|(r, h)| !self.is_ancestor(&r, &h));
                if moved {
                    return Err(self.moved().into());
                }
                Err(Refusal(format!(
                    "origin refused the push of {}: {e:#}. Nothing was force-pushed; the work is on the local branch {}",
                    self.branch, self.branch
                ))
                .into())
            }
        }
    }
}

/// Commits the PRD in the worktree when it changed (as prdloop when git has no identity).
fn commit_prd(wt: &Git, rel: &Path, message: &str) -> Result<()> {
    let rel = rel.display().to_string();
    let spec = format!(":(literal){rel}");
    wt.text(&["add", "--", &spec])?;
    let (_, changed) = wt
        .cmd()
        .args(&["diff", "--cached", "--quiet", "--", &spec])
        .ok_codes(&[1])
        .output()?;
    if changed == 0 {
        return Ok(());
    }
    let ident = wt.text(&["var", "GIT_COMMITTER_IDENT"]).is_ok();
    let args = [
        "commit",
        "--quiet",
        "--no-verify",
        "-m",
        message,
        "--",
        &spec,
    ];
    let c = wt.cmd().args(&args);
    if ident { c } else { c.as_self() }.run()
}

/// The user's PRD text (of the file at `path`, read as the task list it is) with the ticks
/// the branch's copy has (a criterion ticked there and open in the user's text is ticked);
/// the user's text alone when the branch has none.
fn with_ticks_of(path: &Path, users: &str, branch: Option<&str>) -> Result<String, String> {
    let list = crate::prd::ListFormat::detect(path, users)?;
    let mut doc = Prd::parse_as(users, list).map_err(|e| e.message)?;
    let Some(branch) = branch.and_then(|b| doc.reparse(b).ok()) else {
        return Ok(users.to_string());
    };
    for c in branch.criteria.iter().filter(|c| c.checked) {
        doc.set_checked(&c.id, true);
    }
    Ok(doc.text().to_string())
}

/// The receipts of the PRD's latest session and its open questions, by criterion id.
fn evidence(
    state_dir: &Path,
    prd: &Path,
) -> (
    HashMap<String, crate::evidence::receipt::Receipt>,
    HashMap<String, String>,
) {
    let receipts = crate::state::SessionState::latest(state_dir, prd)
        .map(|s| {
            s.criteria
                .into_iter()
                .filter_map(|c| c.receipt.map(|r| (c.id, r)))
                .collect()
        })
        .unwrap_or_default();
    let book = crate::questions::load(&crate::questions::book_path(state_dir, prd));
    let questions = book
        .open_questions()
        .map(|q| (q.criterion.clone(), q.question.clone()))
        .collect();
    (receipts, questions)
}

/// Asks each issue's open questions in a comment, once.
fn ask_questions(
    client: &Client,
    prd: &Prd,
    questions: &HashMap<String, String>,
    path: &Path,
) -> Result<()> {
    let answer_to = crate::backend::claude::shell_quote(&path.display().to_string());
    let mut issues: Vec<u64> = prd
        .criteria
        .iter()
        .filter(|c| questions.contains_key(&c.id))
        .filter_map(pull::issue_of)
        .collect();
    issues.sort_unstable();
    issues.dedup();
    for n in issues {
        let comments = client.comments(n)?;
        let fresh: HashMap<String, String> = questions
            .iter()
            .filter(|(id, q)| !pull::already_asked(&comments, id, q))
            .map(|(id, q)| (id.clone(), q.clone()))
            .collect();
        if let Some(text) = pull::question_comment(prd, n, &fresh, &answer_to) {
            client.comment(n, &text)?;
        }
    }
    Ok(())
}

fn short_hash(s: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(s.as_bytes())
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The branch's ticks are carried into the user's text of any task list, by its format
    /// (read as markdown, a tasks.json had no criteria and kept none of them).
    #[test]
    fn the_branchs_ticks_are_carried_in_the_files_own_format() {
        let path = Path::new("/repo/.taskmaster/tasks/tasks.json");
        let users = "{\"master\": {\"tasks\": [\n  {\"id\": 1, \"title\": \"A\", \"status\": \"pending\"},\n  {\"id\": 2, \"title\": \"B\", \"status\": \"pending\"}\n]}}\n";
        let branch = users.replacen("\"pending\"", "\"done\"", 1);
        assert_eq!(
            with_ticks_of(path, users, Some(&branch)).unwrap(),
            branch,
            "task 1's status, in place"
        );
        let path = Path::new("/repo/specs/001-a/tasks.md");
        let users = "---\n\n# Tasks\n\n## Phase 1\n\n- [ ] T001 a\n- [ ] T002 b\n";
        let branch = users.replace("- [ ] T002", "- [x] T002");
        assert_eq!(with_ticks_of(path, users, Some(&branch)).unwrap(), branch);
        assert_eq!(with_ticks_of(path, users, None).unwrap(), users);
    }
}
