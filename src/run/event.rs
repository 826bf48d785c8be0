//! The loop's messages. `LoopEvent`: what happened, as the dispatcher sees it (a worker ended,
//! a second passed, a signal came, …). `Effects`: what the run state asks the dispatcher to
//! do about it, in order. `RunEvent`: what the user is told; the reporter turns them into
//! lines and JSON.

use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

use super::end::End;
use super::judge::{Judgement, Ran};
use super::reason::{FailReason, Notice, StopReason};
use super::warning::Warning;
pub use super::warning::prd::{PrdBroken, Unreadable};
use crate::backend::{AgentFailure, Usage};
use crate::isolation::Landing;
use crate::prd::Value;
use crate::state::{AttemptRecord, Evidence};
use crate::verify::{Check, Job};
use crate::worker::{Cancel, SpawnError, Spec};

/// A worker's task came back.
#[derive(Debug)]
pub struct WorkerDone {
    /// What it comes to, judged once when it ended (`judge::judge` of `ran`).
    pub judgement: Judgement,
    pub lane: usize,
    pub id: String,
    pub iteration: u64,
    pub started_at: u64,
    pub log: PathBuf,
    pub ran: Result<Ran, SpawnError>,
    /// With isolated workers: how a passing attempt's work reached the checkout (set when
    /// the run has merged it, or when its work could not even be taken).
    pub landing: Option<Landing>,
    /// With isolated workers: why its worktree could not be made ready (it did not start).
    pub unprepared: Option<String>,
    /// Best-of-N: which sample this was.
    pub sample: Option<SampleTag>,
    /// With isolated workers: its base and its work taken as a commit on it.
    pub work: Option<Work>,
    /// Best-of-N with `--select best`: how many other passing criteria's Verify commands
    /// failed in its worktree.
    pub broken: Option<usize>,
}

/// A finished isolated worker's work.
#[derive(Debug, Clone)]
pub struct Work {
    pub base: String,
    pub commit: String,
    /// Where it is pinned.
    pub kept: String,
    /// Lines added and removed against its base.
    pub diff_lines: u64,
    /// The files it changed.
    pub files: Vec<String>,
}

/// Where a worker runs: its lane and its best-of-N sample (0 for a single attempt); the key
/// of what is kept per running worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot {
    pub lane: usize,
    pub sample: u32,
}

impl Slot {
    pub fn new(lane: usize, sample: u32) -> Slot {
        Slot { lane, sample }
    }

    /// The slot of a worker on `lane`, a best-of-N `sample` or not.
    pub fn at(lane: usize, sample: Option<&SampleTag>) -> Slot {
        Slot::new(lane, sample.map_or(0, |t| t.k))
    }

    /// The slot a worker ran in.
    pub fn of(d: &WorkerDone) -> Slot {
        Slot::at(d.lane, d.sample.as_ref())
    }
}

/// Best-of-N: sample `k` (from 0) of the `n` an attempt runs, and its agent set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleTag {
    pub k: u32,
    pub n: u32,
    /// The `--mix` set-up it ran (`None`: the run's agent).
    pub setup: Option<String>,
}

impl SampleTag {
    /// `sample 2/3 (claude:opus)`; an attempt of one sample (`--best-of auto`) by its set-up
    /// alone (`claude:opus`).
    pub fn describe(&self) -> String {
        if self.n == 1
            && let Some(setup) = &self.setup
        {
            return setup.clone();
        }
        let mut s = format!("sample {}/{}", self.k + 1, self.n);
        if let Some(setup) = &self.setup {
            s.push_str(&format!(" ({setup})"));
        }
        s
    }
}

/// A passing attempt's work to merge into the checkout.
#[derive(Debug, Clone)]
pub struct LandJob {
    pub slot: Slot,
    pub work: Work,
    /// The criterion whose work it is (named in its undo point).
    pub id: String,
    /// The commit message with `--commit`.
    pub title: String,
    /// The run's record of the pass, kept with the landing until it is written
    /// ([`crate::isolation::owed`]).
    pub credit: Option<serde_json::Value>,
}

/// Why the runner ran a batch of Verify commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckPurpose {
    /// Before the first iteration: every runnable criterion once.
    Start,
    /// At an iteration's end: the ticked runnable criteria again.
    Regression,
}

/// What happened.
#[derive(Debug)]
pub enum LoopEvent {
    /// A launched worker's process started (`pid`), or could not (`None`).
    WorkerStarted {
        lane: usize,
        id: String,
        iteration: u64,
        attempt: u32,
        sample: Option<SampleTag>,
        pid: Option<u32>,
    },
    WorkerDone(Box<WorkerDone>),
    /// A worker's task panicked: its criterion gets an internal error, the lane goes on.
    WorkerLost {
        slot: Slot,
        id: String,
        why: String,
    },
    ChecksDone {
        purpose: CheckPurpose,
        results: Vec<(String, Result<Check, SpawnError>)>,
    },
    /// A second passed: time to look at the PRD and the request file.
    Tick,
    /// `prdloop pause|stop` asked (through the request file).
    Request(End),
    /// The PRD was read from disk and had changed.
    Disk(Box<SyncReport>),
    /// A rate or usage limit's wait is over.
    PauseOver,
    /// SIGINT, SIGTERM or SIGHUP.
    Signal,
    /// Another sub-loop of this process said something (`prdloop run A.md B.md`).
    SubLoopNews(News),
    /// A passing attempt's work was merged (or not) into the checkout.
    Landed {
        slot: Slot,
        landing: Landing,
    },
    /// The PRD's question book as it is on disk now (read at the start, and again when it
    /// changed: `prdloop answer` or the dashboard answered).
    Questions(crate::questions::Book),
}

/// A worker to start.
#[derive(Debug)]
pub struct Launch {
    pub lane: usize,
    pub id: String,
    pub iteration: u64,
    pub attempt: u32,
    pub spec: Spec,
    /// The criterion's Verify command, run when the worker claims PASS.
    pub check: Option<Job>,
    /// What the attempt may not change of that command's files.
    pub guard: crate::evidence::protect::Guard,
    /// The attempt's name among the criterion's (`3`, `3-retry1`, `3-s2`), for its pinned ref.
    pub attempt_name: String,
    /// Best-of-N: which sample.
    pub sample: Option<SampleTag>,
    /// The worktree slot it works in (`lane` unless samples share the lane).
    pub slot: usize,
    /// Without lanes: the PRD the run reads, which the worker can write (its orders are
    /// compared before and after the attempt, see [`crate::prd::contract`]).
    pub shared_prd: Option<std::path::PathBuf>,
    /// `--setup`, run in its lane when the attempt makes the lane anew: `sh -c` in the
    /// workers' folder of the lane under a check's rules for it (it runs what landed).
    pub setup: Option<Spec>,
    /// `--select best`: the Verify commands of the other passing criteria, to run in its
    /// worktree when it passes.
    pub others: Vec<Job>,
    /// The independent verifier, run when the worker claims PASS and no command of the
    /// runner's can check it (`None` with `--verifier none`).
    pub review: Option<crate::evidence::verifier::ReviewJob>,
}

/// How soon the files must be brought up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flush {
    /// Within the coalescing window (a worker ended; a tick).
    Soon,
    /// Before anything else happens (an iteration's end, the run's end).
    Now,
}

/// One thing the core decided, for the dispatcher to carry out. The dispatcher carries out a
/// list of them in its order; what they lead to (a landing's result, the checks' results,
/// what a poll or a write found) comes back as events, handled after the list.
#[derive(Debug)]
pub enum Effect {
    /// Tell the user.
    Say(RunEvent),
    /// Append an attempt to the attempts log (and ralph's progress file). Once an append
    /// fails, the list's later records are not tried: one warning says so.
    Record(Box<AttemptRecord>),
    /// Write a question a worker asked into the PRD's question book.
    Ask(crate::questions::Question),
    /// End every worker (and the checks), gracefully or at once. Within a list, a cancel no
    /// stronger than one already sent is not sent again.
    Cancel(Cancel),
    /// End a lane's running samples (a sibling won).
    CancelLane(usize),
    /// The third Ctrl-C: end every worker's group and exit at once.
    ExitNow,
    /// Start a worker. Consecutive launches share one base (the checkout as it is then).
    Launch(Box<Launch>),
    /// A front matter edit for the next PRD write.
    Edit(&'static str, Value),
    /// Bring the PRD and the state file up to date. A list's flushes make one write, the
    /// strongest: a `Now` is written before the first `Land`, `RunChecks` or `Poll` that
    /// follows it (they need the files as the run knows them), else at the list's end; a
    /// `Soon` opens the coalescing window at the list's end, unless one is open.
    Flush(Flush),
    /// Merge a passing attempt's work into the checkout (comes back as `LoopEvent::Landed`).
    Land(LandJob),
    /// Run Verify commands (comes back as `LoopEvent::ChecksDone`).
    RunChecks(CheckPurpose, Vec<Job>),
    /// Read the PRD and the request file now.
    Poll,
}

impl Effect {
    /// Whether it needs the files as the run knows them: a `Flush(Now)` before it is
    /// written first.
    pub fn needs_files(&self) -> bool {
        matches!(self, Effect::Land(_) | Effect::RunChecks(..) | Effect::Poll)
    }
}

/// What the dispatcher does about an event: effects, carried out in order.
#[derive(Debug, Default)]
pub struct Effects(Vec<Effect>);

impl Effects {
    pub fn push(&mut self, e: Effect) {
        self.0.push(e);
    }

    pub fn say(&mut self, e: RunEvent) {
        self.push(Effect::Say(e));
    }

    pub fn flush(&mut self, f: Flush) {
        self.push(Effect::Flush(f));
    }

    pub fn cancel(&mut self, level: Cancel) {
        self.push(Effect::Cancel(level));
    }

    /// Front matter edits, in their order.
    pub fn edit(&mut self, edits: Vec<(&'static str, Value)>) {
        self.0.extend(
            edits
                .into_iter()
                .map(|(key, value)| Effect::Edit(key, value)),
        );
    }
}

/// Another list's effects (or an optional one) after these.
impl Extend<Effect> for Effects {
    fn extend<I: IntoIterator<Item = Effect>>(&mut self, effects: I) {
        self.0.extend(effects);
    }
}

impl From<Effect> for Effects {
    fn from(e: Effect) -> Effects {
        Effects(vec![e])
    }
}

impl<'a> IntoIterator for &'a Effects {
    type Item = &'a Effect;
    type IntoIter = std::slice::Iter<'a, Effect>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Effects {
    type Item = Effect;
    type IntoIter = std::vec::IntoIter<Effect>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// How a worker's run ended, as the user is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Pass(Evidence),
    Fail(FailReason),
    /// Ended by `--stuck-after` (a failed attempt): the reason says what it repeated.
    Stuck(FailReason),
    /// The agent failed, not the criterion: (its reason, the failure).
    Agent(FailReason, AgentFailure),
    /// It could not be started.
    NotStarted(FailReason),
    Cancelled,
    CancelledWhileChecking,
    /// Best-of-N: ended because a sibling sample won (not an attempt).
    Sibling,
    /// Best-of-N: it passed, but another sample was selected.
    NotSelected,
    /// It asked a person (`QUESTION:`): the criterion waits for the answer (not an attempt).
    Question(String),
}

#[derive(Debug, Clone)]
pub struct WorkerEnded {
    pub iteration: u64,
    pub lane: usize,
    pub id: String,
    pub ending: Ending,
    pub duration: Duration,
    pub cost: Option<f64>,
    pub log: PathBuf,
    /// With isolated workers: what became of its work.
    pub landing: Option<Landing>,
    /// Best-of-N: which sample it was.
    pub sample: Option<SampleTag>,
}

/// The run's start, for the header.
#[derive(Debug, Clone)]
pub struct Started {
    pub prd: PathBuf,
    pub id: Option<String>,
    pub title: String,
    pub passing: usize,
    pub total: usize,
    pub agents: usize,
    pub max_iterations: u64,
    pub session: String,
    pub workdir: PathBuf,
    pub log_dir: PathBuf,
    pub state: PathBuf,
    /// Workers run in prdloop's kernel sandbox (those of an agent that keeps its own aside).
    pub sandbox: bool,
}

/// A criterion's line in the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowState {
    Pass(Evidence),
    NeedsPerson,
    /// Its worker asked a question no one has answered yet.
    Parked,
    Fail,
    /// Not started: what it needs did not pass (`ISC-8`, or `ISC-8 (needs a person)`).
    Waiting(String),
}

#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub state: RowState,
    pub attempts: u32,
    pub cost: f64,
    pub regressions: u32,
    pub last_failure: Option<String>,
    /// Its 1-based line in the PRD.
    pub line: usize,
    pub domain: String,
    pub anti: bool,
    /// Time its workers ran, summed.
    pub time: Duration,
    pub usage: Usage,
    /// Reasons of the counted failed attempts in this session, oldest first.
    pub failures: Vec<String>,
    /// The log of its last worker.
    pub last_log: Option<PathBuf>,
    /// With isolated workers: what became of its last passing attempt's work.
    pub landing: Option<Landing>,
    /// Best-of-N: the sample that won it (`sample 2/3 (claude:opus)`).
    pub won_by: Option<String>,
    /// Its open question, when it is parked.
    pub question: Option<String>,
}

/// The run's end, for the summary and the `end` event.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The PRD's `id`, when it has one.
    pub prd_id: Option<String>,
    pub title: String,
    pub end: End,
    pub headline: String,
    pub tone: super::end::Tone,
    pub passing: usize,
    pub total: usize,
    pub failing: Vec<String>,
    pub rows: Vec<Row>,
    pub iterations: u64,
    pub elapsed: Duration,
    pub cost: f64,
    pub usage: Usage,
    pub passed_in_run: usize,
    /// Why it stopped early, or is not complete though every criterion passes.
    pub reason: Option<StopReason>,
    pub log_dir: PathBuf,
    pub state: PathBuf,
    /// Best-of-N with `--mix`: how many criteria each set-up won, most first.
    pub setup_wins: Vec<(String, u32)>,
    /// What each set-up and each domain spent per passed criterion.
    pub cost_per_pass: crate::state::CostPerPass,
    /// The independent verifier's runs and their cost (part of `cost`).
    pub reviews: u32,
    /// Passing work that collided with another lane's and was not merged.
    pub conflicts: u32,
    /// The connections the network policy refused workers and checks, by criterion and host.
    pub refused_connections: Vec<crate::state::NetRefusal>,
    pub review_cost: f64,
    /// The questions waiting for an answer (criterion, question), and how to answer.
    pub questions: Vec<(String, String)>,
    pub prd: PathBuf,
}

/// What the user is told.
#[derive(Debug, Clone)]
pub enum RunEvent {
    Warning(Warning),
    Error(String),
    /// A state change worth a line of its own (a pause ends, a stop is requested, …).
    Notice(Notice),
    Resumed {
        session: String,
        iterations: usize,
        attempts: u32,
        cost: f64,
        /// The earlier session's settings this one runs with too (its own command line gave
        /// the rest).
        kept: crate::given::SessionSettings,
    },
    Started(Box<Started>),
    ChecksStarting {
        count: usize,
    },
    /// A start check that changed a box.
    StartCheck {
        id: String,
        /// Why it fails (`None`: it passes).
        failed: Option<FailReason>,
    },
    IterationStarted {
        iteration: u64,
        passing: usize,
        total: usize,
        to_try: usize,
        lanes: usize,
    },
    WorkerStarted {
        iteration: u64,
        lane: usize,
        id: String,
        attempt: u32,
        pid: Option<u32>,
        /// Best-of-N: which sample.
        sample: Option<SampleTag>,
        /// `--escalate` without samples: the set-up it runs (a sample's tag says it itself).
        setup: Option<String>,
    },
    WorkerEnded(Box<WorkerEnded>),
    Regressed {
        id: String,
        reason: FailReason,
    },
    /// Every lane waits: (what happened, the epoch ms it ends, how long).
    Paused {
        label: String,
        until_ms: u64,
        delay: Duration,
    },
    IterationEnded {
        iteration: u64,
        passing: usize,
        total: usize,
        gained: usize,
        regressed: usize,
        cost: f64,
        workers: u32,
        elapsed: Duration,
    },
    /// A worker asked a person; its criterion is parked until the answer comes.
    Asked {
        id: String,
        question: String,
        /// The PRD, for the line that says how to answer.
        prd: PathBuf,
    },
    /// A person answered: the criterion is worked on again, with the answer in its prompt.
    Answered {
        id: String,
        answer: String,
    },
    Finished(Box<Summary>),
}

/// What one sub-loop tells the others.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct News {
    /// The first agent that cannot work: (the PRD's label, what happened).
    pub fatal: Option<(String, super::reason::StopReason)>,
    /// The latest end of a pause for a rate or usage limit: (until, the PRD's label).
    pub pause: Option<(Instant, String)>,
}

/// What a sync of the PRD found and did (`prd_writer`), for the core to apply: the writer
/// reads the run but never changes it.
#[derive(Debug, Default)]
pub struct SyncReport {
    pub warnings: Vec<Warning>,
    /// `loopStatus: paused|stopped` set by someone else.
    pub request: Option<End>,
    /// The file had changed on disk: someone else's edit was merged.
    pub changed_on_disk: bool,
    /// The PRD as the run knows it now (as written, or as merged from disk).
    pub doc: Option<crate::prd::Prd>,
    /// The criteria of `doc` new to the run, with their boxes as read from disk (before the
    /// run's boxes were applied): the run admits them so.
    pub admitted: Vec<(String, bool)>,
    /// Why the PRD cannot be read or written (`Some(None)`: it can again).
    pub broken: Option<Option<PrdBroken>>,
    /// The criteria of the run missing from the PRD on disk (`Some` of none: none is).
    pub vanished: Option<Vec<String>>,
}
