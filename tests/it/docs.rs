//! The documentation cannot drift from the program: the book's command-line reference is the
//! rendering of the clap definitions, and every `console` sample of README.md and the book
//! is run (with trycmd) and its output compared.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::{PRDLOOP, git};

/// Set to 1 to write the book's command-line reference anew instead of comparing it.
const BLESS: &str = "PRDLOOP_BLESS";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn cli_reference() {
    let path = root().join("docs/book/src/reference/cli.md");
    let want = prdloop::commands::reference::markdown();
    if std::env::var(BLESS).is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is not the rendering of the command line's definitions; write it anew with \
         `{BLESS}=1 cargo test --test it docs::cli_reference`",
        path.display()
    );
}

/// Every markdown file of the README and the book that holds a `console` sample.
fn pages_with_samples() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.path());
        for e in entries {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut pages = vec![root().join("README.md")];
    walk(&root().join("docs/book/src"), &mut pages);
    pages.retain(|p| {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .any(|l| l.trim_start() == "```console")
    });
    pages
}

/// The folder a page's samples run in: a git repository holding the bundled example
/// (`PRD.md`, `agent.sh`) at its top and the test fixtures under `tests/fixtures`, as a
/// user's repository would after the README's tour copies the example.
fn workspace(dir: &Path) {
    prdloop::bundle::copy_dir(&root().join("examples/demo"), dir).unwrap();
    prdloop::bundle::copy_dir(
        &root().join("tests/fixtures/prds"),
        &dir.join("tests/fixtures/prds"),
    )
    .unwrap();
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "the bundled example"]);
}

/// The console samples run as shown. Each page runs in a fresh copy of [`workspace`], its
/// samples in order (so a page can `run`, then `status`, then `undo`), with a private HOME
/// and PAI folder, and `claude` on PATH being the bundled demo agent (`examples/demo`),
/// which answers `--version` as Claude Code does. A sample that differs fails with a diff;
/// `TRYCMD=overwrite` writes what the program printed back into the page.
#[test]
fn console_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    let demo = root().join("examples/demo/agent.sh");
    let answers_version =
        "if [ \"${1:-}\" = --version ]; then echo '2.1.332 (Claude Code)'; exit 0; fi";
    let script = format!(
        "#!/bin/sh\n{answers_version}\nexec {} \"$@\"\n",
        demo.display()
    );
    std::fs::write(&claude, script).unwrap();
    std::fs::set_permissions(&claude, PermissionsExt::from_mode(0o755)).unwrap();
    let home = tmp.path().join("home");
    let pai = home.join(".claude");
    std::fs::create_dir_all(&pai).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let cases = trycmd::TestCases::new();
    cases
        .register_bin("prdloop", Path::new(PRDLOOP))
        .env("HOME", home.display().to_string())
        .env("PAI_DIR", pai.display().to_string())
        .env("LIFEOS_DIR", pai.display().to_string())
        .env("PROJECTS_DIR", home.join("Projects").display().to_string())
        .env(
            "XDG_CONFIG_HOME",
            home.join(".config").display().to_string(),
        )
        .env("PATH", path)
        .env("ANTHROPIC_API_KEY", "sk-ant-docs-test")
        .env("NO_COLOR", "1")
        .env("CI", "false")
        .env("GIT_CEILING_DIRECTORIES", tmp.path().display().to_string());
    cases
        .insert_var("[HOME]", home.display().to_string())
        .unwrap();
    let mut copies = Vec::new();
    for (i, page) in pages_with_samples().iter().enumerate() {
        let name = format!(
            "{i:02}-{}",
            page.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .replace('/', "-")
        );
        let copy = tmp.path().join(&name);
        std::fs::copy(page, &copy).unwrap();
        workspace(&copy.with_extension("in"));
        eprintln!("{} runs as {}", page.display(), copy.display());
        cases.case(&copy);
        copies.push((page.clone(), copy));
    }
    cases.run();
    if std::env::var("TRYCMD").is_ok_and(|v| v == "overwrite") {
        for (page, copy) in copies {
            std::fs::copy(copy, page).unwrap();
        }
    }
}

/// The flag table of the book's "Running the loop" is written by hand (its defaults and
/// meanings are prose), so its flag names and their env twins are checked against `run`'s
/// definitions: a flag renamed or an env twin changed fails here, naming the line.
#[test]
fn the_run_flag_table_names_real_flags_and_env_twins() {
    let mut root_cmd = prdloop::commands::config::documented();
    root_cmd.build();
    let run = root_cmd.find_subcommand("run").unwrap();
    let find = |long: &str| {
        run.get_arguments()
            .chain(root_cmd.get_arguments())
            .find(|a| a.get_long() == Some(long))
    };
    let page = root().join("docs/book/src/guide/run.md");
    let text = std::fs::read_to_string(&page).unwrap();
    let word = |s: &str, prefix: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .filter(|w| w.starts_with(prefix) && w.len() > prefix.len())
            .map(str::to_string)
            .collect()
    };
    let mut rows = 0;
    for (n, line) in text.lines().enumerate() {
        let cells: Vec<&str> = line.split(" | ").collect();
        if !line.starts_with("| `-") || cells.len() < 3 {
            continue;
        }
        rows += 1;
        let at = format!("{}:{}", page.display(), n + 1);
        let mut envs = Vec::new();
        for long in word(cells[0], "--") {
            let arg = find(&long[2..]).unwrap_or_else(|| panic!("{at}: `run` has no {long}"));
            envs.extend(arg.get_env().map(|e| e.to_string_lossy().into_owned()));
        }
        let mut listed = word(cells[1], "PRDLOOP_");
        listed.sort();
        envs.sort();
        assert_eq!(listed, envs, "{at}: the env twins of {}", cells[0]);
    }
    assert!(
        rows > 40,
        "{}: the flag table was not found",
        page.display()
    );
}
