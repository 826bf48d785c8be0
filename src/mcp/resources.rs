//! What the client may read: of each run the server started, its PRD, its state file and
//! its workers' logs, as `file://` URIs (each once, percent-encoded). Only what [`list`]
//! lists can be read, and only a regular file (not a link), up to [`LIMIT`] bytes.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, percent_encode};
use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents};

use super::runs::Run;

/// The most bytes of a resource read.
const LIMIT: u64 = 8 << 20;

/// What a `file://` URI's path keeps as it is: RFC 3986's unreserved characters and `/`.
/// Every other byte (a space, `%`, `#`, `?`, a byte of a non-ASCII name) is percent-encoded.
const KEPT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// An absolute path's `file://` URI.
fn uri(p: &Path) -> String {
    format!("file://{}", percent_encode(&path_bytes(p), KEPT))
}

/// The absolute path a `file://` URI names (its path percent-decoded); `None` for any other
/// URI (another scheme, a host).
fn path_of(uri: &str) -> Option<PathBuf> {
    let path = uri.strip_prefix("file://")?;
    if !path.starts_with('/') {
        return None;
    }
    Some(bytes_path(percent_decode_str(path).collect()))
}

#[cfg(unix)]
fn path_bytes(p: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes().to_vec()
}

#[cfg(unix)]
fn bytes_path(b: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(b))
}

#[cfg(not(unix))]
fn path_bytes(p: &Path) -> Vec<u8> {
    p.to_string_lossy().into_owned().into_bytes()
}

#[cfg(not(unix))]
fn bytes_path(b: Vec<u8>) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(&b).into_owned())
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Each run's PRD, state and log files (the logs folder's files, by name).
pub fn list(runs: &[Run]) -> Vec<Resource> {
    let mut out = listed(runs);
    // Runs on one PRD share it (and a resumed session its state and logs): each once.
    let mut seen = HashSet::new();
    out.retain(|r| seen.insert(r.uri.clone()));
    out
}

fn listed(runs: &[Run]) -> Vec<Resource> {
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
        let mut logs: Vec<PathBuf> = crate::worker::output_log::list(&r.logs)
            .into_iter()
            .flatten()
            .map(|l| l.path)
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

/// One listed resource's text: `wanted` names it by its URI, or by another spelling of the
/// same `file://` path (a space as it is, say).
pub fn read(runs: &[Run], wanted: &str) -> Result<ReadResourceResult, ErrorData> {
    let path = path_of(wanted);
    let listed = list(runs)
        .into_iter()
        .find(|r| r.uri == wanted || (path.is_some() && path_of(&r.uri) == path));
    let (Some(r), Some(path)) = (listed, path) else {
        return Err(ErrorData::resource_not_found(
            format!("no resource {wanted}: only the PRD, state and logs of the runs started here"),
            None,
        ));
    };
    let text = read_regular(&path)
        .map_err(|e| ErrorData::resource_not_found(format!("{}: {e}", path.display()), None))?;
    let mut contents = ResourceContents::text(text, r.uri.clone());
    if let Some(m) = r.mime_type.clone() {
        contents = contents.with_mime_type(m);
    }
    Ok(ReadResourceResult::new(vec![contents]))
}

/// A regular file's text (a link or anything else is refused), up to [`LIMIT`] bytes; a log
/// that is no file of its own, from the output log prdloop keeps it in.
fn read_regular(path: &Path) -> std::io::Result<String> {
    let f = match crate::fsutil::open_no_follow(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let bytes = crate::worker::output_log::head(path, LIMIT)?;
            return Ok(String::from_utf8_lossy(&bytes).into_owned());
        }
        f => f?,
    };
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut buf = Vec::new();
    f.take(LIMIT).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_is_percent_encoded_and_read_back() {
        let p = Path::new("/tmp/a b/100%#?é.md");
        let u = uri(p);
        assert_eq!(u, "file:///tmp/a%20b/100%25%23%3F%C3%A9.md");
        assert_eq!(path_of(&u).as_deref(), Some(p));
        assert_eq!(
            path_of("file:///tmp/a b/x.md").unwrap(),
            Path::new("/tmp/a b/x.md")
        );
        assert_eq!(path_of("file://host/etc/passwd"), None);
        assert_eq!(path_of("https://x/y"), None);
    }

    #[test]
    fn runs_sharing_a_prd_or_a_session_list_each_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).unwrap();
        std::fs::write(logs.join("ISC-A-1.log"), "x").unwrap();
        let run = |session: &str| Run {
            session: session.into(),
            prd: dir.path().join("PRD.md"),
            state: dir.path().join(format!("{session}.json")),
            logs: logs.clone(),
        };
        let uris: Vec<String> = list(&[run("s1"), run("s1"), run("s2")])
            .into_iter()
            .map(|r| r.uri)
            .collect();
        let distinct: HashSet<&String> = uris.iter().collect();
        assert_eq!(uris.len(), distinct.len(), "{uris:?}");
        // The PRD, two states, the log.
        assert_eq!(uris.len(), 4, "{uris:?}");
    }
}
