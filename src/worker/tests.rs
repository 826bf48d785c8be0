use super::*;

fn spec(program: &str, cwd: &std::path::Path) -> Spec {
    Spec {
        program: program.into(),
        args: vec![],
        cwd: cwd.to_path_buf(),
        env: vec![],
        env_remove: vec![],
        stdin: Vec::new(),
        log_path: cwd.join("w.log"),
        timeout: Duration::from_secs(60),
        kill_grace: Duration::from_secs(1),
        format: OutputFormat::Text,
        sandbox: None,
        stuck: stuck::StuckAfter::OFF,
    }
}

/// Behind the trampoline a program is looked for before spawning, and what cannot be
/// found fails with the error a direct spawn gives.
#[test]
fn locate_finds_what_a_direct_spawn_finds() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("plain"), "").unwrap();
    for program in [
        "sh",
        "/bin/sh",
        "./plain",
        "/nonexistent/agent",
        "no-such-agent-x1",
    ] {
        let direct = std::process::Command::new(program)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .arg("-c")
            .arg("true")
            .status();
        let found = locate(&spec(program, dir.path()));
        match direct {
            Ok(_) => assert!(found.is_ok(), "{program}: {found:?}"),
            Err(e) => assert_eq!(
                found.map_err(|f| f.to_string()),
                Err(e.to_string()),
                "{program}"
            ),
        }
    }
    // The worker's own PATH is searched, not prdloop's.
    let mut s = spec("sh", dir.path());
    s.env
        .push(("PATH".into(), dir.path().display().to_string()));
    assert!(locate(&s).is_err());
}

/// A process in a new session holding both pipes, or only one, that dropped the worker's
/// token (so it is not found and ended with the worker): the reader is given up on after
/// the drain window, and everything read (stdout's text with its last, unterminated line,
/// stderr's tail, the byte counts) still makes the outcome.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn what_was_read_survives_a_holder_in_another_session() {
    for holds in ["", ">/dev/null", "2>/dev/null"] {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("holder.pid");
        let script = format!(
            "env -u {} setsid sleep 30 {holds} & echo $! > '{}'; \
                 until [ \"$(cut -d' ' -f6 /proc/$!/stat)\" = $! ]; do sleep 0.01; done; \
                 printf 'out line\\nlast'; echo 'err line' >&2",
            crate::env::WORKER_TOKEN,
            pid_file.display()
        );
        let mut spec = spec("sh", dir.path());
        spec.args = vec!["-c".into(), script];
        let (_tx, rx) = watch::channel(Cancel::None);
        let f = start(spec).unwrap().wait(rx).await;
        let holder: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let held = unix::is_alive(holder);
        unix::kill_pid(holder);
        assert!(held, "{holds}: the holder outlived the worker");
        assert_eq!(f.exit, Exit::Code { code: 0 }, "{holds}");
        assert_eq!(
            f.outcome.final_text.as_deref().map(str::trim_end),
            Some("out line\nlast"),
            "{holds}"
        );
        assert_eq!(f.stderr_tail, "err line\n", "{holds}");
        assert_eq!(f.output_bytes, 13 + 9, "{holds}");
        // A safety limit, not a speed assertion: far below the holder's 30 s.
        assert!(
            f.duration < Duration::from_secs(20),
            "{holds}: {:?}",
            f.duration
        );
    }
}

/// The stuck watch reads tool calls: a worker whose output has none (plain text) runs
/// past `--stuck-after`'s time, while a stream-json one making none is ended as stuck.
#[tokio::test]
async fn only_output_with_tool_calls_can_be_stuck() {
    let dir = tempfile::tempdir().unwrap();
    for (format, stuck) in [
        (OutputFormat::Text, false),
        (OutputFormat::StreamJson, true),
    ] {
        let mut spec = spec("sh", dir.path());
        spec.args = vec!["-c".into(), "sleep 2; echo done".into()];
        spec.format = format;
        spec.kill_grace = Duration::from_millis(200);
        spec.stuck = stuck::StuckAfter::parse("500ms").unwrap();
        let (_tx, rx) = watch::channel(Cancel::None);
        let f = start(spec).unwrap().wait(rx).await;
        assert_eq!(
            matches!(f.exit, Exit::Stuck(_)),
            stuck,
            "{format:?}: {:?}",
            f.exit
        );
    }
}

/// Processes a worker detached (a new session, out of reach of its group kill, one of them
/// ignoring SIGTERM) carry its token and are ended when it ends.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn what_a_worker_detaches_ends_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = "setsid sleep 300 >/dev/null 2>&1 & echo $! > a.pid; \
             setsid sh -c 'trap \"\" TERM; sleep 300' >/dev/null 2>&1 & echo $! > b.pid; \
             for p in $(cat a.pid) $(cat b.pid); do \
               until [ \"$(cut -d' ' -f6 /proc/$p/stat)\" = $p ]; do sleep 0.01; done; \
             done";
    let mut spec = spec("sh", dir.path());
    spec.args = vec!["-c".into(), script.into()];
    spec.kill_grace = Duration::from_millis(300);
    let (_tx, rx) = watch::channel(Cancel::None);
    let f = start(spec).unwrap().wait(rx).await;
    assert_eq!(f.exit, Exit::Code { code: 0 });
    for name in ["a.pid", "b.pid"] {
        let pid: u32 = std::fs::read_to_string(dir.path().join(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let alive = unix::is_alive(pid);
        unix::kill_pid(pid);
        assert!(!alive, "{name}: {pid} outlived its worker");
    }
}
