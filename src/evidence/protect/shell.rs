//! What a shell command runs, as far as a reading of it can tell: the scripts it runs and
//! sources, through wrappers, `sh -c`, `make` recipes and `package.json` scripts, and whether
//! a test runner runs. A rough reading that only has to find what runs; what a file says is
//! read through `read` (the attempt's base).

/// Programs whose first argument that is not an option is a script they run.
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "node", "bun", "deno", "ruby",
    "perl", "php", "pytest", "tsx", "ts-node", "Rscript", "lua", "bats",
];

/// Shells: what they run is read on (`sh -c '…'`, a script's lines).
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh"];

/// Programs that run the program after their own options (`timeout 20 ./c.sh`).
const WRAPPERS: &[&str] = &[
    "timeout", "env", "nice", "nohup", "time", "command", "exec", "builtin", "stdbuf", "ionice",
    "chrt", "setsid", "xargs", "sudo", "doas", "unbuffer", "npx", "flock",
];

/// Test runners, and the programs whose subcommand `test` runs tests.
const TEST_RUNNERS: &[&str] = &[
    "pytest",
    "py.test",
    "jest",
    "vitest",
    "mocha",
    "ava",
    "tap",
    "bats",
    "rspec",
    "phpunit",
    "ctest",
    "tox",
    "nox",
    "nose2",
    "cargo-nextest",
];

/// How deep scripts, recipes and `sh -c` are followed.
const DEPTH: usize = 6;

/// Whether a test runner runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Runs(u8);

impl Runs {
    pub const TESTS: Runs = Runs(1);

    pub fn contains(self, other: Runs) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }
}

/// What a command was seen to run.
#[derive(Debug, Default)]
pub struct Seen {
    /// Files it runs, sources or reads its recipes from (from the workers' folder).
    pub files: Vec<String>,
    /// What a program it runs is found as before its installed self, so a new one there
    /// shadows it (from the workers' folder): for `python -m unittest`, `unittest` (the files
    /// `unittest.*` and everything under `unittest/`, [`is_module_file`]); for `npx jest`,
    /// `node_modules/jest` and `node_modules/.bin/jest`.
    pub modules: Vec<String>,
    pub runs: Runs,
}

/// Whether `path` (from the workers' folder) is a file of the module `module` (a path from
/// the same folder): `module.py`, `module.pyc`, `module.cpython-312-x86_64-linux-gnu.so`
/// beside it, or anything under `module/`.
pub fn is_module_file(module: &str, path: &str) -> bool {
    path == module
        || path.strip_prefix(module).is_some_and(|rest| {
            rest.starts_with('/') || (rest.starts_with('.') && !rest.contains('/'))
        })
}

/// What `command`, run in the workers' folder, runs.
pub fn expand(command: &str, read: &dyn Fn(&str) -> Option<String>) -> Seen {
    let mut r = Reader {
        read,
        seen: Seen::default(),
    };
    r.command(command, "", DEPTH);
    r.seen
}

struct Reader<'a> {
    read: &'a dyn Fn(&str) -> Option<String>,
    seen: Seen,
}

impl Reader<'_> {
    fn command(&mut self, text: &str, dir: &str, depth: usize) {
        if depth == 0 {
            return;
        }
        for words in simple_commands(text) {
            self.simple(&words, dir, depth);
        }
    }

    /// A file of the check's own; whether it was new.
    fn own(&mut self, path: &str, dir: &str) -> Option<String> {
        let p = join(dir, path);
        if p.is_empty() || p.starts_with('/') || p.contains('$') {
            return None;
        }
        if self.seen.files.contains(&p) {
            return None;
        }
        self.seen.files.push(p.clone());
        Some(p)
    }

    /// A script it runs or sources: its own lines are read on, when it is a shell's.
    fn script(&mut self, path: &str, dir: &str, depth: usize, shell: bool) {
        let Some(p) = self.own(path, dir) else { return };
        if !shell || depth <= 1 {
            return;
        }
        let Some(text) = (self.read)(&p) else { return };
        // Its own folder, from the folder it runs in.
        let here = path.rsplit_once('/').map_or(".", |(d, _)| d).to_string();
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('#') {
                continue;
            }
            // `"$(dirname "$0")/lib.sh"` and its kin: the script's own folder.
            let mut line = line.to_string();
            for pat in [
                "\"$(cd \"$(dirname \"$0\")\" && pwd)\"",
                "$(cd \"$(dirname \"$0\")\" && pwd)",
                "\"$(dirname \"$0\")\"",
                "$(dirname \"$0\")",
                "$(dirname $0)",
                "\"${0%/*}\"",
                "${0%/*}",
            ] {
                line = line.replace(pat, &here);
            }
            // Paths in a script are the folder it runs in's: the check's own.
            self.command(&line, dir, depth - 1);
        }
    }

    fn simple(&mut self, words: &[String], dir: &str, depth: usize) {
        let mut i = 0;
        while i < words.len() && is_assignment(&words[i]) {
            i += 1;
        }
        while let Some(program) = words.get(i) {
            let name = program.rsplit('/').next().unwrap_or(program).to_string();
            let args = &words[i + 1..];
            if WRAPPERS.contains(&name.as_str()) {
                i += 1 + wrapper_options(&name, args);
                // `npx X` runs the project's own `node_modules/.bin/X` first.
                if name == "npx"
                    && let Some(tool) = words.get(i).filter(|w| !w.contains('/'))
                {
                    self.module(&format!("node_modules/.bin/{tool}"), dir);
                    self.module(&format!("node_modules/{tool}"), dir);
                }
                continue;
            }
            match name.as_str() {
                "." | "source" => {
                    if let Some(f) = args.first() {
                        self.script(f, dir, depth, true);
                    }
                }
                "make" | "gmake" => self.make(args, dir, depth),
                "npm" | "yarn" | "pnpm" => self.npm(&name, args, dir, depth),
                "cargo" if args.iter().any(|a| a == "test" || a == "nextest") => {
                    self.tests();
                }
                "go" if args.first().is_some_and(|a| a == "test") => self.tests(),
                "bun" | "deno" if args.first().is_some_and(|a| a == "test") => self.tests(),
                n if TEST_RUNNERS.contains(&n) => {
                    self.tests();
                    if n == "bats" {
                        for a in args.iter().filter(|a| !a.starts_with('-')) {
                            self.own(a, dir);
                        }
                    }
                }
                n if INTERPRETERS.contains(&n) => {
                    // `PYTHONPATH=src python -m pytest`: src comes before the installed one.
                    let path: Vec<String> = words[..i]
                        .iter()
                        .filter_map(|w| w.strip_prefix("PYTHONPATH="))
                        .flat_map(|v| v.split(':'))
                        .filter(|d| !d.is_empty())
                        .map(str::to_string)
                        .collect();
                    self.interpreter(n, args, dir, depth, &path)
                }
                _ if program.contains('/') => self.script(program, dir, depth, true),
                _ => {}
            }
            return;
        }
    }

    /// A module a program is found as, in `dir` (see [`Seen::modules`]).
    fn module(&mut self, name: &str, dir: &str) {
        let p = join(dir, name);
        if p.is_empty() || p.starts_with('/') || p.starts_with("../") || p.contains('$') {
            return;
        }
        if !self.seen.modules.contains(&p) {
            self.seen.modules.push(p);
        }
    }

    fn tests(&mut self) {
        self.seen.runs = Runs(self.seen.runs.0 | Runs::TESTS.0);
    }

    /// `python -m unittest`, `sh -c '…'`, `bash ./c.sh`, `node check.js`. `path`: the
    /// folders `PYTHONPATH` puts first.
    fn interpreter(
        &mut self,
        name: &str,
        args: &[String],
        dir: &str,
        depth: usize,
        path: &[String],
    ) {
        if name == "pytest" {
            self.tests();
        }
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "-c" if SHELLS.contains(&name) => {
                    if let Some(text) = it.next() {
                        self.command(text, dir, depth - 1);
                    }
                    return;
                }
                "-m" => {
                    let Some(m) = it.next() else { return };
                    if matches!(
                        m.as_str(),
                        "unittest" | "pytest" | "nose2" | "tox" | "nox" | "doctest"
                    ) {
                        self.tests();
                    }
                    // Python looks for the module (its first part: `a` of `a.b`) in the
                    // folder it runs in and on PYTHONPATH before the installed one: a new
                    // `unittest.py` there is the check's own.
                    if name.starts_with("python") {
                        let top = m.split('.').next().unwrap_or(m);
                        for d in path.iter().map(String::as_str).chain([""]) {
                            let at = if d.is_empty() {
                                top.to_string()
                            } else {
                                format!("{}/{top}", d.trim_end_matches('/'))
                            };
                            self.module(&at, dir);
                        }
                    }
                    return;
                }
                "run" | "test" if matches!(name, "deno" | "bun") => {}
                o if o.starts_with('-') => {}
                script => {
                    let shell = SHELLS.contains(&name) || name == "fish";
                    self.script(script, dir, depth, shell);
                    return;
                }
            }
        }
    }

    /// `make [-C DIR] [-f FILE] [TARGET…]`: the makefile, what it includes, and the recipes of
    /// the targets (the first one by default) and of what they depend on.
    fn make(&mut self, args: &[String], dir: &str, depth: usize) {
        let mut sub = dir.to_string();
        let mut file = None;
        let mut targets = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "-C" | "--directory" => {
                    if let Some(d) = it.next() {
                        sub = join(dir, d);
                    }
                }
                "-f" | "--file" | "--makefile" => file = it.next().cloned(),
                o if o.starts_with('-') => {}
                a if is_assignment(a) => {}
                t => targets.push(t.to_string()),
            }
        }
        let names = match &file {
            Some(f) => vec![f.clone()],
            None => vec!["GNUmakefile".into(), "makefile".into(), "Makefile".into()],
        };
        let Some((path, text)) = names.iter().find_map(|n| {
            let p = join(&sub, n);
            (self.read)(&p).map(|t| (p, t))
        }) else {
            return;
        };
        let mut text = text;
        self.own(&path, "");
        // `include a.mk`, `-include b.mk`: their rules are the makefile's.
        for line in text.clone().lines() {
            let line = line.trim_start();
            let rest = ["include ", "-include ", "sinclude "]
                .iter()
                .find_map(|p| line.strip_prefix(p));
            for inc in rest.unwrap_or_default().split_whitespace() {
                if let Some(p) = self.own(inc, &sub)
                    && let Some(t) = (self.read)(&p)
                {
                    text.push('\n');
                    text.push_str(&t);
                }
            }
        }
        let rules = rules(&text);
        if targets.is_empty()
            && let Some((first, _, _)) = rules.iter().find(|(t, _, _)| !t.starts_with('.'))
        {
            targets.push(first.clone());
        }
        let mut done: Vec<String> = Vec::new();
        while let Some(t) = targets.pop() {
            if done.contains(&t) || done.len() > 32 {
                continue;
            }
            done.push(t.clone());
            for (_, deps, recipe) in rules.iter().filter(|(n, _, _)| *n == t) {
                targets.extend(deps.iter().cloned());
                for line in recipe {
                    self.command(line, &sub, depth - 1);
                }
            }
        }
    }

    /// `npm test`, `npm run X`, `yarn X`, `pnpm X`: `package.json` and the scripts it runs for
    /// X (with its `pre` and `post` scripts).
    fn npm(&mut self, tool: &str, args: &[String], dir: &str, depth: usize) {
        let words: Vec<&str> = args
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with('-'))
            .collect();
        let script = match words.as_slice() {
            ["test" | "t", ..] => "test",
            ["run" | "run-script", s, ..] => s,
            [s, ..] if tool != "npm" && !matches!(*s, "install" | "add" | "exec" | "dlx") => s,
            _ => return,
        };
        let path = join(dir, "package.json");
        let Some(text) = (self.read)(&path) else {
            return;
        };
        self.own(&path, "");
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            return;
        };
        for name in [
            format!("pre{script}"),
            script.to_string(),
            format!("post{script}"),
        ] {
            if let Some(s) = json["scripts"][&name].as_str() {
                self.command(s, dir, depth - 1);
            }
        }
    }
}

/// A makefile's rules: each target with what it depends on and its recipe's lines (their
/// `@`, `-`, `+` taken off).
fn rules(text: &str) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for line in text.lines() {
        if let Some(recipe) = line.strip_prefix('\t') {
            let r = recipe.trim_start_matches(['@', '-', '+', ' ']).to_string();
            for &i in &current {
                out[i].2.push(r.clone());
            }
            continue;
        }
        current.clear();
        let l = line.trim_end();
        if l.is_empty() || l.starts_with('#') || l.contains(":=") || l.contains("?=") {
            continue;
        }
        let Some((targets, deps)) = l.split_once(':') else {
            continue;
        };
        if targets.contains('=') || targets.trim_start().starts_with("include") {
            continue;
        }
        let (deps, inline) = match deps.split_once(';') {
            Some((d, r)) => (d, Some(r.trim().to_string())),
            None => (deps, None),
        };
        let deps: Vec<String> = deps.split_whitespace().map(String::from).collect();
        for t in targets.split_whitespace() {
            current.push(out.len());
            out.push((
                t.to_string(),
                deps.clone(),
                inline.iter().cloned().collect(),
            ));
        }
    }
    out
}

/// How many of `args` are the wrapper's own options and operands before the program it runs.
fn wrapper_options(name: &str, args: &[String]) -> usize {
    // Options that take a value as the next word.
    let valued: &[&str] = match name {
        "timeout" => &["-s", "-k", "--signal", "--kill-after"],
        "env" => &["-u", "-C", "--unset", "--chdir", "-S", "--split-string"],
        "nice" => &["-n", "--adjustment"],
        "xargs" => &["-I", "-n", "-P", "-d", "-L", "-a", "-E", "-s", "--max-args"],
        "stdbuf" | "ionice" => &["-i", "-o", "-e", "-c", "-n"],
        "sudo" => &["-u", "-g", "-C", "-D"],
        "flock" => &["-w", "-E", "-c"],
        _ => &[],
    };
    let mut n = 0;
    while let Some(a) = args.get(n) {
        if a == "--" {
            n += 1;
            break;
        }
        if valued.contains(&a.as_str()) {
            n += 2;
        } else if a.starts_with('-') || (name == "env" && is_assignment(a)) {
            n += 1;
        } else {
            break;
        }
    }
    // `timeout DURATION`, `chrt PRIORITY`, `flock FILE`: one operand before the program.
    if matches!(name, "timeout" | "chrt" | "flock") && n < args.len() {
        n += 1;
    }
    n
}

/// `NAME=value`.
fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// `path` as seen from the workers' folder, run in `dir` (from it; `""`: it).
fn join(dir: &str, path: &str) -> String {
    let mut parts: Vec<&str> = if path.starts_with('/') {
        return path.to_string();
    } else {
        dir.split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect()
    };
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return format!("../{path}");
                }
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// A shell command's simple commands as words (split on blanks and operators, quotes taken
/// off).
pub fn simple_commands(command: &str) -> Vec<Vec<String>> {
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
            (None, ';' | '|' | '&' | '(' | ')' | '\n') | (None, '{' | '}' | '!')
                if cur.is_empty() || !matches!(ch, '{' | '}' | '!') =>
            {
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
    // `if`, `then`, `do`, … start commands of their own.
    all.into_iter()
        .map(|w| {
            let skip = w
                .iter()
                .take_while(|x| {
                    matches!(
                        x.as_str(),
                        "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "!" | "{"
                    )
                })
                .count();
            w[skip..].to_vec()
        })
        .filter(|w| !w.is_empty())
        .collect()
}
