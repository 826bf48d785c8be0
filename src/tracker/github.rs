//! GitHub's REST API, the calls prdloop makes: the issues of a repository (paginated through
//! the `Link` header), one issue, its comments, the pull request of a head branch, opening and
//! updating it, commenting. The token is `GITHUB_TOKEN`, else `GH_TOKEN`, else what
//! `gh auth token` prints; the base is `GITHUB_API_URL` (as GitHub Actions sets it), else
//! `https://api.github.com`. Requests go to that base only: a `next` link elsewhere is an
//! error, so the token never leaves it. Rate limits (403 with `x-ratelimit-remaining: 0`
//! and `x-ratelimit-reset`, 403 or 429 with `retry-after`) are waited out when the wait is
//! within [`Client::max_wait`], else they fail naming when the limit resets.

use std::time::Duration;

use serde_json::Value as Json;

use super::{Issue, Repo};

/// The API's base when `GITHUB_API_URL` is not set.
pub const DEFAULT_API: &str = "https://api.github.com";
/// How long one request may take, all in.
const TIMEOUT: Duration = Duration::from_secs(60);
/// How many times one request is made again after a rate limit's wait.
const RATE_RETRIES: usize = 4;
/// The most pages of one listing read (100 items each).
const MAX_PAGES: usize = 100;

/// A request GitHub answered with an error (or that could not reach it): the message names
/// the status, the repository and what to do. Its exit code is 10 ([`crate::exit::Exit::Remote`]).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct HttpError {
    /// The HTTP status; `None` when GitHub was not reached.
    pub status: Option<u16>,
    pub message: String,
}

/// A pull request as prdloop keeps track of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    pub number: u64,
    pub url: String,
}

/// Which issues `import` reads.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Every one of these labels (GitHub's `labels=` is an and).
    pub labels: Vec<String>,
    /// A milestone's number or title.
    pub milestone: Option<String>,
}

/// A client for one repository.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
    repo: Repo,
    /// The longest rate-limit wait taken; a longer one fails.
    pub max_wait: Duration,
}

enum Method {
    Get,
    Post,
    Patch,
}

impl Client {
    /// A client for `repo` with the API base and token of the environment.
    pub fn from_env(repo: Repo, max_wait: Duration) -> Result<Client, HttpError> {
        let base = std::env::var(crate::env::GITHUB_API_URL)
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_API.into());
        Client::new(&base, token_from_env(), repo, max_wait)
    }

    pub fn new(
        base: &str,
        token: Option<String>,
        repo: Repo,
        max_wait: Duration,
    ) -> Result<Client, HttpError> {
        let base = base.trim().trim_end_matches('/').to_string();
        if !(base.starts_with("https://") || base.starts_with("http://")) {
            return Err(HttpError {
                status: None,
                message: format!(
                    "GITHUB_API_URL `{base}` is not an http(s) address: set it to GitHub's API (https://api.github.com, or your GitHub Enterprise's https://HOST/api/v3)"
                ),
            });
        }
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(Client {
            agent,
            base,
            token,
            repo,
            max_wait,
        })
    }

    pub fn repo(&self) -> &Repo {
        &self.repo
    }

    /// The open issues that match `filter` (pull requests left out), oldest first.
    pub fn issues(&self, filter: &Filter) -> Result<Vec<Issue>, HttpError> {
        let mut query = vec![
            "state=open".to_string(),
            "per_page=100".into(),
            "sort=created".into(),
            "direction=asc".into(),
        ];
        if !filter.labels.is_empty() {
            query.push(format!("labels={}", encode(&filter.labels.join(","))));
        }
        if let Some(m) = &filter.milestone {
            query.push(format!("milestone={}", self.milestone_number(m)?));
        }
        let url = format!("{}?{}", self.repo_url("/issues"), query.join("&"));
        let items = self.get_all(&url)?;
        Ok(items
            .iter()
            .map(issue_of)
            .filter(|i| i.open && !i.pull_request)
            .collect())
    }

    /// One issue (open or closed, or a pull request: the caller decides).
    pub fn issue(&self, number: u64) -> Result<Issue, HttpError> {
        let url = self.repo_url(&format!("/issues/{number}"));
        Ok(issue_of(&self.call(Method::Get, &url, None)?.1))
    }

    /// The bodies of an issue's comments.
    pub fn comments(&self, issue: u64) -> Result<Vec<String>, HttpError> {
        let url = self.repo_url(&format!("/issues/{issue}/comments?per_page=100"));
        Ok(self
            .get_all(&url)?
            .iter()
            .map(|c| str_of(c, "body"))
            .collect())
    }

    /// Adds a comment to an issue.
    pub fn comment(&self, issue: u64, body: &str) -> Result<(), HttpError> {
        let url = self.repo_url(&format!("/issues/{issue}/comments"));
        self.call(
            Method::Post,
            &url,
            Some(serde_json::json!({ "body": body })),
        )?;
        Ok(())
    }

    /// The open pull request whose head is `branch` of this repository, if there is one.
    pub fn pull_for_head(&self, branch: &str) -> Result<Option<Pull>, HttpError> {
        let head = encode(&format!("{}:{branch}", self.repo.owner));
        let url = self.repo_url(&format!("/pulls?state=open&head={head}&per_page=100"));
        Ok(self
            .get_all(&url)?
            .iter()
            .find(|p| p["head"]["ref"].as_str() == Some(branch))
            .map(pull_of))
    }

    /// Opens a pull request of `head` into `base`.
    pub fn open_pull(
        &self,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
        draft: bool,
    ) -> Result<Pull, HttpError> {
        let url = self.repo_url("/pulls");
        let json = serde_json::json!({
            "head": head, "base": base, "title": title, "body": body, "draft": draft,
        });
        Ok(pull_of(&self.call(Method::Post, &url, Some(json))?.1))
    }

    /// Sets a pull request's title and body.
    pub fn update_pull(&self, number: u64, title: &str, body: &str) -> Result<Pull, HttpError> {
        let url = self.repo_url(&format!("/pulls/{number}"));
        let json = serde_json::json!({ "title": title, "body": body });
        Ok(pull_of(&self.call(Method::Patch, &url, Some(json))?.1))
    }

    fn repo_url(&self, rest: &str) -> String {
        format!(
            "{}/repos/{}/{}{rest}",
            self.base, self.repo.owner, self.repo.name
        )
    }

    /// A milestone's number: `m` itself when it is one, else the number of the milestone
    /// titled `m` (open or closed).
    fn milestone_number(&self, m: &str) -> Result<u64, HttpError> {
        if let Ok(n) = m.parse::<u64>() {
            return Ok(n);
        }
        let url = self.repo_url("/milestones?state=all&per_page=100");
        self.get_all(&url)?
            .iter()
            .find(|x| x["title"].as_str() == Some(m))
            .and_then(|x| x["number"].as_u64())
            .ok_or_else(|| HttpError {
                status: None,
                message: format!(
                    "{} has no milestone titled `{m}`: give its title exactly, or its number",
                    self.repo
                ),
            })
    }

    /// Every item of a listing, following its `next` links.
    fn get_all(&self, first: &str) -> Result<Vec<Json>, HttpError> {
        let mut items = Vec::new();
        let mut url = Some(first.to_string());
        let mut pages = 0;
        while let Some(u) = url.take() {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(self.fail(
                    None,
                    &u,
                    format!("more than {MAX_PAGES} pages: narrow the selection"),
                ));
            }
            let (link, json) = self.call(Method::Get, &u, None)?;
            match json {
                Json::Array(page) => items.extend(page),
                _ => return Err(self.fail(None, &u, "the answer is not a list".into())),
            }
            if let Some(next) = link.as_deref().and_then(next_link) {
                if !next.starts_with(&format!("{}/", self.base)) {
                    return Err(self.fail(
                        None,
                        &u,
                        format!(
                            "its next page is at `{next}`, outside {}: not followed",
                            self.base
                        ),
                    ));
                }
                url = Some(next);
            }
        }
        Ok(items)
    }

    /// One request, made again after a rate limit's wait; returns the `Link` header and the
    /// JSON answer.
    fn call(
        &self,
        method: Method,
        url: &str,
        body: Option<Json>,
    ) -> Result<(Option<String>, Json), HttpError> {
        let mut waits = 0;
        loop {
            let (verb, m) = match method {
                Method::Get => ("GET", ureq::http::Method::GET),
                Method::Post => ("POST", ureq::http::Method::POST),
                Method::Patch => ("PATCH", ureq::http::Method::PATCH),
            };
            let mut req = ureq::http::Request::builder()
                .method(m)
                .uri(url)
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28")
                .header("User-Agent", concat!("prdloop/", env!("CARGO_PKG_VERSION")));
            if let Some(t) = &self.token {
                req = req.header("Authorization", format!("Bearer {t}"));
            }
            let text = body.as_ref().map(Json::to_string).unwrap_or_default();
            if body.is_some() {
                req = req.header("Content-Type", "application/json");
            }
            let req = req
                .body(text)
                .map_err(|e| self.fail(None, url, format!("a bad request ({e})")))?;
            let mut resp = self.agent.run(req).map_err(|e| HttpError {
                status: None,
                message: format!(
                    "could not reach GitHub at {} for {} ({verb} {}): {e}; check GITHUB_API_URL and the network",
                    self.base,
                    self.repo,
                    self.path_of(url)
                ),
            })?;
            let status = resp.status().as_u16();
            let header = |name: &str| {
                resp.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let link = header("link");
            let limit = RateLimit {
                retry_after: header("retry-after"),
                remaining: header("x-ratelimit-remaining"),
                reset: header("x-ratelimit-reset"),
            };
            let text = resp
                .body_mut()
                .with_config()
                .limit(64 * 1024 * 1024)
                .read_to_string()
                .unwrap_or_default();
            if (200..300).contains(&status) {
                let json = if text.trim().is_empty() {
                    Json::Null
                } else {
                    serde_json::from_str(&text).map_err(|e| {
                        self.fail(Some(status), url, format!("its answer is not JSON ({e})"))
                    })?
                };
                return Ok((link, json));
            }
            if let Some(wait) = limit.wait(status, now_epoch()) {
                if wait <= self.max_wait && waits < RATE_RETRIES {
                    waits += 1;
                    tracing::warn!(
                        "GitHub's rate limit for {}: waiting {} s",
                        self.repo,
                        wait.as_secs()
                    );
                    std::thread::sleep(wait);
                    continue;
                }
                return Err(self.fail(
                    Some(status),
                    url,
                    format!(
                        "rate limited: the limit resets in {} s, more than the {} s prdloop waits; run again later, or raise --rate-limit-wait (PRDLOOP_RATE_LIMIT_WAIT)",
                        wait.as_secs(),
                        self.max_wait.as_secs()
                    ),
                ));
            }
            let said = serde_json::from_str::<Json>(&text)
                .ok()
                .and_then(|j| j["message"].as_str().map(str::to_string))
                .unwrap_or_default();
            return Err(self.fail(Some(status), url, advice(status, &said)));
        }
    }

    fn path_of<'a>(&self, url: &'a str) -> &'a str {
        url.strip_prefix(&self.base).unwrap_or(url)
    }

    fn fail(&self, status: Option<u16>, url: &str, what: String) -> HttpError {
        let status_text = status.map(|s| format!(" {s}")).unwrap_or_default();
        HttpError {
            status,
            message: format!(
                "GitHub{status_text} for {} ({}): {what}",
                self.repo,
                self.path_of(url)
            ),
        }
    }
}

/// What to do about an error status (`said`: GitHub's own message, quoted when there is one).
fn advice(status: u16, said: &str) -> String {
    let what = match status {
        401 => {
            "the token was refused: set GITHUB_TOKEN or GH_TOKEN to a valid token (or run `gh auth login`)"
        }
        403 => {
            "forbidden: the token may not do this here; give a token with access to the repository's issues and pull requests (in GitHub Actions: `permissions: issues: write, pull-requests: write, contents: write`)"
        }
        404 => {
            "not found: check OWNER/REPO, and that the token can see the repository (a private one answers 404 to a token without access)"
        }
        422 => "GitHub refused the request's content",
        500..=599 => "GitHub failed; run again later",
        _ => "GitHub refused the request",
    };
    if said.is_empty() {
        what.to_string()
    } else {
        format!("{what} (GitHub says: {said})")
    }
}

/// The headers GitHub sends with a rate limit.
#[derive(Debug, Default)]
struct RateLimit {
    retry_after: Option<String>,
    remaining: Option<String>,
    reset: Option<String>,
}

impl RateLimit {
    /// How long to wait before asking again, when `status` is a rate limit (403 or 429 with
    /// `retry-after`, or with no requests remaining until `x-ratelimit-reset`); `None` for any
    /// other answer.
    fn wait(&self, status: u16, now: u64) -> Option<Duration> {
        if status != 403 && status != 429 {
            return None;
        }
        if let Some(secs) = self
            .retry_after
            .as_deref()
            .and_then(|s| s.trim().parse().ok())
        {
            return Some(Duration::from_secs(secs));
        }
        if self.remaining.as_deref().map(str::trim) == Some("0") {
            let reset: u64 = self.reset.as_deref()?.trim().parse().ok()?;
            // One second more: the reset time is rounded down.
            return Some(Duration::from_secs(reset.saturating_sub(now) + 1));
        }
        // A 429 with neither header: GitHub's advice is a minute.
        (status == 429).then_some(Duration::from_secs(60))
    }
}

fn now_epoch() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The `rel="next"` address of a `Link` header.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim() == "rel=\"next\"")
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

/// The token: `GITHUB_TOKEN`, else `GH_TOKEN`, else `gh auth token`'s (when gh is installed);
/// none makes unauthenticated requests (public repositories, a lower rate limit).
fn token_from_env() -> Option<String> {
    for name in [crate::env::GITHUB_TOKEN, crate::env::GH_TOKEN] {
        if let Ok(t) = std::env::var(name)
            && !t.trim().is_empty()
        {
            return Some(t.trim().to_string());
        }
    }
    let out = std::process::Command::new("gh")
        .args(["auth", "token"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let t = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !t.trim().is_empty()).then(|| t.trim().to_string())
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn str_of(j: &Json, key: &str) -> String {
    j[key].as_str().unwrap_or_default().to_string()
}

fn issue_of(j: &Json) -> Issue {
    Issue {
        number: j["number"].as_u64().unwrap_or(0),
        title: str_of(j, "title"),
        body: str_of(j, "body"),
        open: j["state"].as_str() == Some("open"),
        pull_request: j.get("pull_request").is_some_and(|p| !p.is_null()),
    }
}

fn pull_of(j: &Json) -> Pull {
    Pull {
        number: j["number"].as_u64().unwrap_or(0),
        url: str_of(j, "html_url"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_page_is_the_link_headers_rel_next() {
        let link = r#"<https://api.github.com/repositories/1/issues?page=3>; rel="next", <https://api.github.com/repositories/1/issues?page=9>; rel="last""#;
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/repositories/1/issues?page=3")
        );
        assert_eq!(
            next_link(r#"<https://x/?page=1>; rel="prev", <https://x/?page=1>; rel="first""#),
            None
        );
    }

    #[test]
    fn rate_limits_are_read_from_their_headers() {
        let h = |ra: Option<&str>, rem: Option<&str>, reset: Option<&str>| RateLimit {
            retry_after: ra.map(Into::into),
            remaining: rem.map(Into::into),
            reset: reset.map(Into::into),
        };
        let secs = Duration::from_secs;
        assert_eq!(
            h(None, Some("0"), Some("1030")).wait(403, 1000),
            Some(secs(31))
        );
        assert_eq!(
            h(None, Some("0"), Some("900")).wait(403, 1000),
            Some(secs(1))
        );
        assert_eq!(h(Some("7"), None, None).wait(429, 1000), Some(secs(7)));
        assert_eq!(h(Some("7"), None, None).wait(403, 1000), Some(secs(7)));
        assert_eq!(h(None, None, None).wait(429, 1000), Some(secs(60)));
        // A 403 with requests left is a refusal, not a limit.
        assert_eq!(h(None, Some("12"), Some("1030")).wait(403, 1000), None);
        assert_eq!(h(None, None, None).wait(403, 1000), None);
        assert_eq!(h(Some("7"), Some("0"), None).wait(404, 1000), None);
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode("good first issue,p1"), "good%20first%20issue%2Cp1");
        assert_eq!(encode("o:prdloop/x"), "o%3Aprdloop%2Fx");
    }

    #[test]
    fn pull_requests_listed_among_issues_are_marked() {
        let i = issue_of(&serde_json::json!({
            "number": 4, "title": "t", "body": null, "state": "open",
            "pull_request": {"url": "u"}
        }));
        assert!(i.pull_request && i.open && i.body.is_empty());
        let i = issue_of(&serde_json::json!({"number": 5, "state": "closed"}));
        assert!(!i.pull_request && !i.open);
    }

    #[test]
    fn a_base_that_is_not_http_is_refused() {
        let repo = Repo::parse("github:o/r").unwrap();
        let e = Client::new("ftp://x", None, repo, Duration::ZERO)
            .err()
            .unwrap();
        assert!(e.message.contains("GITHUB_API_URL"), "{}", e.message);
    }
}
