//! What became of a worker's work: merged into the checkout, unchanged, in conflict with it,
//! discarded, or not merged for an error; with the words the user is told.

/// A passing attempt to merge into the user's checkout ([`super::Isolation::land`]).
#[derive(Debug, Clone)]
pub struct ToLand {
    /// The attempt's commit and the base it was made on.
    pub base: String,
    pub attempt: String,
    /// The ref it is kept under (named when it does not land).
    pub kept: String,
    /// The criterion (named in its undo point) and, with `--commit`, the commit's message.
    pub id: String,
    pub message: String,
    /// The run's record of the pass, kept with the landing until the run has written it
    /// ([`super::owed`], [`super::Isolation::settle`]).
    pub record: Option<serde_json::Value>,
}

/// How a passed attempt's work reached the user's checkout.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Landing {
    /// Applied to the checkout: these files changed (and the commit, with `--commit`).
    Merged {
        files: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        /// With `--commit`, why it was left uncommitted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        /// The undo point that puts the files back (`prdloop undo`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        undo: Option<String>,
    },
    /// The attempt changed nothing.
    Unchanged,
    /// Its changes collide with the checkout's: nothing applied; the attempt is kept.
    /// `theirs`: what changed in those files in the checkout since the attempt's base (a
    /// diff, cut short), for the next attempt's prompt.
    Conflict {
        files: Vec<String>,
        kept: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        theirs: String,
    },
    /// A guard kept it out (it would delete or undo the user's own work, …): nothing
    /// applied; the attempt is kept.
    Refused {
        reason: super::guard::Refusal,
        kept: String,
    },
    /// It failed (or another sample won): its work was not merged; it is kept under `kept`.
    Discarded { files: Vec<String>, kept: String },
    /// Git failed: nothing applied.
    Error { message: String },
}

impl Landing {
    /// A few words for a worker's line: `merged 3 files`.
    pub fn brief(&self) -> String {
        match self {
            Landing::Merged {
                files,
                commit,
                note,
                ..
            } => {
                let n = files.len();
                let mut s = format!("merged {n} file{}", if n == 1 { "" } else { "s" });
                if let Some(c) = commit {
                    s.push_str(&format!(", committed {}", &c[..c.len().min(10)]));
                }
                if let Some(why) = note {
                    s.push_str(&format!(" ({why})"));
                }
                s
            }
            Landing::Unchanged => "no changes to merge".to_string(),
            Landing::Conflict { files, .. } => format!("merge conflict in {}", files.join(", ")),
            Landing::Refused { .. } => "not merged: refused".to_string(),
            Landing::Discarded { files, kept } if !files.is_empty() => {
                format!("its changes to {} discarded (kept as {kept})", files.len())
            }
            Landing::Discarded { .. } => "no changes".to_string(),
            Landing::Error { .. } => "not merged".to_string(),
        }
    }

    /// Why the attempt does not count as passed, when it does not.
    pub fn failure(&self) -> Option<String> {
        match self {
            Landing::Merged { .. } | Landing::Unchanged | Landing::Discarded { .. } => None,
            Landing::Conflict {
                files,
                kept,
                theirs,
            } => {
                let mut s = format!(
                    "merge conflict in {}: the checkout changed them since this attempt began (another criterion's merged work or an edit); nothing was applied, the attempt is kept as {kept}",
                    files.join(", ")
                );
                if !theirs.is_empty() {
                    s.push_str(&format!(
                        "\nWhat changed in the checkout meanwhile (start from it this time):\n```diff\n{theirs}\n```"
                    ));
                }
                Some(s)
            }
            Landing::Refused { reason, kept } => Some(format!(
                "its work was not merged into the checkout: {reason}. The attempt is kept as {kept}"
            )),
            Landing::Error { message } => Some(format!("could not merge the work back: {message}")),
        }
    }
}
