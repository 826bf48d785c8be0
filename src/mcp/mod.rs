//! `prdloop mcp`: an MCP server on stdin/stdout (protocol 2025-06-18, with rmcp, the official
//! Rust SDK), so an agent session can run the loop with tool calls.
//!
//! Each tool is one of prdloop's commands, run as a child of the server (this binary,
//! [`child`]): the command line's parsers judge the input, its config files, environment and
//! trust rules apply, the lock is taken as from a shell, and its message and exit code are
//! the tool's error. [`inputs`] makes the tools' input schemas from the command line's own
//! definitions (clap's) and a call's arguments back into its command line, [`runs`] the
//! runs started in the background, [`resources`] what the client may read.

// Log messages (`notifications/message`, `logging/setLevel`) are part of 2025-06-18, the
// revision served; rmcp marks them deprecated for the revisions after it.
#![allow(deprecated)]

mod child;
pub use child::Globals;
mod inputs;
mod resources;
mod runs;

use std::sync::{Arc, Mutex};

use anyhow::Context;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, ListToolsResult, LoggingLevel, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

use crate::exit::Exit;

/// The protocol revision served (the newest rmcp offers is not asked for by today's clients).
const PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_06_18;

/// `prdloop mcp`: serves until the client closes stdin. `globals` (its `--profile` and `-v`)
/// go to every command it runs.
pub fn serve(globals: child::Globals) -> anyhow::Result<Exit> {
    // A run that crashes leaves its workers to init, which reaps them, not to the server.
    crate::worker::reaper::leave_orphans();
    let rt = crate::platform::runtime()?;
    let code = rt.block_on(async {
        let service = Server::new(globals)
            .serve(rmcp::transport::stdio())
            .await
            .context("the MCP client did not initialize")?;
        service.waiting().await.context("the MCP server failed")?;
        anyhow::Ok(Exit::Success)
    });
    // Runs started here go on; stdin's blocking reader is not waited for.
    rt.shutdown_background();
    code
}

/// The server's state: the runs it started, the log level the client asked for, and what
/// its command line gives the commands.
#[derive(Clone)]
pub struct Server {
    runs: Arc<Mutex<Vec<runs::Run>>>,
    level: Arc<Mutex<LoggingLevel>>,
    globals: Arc<child::Globals>,
}

impl Server {
    fn new(globals: child::Globals) -> Server {
        Server {
            runs: Arc::default(),
            level: Arc::new(Mutex::new(LoggingLevel::Info)),
            globals: Arc::new(globals),
        }
    }
}

/// The tools: name, what it does, its input's schema.
fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "plan",
            "Show what the next iteration would do on a PRD: lanes, criteria in order, the worker command (`prdloop plan --json`).",
            schema("plan"),
        ),
        Tool::new(
            "run",
            "Start the loop on a PRD in the background (`prdloop run --json`): returns its session at once; its events come as log messages, a worker's question as a warning to answer with `answer`. With `wait`, the call lasts until the run ends, with progress notifications.",
            schema("run"),
        ),
        Tool::new(
            "status",
            "Each PRD's progress: criteria, sessions, questions, running loops (`prdloop status --json`).",
            schema("status"),
        ),
        Tool::new(
            "logs",
            "A worker's log for people: assistant text, tool calls and results (`prdloop logs`).",
            schema("logs"),
        ),
        Tool::new(
            "answer",
            "Answer the question a worker asked about a criterion; without `id`, list the open questions (`prdloop answer --json`).",
            schema("answer"),
        ),
        Tool::new(
            "pause",
            "Ask the loop running on a PRD to pause: running workers finish, then it ends `paused` (`prdloop pause`).",
            schema("pause"),
        ),
        Tool::new(
            "stop",
            "Ask the loop running on a PRD to stop: workers are ended, then it ends `stopped` (`prdloop stop`).",
            schema("stop"),
        ),
        Tool::new(
            "resume",
            "Continue a paused, stopped or crashed loop in the background (`prdloop resume --json`), as `run` does.",
            schema("resume"),
        ),
        Tool::new(
            "audit",
            "Re-run the commands that earned each `checked` tick, in a throw-away copy of the checkout (`prdloop audit --json`).",
            schema("audit"),
        ),
        Tool::new(
            "undo",
            "Put back the files the newest landing changed in the server's repository, or list the undo points (`prdloop undo --json`).",
            schema("undo"),
        ),
    ]
}

/// A tool's input schema, from its subcommand's flags.
fn schema(tool: &str) -> Arc<rmcp::model::JsonObject> {
    inputs::spec(tool).map(|s| s.schema()).unwrap_or_default()
}

/// A call's arguments as its command line, whether its output is JSON, and what it gave the
/// server itself; a bad one is the call's error (exit 2, as a bad flag is).
fn input(
    p: &CallToolRequestParams,
) -> Result<(Vec<std::ffi::OsString>, bool, inputs::Given), CallToolResult> {
    let Some(spec) = inputs::spec(&p.name) else {
        return Err(child::refused(
            format!("error: no tool named `{}`", p.name),
            Exit::Usage.code(),
        ));
    };
    let args = p.arguments.clone().unwrap_or_default();
    match spec.argv(&args) {
        Ok((argv, given)) => Ok((argv, spec.json, given)),
        Err(e) => Err(child::refused(
            format!("error: {}: invalid arguments: {e}", p.name),
            Exit::Usage.code(),
        )),
    }
}

impl Server {
    /// Runs a command to its end; its result.
    async fn command(&self, argv: Vec<std::ffi::OsString>, json_output: bool) -> CallToolResult {
        match self.globals.run(&argv).await {
            Ok(o) => o.result(json_output),
            Err(e) => child::refused(format!("error: cannot run prdloop: {e}"), Exit::Io.code()),
        }
    }

    /// `run` and `resume`: started in the background; the session at once, or (with
    /// `wait`) the end.
    async fn start(
        &self,
        argv: Vec<std::ffi::OsString>,
        given: inputs::Given,
        ctx: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let listener = runs::Listener {
            peer: ctx.peer.clone(),
            level: self.level.clone(),
        };
        let (progress, (tx, rx)) = if given.wait {
            let (tx, rx) = tokio::sync::oneshot::channel();
            (ctx.meta.get_progress_token(), (Some(tx), Some(rx)))
        } else {
            (None, (None, None))
        };
        let started = runs::start(
            &self.globals,
            argv,
            listener,
            self.runs.clone(),
            progress,
            tx,
        );
        match started.await {
            Err(e) => child::refused(format!("error: cannot run prdloop: {e}"), Exit::Io.code()),
            Ok(runs::Started::Ended(end)) => end.outcome().result(true),
            Ok(runs::Started::Running(start)) => match rx {
                Some(rx) => {
                    tokio::select! {
                        end = rx => match end {
                            Ok(end) => end.outcome().result(true),
                            Err(_) => child::refused(
                                "error: the run's end was not read".into(),
                                Exit::Io.code(),
                            ),
                        },
                        _ = ctx.ct.cancelled() => child::refused(
                            "error: the call was cancelled; the run goes on".into(),
                            Exit::Interrupted.code(),
                        ),
                    }
                }
                None => {
                    let text = format!(
                        "session {} started on {} (state: {}); its events come as log messages",
                        start["session"].as_str().unwrap_or_default(),
                        start["prd"].as_str().unwrap_or_default(),
                        start["state"].as_str().unwrap_or_default(),
                    );
                    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
                    r.structured_content = Some(start);
                    r
                }
            },
        }
    }

    async fn call(
        &self,
        p: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> CallToolResult {
        match input(&p) {
            Ok((argv, _, given)) if matches!(p.name.as_ref(), "run" | "resume") => {
                self.start(argv, given, &ctx).await
            }
            Ok((argv, json_output, _)) => self.command(argv, json_output).await,
            Err(r) => r,
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_logging()
                .build(),
        )
        .with_protocol_version(PROTOCOL)
        .with_server_info(Implementation::new("prdloop", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "prdloop runs coding agents on a PRD's checkbox criteria until they pass. `plan` shows \
             what a run would do, `run` starts one in the background and returns its session, \
             `status` and `logs` follow it, `answer` answers a worker's question, `pause`/`stop`/\
             `resume` control it, `audit` re-checks the ticks, `undo` puts back a landing.",
        )
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL))
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        p: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(p, ctx).await.into())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let runs = self.runs.lock().expect("runs").clone();
        Ok(ListResourcesResult::with_all_items(resources::list(&runs)))
    }

    async fn read_resource(
        &self,
        p: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let runs = self.runs.lock().expect("runs").clone();
        resources::read(&runs, &p.uri).map(Into::into)
    }

    async fn set_level(
        &self,
        p: SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.level.lock().expect("level") = p.level;
        Ok(())
    }
}
