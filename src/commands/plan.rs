//! `prdloop plan`: what the next iteration would do: the lanes, each criterion in order with
//! who verifies it (the runner's command, the agent, or a person) and why, and the worker
//! command. Spawns nothing, writes nothing.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::config::PlanSettings as Settings;
use crate::exit::Exit;
use crate::plan::{Lane, partition};
use crate::prd::{Criterion, HowVerified, Prd, VerifyTypes};
use crate::report::json::Version;
use crate::{exit, outln};

/// The lanes for a PRD's failing criteria. Criteria that need a person (`Verify: Custom`)
/// get no worker.
pub fn lanes_for(prd: &Prd, agents: usize) -> Vec<Lane> {
    partition(
        prd.failing()
            .filter(|c| !c.is_custom() && !c.is_parent())
            .map(|c| (c.id.as_str(), c.domain.as_str())),
        agents,
    )
}

/// `prdloop plan <PRD>`.
pub fn plan(s: &Settings) -> Result<Exit> {
    let path = &s.prd;
    let doc = super::load_prd(path)?;
    if doc.criteria.is_empty() {
        crate::report::error(super::no_criteria_message(path, &doc));
        return Ok(exit::Exit::Usage);
    }
    match s.shards {
        Some(n) => print_shards(path, &doc, n, s)?,
        None => print(path, &doc, s)?,
    }
    Ok(exit::Exit::Success)
}

/// Who verifies a criterion: the runner (its command), the agent, or a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifiedBy {
    Runner,
    Agent,
    Person,
}

impl std::fmt::Display for VerifiedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VerifiedBy::Runner => "runner",
            VerifiedBy::Agent => "agent",
            VerifiedBy::Person => "person",
        })
    }
}

/// Why a criterion is verified by whom it is (`plan`, `verify --dry-run`): typed as the run
/// events' `why` are, `{"kind": …, …}` with camelCase fields; its words are its `Display`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Why {
    /// The runner runs its command.
    Runs { command: String },
    /// Its command's program is not installed in the workdir: the agent's verdict counts.
    CannotRunHere { command: String, text: String },
    /// It has no command the runner runs (`text`: why, as the PRD's format says).
    NoCommand { text: String },
    /// `Verify: Custom`: a person checks it.
    Custom,
}

impl Why {
    pub fn by(&self) -> VerifiedBy {
        match self {
            Why::Runs { .. } => VerifiedBy::Runner,
            Why::CannotRunHere { .. } | Why::NoCommand { .. } => VerifiedBy::Agent,
            Why::Custom => VerifiedBy::Person,
        }
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Runs { command } => write!(f, "runs `{command}`"),
            Why::CannotRunHere { text, .. } | Why::NoCommand { text } => f.write_str(text),
            Why::Custom => f.write_str("Verify: Custom"),
        }
    }
}

/// Who verifies a criterion and why. A command whose program is not installed in `workdir`
/// is the agent's, as in `run` and `verify`.
pub fn how(c: &Criterion, types: &VerifyTypes, workdir: &Path) -> Why {
    match c.how_verified(types) {
        HowVerified::Command(cmd) => match crate::verify::cannot_run_here(cmd, workdir) {
            Some(text) => Why::CannotRunHere {
                command: cmd.to_string(),
                text,
            },
            None => Why::Runs {
                command: cmd.to_string(),
            },
        },
        HowVerified::Agent { why } => Why::NoCommand { text: why },
        HowVerified::Person => Why::Custom,
    }
}

/// The first line of `plan`: the PRD's id, title and format.
fn heading(id: Option<&str>, title: Option<&str>, format: &str) -> String {
    format!(
        "{} {} ({format})",
        id.unwrap_or("(no id)"),
        title.unwrap_or("")
    )
}

/// What `plan` shows: the next iteration's lanes, the order, and the worker command.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct PlanReport<'a> {
    prd: &'a Path,
    format: &'static str,
    front_matter: bool,
    id: Option<&'a str>,
    title: Option<&'a str>,
    passing: usize,
    total: usize,
    agents: usize,
    lanes: Vec<LaneView<'a>>,
    waves: Vec<Vec<String>>,
    edges: Vec<crate::graph::Edge>,
    blocked_by_deferred: Vec<Blocked<'a>>,
    needs_person: Vec<&'a str>,
    workdir: &'a Path,
    agent: crate::backend::Agent,
    command: WorkerCommand,
    version: Version,
}

/// One lane of the next iteration.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LaneView<'a> {
    /// From 1.
    lane: usize,
    domains: Vec<String>,
    criteria: Vec<CriterionPlan<'a>>,
}

/// A criterion in a lane, with who verifies it and why.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CriterionPlan<'a> {
    id: &'a str,
    description: &'a str,
    line: usize,
    verify: Option<&'a crate::prd::Verify>,
    probe: Option<&'a crate::prd::Probe>,
    anti: bool,
    optional: bool,
    after: &'a [String],
    domain: &'a str,
    verified_by: VerifiedBy,
    why: Why,
}

/// A criterion that waits for deferred tasks.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Blocked<'a> {
    id: &'a str,
    deferred: Vec<String>,
}

/// The worker command: its program, its arguments (`<prompt>` where the prompt goes), and
/// what it reads on stdin.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WorkerCommand {
    program: String,
    args: Vec<String>,
    stdin: Stdin,
    /// For the text: the whole command line, shell-quoted.
    #[serde(skip)]
    shown: String,
}

/// What a worker reads on stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Stdin {
    /// The prompt.
    Prompt,
    /// Nothing: the prompt is an argument.
    Empty,
}

impl WorkerCommand {
    fn of(agent: &crate::backend::AgentOptions) -> WorkerCommand {
        WorkerCommand {
            program: agent.bin.clone(),
            args: agent.display_args(),
            stdin: if agent.prompt_on_stdin() {
                Stdin::Prompt
            } else {
                Stdin::Empty
            },
            shown: agent.display(),
        }
    }
}

/// The criteria of the PRD that need a person (`Verify: Custom`): no worker, no shard.
fn needs_person(prd: &Prd) -> Vec<&str> {
    prd.failing()
        .filter(|c| c.is_custom())
        .map(|c| c.id.as_str())
        .collect()
}

impl<'a> PlanReport<'a> {
    fn of(path: &'a Path, prd: &'a Prd, s: &'a Settings) -> Result<PlanReport<'a>> {
        // An unknown id or a cycle in `(after: …)` is an input error, at its line.
        let graph = crate::graph::Graph::checked(prd, path)?;
        let work: Vec<&str> = prd
            .failing()
            .filter(|c| !c.is_custom() && !c.is_parent())
            .map(|c| c.id.as_str())
            .collect();
        let waves = graph.waves(&work);
        // What waits for a deferred task: it does not start while that task is deferred.
        let blocked_by_deferred = work
            .iter()
            .map(|id| Blocked {
                id,
                deferred: graph
                    .deferred_needs(id)
                    .into_iter()
                    .map(String::from)
                    .collect(),
            })
            .filter(|b| !b.deferred.is_empty())
            .collect();
        let lanes = lanes_for(prd, s.agents)
            .iter()
            .enumerate()
            .map(|(i, l)| LaneView {
                lane: i + 1,
                domains: l.groups.iter().map(|g| g.domain.clone()).collect(),
                criteria: l
                    .ids()
                    .filter_map(|id| prd.criterion(id))
                    .map(|c| {
                        let why = how(c, &s.verify_types, &s.workdir);
                        CriterionPlan {
                            id: &c.id,
                            description: &c.description,
                            line: c.line,
                            verify: c.verify.as_ref(),
                            probe: c.probe.as_ref(),
                            anti: c.anti,
                            optional: c.optional,
                            after: &c.after,
                            domain: &c.domain,
                            verified_by: why.by(),
                            why,
                        }
                    })
                    .collect(),
            })
            .collect();
        let (passing, total) = prd.progress();
        Ok(PlanReport {
            prd: path,
            format: prd.format_name(),
            front_matter: prd.has_front_matter(),
            id: prd.id(),
            title: prd.display_title(),
            passing,
            total,
            agents: s.agents,
            lanes,
            waves,
            edges: graph.edges,
            blocked_by_deferred,
            needs_person: needs_person(prd),
            workdir: &s.workdir,
            agent: s.agent.agent,
            command: WorkerCommand::of(&s.agent),
            version: Version,
        })
    }

    fn text(&self, out: &mut String) {
        outln!(out, "{}", heading(self.id, self.title, self.format));
        outln!(
            out,
            "{}/{} passing; next iteration: {} criteria in {} lane(s) (-a {})",
            self.passing,
            self.total,
            self.lanes.iter().map(|l| l.criteria.len()).sum::<usize>(),
            self.lanes.len(),
            self.agents
        );
        for lane in &self.lanes {
            outln!(
                out,
                "\nlane {} ({}): {}",
                lane.lane,
                lane.criteria.len(),
                lane.domains.join(", ")
            );
            for c in &lane.criteria {
                let optional = if c.optional { " (optional)" } else { "" };
                outln!(out, "  {:<14} {}{optional}", c.id, c.description);
                outln!(
                    out,
                    "  {:<14} checked by the {}: {}",
                    "",
                    c.verified_by,
                    c.why
                );
            }
        }
        if !self.edges.is_empty() {
            outln!(
                out,
                "\norder (after:): {} wave(s); a criterion starts once what it needs passes",
                self.waves.len()
            );
            for (i, w) in self.waves.iter().enumerate() {
                outln!(out, "  wave {}: {}", i + 1, w.join(", "));
            }
            for e in &self.edges {
                outln!(out, "  {} needs {} (line {})", e.criterion, e.needs, e.line);
            }
        }
        if !self.blocked_by_deferred.is_empty() {
            outln!(
                out,
                "\nblocked by a deferred task (not started while it is deferred):"
            );
            for b in &self.blocked_by_deferred {
                outln!(out, "  {} needs {}", b.id, b.deferred.join(", "));
            }
        }
        if !self.needs_person.is_empty() {
            outln!(
                out,
                "\nneeds a person (Verify: Custom), no worker: {}",
                self.needs_person.join(", ")
            );
        }
        let stdin = match self.command.stdin {
            Stdin::Prompt => "prompt on stdin",
            Stdin::Empty => "the prompt as an argument, stdin empty",
        };
        outln!(
            out,
            "\nworker command ({}; one per criterion, {stdin}, in {}):",
            self.agent,
            self.workdir.display()
        );
        outln!(out, "  {}", self.command.shown);
    }
}

pub fn print(path: &Path, prd: &Prd, s: &Settings) -> Result<()> {
    let report = PlanReport::of(path, prd, s)?;
    let mut out = String::new();
    if s.json {
        crate::report::json::push_report(&mut out, &report)?;
    } else {
        report.text(&mut out);
    }
    crate::report::stdout(&out)?;
    Ok(())
}

/// What `plan --shards N` shows: each shard's criteria and the GitHub Actions matrix.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ShardsReport<'a> {
    prd: &'a Path,
    id: Option<&'a str>,
    title: Option<&'a str>,
    passing: usize,
    total: usize,
    shards_asked: usize,
    durations_known: bool,
    shards: Vec<ShardView<'a>>,
    needs_person: Vec<&'a str>,
    /// The GitHub Actions matrix: `{"include": [{"shard": "1/N"}, …]}`.
    #[serde(flatten)]
    matrix: serde_json::Value,
    version: Version,
    /// For the text: the PRD's format, and how many criteria and domain groups are shared.
    #[serde(skip)]
    format: &'static str,
    #[serde(skip)]
    criteria: usize,
    #[serde(skip)]
    groups: usize,
}

/// One shard (`I/N`) and its criteria.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ShardView<'a> {
    shard: String,
    domains: Vec<String>,
    /// What its criteria are expected to take, when earlier durations are known.
    expected_ms: Option<u64>,
    criteria: Vec<ShardCriterion<'a>>,
}

/// A criterion in a shard, with who verifies it and why.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ShardCriterion<'a> {
    id: &'a str,
    description: &'a str,
    line: usize,
    domain: &'a str,
    verified_by: VerifiedBy,
    why: Why,
}

impl<'a> ShardsReport<'a> {
    fn of(path: &'a Path, prd: &'a Prd, n: usize, s: &'a Settings) -> ShardsReport<'a> {
        let items = crate::shard::items(prd);
        // By count, never by what this machine's earlier workers took: every job must compute
        // the same split from the PRD alone, whatever history its machine has.
        let expected: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
        let shards = crate::shard::split(prd, n, &expected);
        let jobs = crate::shard::jobs(&shards, n);
        let weight = |l: &Lane| -> Option<u64> {
            (!expected.is_empty()).then(|| {
                l.ids()
                    .map(|id| expected.get(id).copied().unwrap_or(1))
                    .sum()
            })
        };
        let views = (0..jobs)
            .map(|i| {
                let empty = Lane::default();
                let l = shards.get(i).unwrap_or(&empty);
                ShardView {
                    shard: format!("{}/{jobs}", i + 1),
                    domains: l.groups.iter().map(|g| g.domain.clone()).collect(),
                    expected_ms: weight(l),
                    criteria: l
                        .ids()
                        .filter_map(|id| prd.criterion(id))
                        .map(|c| {
                            let why = how(c, &s.verify_types, &s.workdir);
                            ShardCriterion {
                                id: &c.id,
                                description: &c.description,
                                line: c.line,
                                domain: &c.domain,
                                verified_by: why.by(),
                                why,
                            }
                        })
                        .collect(),
                }
            })
            .collect();
        let (passing, total) = prd.progress();
        ShardsReport {
            prd: path,
            id: prd.id(),
            title: prd.display_title(),
            passing,
            total,
            shards_asked: n,
            durations_known: !expected.is_empty(),
            shards: views,
            needs_person: needs_person(prd),
            matrix: crate::shard::matrix(jobs),
            version: Version,
            format: prd.format_name(),
            criteria: items.len(),
            groups: shards.len(),
        }
    }

    fn text(&self, out: &mut String) {
        let (n, jobs) = (self.shards_asked, self.shards.len());
        outln!(out, "{}", heading(self.id, self.title, self.format));
        outln!(
            out,
            "{}/{} passing; {} criteria in {jobs} shard(s) (--shards {n}){}",
            self.passing,
            self.total,
            self.criteria,
            if self.durations_known {
                ", balanced by what earlier workers took"
            } else {
                ", balanced by count"
            }
        );
        if jobs < n {
            outln!(
                out,
                "only {} domain group(s) to share: {jobs} shard(s), since a domain is never split",
                self.groups
            );
        }
        for shard in &self.shards {
            let est = shard
                .expected_ms
                .map(|ms| {
                    format!(
                        ", ~{}",
                        crate::report::duration(std::time::Duration::from_millis(ms))
                    )
                })
                .unwrap_or_default();
            outln!(
                out,
                "\nshard {} ({}{est}): {}",
                shard.shard,
                shard.criteria.len(),
                shard.domains.join(", ")
            );
            for c in &shard.criteria {
                outln!(out, "  {:<14} {}", c.id, c.description);
            }
        }
        if !self.needs_person.is_empty() {
            outln!(
                out,
                "\nneeds a person (Verify: Custom), in no shard: {}",
                self.needs_person.join(", ")
            );
        }
        outln!(out, "\nGitHub Actions matrix: {}", self.matrix);
        outln!(
            out,
            "each job: prdloop run {} --shard I/{jobs} --bundle DIR; then: prdloop merge {} DIR...",
            self.prd.display(),
            self.prd.display()
        );
    }
}

/// `plan --shards N`: each shard's criteria and, with `--json`, the GitHub Actions matrix.
fn print_shards(path: &Path, prd: &Prd, n: usize, s: &Settings) -> Result<()> {
    let report = ShardsReport::of(path, prd, n, s);
    let mut out = String::new();
    if s.json {
        crate::report::json::push_report(&mut out, &report)?;
    } else {
        report.text(&mut out);
    }
    crate::report::stdout(&out)?;
    Ok(())
}
