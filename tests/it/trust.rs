//! A repository's config files are untrusted: their keys that run commands or weaken safety
//! apply only once the user trusts what they say (`prdloop trust`), and a worker's change to
//! them is held, never landed.

use crate::common::*;
use serde_json::json;

fn out(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository whose `prdloop.toml` turns the sandbox off, runs a setup command in each lane
/// and a notify command at the end, all writing marks under the sandbox's root.
fn hostile_config_repo() -> Sandbox {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[],
    );
    let root = sb.root().display().to_string();
    std::fs::write(
        sb.work().join("prdloop.toml"),
        format!(
            "sandbox = \"off\"\nsetup = \"touch {root}/setup-ran\"\nnotify = [\"command:touch {root}/notified\"]\ntimeout = \"5m\"\n"
        ),
    )
    .unwrap();
    git(&sb.work(), &["add", "-A"]);
    git(&sb.work(), &["commit", "-q", "-m", "config"]);
    sb
}

#[test]
fn an_untrusted_config_runs_nothing_and_says_what_it_ignored() {
    let sb = hostile_config_repo();
    let o = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("prdloop.toml is not trusted")
            && err.contains("`sandbox` (line 1), `setup` (line 2), `notify` (line 3)")
            && err.contains("`prdloop trust "),
        "{err}"
    );
    assert!(
        !err.contains("`timeout`"),
        "an unguarded key applies: {err}"
    );
    assert!(!sb.root().join("setup-ran").exists(), "setup ran");
    assert!(!sb.root().join("notified").exists(), "notify ran");
    let all = format!("{}{err}", out(&o));
    assert!(all.contains("sandbox: "), "no sandbox line: {all}");
    assert!(!all.contains("sandbox: off"), "{all}");
    // `config` shows what it ignored, as comments.
    let o = sb.run(&["config", "PRD.md"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        out(&o).contains("# ignored, its file is not trusted")
            && out(&o).contains("sandbox = \"off\""),
        "{}",
        out(&o)
    );
}

#[test]
fn trusting_applies_the_file_until_a_guarded_value_changes() {
    let sb = hostile_config_repo();
    let o = sb.run(&["trust"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        out(&o).contains("trusted: ") && out(&o).contains("line 1: sandbox = \"off\""),
        "{}",
        out(&o)
    );
    let o = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let all = format!("{}{}", out(&o), stderr(&o));
    assert!(!all.contains("is not trusted"), "{all}");
    // The sandbox line names where it was turned off.
    assert!(
        all.contains("sandbox: off (set by project:") && all.contains("prdloop.toml:1)"),
        "{all}"
    );
    assert!(sb.root().join("setup-ran").exists(), "setup did not run");
    // An unguarded edit keeps the trust; a guarded one needs it again.
    let file = sb.work().join("prdloop.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("timeout = \"5m\"", "timeout = \"6m\"")).unwrap();
    let o = sb.run(&["config"]);
    assert!(!stderr(&o).contains("not trusted"), "{}", stderr(&o));
    let o = sb.run(&["plan", "PRD.md"]);
    assert!(!stderr(&o).contains("not trusted"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("setup-ran", "other-mark")).unwrap();
    let o = sb.run(&["plan", "PRD.md"]);
    assert!(
        stderr(&o).contains("is not trusted (its settings changed since you trusted it)"),
        "{}",
        stderr(&o)
    );
    let o = sb.run(&["trust", "--list"]);
    assert!(
        out(&o).contains("changed since it was trusted"),
        "{}",
        out(&o)
    );
    let o = sb.run(&["trust", "--forget"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = sb.run(&["trust", "--list"]);
    assert_eq!(out(&o), "no file is trusted\n");
}

#[test]
fn a_prds_map_is_trusted_apart_from_its_boxes() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["write:a.txt"]}),
        &[],
    );
    let prd = sb
        .prd_text()
        .replacen("---\n", "---\nprdloop:\n  agent-arg: [--from-map]\n", 1);
    std::fs::write(sb.prd(), &prd).unwrap();
    let o = sb.run(&["plan", "PRD.md", "--json"]);
    assert!(
        stderr(&o).contains("PRD.md is not trusted") && !out(&o).contains("--from-map"),
        "{}{}",
        out(&o),
        stderr(&o)
    );
    let o = sb.run(&["trust", "PRD.md"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // The run ticks the box and rewrites the front matter: the map stays trusted.
    let o = sb.run(&["run", "PRD.md", "-n", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(sb.prd_text().contains("- [x] ISC-A-1"));
    let records = sb.worker_records();
    assert!(records[0]["args"].to_string().contains("--from-map"));
    let o = sb.run(&["plan", "PRD.md"]);
    assert!(!stderr(&o).contains("not trusted"), "{}", stderr(&o));
    // A file without a map has nothing to trust.
    std::fs::write(sb.work().join("B.md"), prd_with(&["- [ ] ISC-A-1: a"])).unwrap();
    let o = sb.run(&["trust", "B.md"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("has no `prdloop:` map"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn doctor_never_runs_a_program_an_untrusted_file_names() {
    let sb = Sandbox::new(&prd_with(&["- [ ] ISC-A-1: a"]), json!({}));
    let mark = sb.root().join("evil-ran");
    let evil = sb.work().join("evil.sh");
    std::fs::write(
        &evil,
        format!("#!/bin/sh\ntouch {}\necho 1.0.0\n", mark.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        sb.work().join("prdloop.toml"),
        "agent = \"command\"\nagent-bin = \"./evil.sh\"\n",
    )
    .unwrap();
    let o = sb.run(&["doctor"]);
    assert!(!mark.exists(), "doctor ran the file's program");
    assert!(stderr(&o).contains("is not trusted"), "{}", stderr(&o));
}

#[test]
fn a_workers_change_to_the_config_is_held_not_landed() {
    let sb = repo(
        &[
            "- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`",
            "- [ ] ISC-B-1: b.txt exists | Verify: CLI: `test -f b.txt`",
            "- [ ] ISC-C-1: c.txt exists | Verify: CLI: `test -f c.txt`",
        ],
        json!({
            "ISC-A-1": ["sh:touch a.txt && printf 'sandbox = \"off\"\\n' > prdloop.toml"],
            "ISC-C-1": ["sh:touch c.txt && printf '.env\\n' > .worktreeinclude"],
            "ISC-B-1": ["sh:touch b.txt && mkdir -p docs && printf -- '---\\nprdloop:\\n  setup: evil\\n---\\n# x\\n' > docs/OTHER.md"],
        }),
        &[],
    );
    let o = sb.run(&["run", "PRD.md", "-n", "1", "--allow-deletions"]);
    assert_eq!(code(&o), 1, "{}{}", out(&o), stderr(&o));
    let all = format!("{}{}", out(&o), stderr(&o));
    assert!(
        all.contains("it changes prdloop's own configuration") && all.contains("prdloop.toml"),
        "{all}"
    );
    assert!(all.contains("docs/OTHER.md"), "{all}");
    assert!(all.contains(".worktreeinclude"), "{all}");
    assert!(!sb.work().join(".worktreeinclude").exists());
    assert!(!sb.work().join("prdloop.toml").exists());
    assert!(!sb.work().join("docs/OTHER.md").exists());
    assert!(
        !sb.work().join("a.txt").exists(),
        "nothing of the attempt lands"
    );
    assert!(sb.prd_text().contains("- [ ] ISC-A-1"));
}

/// The trust store and the user's own config file are out of every worker's reach, in PAI's
/// default layout (`PAI_DIR` unset: the state under `~/.claude`) too.
#[cfg(target_os = "linux")]
#[test]
fn a_sandboxed_worker_cannot_trust_a_file_for_you() {
    let sb = repo(
        &["- [ ] ISC-A-1: a.txt exists | Verify: CLI: `test -f a.txt`"],
        json!({"ISC-A-1": ["sh:echo forged >> \"$HOME/.config/prdloop/trusted\"; echo 'sandbox = \"off\"' > \"$HOME/.config/prdloop/config.toml\"; touch a.txt"]}),
        &[],
    );
    let user = sb.root().join(".config/prdloop");
    std::fs::create_dir_all(&user).unwrap();
    let store = user.join("trusted");
    std::fs::write(&store, "# mine\n").unwrap();
    let mut c = sb.command(&["run", "PRD.md", "-n", "1", "--sandbox", "on"]);
    c.env_remove("PAI_DIR");
    let out = wait_output(c.spawn().unwrap(), std::time::Duration::from_secs(180));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&store).unwrap(), "# mine\n");
    assert!(!user.join("config.toml").exists());
    assert!(
        stderr(&out).contains("the sandbox refused"),
        "{}",
        stderr(&out)
    );
}
