//! Tells prdloop's own end-to-end tests which real tools this build can run them with, so that
//! a test whose tool is missing is reported as ignored (`N ignored` in cargo's summary, with
//! the reason and how to install it), never as passed. Under CI (`CI=true`) they always run:
//! there a missing tool fails them.

/// The variable naming each tool, and the `cfg` its tests are built with when it is there.
const TOOLS: &[(&str, &str)] = &[
    ("PRDLOOP_E2E_CLAUDE", "e2e_claude"),
    ("PRDLOOP_E2E_CODEX", "e2e_codex"),
    ("PRDLOOP_E2E_GEMINI", "e2e_gemini"),
    ("PRDLOOP_CHROMIUM", "e2e_chromium"),
];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=PATH");
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    for (var, cfg) in TOOLS {
        println!("cargo::rerun-if-env-changed={var}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        let set = std::env::var_os(var).is_some_and(|v| !v.is_empty());
        // The browser test also finds `chromium` on PATH.
        let found = *cfg == "e2e_chromium" && on_path("chromium");
        if ci || set || found {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
