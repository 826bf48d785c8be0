//! `prdloop import` and `run --pr` against a stand-in GitHub API on 127.0.0.1
//! (`common::fake_github`) and a local bare repository as `origin`. Nothing here talks to
//! github.com.

use std::io::{BufRead, Write};
use std::process::Output;

use crate::common::fake_github::FakeGithub;
use crate::common::*;

fn import(sb: &Sandbox, gh: &FakeGithub, args: &[&str]) -> Output {
    let mut all = vec!["import", "github:acme/widgets"];
    all.extend(args);
    let child = sb
        .command(&all)
        .env("GITHUB_API_URL", gh.base_url())
        .env("GITHUB_TOKEN", "t0ken")
        .spawn()
        .unwrap();
    wait_output(child, std::time::Duration::from_secs(180))
}

fn read(sb: &Sandbox, name: &str) -> String {
    std::fs::read_to_string(sb.work().join(name)).unwrap()
}

fn ids(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            l.strip_prefix("- [ ] ")
                .or_else(|| l.strip_prefix("- [x] "))
        })
        .filter_map(|l| l.split(':').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn import_takes_the_open_issues_with_every_label_across_pages() {
    let sb = Sandbox::new("", serde_json::json!({}));
    let gh = FakeGithub::start();
    gh.page_size(1);
    gh.issue(
        1,
        "Login form",
        "- [ ] a form\n- [x] a route",
        &["agent", "p1"],
        true,
    );
    gh.issue(2, "Closed one", "- [ ] never", &["agent", "p1"], false);
    gh.issue(3, "Only one label", "", &["agent"], true);
    gh.issue(4, "Logout", "Just words.", &["agent", "p1"], true);
    gh.push_issue(serde_json::json!({
        "number": 5, "title": "A pull request", "body": "", "state": "open",
        "labels": [{"name": "agent"}, {"name": "p1"}], "pull_request": {"url": "x"},
    }));
    gh.issue(6, "Signup", "- [ ] an email check", &["p1", "agent"], true);
    let out = import(
        &sb,
        &gh,
        &["--label", "agent", "--label", "p1", "-o", "issues.md"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = read(&sb, "issues.md");
    assert_eq!(
        ids(&text),
        ["ISC-GH1-1", "ISC-GH1-2", "ISC-GH4-1", "ISC-GH6-1"],
        "{text}"
    );
    assert!(text.contains("- [x] ISC-GH1-2: a route (#1)\n"), "{text}");
    assert!(text.contains("- [ ] ISC-GH4-1: Logout (#4)\n"), "{text}");
    assert!(text.contains("\ntracker: github:acme/widgets\n"), "{text}");
    let seen = gh.seen();
    let pages: Vec<_> = seen
        .iter()
        .filter(|s| s.uri.starts_with("/repos/acme/widgets/issues?"))
        .collect();
    // Four matching (a pull request among them), one a page.
    assert_eq!(pages.len(), 4, "{seen:?}");
    assert!(
        pages[0].uri.contains("labels=agent%2Cp1"),
        "{}",
        pages[0].uri
    );
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some("Bearer t0ken"))
    );
    // It reads as a PRD prdloop can plan.
    let plan = sb.run(&["plan", "issues.md"]);
    assert_eq!(code(&plan), 0, "{}", stderr(&plan));
}

#[test]
fn reimport_adds_new_items_and_keeps_ids_ticks_and_the_users_words() {
    let sb = Sandbox::new("", serde_json::json!({}));
    let gh = FakeGithub::start();
    gh.issue(3, "Login", "- [ ] a form\n- [ ] a route", &[], true);
    let out = import(&sb, &gh, &["-o", "issues.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let edited = read(&sb, "issues.md")
        .replace("- [ ] ISC-GH3-1", "- [x] ISC-GH3-1")
        .replace("## PLAN\n", "## PLAN\n\nMy own plan,  spaced   oddly.\n");
    std::fs::write(sb.work().join("issues.md"), &edited).unwrap();
    gh.set_body(3, "- [ ] a route\n- [ ] a form\n- [ ] a test");
    gh.issue(8, "Docs", "", &[], true);
    let out = import(&sb, &gh, &["-o", "issues.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("2 new criteria"),
        "{out:?}"
    );
    let text = read(&sb, "issues.md");
    assert_eq!(
        ids(&text),
        ["ISC-GH3-1", "ISC-GH3-2", "ISC-GH3-3", "ISC-GH8-1"],
        "{text}"
    );
    let without: String = text
        .split_inclusive('\n')
        .filter(|l| !l.contains("ISC-GH3-3") && !l.contains("ISC-GH8-1"))
        .collect();
    assert_eq!(without, edited, "only the new lines were added");
    // A third import finds nothing new and writes nothing.
    let out = import(&sb, &gh, &["-o", "issues.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(read(&sb, "issues.md"), text);
}

#[test]
fn named_issues_are_read_one_by_one_and_closed_ones_skipped() {
    let sb = Sandbox::new("", serde_json::json!({}));
    let gh = FakeGithub::start();
    gh.issue(1, "One", "", &[], true);
    gh.issue(2, "Two", "", &[], false);
    let out = import(&sb, &gh, &["--issue", "2", "--issue", "1", "-o", "i.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("#2 is closed"), "{}", stderr(&out));
    assert_eq!(ids(&read(&sb, "i.md")), ["ISC-GH1-1"]);
}

#[test]
fn github_errors_name_the_status_the_repository_and_what_to_do() {
    for (status, needle) in [
        (401, "GITHUB_TOKEN"),
        (403, "forbidden"),
        (404, "check OWNER/REPO"),
    ] {
        let sb = Sandbox::new("", serde_json::json!({}));
        let gh = FakeGithub::start();
        gh.issue(1, "One", "", &[], true);
        gh.script(
            status,
            &[("content-type", "application/json")],
            r#"{"message":"Nope"}"#,
        );
        let out = import(&sb, &gh, &["-o", "i.md"]);
        let err = stderr(&out);
        assert_eq!(code(&out), 10, "{status}: {err}");
        assert!(
            err.contains(&format!("GitHub {status} for acme/widgets")),
            "{err}"
        );
        assert!(
            err.contains(needle) && err.contains("GitHub says: Nope"),
            "{err}"
        );
        assert!(!sb.work().join("i.md").exists(), "nothing is written");
    }
}

#[test]
fn rate_limits_are_waited_out_within_the_limit() {
    let sb = Sandbox::new("", serde_json::json!({}));
    let gh = FakeGithub::start();
    gh.issue(1, "One", "", &[], true);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let reset = now.to_string();
    gh.script(
        403,
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", &reset),
        ],
        "{}",
    );
    gh.script(429, &[("retry-after", "1")], "{}");
    let out = import(&sb, &gh, &["-o", "i.md"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(gh.seen().len(), 3);
    assert_eq!(ids(&read(&sb, "i.md")), ["ISC-GH1-1"]);
}

#[test]
fn a_rate_limit_beyond_the_wait_fails_saying_when_it_resets() {
    let sb = Sandbox::new("", serde_json::json!({}));
    let gh = FakeGithub::start();
    gh.issue(1, "One", "", &[], true);
    gh.script(429, &[("retry-after", "3600")], "{}");
    let out = import(&sb, &gh, &["-o", "i.md", "--rate-limit-wait", "5s"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 10, "{err}");
    assert!(
        err.contains("GitHub 429 for acme/widgets") && err.contains("resets in 3600 s"),
        "{err}"
    );
    assert!(err.contains("--rate-limit-wait"), "{err}");
    assert_eq!(gh.seen().len(), 1);
}

#[test]
fn a_next_page_outside_the_api_is_not_followed() {
    let sb = Sandbox::new("", serde_json::json!({}));
    let gh = FakeGithub::start();
    gh.page_size(1);
    gh.foreign_next("http://192.0.2.1/steal?page=2");
    gh.issue(1, "One", "", &[], true);
    gh.issue(2, "Two", "", &[], true);
    let out = import(&sb, &gh, &["-o", "i.md"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 10, "{err}");
    assert!(err.contains("not followed"), "{err}");
}

/// Without GITHUB_API_URL the API is github.com's: through an HTTPS proxy on 127.0.0.1 that
/// refuses every tunnel, the one connection asked for is to api.github.com, and nothing
/// else leaves the machine.
#[test]
fn the_default_api_is_githubs_and_the_tests_reach_it_only_through_a_refusing_proxy() {
    let sb = Sandbox::new("", serde_json::json!({}));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = format!("http://{}", listener.local_addr().unwrap());
    let asked = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(s.try_clone().unwrap())
            .read_line(&mut line)
            .unwrap();
        let _ = s.write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
        line
    });
    let child = sb
        .command(&["import", "github:acme/widgets", "-o", "i.md"])
        .env("GITHUB_TOKEN", "t0ken")
        .env("HTTPS_PROXY", &proxy)
        .env("https_proxy", &proxy)
        .spawn()
        .unwrap();
    let out = wait_output(child, std::time::Duration::from_secs(180));
    let line = asked.join().unwrap();
    assert!(line.starts_with("CONNECT api.github.com:443 "), "{line}");
    let err = stderr(&out);
    assert_eq!(code(&out), 10, "{err}");
    assert!(
        err.contains("could not reach GitHub at https://api.github.com"),
        "{err}"
    );
}
