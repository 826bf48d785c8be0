//! A check can be gamed by the attempt it checks: a worker that edits the test script its
//! Verify command runs makes the command pass without the work. The files a command runs
//! (`./verify.sh`, `bash tests/check.sh`, `python tests/test_api.py`, `node check.js`) are
//! protected: an attempt that changes one of them is not `checked` by that command. Files a
//! command only reads (`grep -q x site/index.html`) are the work itself and are not.

/// Programs whose first argument that is not an option is a script they run.
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "node", "bun", "deno", "ruby",
    "perl", "php", "pytest", "tsx", "ts-node", "Rscript", "lua",
];

/// The files `command` runs that `changed` (the attempt's changed paths, from the top of the
/// repository; `rel`: the workers' folder from the top) holds.
pub fn touched_by(command: &str, changed: &[String], rel: &str) -> Vec<String> {
    let mut hit = Vec::new();
    for script in scripts(command) {
        let w = script.trim_start_matches("./");
        let from_top = if rel.is_empty() {
            w.to_string()
        } else {
            format!("{}/{w}", rel.trim_end_matches('/'))
        };
        if changed.contains(&from_top) && !hit.contains(&from_top) {
            hit.push(from_top);
        }
    }
    hit
}

/// The scripts a shell command runs: each simple command's program when it is a path, and
/// an interpreter's script.
fn scripts(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    for simple in simple_commands(command) {
        let mut words = simple
            .iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'));
        let Some(program) = words.next() else {
            continue;
        };
        let name = program.rsplit('/').next().unwrap_or(program);
        if INTERPRETERS.contains(&name) {
            let mut args = words.filter(|w| !w.starts_with('-'));
            let first = args.next();
            // `deno run x.ts`, `bun run x.ts`, `python -m module` (no file).
            let script = match first.map(String::as_str) {
                Some("run" | "test") if matches!(name, "deno" | "bun") => args.next(),
                _ => first,
            };
            if let Some(s) = script {
                out.push(s.clone());
            }
        } else if program.contains('/') {
            out.push(program.clone());
        }
    }
    out
}

/// A shell command's simple commands as words (split on blanks and operators, quotes taken
/// off: a rough split that only has to find what runs).
fn simple_commands(command: &str) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let flush = |cur: &mut String, words: &mut Vec<String>| {
        if !cur.is_empty() {
            words.push(std::mem::take(cur));
        }
    };
    for ch in command.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => quote = Some(ch),
            (None, ';' | '|' | '&' | '(' | ')' | '\n') => {
                flush(&mut cur, &mut words);
                if !words.is_empty() {
                    all.push(std::mem::take(&mut words));
                }
            }
            (None, c) if c.is_whitespace() => flush(&mut cur, &mut words),
            (None, c) => cur.push(c),
        }
    }
    flush(&mut cur, &mut words);
    if !words.is_empty() {
        all.push(words);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_a_command_runs_are_found_among_the_changed() {
        let changed = vec![
            "tests/check.sh".to_string(),
            "site/index.html".to_string(),
            "check.py".to_string(),
        ];
        let t = |cmd: &str| touched_by(cmd, &changed, "");
        assert_eq!(t("bash tests/check.sh"), vec!["tests/check.sh"]);
        assert_eq!(t("./tests/check.sh && echo ok"), vec!["tests/check.sh"]);
        assert_eq!(
            t("CI=1 sh -e 'tests/check.sh' --fast"),
            vec!["tests/check.sh"]
        );
        assert_eq!(t("test -f x || python3 check.py"), vec!["check.py"]);
        // What a command reads is the work, not the check.
        assert!(t("grep -q '<title>' site/index.html").is_empty());
        assert!(t("cargo test").is_empty());
        assert!(t("python -m pytest").is_empty());
        // The workers' folder is a subfolder of the repository.
        let changed = vec!["app/verify.sh".to_string()];
        assert_eq!(
            touched_by("./verify.sh", &changed, "app"),
            vec!["app/verify.sh"]
        );
        assert!(touched_by("./verify.sh", &changed, "").is_empty());
    }
}
