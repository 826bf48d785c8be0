//! `prdloop interactive` (PAI's `-m interactive`): an interactive claude on the PRD, with the
//! terminal attached, in the workdir, and a first prompt naming the PRD and what still fails.

use std::path::Path;

use anyhow::Result;

use crate::exit::Exit;
use crate::{env, exit, platform, report};

pub fn prompt(prd: &crate::prd::Prd, path: &Path) -> String {
    let (p, t) = prd.progress();
    let failing: Vec<String> = prd
        .failing()
        .map(|c| format!("- {}: {}", c.id, c.description))
        .collect();
    let mut s = format!(
        "We are working on the PRD at {} ({}: {}). {p} of {t} criteria pass.",
        path.display(),
        prd.front.id.as_deref().unwrap_or("no id"),
        prd.title.as_deref().unwrap_or("untitled"),
    );
    if failing.is_empty() {
        s.push_str(" All criteria pass; review the PRD with me.");
    } else {
        s.push_str(" These criteria still fail:\n");
        s.push_str(&failing.join("\n"));
        s.push_str("\n\nRead the PRD, then help me make them pass. Tick a box only when its Verify method passes.");
    }
    s
}

pub fn interactive(s: &crate::config::InteractiveSettings) -> Result<Exit> {
    let path = &s.prd;
    let doc = crate::commands::load_prd(path)?;
    let program = match platform::find_program(&s.program, "--claude-bin") {
        Ok(p) => p,
        Err(msg) => {
            report::error(msg);
            return Ok(exit::Exit::Usage);
        }
    };
    let workdir = &s.workdir;
    let status = std::process::Command::new(&program)
        .arg(prompt(&doc, path))
        .current_dir(workdir)
        .env_remove(env::CLAUDECODE)
        .env(env::WORKER_PRD, path)
        .status()
        .map_err(|e| anyhow::anyhow!("failed to start `{}`: {e}", program.display()))?;
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(Exit::Child(u8::try_from(code).unwrap_or(1)))
}
