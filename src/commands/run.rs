//! `prdloop run` (and PAI's `-m loop -p`): validate everything, then hand over to the loop.

use anyhow::{Context, Result};

use crate::cli::RunOpts;
use crate::config::RunConfig;
use crate::prd::lookup::{self, Locations};
use crate::{exit, report, worker};

pub fn run(prd_arg: &str, opts: &RunOpts, loc: &Locations) -> Result<u8> {
    let path = lookup::resolve(prd_arg, loc)?;
    let doc = crate::load_with_warnings(&path)?;
    let (cfg, warnings) = RunConfig::new(path.clone(), opts, loc)?;
    for w in warnings {
        report::warn(w);
    }
    if opts.dry_run {
        crate::commands::plan::print(&path, &doc, cfg.agents, &cfg.claude, &cfg.workdir, false)?;
        return Ok(exit::SUCCESS);
    }
    // A missing or non-executable agent is found before anything is written.
    if let Err(msg) = worker::find_program(&cfg.claude.bin) {
        report::error(msg);
        return Ok(exit::USAGE);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    rt.block_on(crate::run::execute(cfg))
}
