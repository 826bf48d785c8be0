//! Best-of-N settings: samples per attempt (fixed or `auto`), the winner's choice, the
//! `--mix` set-ups samples are spread across and the `--escalate` ladder.

use super::*;

/// Best-of-N: how many samples each attempt runs, how the winner is chosen, and the agent
/// set-ups they are round-robined across.
#[derive(Debug, Clone)]
pub struct Samples {
    /// The most samples one attempt runs: `--best-of N`, or MAX of `--best-of auto:MAX`.
    pub n: u32,
    /// `--best-of auto`: each attempt runs 1 to `n` samples, by its domain's pass rate.
    pub auto: bool,
    pub select: Select,
    /// `--mix`, resolved; empty = every sample runs the run's agent.
    pub mix: Vec<Setup>,
    /// `--escalate`, `--escalate-after`, `--fallback`.
    pub escalate: Escalate,
}

impl Default for Samples {
    fn default() -> Samples {
        Samples {
            n: 1,
            auto: false,
            select: Select::First,
            mix: Vec::new(),
            escalate: Escalate::default(),
        }
    }
}

/// The set-ups a failing criterion climbs (`--escalate`), after how many failed attempts on
/// one (`--escalate-after`), and whether a usage limit hands work to the next (`--fallback`).
#[derive(Debug, Clone)]
pub struct Escalate {
    /// Empty: no escalation (every worker runs the run's agent, or its `--mix` set-up).
    pub setups: Vec<Setup>,
    pub after: u32,
    pub fallback: bool,
}

impl Default for Escalate {
    fn default() -> Escalate {
        Escalate {
            setups: Vec::new(),
            after: 2,
            fallback: false,
        }
    }
}

/// One agent set-up of `--mix`.
#[derive(Debug, Clone)]
pub struct Setup {
    /// As the user wrote it: `claude:opus`.
    pub label: String,
    pub agent: AgentOptions,
}

impl Samples {
    /// The set-up sample `k` (from 0) runs, and its label (`None`: the run's agent).
    pub fn setup(&self, k: u32) -> Option<&Setup> {
        (!self.mix.is_empty()).then(|| &self.mix[k as usize % self.mix.len()])
    }
}

/// The flags that take a list of agent set-ups: what an error about one names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupsFlag {
    Mix,
    Escalate,
    Verifier,
}

impl SetupsFlag {
    pub fn name(self) -> &'static str {
        match self {
            SetupsFlag::Mix => "--mix",
            SetupsFlag::Escalate => "--escalate",
            SetupsFlag::Verifier => "--verifier",
        }
    }
}

/// `--mix claude:opus,codex,gemini:gemini-2.5-pro` (or the list of `flag`) as agent set-ups.
/// An entry without a model takes `--model` when it is the run's own agent; `--agent-bin`
/// applies to the run's own agent only.
pub fn mix(
    spec: &str,
    flag: SetupsFlag,
    w: &WorkerOpts,
) -> Result<(Vec<Setup>, Vec<super::Warning>)> {
    let flag = flag.name();
    let own = w.agent.unwrap_or_default();
    let mut setups = Vec::new();
    let mut warnings = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, model) = match entry.split_once(':') {
            Some((n, m)) => (
                n.trim(),
                Some(m.trim().to_string()).filter(|m| !m.is_empty()),
            ),
            None => (entry, None),
        };
        let agent: crate::backend::Agent = name
            .parse()
            .map_err(|e| anyhow::anyhow!("{flag} `{entry}`: {e}"))?;
        let mut opts = w.clone();
        opts.agent = Some(agent);
        if agent != own {
            opts.agent_bin = None;
            opts.model = None;
        }
        if model.is_some() {
            opts.model = model;
        }
        let (agent_opts, w) = agent_options(&opts)?;
        for x in w {
            if !warnings.contains(&x) {
                warnings.push(x);
            }
        }
        setups.push(Setup {
            label: entry.to_string(),
            agent: agent_opts,
        });
    }
    if setups.is_empty() {
        anyhow::bail!("{flag} `{spec}` names no agent set-up (e.g. claude:opus,claude:sonnet)");
    }
    Ok((setups, warnings))
}
