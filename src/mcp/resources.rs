//! What the client may read: of each run the server started, its PRD, its state file and
//! its workers' logs, as `file://` URIs. Only what [`list`] lists can be read, and only a
//! regular file (not a link), up to [`LIMIT`] bytes.

use std::io::Read;
use std::path::{Path, PathBuf};

use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents};

use super::runs::Run;

/// The most bytes of a resource read.
const LIMIT: u64 = 8 << 20;

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Each run's PRD, state and log files (the logs folder's files, by name).
pub fn list(runs: &[Run]) -> Vec<Resource> {
    let mut out = Vec::new();
    for r in runs {
        let prd = absolute(&r.prd);
        out.push(
            Resource::new(uri(&prd), format!("PRD {}", r.prd.display()))
                .with_description(format!("The PRD of session {}", r.session))
                .with_mime_type("text/markdown"),
        );
        out.push(
            Resource::new(uri(&absolute(&r.state)), format!("state {}", r.session))
                .with_description(format!("Session {}'s state file", r.session))
                .with_mime_type("application/json"),
        );
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&r.logs)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .collect();
        logs.sort();
        for log in logs {
            let name = log
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            out.push(
                Resource::new(uri(&absolute(&log)), format!("log {name}"))
                    .with_description(format!("A worker's log of session {}", r.session))
                    .with_mime_type("text/plain"),
            );
        }
    }
    out
}

/// One listed resource's text.
pub fn read(runs: &[Run], wanted: &str) -> Result<ReadResourceResult, ErrorData> {
    let listed = list(runs).into_iter().find(|r| r.uri == wanted);
    let Some(r) = listed else {
        return Err(ErrorData::resource_not_found(
            format!("no resource {wanted}: only the PRD, state and logs of the runs started here"),
            None,
        ));
    };
    let path = PathBuf::from(wanted.trim_start_matches("file://"));
    let text = read_regular(&path)
        .map_err(|e| ErrorData::resource_not_found(format!("{}: {e}", path.display()), None))?;
    let mut contents = ResourceContents::text(text, wanted);
    if let Some(m) = r.mime_type {
        contents = contents.with_mime_type(m);
    }
    Ok(ReadResourceResult::new(vec![contents]))
}

/// A regular file's text (a link or anything else is refused), up to [`LIMIT`] bytes.
fn read_regular(path: &Path) -> std::io::Result<String> {
    let f = crate::fsutil::open_no_follow(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut buf = Vec::new();
    f.take(LIMIT).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
