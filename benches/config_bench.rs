//! What the config files add to every command's start: reading the command line once
//! without them, and with a user file, a project file (a profile among its tables) and a
//! PRD's `prdloop:` map on a PRD of 5,000 criteria: finding the keys in the clap
//! definitions, reading and checking the files, and parsing again with their settings as
//! defaults. Prints the median of several runs. Run with `cargo bench --bench config_bench`.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use clap::CommandFactory;
use prdloop::cli::Cli;
use prdloop::config_file::trust::TrustStore;
use prdloop::config_file::{Keys, Profile, Settings, Sources, trustable};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("user/prdloop")).unwrap();
    std::fs::write(
        root.join("user/prdloop/config.toml"),
        "model = \"opus\"\ntimeout = \"30m\"\nmax-cost = 20\n",
    )
    .unwrap();
    std::fs::write(
        root.join("prdloop.toml"),
        "agents = 4\nbest-of = 2\nagent-arg = [\"--a\", \"--b\"]\nverify-types = \"Test,CLI\"\n\n[profile.ci]\nprogress = \"lines\"\nmax-cost = 5\n",
    )
    .unwrap();
    let mut prd = String::from("---\nid: PRD-1\nprdloop:\n  agents: 2\n  stall: 4\n---\n\n");
    for i in 0..5_000 {
        prd.push_str(&format!("- [ ] ISC-D{}-{i}: criterion {i}\n", i % 50));
    }
    let prd_path = root.join("PRD.md");
    std::fs::write(&prd_path, &prd).unwrap();
    let sources = Sources {
        user: Some(root.join("user/prdloop/config.toml")),
        project_dir: Some(root.to_path_buf()),
        prd: Some(prd_path.clone()),
    };
    let args: Vec<OsString> = ["prdloop", "run", prd_path.to_str().unwrap(), "-n", "3"]
        .iter()
        .map(OsString::from)
        .collect();
    let profile = Profile::IfDefined("ci".into());
    // The project's file trusted, as its guarded keys (agent-arg, verify-types) apply.
    let mut trusted = TrustStore::default();
    let project = trustable(&root.join("prdloop.toml")).expect("project file");
    trusted.trust(&project.file, project.fingerprint);
    let runs = 31;
    let (mut bare, mut keys, mut load, mut again, mut total) =
        (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let t0 = Instant::now();
        Cli::command().try_get_matches_from(&args).expect("parse");
        let t1 = Instant::now();
        let k = Keys::new();
        let t2 = Instant::now();
        let settings = Settings::load(&k, &sources, &profile, &trusted).expect("load");
        let t3 = Instant::now();
        settings
            .apply(Cli::command())
            .try_get_matches_from(&args)
            .expect("parse again");
        let t4 = Instant::now();
        assert_eq!(settings.values.len(), 9);
        bare.push(t1 - t0);
        keys.push(t2 - t1);
        load.push(t3 - t2);
        again.push(t4 - t3);
        total.push(t4 - t0);
    }
    println!(
        "config_bench: user + project (with [profile.ci]) + a 5,000-criterion PRD's map, {runs} runs, medians:"
    );
    println!("  parse, no files     {:>10.2?}", median(bare));
    println!("  keys from clap      {:>10.2?}", median(keys));
    println!("  read + check files  {:>10.2?}", median(load));
    println!("  parse with them     {:>10.2?}", median(again));
    println!("  total               {:>10.2?}", median(total));
}
