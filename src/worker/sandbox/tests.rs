use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::*;
use crate::worker::network::Reach;

fn rules() -> Rules {
    let home = home_writable(&|_| None, Path::new("/home/u"));
    let also: Vec<PathBuf> = home
        .into_iter()
        .chain([PathBuf::from("/opt/extra")])
        .collect();
    Rules::for_worker(Path::new("/lanes/1"), &also)
        .with(Path::new("/tmp/prdloop-w1"))
        .hiding(&[PathBuf::from("/home/u/.ssh")], Vec::new())
}

#[test]
fn rules_that_limit_the_network_without_a_proxy_port_allow_no_tcp() {
    let r = rules().reaching(Reach::Hosts(Vec::new()));
    let mut it = r.to_args().into_iter().peekable();
    let back = Rules::take_args(&mut it).unwrap().unwrap();
    assert_eq!(back.connect, Some(Vec::new()));
}

#[test]
fn the_tcp_ports_cross_the_trampolines_command_line() {
    for connect in [None, Some(vec![]), Some(vec![4242, 80])] {
        let r = Rules {
            connect: connect.clone(),
            ..rules()
        };
        let mut it = r.to_args().into_iter().peekable();
        assert_eq!(Rules::take_args(&mut it), Ok(Some(r)), "{connect:?}");
    }
}

#[test]
fn rules_cross_the_trampolines_command_line_unchanged() {
    let r = rules();
    let mut args = r.to_args();
    args.push("prog".into());
    args.push("--write".into());
    let mut it = args.into_iter().peekable();
    assert_eq!(Rules::take_args(&mut it), Ok(Some(r)));
    let rest: Vec<OsString> = it.collect();
    assert_eq!(rest, vec![OsString::from("prog"), "--write".into()]);
    // No rules: nothing taken.
    let mut it = vec![OsString::from("prog")].into_iter().peekable();
    assert_eq!(Rules::take_args(&mut it), Ok(None));
    assert_eq!(it.next(), Some("prog".into()));
    // Cut short: an error, not a sandbox with fewer rules.
    let mut it = vec![OsString::from("--sandbox"), "--write".into(), "/a".into()]
        .into_iter()
        .peekable();
    assert!(Rules::take_args(&mut it).is_err());
}

#[test]
fn the_writable_set_is_the_lane_tmp_the_agents_folders_devices_and_extras() {
    let r = rules();
    for p in [
        "/lanes/1/src/a.rs",
        "/tmp/prdloop-w1/x",
        "/home/u/.config/opencode/x",
        "/home/u/.local/share/amp/x",
        "/home/u/.cache/pip",
        "/dev/null",
        "/dev/pts/3",
        "/opt/extra/f",
    ] {
        assert!(r.allows(Path::new(p)), "{p}");
    }
    for p in [
        "/lanes/10/a",
        // The agents with a private home: their real folders are not writable, nor
        // what PAI and prdloop keep there.
        "/home/u/.claude/projects/x",
        "/home/u/.claude/MEMORY/WORK/p/PRD.md",
        "/home/u/.claude/MEMORY/STATE/algorithms/s.json",
        "/home/u/.claude.json",
        "/home/u/.codex/sessions/x",
        "/home/u/.gemini/tmp/x",
        "/home/u/notes.txt",
        "/home/u/.claude.json.tmp",
        "/home/u/.config/git/config",
        "/home/u/.ssh/authorized_keys",
        "/tmp/other",
        "/work/checkout/.git/config",
    ] {
        assert!(!r.allows(Path::new(p)), "{p}");
    }
}

#[test]
fn refused_writes_are_read_from_the_output_outside_the_lane_only() {
    let r = rules();
    let mut seen = Refusals::default();
    seen.see(
        &r,
        b"sh: 1: cannot create /work/checkout/a.txt: Permission denied",
    );
    seen.see(
        &r,
        b"touch: cannot touch '/home/u/notes.txt': Permission denied",
    );
    // Inside the lane (some other cause), or no denial, or no path: not counted.
    seen.see(
        &r,
        b"sh: 1: cannot create /lanes/1/a.txt: Permission denied",
    );
    seen.see(&r, b"wrote /home/u/x.txt");
    seen.see(&r, b"Error: Permission denied (os error 13)");
    // Inside a JSON string, as claude's stream shows a tool's output.
    seen.see(
        &r,
        br#"{"type":"user","content":"cp: cannot create regular file '/etc/x': Read-only file system\n"}"#,
    );
    assert_eq!(seen.lines, 3);
    assert_eq!(
        seen.paths,
        vec!["/work/checkout/a.txt", "/home/u/notes.txt", "/etc/x"]
    );
    let w = seen.warning("ISC-A-1").unwrap().to_string();
    assert!(w.contains("3 line(s)") && w.contains("/etc/x"), "{w}");
    assert_eq!(Refusals::default().warning("ISC-A-1"), None);
}

#[test]
fn on_fails_where_there_is_no_sandbox_and_auto_says_why() {
    let none = Support::Unavailable("no Landlock".into());
    assert!(
        decide(Mode::On, &none, None)
            .unwrap_err()
            .contains("no Landlock")
    );
    let (on, notice) = decide(Mode::Auto, &none, None).unwrap();
    assert!(!on && notice.unwrap().contains("no Landlock"));
    let ll = Support::Landlock { abi: 3 };
    assert!(decide(Mode::On, &ll, None).unwrap().0);
    assert!(decide(Mode::Auto, &ll, None).unwrap().0);
    // Off says so, and where it was set.
    let open = "workers may write wherever you may, read your secrets (~/.ssh, ~/.aws, …) and your environment's credentials, and connect anywhere";
    for support in [&none, &ll] {
        let (on, line) = decide(Mode::Off, support, None).unwrap();
        assert!(!on);
        assert_eq!(line, Some(format!("sandbox: off (--sandbox off); {open}")));
    }
    let file = Some("project:/r/prdloop.toml:3");
    let (_, line) = decide(Mode::Off, &ll, file).unwrap();
    assert_eq!(
        line,
        Some(format!(
            "sandbox: off (set by project:/r/prdloop.toml:3); {open}"
        ))
    );
    let (_, line) = decide(Mode::On, &ll, Some("env:PRDLOOP_SANDBOX")).unwrap();
    assert!(line.unwrap().contains("(set by env:PRDLOOP_SANDBOX)"));
}

/// prdloop's state folder is refused where a rule holds it or lies in it, also through
/// a link; beside a rule it is fine.
#[test]
fn a_state_folder_under_a_writable_rule_is_found() {
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    let state = home.join(".claude/MEMORY/STATE/algorithms");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    let w = home_writable(&|_| None, &home);
    // PAI's default layout: nothing writable holds it any more.
    assert_eq!(overlap(&state, &w), None, "{w:?}");
    // A rule holding it, one inside it, and one through a link to `~/.claude`.
    let claude = home.join(".claude");
    assert_eq!(
        overlap(&state, std::slice::from_ref(&claude)),
        Some(&claude)
    );
    let inside = state.join("lanes");
    assert_eq!(
        overlap(&state, std::slice::from_ref(&inside)),
        Some(&inside)
    );
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&claude, &link).unwrap();
    assert_eq!(overlap(&state, std::slice::from_ref(&link)), Some(&link));
    // A state folder not made yet, under a cache: found too.
    let later = home.join(".cache/prdloop/state");
    assert_eq!(overlap(&later, &w), Some(&home.join(".cache")));
    // Beside: fine.
    let elsewhere = d.path().join("state");
    assert_eq!(overlap(&elsewhere, &w), None);
}

/// Where the environment moves an agent's folders, those are writable instead.
#[test]
fn the_agents_folders_follow_their_environment_variables() {
    let var = |k: &str| match k {
        "XDG_CONFIG_HOME" => Some("/cfg/u".into()),
        "CODEX_HOME" => Some("/state/codex".into()),
        "XDG_CACHE_HOME" => Some("/var/cache/u".into()),
        _ => None,
    };
    let w = home_writable(&var, Path::new("/home/u"));
    assert!(w.contains(&PathBuf::from("/cfg/u/opencode")), "{w:?}");
    assert!(
        !w.contains(&PathBuf::from("/home/u/.config/opencode")),
        "{w:?}"
    );
    // Codex has a private home: its real folder is not writable, wherever it is.
    assert!(!w.contains(&PathBuf::from("/state/codex")), "{w:?}");
    assert!(w.contains(&PathBuf::from("/var/cache/u")), "{w:?}");
}
