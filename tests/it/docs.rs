//! The documentation cannot drift from the program: the book's command-line reference is the
//! rendering of the clap definitions.

use std::path::Path;

/// Set to 1 to write the book's command-line reference anew instead of comparing it.
const BLESS: &str = "PRDLOOP_BLESS";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn cli_reference() {
    let path = root().join("docs/book/src/reference/cli.md");
    let want = prdloop::commands::reference::markdown();
    if std::env::var(BLESS).is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is not the rendering of the command line's definitions; write it anew with \
         `{BLESS}=1 cargo test --test it docs::cli_reference`",
        path.display()
    );
}
