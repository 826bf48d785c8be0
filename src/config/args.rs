//! clap's value enums turned into the settings' own types: the layers below config never
//! see a clap type.

use crate::cli::{
    IsolationArg, IsolationOpts, NotifyOnArg, NotifyOpts, RoundsArg, SandboxArg, SelectArg,
};

/// `--rounds`: how attempts follow each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rounds {
    /// No barrier: lanes take the next runnable criterion as soon as they are free.
    #[default]
    Continuous,
    /// PAI's iterations: one attempt per failing criterion, then wait for all of them.
    Barrier,
}

/// `--select`: which passing sample wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Select {
    /// The first to pass; its siblings are ended at once.
    #[default]
    First,
    /// Wait for all, then the best of those that passed.
    Best,
}

impl From<RoundsArg> for Rounds {
    fn from(a: RoundsArg) -> Rounds {
        match a {
            RoundsArg::Continuous => Rounds::Continuous,
            RoundsArg::Barrier => Rounds::Barrier,
        }
    }
}

impl From<SelectArg> for Select {
    fn from(a: SelectArg) -> Select {
        match a {
            SelectArg::First => Select::First,
            SelectArg::Best => Select::Best,
        }
    }
}

impl From<IsolationArg> for crate::isolation::Mode {
    fn from(a: IsolationArg) -> crate::isolation::Mode {
        match a {
            IsolationArg::Lane => crate::isolation::Mode::Lane,
            IsolationArg::None => crate::isolation::Mode::None,
        }
    }
}

impl From<SandboxArg> for crate::worker::sandbox::Mode {
    fn from(a: SandboxArg) -> crate::worker::sandbox::Mode {
        use crate::worker::sandbox::Mode;
        match a {
            SandboxArg::Auto => Mode::Auto,
            SandboxArg::On => Mode::On,
            SandboxArg::Off => Mode::Off,
        }
    }
}

impl From<NotifyOnArg> for crate::notify::Kind {
    fn from(a: NotifyOnArg) -> crate::notify::Kind {
        use crate::notify::Kind;
        match a {
            NotifyOnArg::Done => Kind::Done,
            NotifyOnArg::Failed => Kind::Failed,
            NotifyOnArg::NeedsPerson => Kind::NeedsPerson,
            NotifyOnArg::Limit => Kind::Limit,
            NotifyOnArg::Resumed => Kind::Resumed,
            NotifyOnArg::Budget => Kind::Budget,
        }
    }
}

/// `--isolation`, `--setup`, `--commit`, `--keep-worktrees`, `--allow-deletions`.
pub fn isolation(o: &IsolationOpts) -> crate::isolation::Settings {
    crate::isolation::Settings {
        mode: o.isolation.map(Into::into),
        setup: o.setup.clone().filter(|s| !s.trim().is_empty()),
        commit: o.commit,
        keep: o.keep_worktrees,
        allow_deletions: o.allow_deletions,
    }
}

/// `--notify`, `--notify-on`, `--notify-url`, `--voice-id`.
pub fn notify(o: &NotifyOpts) -> crate::notify::Settings {
    let on: Vec<crate::notify::Kind> = o.notify_on.iter().map(|&k| k.into()).collect();
    crate::notify::Settings::new(
        o.targets.clone(),
        &on,
        o.notify_url.clone().filter(|u| !u.is_empty()),
        &o.voice_id,
    )
}
