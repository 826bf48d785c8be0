//! Evidence, not claims: how a tick is earned ([`Evidence`]: `checked` by the
//! runner's own command, `reviewed` by an independent verifier, or only `claimed` by the
//! worker), the verifier that reviews what no command can check ([`verifier`]), the files a
//! check runs that an attempt may not change ([`protect`]), and the receipt kept for every
//! tick ([`receipt`]), which `prdloop audit` re-runs.

pub mod protect;
pub mod receipt;
pub mod verifier;

/// How a passing criterion's tick was earned: the evidence behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The runner ran the criterion's command (or probe) on the attempt's tree and it passed.
    #[serde(alias = "command")]
    Checked,
    /// An independent verifier agreed, with evidence (no command could run).
    Reviewed,
    /// Only the worker said so (`--verifier none`, or nothing could check it).
    #[serde(alias = "agent")]
    Claimed,
    /// Ticked before the run (by its author) and not re-checked.
    Before,
}

impl Evidence {
    /// One word for it: `checked`, `reviewed`, `claimed`, `ticked before the run`.
    pub fn word(self) -> &'static str {
        match self {
            Evidence::Checked => "checked",
            Evidence::Reviewed => "reviewed",
            Evidence::Claimed => "claimed",
            Evidence::Before => "ticked before the run",
        }
    }
}
