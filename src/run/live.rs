//! The live view (`--progress bar`): a header (iteration, passing criteria, cost, time, a
//! pause's countdown) and one line per running worker (lane, criterion, time, what its agent
//! is doing now, tokens so far), redrawn in place on stderr; the reporter's lines scroll
//! above it. Only the reporter drives it.
//!
//! The view is one indicatif bar whose text is drawn from shared state by indicatif's own
//! ticker thread, at most 10 times a second. The reporter only updates that state (a map
//! entry per event) and never waits on the terminal except to print its lines, as it does
//! without the view. What the agents are doing is read from the workers' watch cells when the
//! view draws: a busy stream costs the run nothing.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressStyle};
use tokio::sync::watch;

use super::event::{Ending, RunEvent, Slot};
use crate::backend::Activity;
use crate::report::{self, bold, dim, yellow};

/// How often the view is redrawn (the worker clocks tick, activity changes show).
const REDRAW: Duration = Duration::from_millis(100);

/// A running worker, as the view shows it.
struct Worker {
    id: String,
    attempt: u32,
    started: Instant,
    activity: Option<watch::Receiver<Activity>>,
    /// Best-of-N: `sample 2/3 (claude:opus)`.
    sample: Option<String>,
}

/// What the view shows; shared between the reporter and the drawing thread.
struct View {
    color: bool,
    show_cost: bool,
    started: Instant,
    iteration: u64,
    passing: usize,
    total: usize,
    cost: f64,
    /// A limit's wait: what happened, and when workers start again.
    pause: Option<(String, Instant)>,
    /// Running workers by (lane, best-of-N sample), in lane order.
    workers: BTreeMap<Slot, Worker>,
    /// Activity cells handed over before their worker's start is reported.
    pending: BTreeMap<Slot, watch::Receiver<Activity>>,
    /// Stripped from paths in what the agents do (`Edit: src/x.rs`, not the absolute path).
    workdir: String,
}

pub struct Live {
    bar: ProgressBar,
    view: Arc<Mutex<View>>,
}

fn lock(v: &Mutex<View>) -> MutexGuard<'_, View> {
    v.lock().unwrap_or_else(|e| e.into_inner())
}

impl Live {
    /// Starts drawing on stderr. `show_cost`: the agent reports costs.
    pub fn new(show_cost: bool) -> Live {
        let view = Arc::new(Mutex::new(View::new(report::stderr_color(), show_cost)));
        let drawn = Arc::clone(&view);
        let style = ProgressStyle::with_template("{view}")
            .expect("a valid template")
            .with_key(
                "view",
                move |_: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let (rows, cols) = console::Term::stderr().size();
                    let _ = w.write_str(&lock(&drawn).render(
                        Instant::now(),
                        usize::from(cols),
                        usize::from(rows),
                    ));
                },
            );
        // Not `MultiProgress::set_move_cursor`: drawing over the old lines in place left a
        // stale worker line behind when the view shrank (indicatif 0.18.6).
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10))
            .with_style(style)
            .with_finish(ProgressFinish::AndClear);
        bar.enable_steady_tick(REDRAW);
        Live { bar, view }
    }

    /// What the agent of the worker about to start on `lane` is doing, as it changes.
    pub fn watch(&self, slot: Slot, activity: watch::Receiver<Activity>) {
        lock(&self.view).pending.insert(slot, activity);
    }

    /// The view's state after `e`.
    pub fn update(&self, e: &RunEvent) {
        lock(&self.view).update(e, Instant::now());
    }

    /// Lines printed above the view.
    pub fn print(&self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        self.bar.suspend(|| {
            for l in lines {
                report::eline(l);
            }
        });
    }

    /// Takes the view off the screen, leaving the lines printed above it.
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.clear();
    }
}

impl View {
    fn new(color: bool, show_cost: bool) -> View {
        View {
            color,
            show_cost,
            started: Instant::now(),
            iteration: 0,
            passing: 0,
            total: 0,
            cost: 0.0,
            pause: None,
            workers: BTreeMap::new(),
            pending: BTreeMap::new(),
            workdir: String::new(),
        }
    }

    /// Constant work per event: the view never walks the PRD's criteria.
    fn update(&mut self, e: &RunEvent, now: Instant) {
        match e {
            RunEvent::Started(s) => {
                (self.passing, self.total) = (s.passing, s.total);
                self.workdir = dir_prefix(&s.workdir);
            }
            RunEvent::Resumed { cost, .. } => self.cost += cost,
            RunEvent::StartCheck { failed, .. } => {
                if failed.is_none() {
                    self.passing += 1;
                } else {
                    self.passing = self.passing.saturating_sub(1);
                }
            }
            RunEvent::IterationStarted {
                iteration,
                passing,
                total,
                ..
            } => {
                self.iteration = *iteration;
                (self.passing, self.total) = (*passing, *total);
            }
            RunEvent::WorkerStarted {
                lane,
                id,
                attempt,
                sample,
                ..
            } => {
                self.pause = None;
                let key = Slot::at(*lane, sample.as_ref());
                self.workers.insert(
                    key,
                    Worker {
                        id: id.clone(),
                        attempt: *attempt,
                        started: now,
                        activity: self.pending.remove(&key),
                        sample: sample.as_ref().map(|t| t.describe()),
                    },
                );
            }
            RunEvent::WorkerEnded(w) => {
                let key = Slot::at(w.lane, w.sample.as_ref());
                if self.workers.get(&key).is_some_and(|r| r.id == w.id) {
                    self.workers.remove(&key);
                }
                self.cost += w.cost.unwrap_or(0.0);
                if matches!(w.ending, Ending::Pass(_)) {
                    self.passing += 1;
                }
            }
            RunEvent::Regressed { .. } => self.passing = self.passing.saturating_sub(1),
            RunEvent::Paused { label, delay, .. } => {
                self.pause = Some((label.clone(), now + *delay));
            }
            RunEvent::IterationEnded { passing, total, .. } => {
                (self.passing, self.total) = (*passing, *total);
            }
            _ => {}
        }
    }

    /// The view's text for a terminal of `width` × `height`: every line cut to the width,
    /// and no more lines than fit (the workers that do not are counted instead).
    fn render(&self, now: Instant, width: usize, height: usize) -> String {
        let width = width.max(10);
        // Not `──`: the line an iteration's start prints above looks like that.
        let mut header = format!("▸ iteration {}", self.iteration);
        if self.iteration == 0 {
            header = "▸ starting".into();
        }
        header.push_str(&format!(" · {}/{} passing", self.passing, self.total));
        if self.show_cost {
            header.push_str(&format!(" · ${:.4}", self.cost));
        }
        header.push_str(&format!(
            " · {}",
            clock(now.saturating_duration_since(self.started))
        ));
        let mut lines = vec![self.paint(bold, &header)];
        if let Some((label, until)) = &self.pause
            && *until > now
        {
            lines[0].push_str(&self.paint(
                yellow,
                &format!(
                    " · {label}: workers start again in {}",
                    clock(until.saturating_duration_since(now) + Duration::from_millis(999))
                ),
            ));
        }
        // The header, the workers, and the line the cursor rests on.
        let room = height.saturating_sub(2).max(1);
        let n = self.workers.len();
        let shown = if n <= room { n } else { room - 1 };
        for (slot, w) in self.workers.iter().take(shown) {
            lines.push(self.worker_line(slot.lane, w, now));
        }
        if shown < n {
            lines.push(format!("  … and {} more", n - shown));
        }
        lines
            .iter()
            .map(|l| console::truncate_str(l, width, "…").into_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn worker_line(&self, lane: usize, w: &Worker, now: Instant) -> String {
        let activity = w
            .activity
            .as_ref()
            .map(|a| a.borrow().clone())
            .unwrap_or_default();
        let mut line = format!(
            "  {} {}",
            self.paint(dim, &format!("[lane {}]", lane + 1)),
            w.id
        );
        if let Some(sample) = &w.sample {
            line.push_str(&self.paint(dim, &format!(" [{sample}]")));
        }
        if w.attempt > 1 {
            line.push_str(&self.paint(dim, &format!(" (attempt {})", w.attempt)));
        }
        line.push_str(&format!(
            " {}  ",
            self.paint(dim, &clock(now.saturating_duration_since(w.started)))
        ));
        if activity.doing.is_empty() {
            line.push_str(&self.paint(dim, "starting"));
        } else if self.workdir.len() > 1 {
            line.push_str(&activity.doing.replace(&self.workdir, ""));
        } else {
            line.push_str(&activity.doing);
        }
        if let Some(t) = activity.tokens.filter(|t| *t > 0) {
            line.push_str(&self.paint(dim, &format!(" · {} tokens", count(t))));
        }
        line
    }

    fn paint(&self, style: fn(&str) -> String, s: &str) -> String {
        if self.color { style(s) } else { s.to_string() }
    }
}

/// `dir/`, to strip from the paths agents name.
fn dir_prefix(dir: &Path) -> String {
    let mut s = dir.to_string_lossy().into_owned();
    if !s.ends_with('/') {
        s.push('/');
    }
    s
}

/// A running time in whole seconds: `42s`, `3m 05s`, `1h 02m`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// A token count as people read it: `950`, `12.3k`, `1.2M`.
fn count(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::event::WorkerEnded;
    use crate::state::Evidence;

    fn started(lane: usize, id: &str) -> RunEvent {
        RunEvent::WorkerStarted {
            iteration: 1,
            lane,
            id: id.into(),
            attempt: 1,
            pid: None,
            sample: None,
            setup: None,
        }
    }

    fn view_with(workers: usize) -> (View, Instant) {
        let mut v = View::new(false, true);
        let t0 = v.started;
        v.update(
            &RunEvent::IterationStarted {
                iteration: 2,
                passing: 3,
                total: 20,
                to_try: workers,
                lanes: workers,
            },
            t0,
        );
        for lane in 0..workers {
            v.update(&started(lane, &format!("ISC-A-{}", lane + 1)), t0);
        }
        (v, t0)
    }

    #[test]
    fn a_worker_line_says_what_its_agent_does_now() {
        let mut v = View::new(false, true);
        let t0 = v.started;
        v.workdir = dir_prefix(Path::new("/w/project"));
        let (tx, rx) = watch::channel(Activity::default());
        v.pending.insert(Slot::new(0, 0), rx);
        v.update(&started(0, "ISC-A-1"), t0);
        let at = t0 + Duration::from_secs(75);
        assert_eq!(
            v.render(at, 100, 24),
            "▸ starting · 0/0 passing · $0.0000 · 1m 15s\n  [lane 1] ISC-A-1 1m 15s  starting"
        );
        tx.send_replace(Activity {
            doing: "Edit: /w/project/src/x.rs".into(),
            tokens: Some(12_345),
        });
        assert!(
            v.render(at, 100, 24)
                .ends_with("ISC-A-1 1m 15s  Edit: src/x.rs · 12.3k tokens"),
            "{}",
            v.render(at, 100, 24)
        );
        // It goes when its worker's end is reported, and its cost and pass count.
        v.update(
            &RunEvent::WorkerEnded(Box::new(WorkerEnded {
                iteration: 1,
                lane: 0,
                id: "ISC-A-1".into(),
                ending: Ending::Pass(Evidence::Checked),
                duration: Duration::from_secs(75),
                cost: Some(0.25),
                log: "/l".into(),
                landing: None,
                sample: None,
            })),
            at,
        );
        assert_eq!(
            v.render(at, 100, 24),
            "▸ starting · 1/0 passing · $0.2500 · 1m 15s"
        );
    }

    #[test]
    fn more_workers_than_rows_collapse_into_a_count() {
        let (v, t0) = view_with(16);
        let text = v.render(t0, 80, 8);
        let lines: Vec<&str> = text.lines().collect();
        // The header, 5 workers, the count: one row less than the terminal's.
        assert_eq!(lines.len(), 7, "{text}");
        assert_eq!(lines[1], "  [lane 1] ISC-A-1 0s  starting");
        assert_eq!(lines[6], "  … and 11 more");
        // All fit: no count.
        let text = v.render(t0, 80, 40);
        assert_eq!(text.lines().count(), 17);
        assert!(!text.contains("more"));
        // A terminal of two rows still shows the header and the count.
        assert_eq!(
            v.render(t0, 80, 2).lines().collect::<Vec<_>>(),
            [
                "▸ iteration 2 · 3/20 passing · $0.0000 · 0s",
                "  … and 16 more"
            ]
        );
    }

    #[test]
    fn no_line_is_wider_than_the_terminal() {
        let (mut v, t0) = view_with(2);
        let (tx, rx) = watch::channel(Activity::default());
        v.workers.get_mut(&Slot::new(1, 0)).unwrap().activity = Some(rx);
        tx.send_replace(Activity {
            doing: format!("Bash: {}", "cargo test ".repeat(30)),
            tokens: None,
        });
        for width in [10, 33, 80] {
            for line in v.render(t0, width, 24).lines() {
                assert!(
                    console::measure_text_width(line) <= width,
                    "{width}: {line:?}"
                );
            }
        }
        assert!(v.render(t0, 40, 24).lines().last().unwrap().ends_with('…'));
    }

    #[test]
    fn a_pause_counts_down_in_the_header_until_workers_start() {
        let (mut v, t0) = view_with(0);
        v.update(
            &RunEvent::Paused {
                label: "usage limit".into(),
                until_ms: 0,
                delay: Duration::from_secs(600),
            },
            t0,
        );
        let at = t0 + Duration::from_secs(30);
        assert!(
            v.render(at, 120, 24)
                .ends_with("· usage limit: workers start again in 9m 30s"),
            "{}",
            v.render(at, 120, 24)
        );
        assert!(
            !v.render(t0 + Duration::from_secs(601), 120, 24)
                .contains("usage limit")
        );
        v.update(&started(0, "ISC-A-1"), at);
        assert!(!v.render(at, 120, 24).contains("usage limit"));
    }

    #[test]
    fn clocks_and_counts() {
        assert_eq!(clock(Duration::from_millis(59_999)), "59s");
        assert_eq!(clock(Duration::from_secs(185)), "3m 05s");
        assert_eq!(clock(Duration::from_secs(3720)), "1h 02m");
        assert_eq!(count(950), "950");
        assert_eq!(count(12_345), "12.3k");
        assert_eq!(count(1_234_567), "1.2M");
    }

    #[test]
    fn each_sample_of_a_lane_has_its_line_until_it_ends() {
        let (mut v, t0) = view_with(0);
        for k in 0..2 {
            v.update(
                &RunEvent::WorkerStarted {
                    iteration: 1,
                    lane: 0,
                    id: "ISC-A-1".into(),
                    attempt: 1,
                    pid: None,
                    sample: Some(crate::run::event::SampleTag {
                        k,
                        n: 2,
                        setup: None,
                    }),
                    setup: None,
                },
                t0,
            );
        }
        let text = v.render(t0, 100, 24);
        assert!(
            text.contains("[sample 1/2]") && text.contains("[sample 2/2]"),
            "{text}"
        );
        v.update(
            &RunEvent::WorkerEnded(Box::new(WorkerEnded {
                iteration: 1,
                lane: 0,
                id: "ISC-A-1".into(),
                ending: Ending::Sibling,
                duration: Duration::from_secs(1),
                cost: None,
                log: "/l".into(),
                landing: None,
                sample: Some(crate::run::event::SampleTag {
                    k: 0,
                    n: 2,
                    setup: None,
                }),
            })),
            t0,
        );
        let text = v.render(t0, 100, 24);
        assert!(
            !text.contains("[sample 1/2]") && text.contains("[sample 2/2]"),
            "{text}"
        );
    }
}
