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
    with_github(sb, gh, &all)
}

/// prdloop with the stand-in as GitHub's API, a token, and a git identity.
fn with_github(sb: &Sandbox, gh: &FakeGithub, args: &[&str]) -> Output {
    let child = sb
        .command(args)
        .env("GITHUB_API_URL", gh.base_url())
        .env("GITHUB_TOKEN", "t0ken")
        .env("GIT_AUTHOR_NAME", "Author")
        .env("GIT_AUTHOR_EMAIL", "author@example.com")
        .env("GIT_COMMITTER_NAME", "Author")
        .env("GIT_COMMITTER_EMAIL", "author@example.com")
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

/// A repository (branch `main`) with a PRD of two issues' criteria, pushed to a bare
/// `origin`; the agent passes ISC-GH1-1 (checked by its command) and asks about ISC-GH2-1.
fn pr_repo() -> (Sandbox, std::path::PathBuf) {
    let mut prd = prd_with(&[
        "- [ ] ISC-GH1-1: one exists (#1) | Verify: CLI: `test -f one.txt`",
        "- [ ] ISC-GH2-1: two is chosen (#2)",
    ]);
    prd = prd.replace(
        "children: []\n",
        "children: []\ntracker: github:acme/widgets\n",
    );
    let sb = Sandbox::new(&prd, serde_json::json!({}));
    let w = sb.work();
    git(&w, &["init", "-q", "-b", "main"]);
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-q", "-m", "initial"]);
    let origin = sb.root().join("origin.git");
    git(
        sb.root(),
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            origin.to_str().unwrap(),
        ],
    );
    git(&w, &["remote", "add", "origin", origin.to_str().unwrap()]);
    git(&w, &["push", "-q", "origin", "main"]);
    let agent = sb.root().join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\ncat >/dev/null\nif [ \"$PRDLOOP_CRITERION\" = ISC-GH2-1 ]; then\n  echo \"QUESTION: ISC-GH2-1 Which colour, blue or green?\"\n  exit 0\nfi\necho one > one.txt\necho \"RESULT: $PRDLOOP_CRITERION PASS\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    (sb, agent)
}

fn run_pr(sb: &Sandbox, gh: &FakeGithub, agent: &std::path::Path, extra: &[&str]) -> Output {
    let mut more = vec!["--pr"];
    more.extend(extra);
    with_github(sb, gh, &command_agent_args(agent, &more))
}

const BRANCH: &str = "prdloop/PRD-20261130-test";

fn checkout_state(sb: &Sandbox) -> (String, String, String, String) {
    let w = sb.work();
    (
        git(&w, &["rev-parse", "HEAD"]),
        git(&w, &["symbolic-ref", "HEAD"]),
        git(&w, &["status", "--porcelain"]),
        sb.prd_text(),
    )
}

#[test]
fn pr_opens_one_pull_request_then_updates_it_and_leaves_the_checkout_alone() {
    let (sb, agent) = pr_repo();
    let gh = FakeGithub::start();
    let before = checkout_state(&sb);
    let out = run_pr(&sb, &gh, &agent, &["--draft"]);
    let err = stderr(&out);
    // What is left waits for an answer.
    assert_eq!(code(&out), 8, "{err}");
    assert_eq!(
        checkout_state(&sb),
        before,
        "the user's checkout and branch are untouched"
    );
    let origin = sb.root().join("origin.git");
    let log = git(&origin, &["log", "--format=%s", BRANCH]);
    assert!(log.contains("ISC-GH1-1: one exists (#1)"), "{log}");
    assert!(
        log.contains("PRD-20261130-test: 1/2 criteria pass"),
        "{log}"
    );
    let shown = git(&origin, &["show", &format!("{BRANCH}:one.txt")]);
    assert_eq!(shown, "one\n");
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let p = &pulls[0];
    assert_eq!(
        (p["head"]["ref"].as_str(), p["base"]["ref"].as_str()),
        (Some(BRANCH), Some("main"))
    );
    assert_eq!(p["draft"], true);
    let body = p["body"].as_str().unwrap();
    assert!(
        body.contains("| ✅ | ISC-GH1-1 one exists (#1) | checked | `test -f one.txt` exited"),
        "{body}"
    );
    assert!(body.contains("| ❓ | ISC-GH2-1 two is chosen (#2) | waiting for an answer | asks: Which colour, blue or green? | #2 |"), "{body}");
    assert!(
        body.contains("Closes #1") && !body.contains("Closes #2"),
        "{body}"
    );
    let comments = gh.comments();
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert_eq!(comments[0].0, 2);
    assert!(comments[0].1.contains("Which colour, blue or green?"));
    // It says which PRD `prdloop answer` takes: the one the run worked on, in its worktree.
    assert!(
        comments[0].1.contains("prdloop answer ") && comments[0].1.contains("/pull-requests/"),
        "{}",
        comments[0].1
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("pull request #100 opened"),
        "{out:?}"
    );

    // The second run continues the branch and updates the same pull request; with `--json`,
    // its last line says so.
    let out = run_pr(&sb, &gh, &agent, &["--json"]);
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap();
    snapshot!(
        sb.root(),
        "pull_request_json",
        &serde_json::to_string_pretty(&last).unwrap()
    );
    assert_eq!(gh.pulls().len(), 1, "no second pull request");
    assert!(
        gh.seen()
            .iter()
            .any(|s| s.method == "PATCH" && s.uri.ends_with("/pulls/100"))
    );
    assert_eq!(last["action"], "updated", "{stdout}");
    assert_eq!(gh.comments().len(), 1, "a question is asked once");
    assert_eq!(checkout_state(&sb), before);
}

#[test]
fn pr_stops_when_origins_branch_moved_elsewhere_and_never_forces() {
    let (sb, agent) = pr_repo();
    let gh = FakeGithub::start();
    let out = run_pr(&sb, &gh, &agent, &[]);
    assert_eq!(code(&out), 8, "{}", stderr(&out));
    // Someone else pushes a commit of their own onto origin's branch, from the old base.
    let other = sb.root().join("other");
    let origin = sb.root().join("origin.git");
    git(
        sb.root(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    git(&other, &["checkout", "-q", "-b", "x", "origin/main"]);
    std::fs::write(other.join("theirs.txt"), "t\n").unwrap();
    git(&other, &["add", "theirs.txt"]);
    git(&other, &["commit", "-q", "-m", "theirs"]);
    git(
        &other,
        &["push", "-q", "-f", "origin", &format!("x:{BRANCH}")],
    );
    let theirs = git(&origin, &["rev-parse", BRANCH]);
    let out = run_pr(&sb, &gh, &agent, &[]);
    let err = stderr(&out);
    assert_eq!(code(&out), 10, "{err}");
    assert!(
        err.contains("moved elsewhere") && err.contains("never force-pushes"),
        "{err}"
    );
    assert_eq!(
        git(&origin, &["rev-parse", BRANCH]),
        theirs,
        "origin's branch is theirs still"
    );
}

#[test]
fn a_refused_push_fails_with_exit_10_and_opens_no_pull_request() {
    let (sb, agent) = pr_repo();
    let gh = FakeGithub::start();
    let hook = sb.root().join("origin.git/hooks/pre-receive");
    std::fs::write(&hook, "#!/bin/sh\necho 'protected by policy' >&2\nexit 1\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_pr(&sb, &gh, &agent, &[]);
    let err = stderr(&out);
    assert_eq!(code(&out), 10, "{err}");
    assert!(
        err.contains("origin refused the push of prdloop/PRD-20261130-test"),
        "{err}"
    );
    assert!(err.contains("protected by policy"), "{err}");
    assert!(gh.pulls().is_empty());
}

#[test]
fn an_untrusted_repository_config_cannot_turn_pr_on() {
    let (sb, agent) = pr_repo();
    let gh = FakeGithub::start();
    std::fs::write(sb.work().join("prdloop.toml"), "pr = true\n").unwrap();
    let out = with_github(&sb, &gh, &command_agent_args(&agent, &[]));
    let err = stderr(&out);
    assert_eq!(code(&out), 8, "{err}");
    assert!(err.contains("pr"), "{err}");
    assert!(gh.seen().is_empty(), "{:?}", gh.seen());
    let origin = sb.root().join("origin.git");
    assert_eq!(git(&origin, &["branch", "--list", "prdloop/*"]), "");
}

/// The Action's `import` and `pr` inputs: issues in, one pull request out, its address an
/// output.
#[test]
fn the_actions_import_and_pr_inputs_go_from_issues_to_a_pull_request() {
    let (sb, agent) = pr_repo();
    let gh = FakeGithub::start();
    gh.issue(1, "One", "- [ ] one exists", &["prdloop"], true);
    gh.issue(2, "Not labelled", "", &[], true);
    let base = gh.base_url();
    let (o, outputs) = crate::ci_report::action_step(
        &sb,
        &[
            ("INPUT_PRD", "issues.md"),
            ("INPUT_WORKING_DIRECTORY", "work"),
            ("INPUT_IMPORT", "github:acme/widgets"),
            ("INPUT_IMPORT_ARGS", "--label prdloop"),
            ("INPUT_PR", "true"),
            ("INPUT_AGENT", "command"),
            ("INPUT_AGENT_BIN", agent.to_str().unwrap()),
            ("GITHUB_API_URL", &base),
            ("GITHUB_TOKEN", "t0ken"),
        ],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(outputs.contains("outcome=completed\n"), "{outputs}");
    assert!(
        outputs.contains("pull-request=https://github.example/acme/widgets/pull/100\n"),
        "{outputs}"
    );
    let pulls = gh.pulls();
    assert_eq!(pulls.len(), 1);
    let body = pulls[0]["body"].as_str().unwrap();
    assert!(
        body.contains("ISC-GH1-1 one exists (#1) | claimed"),
        "{body}"
    );
    assert!(body.contains("Closes #1") && !body.contains("#2"), "{body}");
}

#[test]
fn a_run_that_cannot_work_pushes_nothing_and_opens_no_pull_request() {
    let (sb, _) = pr_repo();
    let gh = FakeGithub::start();
    let missing = sb.root().join("no-such-agent");
    let out = run_pr(&sb, &gh, &missing, &[]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(err.contains("nothing pushed, no pull request"), "{err}");
    assert!(gh.seen().is_empty(), "{:?}", gh.seen());
    let origin = sb.root().join("origin.git");
    assert_eq!(git(&origin, &["branch", "--list", "prdloop/*"]), "");
    // --dry-run and --pr do not go together.
    let out = run_pr(&sb, &gh, &missing, &["--dry-run"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("leave out --dry-run"),
        "{}",
        stderr(&out)
    );
}

/// `run --pr` on another tool's task list (no front matter, so no id to name the branch by)
/// is refused before anything is made, saying which format has none; nothing is pushed.
#[test]
fn pr_on_a_task_list_without_an_id_is_refused_naming_its_format() {
    let (sb, _agent) = pr_repo();
    let rel = "specs/001-a/tasks.md";
    let path = sb.work().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "# Tasks\n\n## Phase 1\n\n- [ ] T001 Write one.txt\n").unwrap();
    let w = sb.work();
    git(&w, &["add", "-A"]);
    git(&w, &["commit", "-q", "-m", "tasks"]);
    let gh = FakeGithub::start();
    let out = with_github(&sb, &gh, &["run", rel, "--pr"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("tasks.md: --pr names its branch prdloop/<id>, and a spec-kit task list has none (no front matter): --pr runs PAI PRDs and ISAs"),
        "{err}"
    );
    assert!(gh.pulls().is_empty());
    let origin = sb.root().join("origin.git");
    assert_eq!(git(&origin, &["branch", "--list", "prdloop/*"]), "");
}
