//! prdloop: run parallel coding agents against a PRD's criteria until they pass.
//!
//! The library holds everything; `main.rs` only maps [`main`]'s result to the process exit
//! code. See `README.md` for the user's view and the module docs for the parts.

pub mod backend;
pub mod bundle;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod config;
pub mod config_file;
pub mod env;
pub mod evidence;
pub mod exit;
pub mod fsutil;
pub mod graph;
pub mod isolation;
pub mod notify;
pub mod plan;
pub mod platform;
pub mod prd;
pub mod questions;
pub mod report;
pub mod request;
pub mod run;
pub mod serve;
pub mod shard;
pub mod state;
pub mod text;
pub mod verify;
pub mod worker;

use crate::exit::Exit;
use std::process::ExitCode;

use cli::{Cli, Command};

/// Parses the arguments, runs the command, and returns the exit code.
pub fn main() -> ExitCode {
    // A child being started through the exec trampoline (before anything else, and hidden
    // from the command line's parser and help).
    if let Some(code) = worker::trampoline::run_if_asked() {
        return code;
    }
    worker::trampoline::enable();
    // Processes the workers detach are re-parented to prdloop, which ends them.
    worker::reaper::adopt_orphans();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Before parsing, for clap's own errors and help; set again from the parsed arguments.
    report::set_color(
        cli::color_asked(
            args.get(1..).unwrap_or_default(),
            std::env::var_os(env::COLOR).as_deref(),
        )
        .choice(),
    );
    let parsed = match config_file::parse(&args) {
        Ok(p) => p,
        Err(config_file::Failure::Config(e)) => {
            report::error(format!("{e:#}"));
            let given = args.get(1..).unwrap_or_default();
            if cli::wants_json_run(given, std::env::var_os(env::JSON).as_deref()) {
                commands::run::end_event("error", exit::code_of(&e), &format!("{e:#}"), None);
            }
            return ExitCode::from(exit::code_of(&e));
        }
        Err(config_file::Failure::Clap(e)) => {
            if !e.use_stderr() {
                // Help and version.
                let _ = e.print();
                return ExitCode::from(exit::Exit::Success);
            }
            let given = args.get(1..).unwrap_or_default();
            // PAI's form with the PRD but no `-p`: clap would call the PRD a subcommand.
            let hint = cli::pai_form_hint(given);
            match &hint {
                Some(hint) => report::error(hint),
                None => {
                    let _ = e.print();
                }
            }
            // A script asking for JSON events gets its `end` event.
            if cli::wants_json_run(given, std::env::var_os(env::JSON).as_deref()) {
                let message = hint.unwrap_or_else(|| {
                    let text = e.to_string();
                    let first = text.lines().next().unwrap_or_default();
                    first.strip_prefix("error: ").unwrap_or(first).to_string()
                });
                commands::run::end_event("error", exit::Exit::Usage, &message, None);
            }
            return ExitCode::from(exit::Exit::Usage);
        }
    };
    let cli = parsed.cli;
    report::set_color(cli.global.color.choice());
    init_logging(cli.global.verbose);
    let code = match dispatch(cli, &parsed.settings, &parsed.again) {
        Ok(code) => code,
        Err(e) => {
            report::error(format!("{e:#}"));
            exit::code_of(&e)
        }
    };
    ExitCode::from(code)
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = std::env::var(env::PRDLOOP_LOG)
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(format!("prdloop={default}")));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(report::stderr_color())
        .with_target(false)
        .without_time()
        .try_init();
}

/// Whether a command needs PAI's folders (`$PAI_DIR`, `$PROJECTS_DIR`), and if not, what of
/// its arguments makes them unnecessary (for the message when they are unknown).
fn needs_pai(cli: &Cli) -> (bool, &'static str) {
    use config::is_prd_path as is_path;
    const STATE_AND_PATH: &str = "give --state-dir and the PRD's path";
    match &cli.command {
        Some(Command::Run { prds, opts }) => (
            !(prds.iter().all(|p| is_path(p)) && opts.exec.state_dir.is_some()),
            STATE_AND_PATH,
        ),
        Some(Command::Resume { prd, opts }) => (
            !(is_path(prd) && opts.exec.state_dir.is_some()),
            STATE_AND_PATH,
        ),
        Some(Command::Plan { prd, .. }) | Some(Command::Interactive { prd, .. }) => {
            (!is_path(prd), "give the PRD's path")
        }
        Some(Command::Verify { prd, exec, .. })
        | Some(Command::Merge { prd, exec, .. })
        | Some(Command::Audit { prd, exec, .. }) => {
            (!(is_path(prd) && exec.state_dir.is_some()), STATE_AND_PATH)
        }
        Some(Command::Doctor { .. })
        | Some(Command::Clean { .. })
        | Some(Command::Undo { .. })
        | Some(Command::Config { .. })
        | Some(Command::Completions { .. })
        | Some(Command::Man { .. }) => (false, ""),
        Some(Command::Logs { prd, state_dir, .. }) => {
            (!(is_path(prd) && state_dir.is_some()), STATE_AND_PATH)
        }
        Some(Command::Status {
            prds, state_dir, ..
        }) => (
            prds.is_empty() || !prds.iter().all(|p| is_path(p)) || state_dir.is_none(),
            "give --state-dir and the PRDs' paths",
        ),
        Some(Command::New { dir, .. }) => (dir.is_none(), "give the folder with -p"),
        Some(Command::Serve { state_dirs, .. }) => (state_dirs.is_empty(), "give --state-dir"),
        Some(Command::Pause(args)) | Some(Command::Stop(args)) => (
            !(is_path(args.prd()) && args.state_dir.is_some()),
            STATE_AND_PATH,
        ),
        Some(Command::Answer { prd, state_dir, .. }) => {
            (!(is_path(prd) && state_dir.is_some()), STATE_AND_PATH)
        }
        None => match (cli.mode, cli.prd.as_deref()) {
            (Some(cli::Mode::Loop), Some(prd)) => (
                !(is_path(prd) && cli.run.exec.state_dir.is_some()),
                STATE_AND_PATH,
            ),
            (Some(cli::Mode::Interactive), Some(prd)) => (!is_path(prd), "give the PRD's path"),
            _ => (false, ""),
        },
    }
}

fn dispatch(
    cli: Cli,
    settings: &config_file::Settings,
    again: &config_file::Reparse,
) -> anyhow::Result<Exit> {
    let (needed, instead) = needs_pai(&cli);
    let locations = config::locations_for(needed, instead);
    match cli.command {
        // `run` and `resume` take the result: with `--json` their failures get an `end` event.
        Some(Command::Run { prds, opts }) => match &prds[..] {
            [prd] if !opts.with_children => commands::run::run(prd, &opts, locations),
            _ if opts.shard.shard.is_some() => {
                report::error(
                    "--shard works on one PRD: run each PRD's shards as their own jobs (without --with-children)",
                );
                Ok(exit::Exit::Usage)
            }
            _ => commands::multi::run(&prds, &opts, locations, &|prd| again.run_opts_for(prd)),
        },
        Some(Command::Plan {
            prd,
            agents,
            worker,
            workdir,
            verify_types,
            json,
            shards,
            state_dir,
        }) => {
            let loc = locations?;
            let path = prd::lookup::resolve(&prd, &loc)?;
            let (n, w) = config::clamp_agents(agents.or(1));
            if let Some(w) = w {
                report::warn(w);
            }
            let settings = commands::plan::Settings {
                agents: n,
                agent: {
                    let (agent, warnings) = config::agent_options(&worker)?;
                    warnings.into_iter().for_each(report::warn);
                    agent
                },
                workdir: config::workdir(&path, workdir.as_deref())?,
                verify_types: verify_types.get(),
                json,
                shards: shards.map(usize::from),
                state_dir: config::state_dir(state_dir.as_deref(), &loc)?,
            };
            commands::plan::plan(&path, &settings)
        }
        Some(Command::Logs {
            prd,
            criterion,
            attempt,
            follow,
            raw,
            state_dir,
        }) => {
            let loc = locations?;
            let settings = commands::logs::Settings {
                criterion,
                attempt,
                follow,
                raw,
                state_dir: config::state_dir(state_dir.as_deref(), &loc)?,
            };
            commands::logs::logs(&prd, &settings, &loc)
        }
        Some(Command::Clean {
            dir,
            all,
            force,
            json,
        }) => commands::clean::clean(&dir, all, force, json),
        Some(Command::Audit { prd, exec, json }) => {
            commands::audit::audit(&prd, &exec, json, &locations?)
        }
        Some(Command::Undo {
            prd,
            to,
            all,
            list,
            json,
        }) => {
            let settings = commands::undo::Settings {
                prd,
                count: if all {
                    commands::undo::Count::All
                } else {
                    commands::undo::Count::Newest(to.unwrap_or(1) as usize)
                },
                list,
                json,
            };
            commands::undo::undo(std::path::Path::new("."), &settings)
        }
        Some(Command::Status {
            prds,
            state_dir,
            json,
        }) => commands::status::status(&prds, state_dir.as_deref(), &locations?, json),
        Some(Command::Verify {
            prd,
            agents,
            exec,
            dry_run,
            no_write,
            json,
        }) => {
            let mode = match (dry_run, no_write) {
                (true, _) => commands::verify::Mode::DryRun,
                (_, true) => commands::verify::Mode::NoWrite,
                _ => commands::verify::Mode::Write,
            };
            commands::verify::verify(&prd, agents.or(1), &exec, mode, json, &locations?)
        }
        Some(Command::New {
            title,
            effort,
            dir,
            format,
        }) => commands::new::new(&title, &effort, dir.as_deref(), format, &locations?),
        Some(Command::Serve {
            port,
            open,
            state_dirs,
        }) => {
            let state_dirs = if state_dirs.is_empty() {
                let loc = locations?;
                let mut dirs = vec![config::state_dir(None, &loc)?];
                if let Some(d) = std::env::var_os(env::LIFEOS_DIR).filter(|d| !d.is_empty()) {
                    dirs.push(std::path::PathBuf::from(d).join("MEMORY/STATE/algorithms"));
                }
                dirs
            } else {
                state_dirs
                    .iter()
                    .map(std::path::absolute)
                    .collect::<std::io::Result<_>>()?
            };
            serve::serve(
                serve::Options {
                    state_dirs,
                    port: port.unwrap_or(0),
                },
                open,
            )
        }
        Some(Command::Answer {
            prd,
            id,
            text,
            state_dir,
            json,
        }) => commands::answer::answer(
            &prd,
            id.as_deref(),
            text.as_deref(),
            state_dir.as_deref(),
            json,
            &locations?,
        ),
        Some(Command::Pause(args)) => {
            commands::control::request(&args, commands::control::Ask::Pause, &locations?)
        }
        Some(Command::Stop(args)) => {
            commands::control::request(&args, commands::control::Ask::Stop, &locations?)
        }
        Some(Command::Merge {
            prd,
            bundles,
            agents,
            exec,
            json,
            max_bundle_size,
        }) => commands::merge::merge(
            &prd,
            &bundles,
            agents.or(1),
            &exec,
            json,
            &crate::bundle::Limits {
                size: max_bundle_size,
            },
            &locations?,
        ),
        Some(Command::Resume { prd, opts }) => commands::run::resume(&prd, &opts, locations),
        Some(Command::Doctor { worker }) => commands::doctor::doctor(&worker),
        Some(Command::Config { show_origin, .. }) => commands::config::show(settings, show_origin),
        Some(Command::Completions { shell }) => commands::config::completions(shell),
        Some(Command::Man { dir }) => commands::config::write_man_pages(&dir),
        Some(Command::Interactive {
            prd,
            claude_bin,
            workdir,
        }) => {
            commands::interactive::interactive(&prd, &claude_bin, workdir.as_deref(), &locations?)
        }
        None => match (cli.mode, cli.prd) {
            (Some(cli::Mode::Loop), Some(prd)) => commands::run::run(&prd, &cli.run, locations),
            (Some(cli::Mode::Interactive), Some(prd)) => commands::interactive::interactive(
                &prd,
                &cli.run.worker.claude_bin,
                cli.run.exec.workdir.as_deref(),
                &locations?,
            ),
            _ => {
                use clap::CommandFactory;
                let _ = Cli::command().print_help();
                Ok(exit::Exit::Usage)
            }
        },
    }
}
