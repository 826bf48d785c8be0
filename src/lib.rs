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
pub mod given;
pub mod graph;
pub mod isolation;
pub mod mcp;
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
pub mod tracker;
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
    // `config` shows them in its output; `trust` is how to act on them.
    if !matches!(
        cli.command,
        Some(
            Command::Config { .. }
                | Command::Completions { .. }
                | Command::Man { .. }
                | Command::Trust(_)
        )
    ) {
        for w in parsed.settings.ignored_warnings() {
            report::warn(w);
        }
    }
    let code = match dispatch(cli, &parsed.settings, &parsed.again) {
        Ok(code) => code,
        Err(e) => {
            report::error(format!("{e:#}"));
            exit::code_of(&e)
        }
    };
    ExitCode::from(code)
}

/// What `prdloop` alone says: how to start, and the commands by name.
fn short_usage() -> String {
    use clap::CommandFactory;
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    format!(
        "a command is needed: `prdloop run PRD.md` runs the loop on a PRD\n\n\
         Usage: prdloop <COMMAND> [OPTIONS]\n\
         Commands: {}\n\n\
         `prdloop --help` says what each does; `prdloop <COMMAND> --help` lists its options",
        names.join(", ")
    )
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
        Some(Command::Plan(cli::PlanArgs { prd, .. }))
        | Some(Command::Interactive(cli::InteractiveArgs { prd, .. })) => {
            (!is_path(prd), "give the PRD's path")
        }
        Some(Command::Verify(cli::VerifyArgs { prd, exec, .. }))
        | Some(Command::Merge(cli::MergeArgs { prd, exec, .. }))
        | Some(Command::Audit(cli::AuditArgs { prd, exec, .. })) => {
            (!(is_path(prd) && exec.state_dir.is_some()), STATE_AND_PATH)
        }
        Some(Command::Doctor(_))
        | Some(Command::Import(_))
        | Some(Command::Trust(_))
        | Some(Command::Clean(_))
        | Some(Command::Undo(_))
        | Some(Command::Config { .. })
        | Some(Command::Completions { .. })
        | Some(Command::Man { .. })
        | Some(Command::Mcp) => (false, ""),
        Some(Command::Logs(cli::LogsArgs { prd, state_dir, .. })) => {
            (!(is_path(prd) && state_dir.is_some()), STATE_AND_PATH)
        }
        Some(Command::Status(cli::StatusArgs {
            prds, state_dir, ..
        })) => (
            prds.is_empty() || !prds.iter().all(|p| is_path(p)) || state_dir.is_none(),
            "give --state-dir and the PRDs' paths",
        ),
        Some(Command::New(cli::NewArgs { dir, .. })) => (dir.is_none(), "give the folder with -p"),
        Some(Command::Serve(cli::ServeArgs { state_dirs, .. })) => {
            (state_dirs.is_empty(), "give --state-dir")
        }
        Some(Command::Pause(args)) | Some(Command::Stop(args)) => (
            !(is_path(args.prd()) && args.state_dir.is_some()),
            STATE_AND_PATH,
        ),
        Some(Command::Answer(cli::AnswerArgs { prd, state_dir, .. })) => {
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
    let start = Start {
        settings,
        again,
        sandbox_set_by: settings
            .origins
            .get("sandbox")
            .and_then(config_file::Origin::named),
    };
    match cli.command {
        // `run` and `resume` take the result: with `--json` their failures get an `end` event.
        Some(Command::Run { prds, opts }) => start.run(&prds, &opts, locations),
        Some(Command::Resume { prd, opts }) => start.resume(&prd, &opts, locations),
        Some(Command::Plan(a)) => {
            commands::plan::plan(&warned(config::PlanSettings::new(&a, &locations?)?))
        }
        Some(Command::Logs(a)) => {
            commands::logs::logs(&config::LogsSettings::new(&a, &locations?)?)
        }
        Some(Command::Clean(a)) => commands::clean::clean(&config::CleanSettings::new(&a)),
        Some(Command::Audit(a)) => {
            commands::audit::audit(&config::AuditSettings::new(&a, &locations?)?)
        }
        Some(Command::Undo(a)) => {
            commands::undo::undo(std::path::Path::new("."), &config::UndoSettings::new(&a))
        }
        Some(Command::Status(a)) => {
            commands::status::status(&config::StatusSettings::new(&a, &locations?)?)
        }
        Some(Command::Verify(a)) => {
            commands::verify::verify(&warned(config::VerifySettings::new(&a, &locations?)?))
        }
        Some(Command::New(a)) => commands::new::new(&config::NewSettings::new(&a, &locations?)),
        Some(Command::Import(a)) => commands::import::import(&a),
        Some(Command::Serve(a)) => {
            let s = config::ServeSettings::new(&a, || locations)?;
            serve::serve(s.options, s.open)
        }
        Some(Command::Answer(a)) => {
            commands::answer::answer(&config::AnswerSettings::new(&a, &locations?)?)
        }
        Some(Command::Pause(a)) => commands::control::request(&config::ControlSettings::new(
            &a,
            request::Ask::Pause,
            &locations?,
        )?),
        Some(Command::Stop(a)) => commands::control::request(&config::ControlSettings::new(
            &a,
            request::Ask::Stop,
            &locations?,
        )?),
        Some(Command::Merge(a)) => {
            commands::merge::merge(&warned(config::MergeSettings::new(&a, &locations?)?))
        }
        Some(Command::Doctor(a)) => commands::doctor::doctor(&config::DoctorSettings::new(&a)?),
        Some(Command::Trust(a)) => commands::trust::trust(&a),
        Some(Command::Config { show_origin, .. }) => commands::config::show(settings, show_origin),
        Some(Command::Completions { shell }) => commands::config::completions(shell),
        Some(Command::Man { dir }) => commands::config::write_man_pages(&dir),
        Some(Command::Mcp) => mcp::serve(mcp::Globals {
            profile: cli.global.profile.clone(),
            verbose: cli.global.verbose,
        }),
        Some(Command::Interactive(a)) => {
            commands::interactive::interactive(&config::InteractiveSettings::of(&a, &locations?)?)
        }
        None => start.mode(cli.mode, cli.prd, &cli.run, locations),
    }
}

/// A command's settings, once the warnings making them had are said.
fn warned<S>((settings, warnings): (S, Vec<config::Warning>)) -> S {
    warnings.into_iter().for_each(report::warn);
    settings
}

/// What the commands that run a loop start from besides their options: the config files'
/// settings, and how to read them again for another PRD or a resumed session.
struct Start<'a> {
    settings: &'a config_file::Settings,
    again: &'a config_file::Reparse,
    /// Where `--sandbox` was set, for the run's sandbox line.
    sandbox_set_by: Option<String>,
}

impl Start<'_> {
    /// A run's settings: its options, with what the config files give.
    fn run_settings(&self, opts: &cli::RunOpts) -> config::RunSettings {
        config::RunSettings::new(opts)
            .with_sandbox_set_by(self.sandbox_set_by.clone())
            .with_given(self.settings.given.clone())
    }

    /// `run`: one PRD (as a pull request with `--pr`), or several as sub-loops.
    fn run(
        &self,
        prds: &[String],
        opts: &cli::RunOpts,
        locations: anyhow::Result<prd::lookup::Locations>,
    ) -> anyhow::Result<Exit> {
        match prds {
            [prd] if !opts.with_children && opts.pr.pr => {
                commands::pull_request::run(prd, &self.run_settings(opts), locations)
            }
            _ if opts.pr.pr => {
                report::error(
                    "--pr works on one PRD: give each PRD's run its own pull request (without --with-children)",
                );
                Ok(exit::Exit::Usage)
            }
            [prd] if !opts.with_children => {
                commands::run::run(prd, &self.run_settings(opts), locations)
            }
            _ if opts.shard.shard.is_some() => {
                report::error(
                    "--shard works on one PRD: run each PRD's shards as their own jobs (without --with-children)",
                );
                Ok(exit::Exit::Usage)
            }
            _ => commands::multi::run(prds, &self.run_settings(opts), locations, &|prd| {
                self.again.run_opts_for(prd).map(|o| self.run_settings(&o))
            }),
        }
    }

    /// `resume`: the session's settings under the options given now.
    fn resume(
        &self,
        prd: &str,
        opts: &cli::RunOpts,
        locations: anyhow::Result<prd::lookup::Locations>,
    ) -> anyhow::Result<Exit> {
        if opts.pr.pr {
            report::error(
                "--pr works with `run`: `prdloop run PRD --pr` continues the branch and the pull request it opened before",
            );
            return Ok(exit::Exit::Usage);
        }
        commands::run::resume(
            prd,
            &self.run_settings(opts),
            &|prd, session, state_file| {
                let r = self.again.resume_opts(prd, session, state_file)?;
                Ok(config::RunSettings::new(&r.opts)
                    .with_sandbox_set_by(r.sandbox_set_by)
                    .with_given(self.settings.given.clone())
                    .with_session_settings(r.taken))
            },
            locations,
        )
    }

    /// No subcommand: `prdloop --mode loop|interactive PRD`, or the short usage.
    fn mode(
        &self,
        mode: Option<cli::Mode>,
        prd: Option<String>,
        opts: &cli::RunOpts,
        locations: anyhow::Result<prd::lookup::Locations>,
    ) -> anyhow::Result<Exit> {
        match (mode, prd) {
            (Some(cli::Mode::Loop), Some(prd)) if opts.pr.pr => {
                commands::pull_request::run(&prd, &self.run_settings(opts), locations)
            }
            (Some(cli::Mode::Loop), Some(prd)) => {
                commands::run::run(&prd, &self.run_settings(opts), locations)
            }
            (Some(cli::Mode::Interactive), Some(prd)) => {
                commands::interactive::interactive(&config::InteractiveSettings::new(
                    &prd,
                    &opts.worker.claude_bin,
                    opts.exec.workdir.as_deref(),
                    &locations?,
                )?)
            }
            _ => {
                report::error(short_usage());
                Ok(exit::Exit::Usage)
            }
        }
    }
}
