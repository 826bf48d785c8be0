//! Scheduling over a family of workloads, not one: `cargo bench --bench family_bench`.
//!
//! A generator draws, per seed, a workload prdloop has not been tuned to: how many domains and
//! how uneven, the duration distribution (uniform, long-tailed or two-humped, scaled per
//! domain), how many criteria fail and how often (1 to 3 times, each failed attempt a share
//! of the passing one's time), dependency chains `(after: …)` across domains, shared files
//! named in the text (footprints), and the lanes (`-a 2` to `-a 8`).
//!
//! A simulator, pure (no processes, no clock), drives the run's own scheduling code on it: the
//! flow (`Flow`, the default) and PAI's iterations (`LanePlan` per iteration over
//! `partition_weighted`, `--rounds barrier`), with the durations the workload says. Per seed
//! it computes the free bound (max of all attempts' time ÷ lanes, the largest domain's or
//! shared file's attempts (the flow never runs two attempts on one file at once), the
//! longest chain of attempts along `(after: …)`), the barrier bound (per iteration the same,
//! domains only, summed) and both policies' makespans; it prints the median and the worst
//! over the seeds (`FAMILY_SEEDS`, default 40, from `FAMILY_SEED_BASE`, default 0). The
//! barrier keeps only domains apart, so two attempts on one shared file may run at once in an
//! iteration: the simulator charges it what a real run pays, the later one to merge conflicts
//! (its work is lost and it is made again in the next iteration). For reference it also runs
//! a clairvoyant greedy that knows every attempt's duration (`sim_clairvoyant`): what no
//! online policy can reach, and how loose the free bound is on a seed. And it runs each
//! workload a second time, as `run` would after a first run of the PRD: each criterion weighed
//! by what its attempts took (the ledger's `expected_ms`), both policies given the same
//! weights (`Prior::EarlierRun`).
//!
//! `cargo bench --bench family_bench -- real [N]` also runs the real runner against the fake
//! agent on the first N seeds (default 3), both modes, in a git repository whose shared files
//! the passing attempts append to (so the barrier's attempts on one file conflict for real),
//! and prints each run's makespan (from its attempts log) ÷ the seed's free bound, beside what
//! the simulator said. It is opt-in: each seed takes several seconds of sleeping agents.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

#[path = "support/fake_run.rs"]
mod fake_run;

use prdloop::graph::Graph;
use prdloop::plan::partition_weighted;
use prdloop::prd::Prd;
use prdloop::run::flow::plan::LanePlan;
use prdloop::run::flow::{Flow, Work};

/// splitmix64: a small seeded generator, so each seed draws the same workload everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Crit {
    id: String,
    domain: String,
    /// Each attempt's duration in ms; the last one passes.
    attempts: Vec<u64>,
    after: Option<String>,
    file: Option<String>,
}

struct Workload {
    crits: Vec<Crit>,
    lanes: usize,
    text: String,
}

fn draw(seed: u64) -> Workload {
    let mut r = Rng(seed.wrapping_mul(7919) ^ 0xA5A5);
    let domains = r.range(3, 14) as usize;
    let lanes = r.range(2, 8) as usize;
    let shape = r.range(0, 2);
    let fail_share = r.unit() * 0.45;
    let shared_files = r.range(0, 4);
    let mut crits: Vec<Crit> = Vec::new();
    for d in 0..domains {
        // Uneven domains: a few large, many small.
        let size = 1 + (r.unit().powi(2) * 9.0) as usize;
        let scale = 0.5 + r.unit() * 1.5;
        for i in 0..size {
            let base = match shape {
                0 => r.range(150, 1500) as f64,
                1 => 150.0 * (1.0 + 9.0 * r.unit().powi(3)),
                _ if r.unit() < 0.8 => r.range(100, 300) as f64,
                _ => r.range(1000, 2000) as f64,
            };
            let pass = (base * scale) as u64;
            let mut attempts = Vec::new();
            if r.unit() < fail_share {
                for _ in 0..r.range(1, 3) {
                    attempts.push((pass as f64 * (0.2 + 0.8 * r.unit())) as u64);
                }
            }
            attempts.push(pass);
            let file = (shared_files > 0 && r.unit() < 0.25)
                .then(|| format!("src/shared{}.rs", r.range(1, shared_files)));
            crits.push(Crit {
                id: format!("ISC-D{d}-{}", i + 1),
                domain: format!("D{d}"),
                attempts,
                after: None,
                file,
            });
        }
    }
    // Chains across domains: each link needs one drawn from an earlier domain.
    for _ in 0..r.range(0, 3) {
        let len = r.range(2, 4) as usize;
        let mut prev: Option<usize> = None;
        for _ in 0..len {
            let at = r.range(0, crits.len() as u64 - 1) as usize;
            if let Some(p) = prev
                && p < at
                && crits[at].after.is_none()
            {
                crits[at].after = Some(crits[p].id.clone());
                prev = Some(at);
            } else if prev.is_none() {
                prev = Some(at);
            }
        }
    }
    let mut text =
        String::from("---\nid: PRD-family\nmaxIterations: 8\n---\n\n# Family\n\n## CRITERIA\n\n");
    for c in &crits {
        text.push_str(&format!("- [ ] {}: a criterion", c.id));
        if let Some(f) = &c.file {
            text.push_str(&format!(", edits `{f}`"));
        }
        if let Some(a) = &c.after {
            text.push_str(&format!(" (after: {a})"));
        }
        text.push('\n');
    }
    Workload { crits, lanes, text }
}

/// max(time ÷ lanes, the largest domain's (or shared file's) time, the longest chain), over
/// `attempts` (each criterion's attempts in the set measured).
fn bound(w: &Workload, attempts: &HashMap<&str, Vec<u64>>, files: bool) -> u64 {
    let total: u64 = attempts.values().flatten().sum();
    // Domains, and shared files when `files`: neither runs two attempts at once.
    let mut domains: HashMap<&str, u64> = HashMap::new();
    for c in &w.crits {
        let t: u64 = attempts.get(c.id.as_str()).map_or(0, |a| a.iter().sum());
        *domains.entry(&c.domain).or_default() += t;
        if let (true, Some(f)) = (files, &c.file) {
            *domains.entry(f).or_default() += t;
        }
    }
    let by_id: HashMap<&str, &Crit> = w.crits.iter().map(|c| (c.id.as_str(), c)).collect();
    let longest = w
        .crits
        .iter()
        .map(|last| {
            let (mut c, mut t) = (last, 0);
            loop {
                t += attempts
                    .get(c.id.as_str())
                    .map_or(0, |a| a.iter().sum::<u64>());
                match c.after.as_deref().and_then(|a| by_id.get(a).copied()) {
                    Some(p) => c = p,
                    None => return t,
                }
            }
        })
        .max()
        .unwrap_or(0);
    let dmax = domains.values().copied().max().unwrap_or(0);
    (total / w.lanes as u64).max(dmax).max(longest)
}

fn free_bound(w: &Workload) -> u64 {
    let all = w
        .crits
        .iter()
        .map(|c| (c.id.as_str(), c.attempts.clone()))
        .collect();
    bound(w, &all, true)
}

/// What the flow knows of each criterion's attempts when it starts: nothing (a first run), or
/// what an earlier run of the same PRD left in its attempts log, weighed as the ledger's
/// `expected_ms` weighs it: the larger of the criterion's own mean attempt and its domain's.
#[derive(Clone, Copy, PartialEq)]
enum Prior {
    None,
    EarlierRun,
}

fn weights(w: &Workload, prior: Prior) -> HashMap<&str, u64> {
    if prior == Prior::None {
        return HashMap::new();
    }
    let mean = |a: &[u64]| a.iter().sum::<u64>() / a.len() as u64;
    let mut domains: HashMap<&str, (u64, u64)> = HashMap::new();
    for c in &w.crits {
        let d = domains.entry(&c.domain).or_default();
        d.0 += c.attempts.iter().sum::<u64>();
        d.1 += c.attempts.len() as u64;
    }
    w.crits
        .iter()
        .map(|c| {
            let (t, n) = domains[c.domain.as_str()];
            (c.id.as_str(), mean(&c.attempts).max(t / n))
        })
        .collect()
}

/// The flow on the workload: the makespan in ms.
fn sim_flow(w: &Workload, prior: Prior, trace: bool) -> u64 {
    let prd = Prd::parse(w.text.clone()).unwrap();
    let graph = Graph::of(&prd).unwrap();
    let known = weights(w, prior);
    let work = prd
        .criteria
        .iter()
        .map(|c| Work::of(c, known.get(c.id.as_str()).copied().unwrap_or(1)))
        .collect();
    let mut flow = Flow::new(work, &graph, w.lanes, 8, |_| None);
    let by_id: HashMap<&str, &Crit> = w.crits.iter().map(|c| (c.id.as_str(), c)).collect();
    let mut made: HashMap<String, usize> = HashMap::new();
    let mut passed: HashSet<String> = HashSet::new();
    // (end, lane, id)
    let mut running: Vec<(u64, usize, String)> = Vec::new();
    let mut now = 0;
    loop {
        for lane in flow.idle_lanes() {
            if let Some(id) = flow.next_for_lane(lane) {
                let k = made.entry(id.clone()).or_default();
                let atts = &by_id[id.as_str()].attempts;
                let ms = atts[(*k).min(atts.len() - 1)];
                *k += 1;
                if trace {
                    eprintln!("{now:6} lane {lane} {id} #{k} {ms} ms");
                }
                running.push((now + ms, lane, id));
            }
        }
        let Some(at) = (0..running.len()).min_by_key(|&i| running[i].0) else {
            return now;
        };
        let (end, lane, id) = running.swap_remove(at);
        now = end;
        let atts = &by_id[id.as_str()].attempts;
        if made[&id] >= atts.len() {
            passed.insert(id.clone());
            flow.observed(&id, atts[atts.len() - 1]);
        }
        flow.lane_ended(lane);
        flow.settle(|c| passed.contains(c));
    }
}

/// A clairvoyant greedy on the workload, for reference (no online policy can know what it
/// knows): every attempt's duration. A free lane takes the ready criterion (its needs passed,
/// its domain and shared file not running) with the most known work behind it: the larger
/// of its domain's, its shared file's and its chain's remaining attempts. The makespan in ms.
fn sim_clairvoyant(w: &Workload) -> u64 {
    let n = w.crits.len();
    let idx: HashMap<&str, usize> = w
        .crits
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let mut made = vec![0usize; n];
    let mut passed = vec![false; n];
    let mut running: Vec<(u64, usize)> = Vec::new();
    let mut busy = vec![false; n];
    let left = |i: usize, made: &[usize]| -> u64 { w.crits[i].attempts[made[i]..].iter().sum() };
    let mut now = 0;
    loop {
        while running.len() < w.lanes {
            let mut best: Option<(u64, u64, usize)> = None;
            for i in 0..n {
                let c = &w.crits[i];
                if passed[i] || busy[i] {
                    continue;
                }
                if c.after.as_deref().is_some_and(|a| !passed[idx[a]]) {
                    continue;
                }
                let clash = running.iter().any(|&(_, j)| {
                    let o = &w.crits[j];
                    o.domain == c.domain || (c.file.is_some() && o.file == c.file)
                });
                if clash {
                    continue;
                }
                let dom: u64 = (0..n)
                    .filter(|&j| !passed[j] && w.crits[j].domain == c.domain)
                    .map(|j| left(j, &made))
                    .sum();
                let file: u64 = c.file.as_ref().map_or(0, |f| {
                    (0..n)
                        .filter(|&j| !passed[j] && w.crits[j].file.as_ref() == Some(f))
                        .map(|j| left(j, &made))
                        .sum()
                });
                let mut chain = 0;
                let mut k = Some(i);
                while let Some(j) = k {
                    chain += left(j, &made);
                    k = w
                        .crits
                        .iter()
                        .position(|d| d.after.as_deref() == Some(w.crits[j].id.as_str()));
                }
                let key = (dom.max(file).max(chain), left(i, &made), i);
                if best.is_none_or(|b| (key.0, key.1) > (b.0, b.1)) {
                    best = Some(key);
                }
            }
            let Some((_, _, i)) = best else { break };
            busy[i] = true;
            running.push((now + w.crits[i].attempts[made[i]], i));
        }
        let Some(at) = (0..running.len()).min_by_key(|&k| running[k].0) else {
            return now;
        };
        let (end, i) = running.swap_remove(at);
        now = end;
        busy[i] = false;
        made[i] += 1;
        if made[i] >= w.crits[i].attempts.len() {
            passed[i] = true;
        }
    }
}

/// PAI's iterations on the workload: the makespan and the barrier bound, in ms, and how many
/// attempts conflicted on a shared file. With `prior`, what an earlier run took weighs each
/// criterion until this run's own attempts do.
fn sim_barrier(w: &Workload, prior: Prior) -> (u64, u64, u64) {
    let known = weights(w, prior);
    let by_id: HashMap<&str, &Crit> = w.crits.iter().map(|c| (c.id.as_str(), c)).collect();
    let mut made: HashMap<&str, usize> = HashMap::new();
    let mut ran: HashMap<&str, Vec<u64>> = HashMap::new();
    let mut passed: HashSet<&str> = HashSet::new();
    let (mut now, mut bounds, mut conflicts) = (0, 0, 0);
    for _ in 0..64 {
        let items: Vec<(&str, &str)> = w
            .crits
            .iter()
            .filter(|c| !passed.contains(c.id.as_str()))
            .filter(|c| c.after.as_deref().is_none_or(|a| passed.contains(a)))
            .map(|c| (c.id.as_str(), c.domain.as_str()))
            .collect();
        if items.is_empty() {
            break;
        }
        // What earlier attempts took (the ledger's expected_ms: its own mean, else 1).
        let weight = |id: &str| {
            ran.get(id).map_or_else(
                || known.get(id).copied().unwrap_or(1),
                |v| v.iter().sum::<u64>() / v.len() as u64,
            )
        };
        let lanes = partition_weighted(items.iter().copied(), w.lanes, weight);
        let mut s = LanePlan::weighted(&lanes, weight);
        let mut this: HashMap<&str, Vec<u64>> = HashMap::new();
        let mut running: Vec<(u64, usize, String)> = Vec::new();
        // When each running attempt began, and when each shared file was last merged into.
        let mut now_of: HashMap<&str, u64> = HashMap::new();
        let mut merged: HashMap<&str, u64> = HashMap::new();
        let start = now;
        loop {
            for lane in s.idle_lanes() {
                if let Some(id) = s.next_for_lane(lane) {
                    let c = by_id[id.as_str()];
                    let k = made.entry(c.id.as_str()).or_default();
                    let ms = c.attempts[(*k).min(c.attempts.len() - 1)];
                    *k += 1;
                    this.entry(c.id.as_str()).or_default().push(ms);
                    ran.entry(c.id.as_str()).or_default().push(ms);
                    s.set_running(lane, Some(id.clone()));
                    now_of.insert(c.id.as_str(), now);
                    running.push((now + ms, lane, id));
                }
            }
            let Some(at) = (0..running.len()).min_by_key(|&i| running[i].0) else {
                break;
            };
            let (end, lane, id) = running.swap_remove(at);
            let began = now_of[id.as_str()];
            now = end;
            s.set_running(lane, None);
            let c = by_id[id.as_str()];
            // The barrier keeps only domains apart: an attempt on a shared file that another
            // attempt merged into while it ran conflicts, as in a real run. Its work is lost
            // and it is made again in the next iteration (the same attempt: not one of its
            // failures).
            if let Some(f) = &c.file
                && merged.get(f.as_str()).is_some_and(|&m| m > began)
            {
                *made.get_mut(c.id.as_str()).expect("made") -= 1;
                conflicts += 1;
                continue;
            }
            if let Some(f) = &c.file {
                merged.insert(f.as_str(), end);
            }
            if made[c.id.as_str()] >= c.attempts.len() {
                passed.insert(c.id.as_str());
            }
        }
        let longest = this.values().flatten().copied().max().unwrap_or(0);
        // The barrier keeps domains apart only (its conflicts cost it attempts made again).
        bounds += bound(w, &this, false).max(longest);
        debug_assert!(now - start >= longest);
    }
    (now, bounds, conflicts)
}

/// The median, the 90th percentile and the worst.
fn quantiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[v.len() * 9 / 10], v[v.len() - 1])
}

fn main() {
    let seeds: u64 = std::env::var("FAMILY_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    // Another base draws other workloads: a check that the policy is not tuned to the first.
    let base: u64 = std::env::var("FAMILY_SEED_BASE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let real = args
        .iter()
        .position(|a| a == "real")
        .map(|i| args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(3));
    let (mut flow_free, mut barrier_free, mut flow_barrier) = (vec![], vec![], vec![]);
    let (mut clairvoyant_free, mut second_free) = (vec![], vec![]);
    let mut second_slower = Vec::new();
    let mut worse = Vec::new();
    let mut all_conflicts = 0;
    println!(
        "seed lanes crits free_ms barrier_bound_ms flow_ms barrier_ms flow/free barrier/free clairvoyant/free second/free second_barrier/free"
    );
    for seed in base..base + seeds {
        let w = draw(seed);
        let free = free_bound(&w);
        let trace = std::env::var("FAMILY_TRACE").is_ok_and(|t| t == seed.to_string());
        if trace {
            for c in &w.crits {
                eprintln!(
                    "{} {:?} after {:?} file {:?}",
                    c.id, c.attempts, c.after, c.file
                );
            }
        }
        let flow = sim_flow(&w, Prior::None, trace);
        let second = sim_flow(&w, Prior::EarlierRun, false);
        let (barrier, barrier_bound, conflicts) = sim_barrier(&w, Prior::None);
        let (second_barrier, _, _) = sim_barrier(&w, Prior::EarlierRun);
        let clairvoyant = sim_clairvoyant(&w);
        all_conflicts += conflicts;
        println!(
            "{seed:4} {:5} {:5} {free:7} {barrier_bound:16} {flow:7} {barrier:10} {:9.3} {:12.3} {:11.3} {:11.3} {:19.3}",
            w.lanes,
            w.crits.len(),
            flow as f64 / free as f64,
            barrier as f64 / free as f64,
            clairvoyant as f64 / free as f64,
            second as f64 / free as f64,
            second_barrier as f64 / free as f64
        );
        clairvoyant_free.push(clairvoyant as f64 / free as f64);
        second_free.push(second as f64 / free as f64);
        if second > second_barrier {
            second_slower.push(seed);
        }
        flow_free.push(flow as f64 / free as f64);
        barrier_free.push(barrier as f64 / free as f64);
        flow_barrier.push(flow as f64 / barrier as f64);
        if flow > barrier {
            // Below the free bound would mean the barrier gained from running attempts on one
            // shared file at once: with conflicts charged, it should not happen.
            worse.push((seed, barrier < free));
        }
    }
    let slower: Vec<u64> = worse.iter().filter(|w| !w.1).map(|w| w.0).collect();
    let overlapped: Vec<u64> = worse.iter().filter(|w| w.1).map(|w| w.0).collect();
    let (fm, f9, fw) = quantiles(flow_free);
    let (bm, b9, bw) = quantiles(barrier_free);
    let (rm, r9, rw) = quantiles(flow_barrier);
    let (cm, c9, cw) = quantiles(clairvoyant_free);
    println!("clairvoyant greedy / free bound: median {cm:.3}, p90 {c9:.3}, worst {cw:.3}");
    let (sm, s9, sw) = quantiles(second_free);
    println!(
        "second run (durations from an earlier run's attempts log) / free bound: median {sm:.3}, p90 {s9:.3}, worst {sw:.3}; slower than the barrier given the same durations on {second_slower:?}"
    );
    println!(
        "family, {seeds} seeds from {base} (simulated): flow / free bound median {fm:.3}, p90 {f9:.3}, worst {fw:.3}; barrier / free bound median {bm:.3}, p90 {b9:.3}, worst {bw:.3}; flow / barrier median {rm:.3}, p90 {r9:.3}, worst {rw:.3}; seeds where the flow is slower than the barrier: {:?}, and where the barrier is below the free bound: {:?}; barrier attempts lost to shared-file conflicts: {all_conflicts} (goal: median <= 1.05, worst <= 1.25, none slower)",
        slower, overlapped
    );
    if let Some(n) = real {
        real_runs(n);
    }
}

const PRDLOOP: &str = env!("CARGO_BIN_EXE_prdloop");

/// The real runner on the first `n` seeds, both modes.
fn real_runs(n: u64) {
    let root = tempfile::tempdir().unwrap();
    for seed in 0..n {
        let w = draw(seed);
        let mut plan = serde_json::Map::new();
        for c in &w.crits {
            let last = c.attempts.len() - 1;
            let steps: Vec<String> = c
                .attempts
                .iter()
                .enumerate()
                .map(|(i, ms)| match (i == last, &c.file) {
                    // The passing attempt of a criterion that names a shared file appends
                    // to it: two at once conflict when the second is merged.
                    (true, Some(f)) => {
                        format!(
                            "sh:sleep {:.3} && echo {} >> {f}",
                            *ms as f64 / 1000.0,
                            c.id
                        )
                    }
                    (true, None) => format!("sleep:{ms}"),
                    (false, _) => format!("sleep-fail:{ms}"),
                })
                .collect();
            plan.insert(c.id.clone(), serde_json::json!(steps));
        }
        let free = free_bound(&w);
        let mut line = format!(
            "real seed {seed} (-a {}, {} criteria):",
            w.lanes,
            w.crits.len()
        );
        for rounds in ["continuous", "barrier"] {
            let dir = root.path().join(format!("{seed}-{rounds}"));
            let attempts = run_real(&dir, &w, &plan, rounds);
            let (mut start, mut end) = (u64::MAX, 0);
            for a in &attempts {
                start = start.min(a["startedAt"].as_u64().unwrap());
                end = end.max(a["finishedAt"].as_u64().unwrap());
            }
            let simulated = match rounds {
                "continuous" => sim_flow(&w, Prior::None, false),
                _ => sim_barrier(&w, Prior::None).0,
            };
            line.push_str(&format!(
                " {rounds} {} ms = {:.3} x the free bound (simulated {:.3}), {} attempts;",
                end - start,
                (end - start) as f64 / free as f64,
                simulated as f64 / free as f64,
                attempts.len()
            ));
        }
        println!("{line}");
    }
}

fn run_real(
    dir: &Path,
    w: &Workload,
    plan: &serde_json::Map<String, serde_json::Value>,
    rounds: &str,
) -> Vec<serde_json::Value> {
    let plan = serde_json::Value::Object(plan.clone());
    let mut cmd = fake_run::command(PRDLOOP, dir, &w.text, &plan);
    cmd.args(["-a", &w.lanes.to_string(), "-n", "8"]).args([
        "--stall",
        "0",
        "--rounds",
        rounds,
        "--verifier",
        "none",
    ]);
    let files: BTreeSet<String> = w.crits.iter().filter_map(|c| c.file.clone()).collect();
    fake_run::repository(dir, &files.into_iter().collect::<Vec<_>>(), &mut cmd);
    let status = cmd.status().unwrap();
    assert!(status.code().is_some(), "{status}");
    fake_run::attempts(dir)
}
