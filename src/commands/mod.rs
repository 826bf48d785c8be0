//! One file per subcommand.

pub mod plan;
pub mod run;
pub mod status;
pub mod verify;
