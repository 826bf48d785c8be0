//! One file per subcommand.

pub mod control;
pub mod interactive;
pub mod new;
pub mod plan;
pub mod run;
pub mod status;
pub mod verify;
