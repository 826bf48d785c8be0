//! `prdloop import github:OWNER/REPO`: a PRD from a tracker's open issues (see
//! [`crate::tracker::import`] for what it writes). A new PRD appears whole or not at all; an
//! existing one is changed through [`crate::prd::write::update`], so that an edit made
//! meanwhile is kept.

use anyhow::{Context, Result, anyhow};

use super::warning::Warning;
use crate::cli::ImportArgs;
use crate::exit::Exit;
use crate::fsutil::Staged;
use crate::prd::Prd;
use crate::tracker::github::Filter;
use crate::tracker::import::{Imported, items_of, merge};
use crate::tracker::{Client, Issue, Repo};
use crate::{outln, report};

pub fn import(a: &ImportArgs) -> Result<Exit> {
    let repo = match Repo::parse(&a.tracker) {
        Ok(r) => r,
        Err(e) => {
            report::error(e);
            return Ok(Exit::Usage);
        }
    };
    let client = Client::from_env(repo.clone(), a.rate_limit_wait)?;
    let issues = if a.issues.is_empty() {
        client.issues(&Filter {
            labels: a.labels.clone(),
            milestone: a.milestone.clone(),
        })?
    } else {
        chosen(&client, &a.issues)?
    };
    if issues.is_empty() {
        report::warn(Warning::NoIssueMatches {
            repo: repo.to_string(),
            output: a.output.clone(),
        });
        return Ok(Exit::Success);
    }
    let items = items_of(&issues);
    let path = &a.output;
    let mut result: Option<Imported> = None;
    if path.exists() {
        crate::prd::write::update(path, |doc| {
            let out = merge(doc, &repo, &items).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            *doc = doc
                .reparse(out.text.clone())
                .map_err(|e| anyhow!(e.at(path)))?;
            result = Some(out);
            Ok(())
        })?;
    } else {
        let base = Prd::parse(new_prd(&repo)).map_err(|e| anyhow!(e.at(path)))?;
        let out = merge(&base, &repo, &items).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("failed to create `{}`", dir.display()))?;
        }
        Staged::new(path, out.text.as_bytes())?.persist_new()?;
        result = Some(out);
    }
    let out = result.expect("the change ran");
    let mut text = String::new();
    outln!(
        text,
        "{}: {} new criteri{} from {} issue{} of {repo}{}",
        path.display(),
        out.added.len(),
        if out.added.len() == 1 { "on" } else { "a" },
        issues.len(),
        if issues.len() == 1 { "" } else { "s" },
        if out.present > 0 {
            format!(" ({} there already)", out.present)
        } else {
            String::new()
        }
    );
    for id in &out.added {
        outln!(text, "  + {id}");
    }
    report::stdout(&text)?;
    Ok(Exit::Success)
}

/// The issues `--issue` names, in order: closed ones and pull requests are left out, with a
/// warning.
fn chosen(client: &Client, numbers: &[u64]) -> Result<Vec<Issue>> {
    let mut out = Vec::new();
    for &n in numbers {
        let issue = client.issue(n)?;
        if issue.pull_request {
            report::warn(Warning::PullRequestSkipped { issue: n });
        } else if !issue.open {
            report::warn(Warning::ClosedSkipped { issue: n });
        } else if !out.iter().any(|i: &Issue| i.number == n) {
            out.push(issue);
        }
    }
    Ok(out)
}

/// The text of a new PRD for the repository's issues (PAI's v3 layout, as `prdloop new`).
fn new_prd(repo: &Repo) -> String {
    let now = jiff::ZonedDateTime::now();
    let title = format!("{repo} issues");
    let id = format!(
        "PRD-{}-{}",
        now.strftime("%Y%m%d"),
        super::new::slug(&title)
    );
    super::new::template(&id, &title, "Standard", &now.date().to_string())
}
