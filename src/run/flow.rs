//! The run's one scheduler. Its default policy (`--rounds continuous`) puts no barrier between
//! iterations; PAI's barrier (`--rounds barrier`) is its other policy (`barrier.rs`). A lane
//! that comes free takes the most urgent runnable criterion at once: one whose needs all pass,
//! with attempts left (`-n` per criterion), whose footprint (its domain, the files its text
//! names and its attempts touched) overlaps no running criterion's. Urgency is the work left
//! behind it: the longest of its chain of dependents, its domain's criteria not yet passed and
//! those of any file in its footprint (each at what the PRD's last session's attempts took,
//! else at its domain's pace learned in this run), so the critical path, the heaviest domain
//! and the busiest shared file start first. No criterion's failures take its attempts more
//! than [`MAX_AHEAD`] rounds ahead of the oldest open round, so a criterion that keeps failing
//! cannot take every attempt of its lane (a chain's later link, in a late round because
//! what it needs passed late, still retries at once). When no duration is known (a first
//! run), urgency is a guess: a retry goes before first attempts, and one more than [`AHEAD`]
//! ahead starts only when nothing nearer can, unless something needs it. With durations
//! known, the most urgent goes first, retry or not ([`Pick`]).
//!
//! Iterations still count in PAI's sense: an attempt belongs to round `k` when it is its
//! criterion's `k`-th in this run, or later when what it needs passed only in round `k - 1`
//! (the iteration a barrier run would have given it). Round `k` closes when no attempt of
//! round `k` or earlier runs or can still start; the front matter and the state advance then.
//!
//! With the barrier, no attempt runs ahead of the open round, each round's criteria are
//! partitioned over the lanes when it opens (PAI's rule, `plan.rs`), and no round starts past
//! the `-n`-th.
//!
//! Pure: no processes, no clocks. Outcomes come in through [`Flow::ended`] with the ledger's
//! view of them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::graph::Graph;

/// How many rounds ahead of the oldest round still open an attempt starts only when nothing
/// nearer can.
const AHEAD: u64 = 1;
/// How many rounds ahead of the oldest round still open a criterion's own failures may take
/// it (fewer with a lower `--stall`, [`Flow::bound_ahead`]): a criterion that keeps failing
/// makes at most `MAX_AHEAD + 1` attempts while a round is open, whatever its lane could take,
/// so rounds (iterations, `--stall`) close in step with the work, and a criterion failing three
/// times still makes all its attempts while the first round is open. The rounds a criterion
/// is ahead only because what it needs passed late do not count ([`Item::rounds_ahead`]): a
/// chain's later links retry as its first would.
pub const MAX_AHEAD: u64 = 3;

/// How a lane chooses among the domains' most urgent criteria, lowest first (the fields in
/// order). Urgency is known when durations come from earlier runs (`weighted`): then
/// the most urgent goes first, and an attempt far ahead of the oldest open round (unless
/// something needs it, [`Item::held_back`]) or a first attempt yields only to one as urgent.
/// In a first run urgency is a guess from counts and the pace seen so far: then an attempt
/// far ahead waits for any nearer one, and a retry goes before any first attempt (a failed
/// criterion is known work left; a guess is not). Then the lane's own domain, document order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Pick {
    /// Far ahead, in a run that guesses urgency.
    guessed_ahead: bool,
    /// A first attempt, in a run that guesses urgency.
    guessed_first: bool,
    less_urgent: u64,
    ahead: bool,
    first_attempt: bool,
    other_domain: bool,
    index: usize,
}

/// Where a criterion of the run stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Something it needs has not passed yet.
    Blocked,
    Ready,
    Running {
        lane: usize,
    },
    Passed {
        round: u64,
    },
    /// `-n` attempts made, still failing.
    Exhausted,
    /// Something it needs will not pass in this run (it ran out of attempts, needs a person,
    /// or is outside the shard): it is not started.
    Waiting {
        on: String,
    },
    /// Its worker asked a question only a person can answer: not started again until the
    /// answer comes ([`Flow::unpark`]).
    Parked,
}

#[derive(Debug, Clone)]
struct Item {
    id: String,
    domain: String,
    /// Document order, for ties.
    index: usize,
    /// Its expected duration and the longest chain of dependents' behind it, itself included.
    weight: u64,
    tail: u64,
    /// What it needs that has not passed yet.
    needs: BTreeSet<String>,
    dependents: Vec<String>,
    state: State,
    /// The round of its next (or running) attempt.
    round: u64,
    /// Attempts made in this run.
    attempts: u32,
    /// Its footprint: files named in its text and touched by its attempts.
    files: BTreeSet<String>,
    /// Its attempt could not be made (or was stopped by a pause): tried again in its round.
    requeued: bool,
    /// Its running attempt asked a question: it parks when that attempt ends.
    parks: bool,
}

impl Item {
    /// Whether its attempt waits for nearer ones: it is more than [`AHEAD`] rounds ahead of
    /// the oldest open round (`ahead` is the last round that is not), and nothing waits for it
    /// to pass. A criterion others need is on a chain: each round its retry waits, the whole
    /// chain behind it waits too.
    fn held_back(&self, ahead: u64) -> bool {
        self.round > ahead && self.dependents.is_empty()
    }

    /// How many rounds its own failures put its next attempt ahead of the `open` round: as
    /// many as its round is ahead, but no more than its failed attempts (its first attempt
    /// is in a late round when what it needs passed late, and that is no runaway of its own).
    fn rounds_ahead(&self, open: u64) -> u64 {
        self.round
            .saturating_sub(open)
            .min(u64::from(self.attempts))
    }

    /// A criterion to schedule, `index`-th in document order, its first attempt in `round`
    /// (blocked until what it needs is known).
    fn new(w: Work, index: usize, round: u64) -> Item {
        Item {
            id: w.id,
            domain: w.domain,
            index,
            weight: w.weight,
            tail: w.weight,
            needs: BTreeSet::new(),
            dependents: Vec::new(),
            state: State::Blocked,
            round,
            attempts: 0,
            files: w.files,
            requeued: false,
            parks: false,
        }
    }
}

/// One criterion to schedule, as the run gives it.
#[derive(Debug, Clone)]
pub struct Work {
    pub id: String,
    pub domain: String,
    pub weight: u64,
    pub files: BTreeSet<String>,
}

impl Work {
    /// A criterion as the flow schedules it, with its expected duration (`weight`, at least
    /// 1; 1 is unknown) and the files its text names.
    pub fn of(c: &crate::prd::Criterion, weight: u64) -> Work {
        Work {
            id: c.id.clone(),
            domain: c.domain.clone(),
            weight: weight.max(1),
            files: crate::graph::predicted_files(c),
        }
    }
}

/// The run's criteria, each at its document index (the order they were added in), and found
/// by id: what decides the next criterion for a lane reaches them by index, without hashing.
#[derive(Debug, Default)]
struct Items {
    all: Vec<Item>,
    by_id: HashMap<String, usize>,
}

impl Items {
    /// Adds `it`, its index the next one (`it.index` must be [`Items::len`]).
    fn push(&mut self, it: Item) {
        debug_assert_eq!(it.index, self.all.len());
        self.by_id.insert(it.id.clone(), self.all.len());
        self.all.push(it);
    }

    fn len(&self) -> usize {
        self.all.len()
    }

    fn contains_key(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    fn get(&self, id: &str) -> Option<&Item> {
        self.by_id.get(id).map(|&i| &self.all[i])
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut Item> {
        self.by_id.get(id).map(|&i| &mut self.all[i])
    }

    /// The criterion at document index `i`.
    fn at(&self, i: usize) -> &Item {
        &self.all[i]
    }

    fn iter(&self) -> impl Iterator<Item = &Item> {
        self.all.iter()
    }
}

impl std::ops::Index<&str> for Items {
    type Output = Item;

    fn index(&self, id: &str) -> &Item {
        self.get(id).expect("a criterion of the run")
    }
}

/// A ready criterion's place in its domain (see [`Flow::key`]): the last field is its document
/// index, which no other criterion has.
type ReadyKey = (u64, u64, usize);

#[derive(Debug, Default)]
pub struct Flow {
    items: Items,
    /// Each lane's running criterion (its document index).
    lanes: Vec<Option<usize>>,
    /// Each lane's last domain: between domains as urgent, it goes on with it (as a barrier
    /// run's lane works through its group).
    last: Vec<Option<String>>,
    /// Criteria ready or running, by the round of their attempt.
    rounds: BTreeMap<u64, usize>,
    /// Per domain: criteria ready (by urgency), whether one runs, the weight not passed.
    domains: HashMap<String, Domain>,
    /// Attempts per criterion (`-n`).
    limit: u32,
    /// Criteria that ended since the last [`Flow::settle`], with their lane.
    ended: Vec<String>,
    /// Passing attempts' durations so far: (ms, count).
    seen: (u64, u64),
    /// Whether weights are expected durations (from earlier sessions), not all unknown.
    weighted: bool,
    /// How many rounds ahead of the oldest open round an attempt may start.
    max_ahead: u64,
    /// Per file in some criterion's footprint: the work left of the criteria whose footprint
    /// holds it (no two of them run at once, as in a domain).
    files: HashMap<String, Load>,
    /// With PAI's barrier (`--rounds barrier`): each round's lane plan and the last round.
    barrier: Option<barrier::Barrier>,
}

#[derive(Debug, Default)]
struct Domain {
    ready: BTreeSet<ReadyKey>,
    running: usize,
    /// Its criteria not passed yet.
    load: Load,
    /// Its passing attempts so far: (ms, count), to learn what an unknown one takes.
    seen: (u64, u64),
}

/// The work left on something only one attempt at a time may hold (a domain, a shared
/// file): the expected time of its criteria not passed yet, known ones (from earlier
/// sessions) and how many are unknown (weight 1).
#[derive(Debug, Default)]
struct Load {
    left: u64,
    unknown: u64,
}

impl Load {
    /// With an unknown criterion at `per`.
    fn estimate(&self, per: u64) -> u64 {
        self.left + self.unknown * per
    }

    fn add(&mut self, weight: u64) {
        if weight <= 1 {
            self.unknown += 1;
        } else {
            self.left += weight;
        }
    }

    fn remove(&mut self, weight: u64) {
        if weight <= 1 {
            self.unknown = self.unknown.saturating_sub(1);
        } else {
            self.left = self.left.saturating_sub(weight);
        }
    }
}

/// How many passing attempts' worth of the run's mean a domain's own mean is weighed with:
/// one observation moves its estimate a third of the way.
const PRIOR: u64 = 2;

impl Domain {
    /// The work left in it, with unknown criteria at its own mean so far shrunk towards the
    /// run's `mean` (domains differ in pace; one quick pass says little).
    fn estimate(&self, mean: u64) -> u64 {
        self.load.estimate(self.per(mean))
    }

    /// What one of its criteria of unknown duration is expected to take.
    fn per(&self, mean: u64) -> u64 {
        ((self.seen.0 + mean.max(1) * PRIOR) / (self.seen.1 + PRIOR)).max(1)
    }
}

impl Flow {
    /// `work`: the run's criteria to work on; `outside`: why a criterion that is not work and
    /// does not pass will not pass in this run, for what needs it (`None`: it passes).
    pub fn new(
        work: Vec<Work>,
        graph: &Graph,
        lanes: usize,
        limit: u32,
        outside: impl Fn(&str) -> Option<String>,
    ) -> Flow {
        let mut f = Flow {
            lanes: vec![None; lanes.max(1)],
            last: vec![None; lanes.max(1)],
            limit: limit.max(1),
            max_ahead: MAX_AHEAD,
            ..Flow::default()
        };
        f.weighted = work.iter().any(|w| w.weight > 1);
        for (index, w) in work.into_iter().enumerate() {
            f.add_load(&w.domain, &w.files, w.weight);
            f.items.push(Item::new(w, index, 1));
        }
        let ids: Vec<String> = f.sorted_ids();
        let mut waiting: Vec<(String, String)> = Vec::new();
        for id in &ids {
            for n in graph.needs(id) {
                if f.items.contains_key(n) {
                    f.items
                        .get_mut(id)
                        .expect("an item")
                        .needs
                        .insert(n.clone());
                    f.items
                        .get_mut(n)
                        .expect("an item")
                        .dependents
                        .push(id.clone());
                } else if let Some(why) = outside(n) {
                    waiting.push((id.clone(), format!("{n} ({why})")));
                }
            }
        }
        f.compute_tails(&ids);
        for (id, on) in waiting {
            f.wait(&id, on);
        }
        for id in &ids {
            let it = &f.items[id.as_str()];
            if it.state == State::Blocked && it.needs.is_empty() {
                f.make_ready(id);
            }
        }
        f
    }

    /// A criterion of `domain` with `files` in its footprint is work left again (or anew).
    fn add_load(&mut self, domain: &str, files: &BTreeSet<String>, weight: u64) {
        self.domains
            .entry(domain.to_string())
            .or_default()
            .load
            .add(weight);
        for file in files {
            self.files.entry(file.clone()).or_default().add(weight);
        }
    }

    fn sorted_ids(&self) -> Vec<String> {
        self.items.iter().map(|it| it.id.clone()).collect()
    }

    /// Each criterion's tail: its weight plus the heaviest tail among its dependents.
    fn compute_tails(&mut self, ids: &[String]) {
        let mut memo: HashMap<String, u64> = HashMap::new();
        fn tail(f: &Flow, id: &str, memo: &mut HashMap<String, u64>) -> u64 {
            if let Some(t) = memo.get(id) {
                return *t;
            }
            let it = &f.items[id];
            let behind = it
                .dependents
                .iter()
                .map(|d| tail(f, d, memo))
                .max()
                .unwrap_or(0);
            let t = it.weight + behind;
            memo.insert(id.to_string(), t);
            t
        }
        for id in ids {
            let t = tail(self, id, &mut memo);
            self.items.get_mut(id).expect("an item").tail = t;
        }
    }

    fn count(&mut self, round: u64, up: bool) {
        let n = self.rounds.entry(round).or_default();
        if up {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.rounds.remove(&round);
            }
        }
    }

    /// A ready criterion's place in its domain: a retry first (a failed criterion retries
    /// as soon as a lane is free: an attempt that failed quickly says nothing of how long the
    /// one that passes takes, so it had better start early), then the longest chain behind
    /// it, then document order.
    fn key(&self, id: &str) -> ReadyKey {
        let it = &self.items[id];
        (u64::MAX - it.round, u64::MAX - it.tail, it.index)
    }

    fn make_ready(&mut self, id: &str) {
        if self.past_last_round(self.items[id].round) {
            self.exhaust(id);
            return;
        }
        let key = self.key(id);
        let it = self.items.get_mut(id).expect("an item");
        it.state = State::Ready;
        let (round, domain) = (it.round, it.domain.clone());
        self.count(round, true);
        self.domains.entry(domain).or_default().ready.insert(key);
    }

    /// A criterion (and what needs it, on down) will not start: `on` is why.
    fn wait(&mut self, id: &str, on: String) {
        let mut stack = vec![(id.to_string(), on)];
        while let Some((id, on)) = stack.pop() {
            let Some(it) = self.items.get_mut(&id) else {
                continue;
            };
            if matches!(it.state, State::Waiting { .. } | State::Passed { .. }) {
                continue;
            }
            if it.state == State::Ready {
                let (round, domain) = (it.round, it.domain.clone());
                let key = self.key(&id);
                self.count(round, false);
                if let Some(d) = self.domains.get_mut(&domain) {
                    d.ready.remove(&key);
                }
            }
            let it = self.items.get_mut(&id).expect("an item");
            it.state = State::Waiting { on: on.clone() };
            for d in it.dependents.clone() {
                stack.push((d, id.clone()));
            }
        }
    }

    /// No criterion's failures take its attempts more than `rounds` rounds ahead of the
    /// oldest round still open (at most [`MAX_AHEAD`]): with `--stall N`, a criterion that
    /// keeps failing makes at most `N + 1` attempts before N rounds in a row without a pass
    /// can close and stop the run.
    pub fn bound_ahead(&mut self, rounds: u64) {
        self.max_ahead = rounds.min(MAX_AHEAD);
    }

    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    pub fn idle_lanes(&self) -> Vec<usize> {
        (0..self.lanes.len())
            .filter(|&i| self.lanes[i].is_none())
            .collect()
    }

    pub fn busy_lanes(&self) -> usize {
        self.lanes.iter().filter(|l| l.is_some()).count()
    }

    pub fn any_running(&self) -> bool {
        self.lanes.iter().any(Option::is_some)
    }

    /// Whether a criterion is ready to start (maybe only once a conflicting one ends).
    pub fn work_waits(&self) -> bool {
        self.domains.values().any(|d| !d.ready.is_empty())
    }

    /// The most urgent ready criterion whose footprint overlaps no running one's, for `lane`.
    pub fn next_for_lane(&mut self, lane: usize) -> Option<String> {
        if self.lanes.get(lane)?.is_some() {
            return None;
        }
        if self.plans_rounds() {
            return self.next_planned(lane);
        }
        // What the running criteria hold besides their domains (a domain with one running is
        // skipped below): the files in their footprints.
        let held_files: Vec<&str> = self
            .lanes
            .iter()
            .flatten()
            .flat_map(|&i| self.items.at(i).files.iter().map(String::as_str))
            .collect();
        let mean_all = self.seen.0.checked_div(self.seen.1).unwrap_or(1);
        // No barrier, but no runaway either: an attempt more than [`AHEAD`] rounds ahead of
        // the oldest round still open starts only when nothing nearer can, and a criterion
        // its own failures put more than `max_ahead` rounds ahead not at all (its lane
        // waits), so a criterion that keeps failing cannot take its lane's every attempt, and
        // rounds (iterations, `--stall`) still close.
        let open = self.open_round();
        let ahead = open.map_or(u64::MAX, |r| r + AHEAD.min(self.max_ahead));
        let mut best: Option<(Pick, usize)> = None;
        let last = self.last.get(lane).and_then(Option::as_deref);
        for (name, d) in &self.domains {
            if d.running > 0 || d.ready.is_empty() {
                continue;
            }
            // The domain's most urgent criterion that conflicts with nothing running (no
            // file in common: none of its domain runs).
            let free = |it: &&Item| {
                open.is_none_or(|r| it.rounds_ahead(r) <= self.max_ahead)
                    && !it.files.iter().any(|f| held_files.contains(&f.as_str()))
            };
            let mut ready = d.ready.iter().map(|k| self.items.at(k.2));
            let Some(it) = ready
                .clone()
                .find(|it| !it.held_back(ahead) && free(it))
                .or_else(|| ready.find(free))
            else {
                continue;
            };
            // Tails count criteria when no duration is known: at what one of its domain is
            // expected to take.
            let unit = if self.weighted { 1 } else { d.per(mean_all) };
            // The busiest of what it holds: its domain, or a file other criteria name too.
            let file = it
                .files
                .iter()
                .filter_map(|f| self.files.get(f))
                .map(|l| l.estimate(mean_all.max(1)))
                .max()
                .unwrap_or(0);
            let urgency = (it.tail * unit).max(d.estimate(mean_all)).max(file);
            let (held, first) = (it.held_back(ahead), it.attempts == 0);
            let key = Pick {
                guessed_ahead: held && !self.weighted,
                guessed_first: first && !self.weighted,
                less_urgent: u64::MAX - urgency,
                ahead: held,
                first_attempt: first,
                other_domain: last != Some(name.as_str()),
                index: it.index,
            };
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, it.index));
            }
        }
        let id = self.items.at(best?.1).id.clone();
        Some(self.start(lane, &id))
    }

    /// `lane` starts the ready criterion `id`.
    fn start(&mut self, lane: usize, id: &str) -> String {
        let key = self.key(id);
        let it = self.items.get_mut(id).expect("an item");
        it.state = State::Running { lane };
        let domain = it.domain.clone();
        let d = self.domains.get_mut(&domain).expect("its domain");
        d.ready.remove(&key);
        d.running += 1;
        self.lanes[lane] = Some(key.2);
        self.last[lane] = Some(domain);
        self.plan_running(lane, Some(id.to_string()));
        id.to_string()
    }

    /// The round of a criterion's next or running attempt.
    pub fn round_of(&self, id: &str) -> u64 {
        self.items.get(id).map_or(1, |it| it.round)
    }

    /// The lowest round with an attempt running or still to start.
    pub fn open_round(&self) -> Option<u64> {
        self.rounds.keys().next().copied()
    }

    /// How many criteria have an attempt of `round` running or still to start.
    pub fn round_size(&self, round: u64) -> usize {
        self.rounds.get(&round).copied().unwrap_or(0)
    }

    /// The lowest round with an attempt running now.
    pub fn running_round(&self) -> Option<u64> {
        self.lanes
            .iter()
            .flatten()
            .map(|&i| self.items.at(i).round)
            .min()
    }

    pub fn state(&self, id: &str) -> Option<&State> {
        self.items.get(id).map(|it| &it.state)
    }

    /// What a criterion that was not started waits for.
    pub fn waiting_for(&self, id: &str) -> Option<&str> {
        match self.state(id)? {
            State::Waiting { on } => Some(on),
            _ => None,
        }
    }

    /// The footprint of a criterion.
    #[cfg(test)]
    pub fn files(&self, id: &str) -> Option<&BTreeSet<String>> {
        self.items.get(id).map(|it| &it.files)
    }
}

mod barrier;
mod outcomes;
pub mod plan;
#[cfg(test)]
mod tests;
