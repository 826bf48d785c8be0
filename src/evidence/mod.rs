//! Evidence, not claims: how a tick is earned ([`crate::state::Evidence`]: `checked` by the
//! runner's own command, `reviewed` by an independent verifier, or only `claimed` by the
//! worker), the verifier that reviews what no command can check ([`verifier`]), the files a
//! check runs that an attempt may not change ([`protect`]), and the receipt kept for every
//! tick ([`receipt`]), which `prdloop audit` re-runs.

pub mod protect;
pub mod receipt;
pub mod verifier;
