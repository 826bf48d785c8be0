//! prdloop: run parallel coding agents against a PRD's criteria until they pass.
//!
//! The library holds everything; `main.rs` only maps [`main`]'s result to the process exit
//! code. See `README.md` for the user's view and the module docs for the parts.

pub mod backend;
pub mod cli;
pub mod commands;
pub mod config;
pub mod env;
pub mod exit;
pub mod fsutil;
pub mod notify;
pub mod plan;
pub mod platform;
pub mod prd;
pub mod report;
pub mod run;
pub mod state;
pub mod text;
pub mod verify;
pub mod worker;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

/// Parses the arguments, runs the command, and returns the exit code.
pub fn main() -> ExitCode {
    // A child being started through the exec trampoline (before anything else, and hidden
    // from the command line's parser and help).
    if let Some(code) = worker::trampoline::run_if_asked() {
        return code;
    }
    worker::trampoline::enable();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version with 0 and usage errors with 2.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            });
        }
    };
    init_logging(cli.global.verbose);
    let code = match dispatch(cli) {
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

fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    let loc = config::locations();
    match cli.command {
        Some(Command::Run { prd, opts }) => commands::run::run(&prd, &opts, &loc),
        Some(Command::Plan {
            prd,
            agents,
            worker,
            workdir,
            verify_types,
            json,
        }) => {
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
            };
            commands::plan::plan(&path, &settings)
        }
        Some(Command::Status {
            prds,
            state_dir,
            json,
        }) => commands::status::status(&prds, state_dir.as_deref(), &loc, json),
        Some(Command::Verify {
            prd,
            agents,
            exec,
            dry_run,
            json,
        }) => commands::verify::verify(&prd, agents.or(1), &exec, dry_run, json, &loc),
        Some(Command::New {
            title,
            effort,
            dir,
            format,
        }) => commands::new::new(&title, &effort, dir.as_deref(), format, &loc),
        Some(Command::Pause(args)) => {
            commands::control::request(&args, commands::control::Ask::Pause, &loc)
        }
        Some(Command::Stop(args)) => {
            commands::control::request(&args, commands::control::Ask::Stop, &loc)
        }
        Some(Command::Resume { prd, opts }) => commands::run::resume(&prd, &opts, &loc),
        Some(Command::Doctor { worker }) => commands::doctor::doctor(&worker),
        Some(Command::Interactive {
            prd,
            claude_bin,
            workdir,
        }) => commands::interactive::interactive(&prd, &claude_bin, workdir.as_deref(), &loc),
        None => match (cli.mode, cli.prd) {
            (Some(cli::Mode::Loop), Some(prd)) => commands::run::run(&prd, &cli.run, &loc),
            (Some(cli::Mode::Interactive), Some(prd)) => commands::interactive::interactive(
                &prd,
                &cli.run.worker.claude_bin,
                cli.run.exec.workdir.as_deref(),
                &loc,
            ),
            _ => {
                use clap::CommandFactory;
                let _ = Cli::command().print_help();
                Ok(exit::USAGE)
            }
        },
    }
}
