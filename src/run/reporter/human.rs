//! What people read of a run: a line per event (the worker's end with how its tick was
//! earned, the iteration's), and the summary with the cost per passed criterion.

use super::*;

fn lane_tag(lane: usize) -> String {
    dim(&format!("[lane {}]", lane + 1))
}

/// A sum of costs as the agent reported them: `$0.1234`, or `cost not reported`.
fn cost_text(agent: Agent, cost: f64) -> String {
    if cost > 0.0 || agent.reports_cost() {
        format!("${cost:.4}")
    } else {
        "cost not reported".into()
    }
}

/// The lines a person reads, for workers of `agent`.
pub fn human_for(e: &RunEvent, agent: Agent) -> Vec<String> {
    match e {
        RunEvent::Warning(m) => vec![format!("{} {m}", yellow("warning:"))],
        RunEvent::Error(m) => vec![format!("{} {m}", red("error:"))],
        RunEvent::Notice(m) => vec![yellow(&m.to_string())],
        RunEvent::Resumed {
            session,
            iterations,
            attempts,
            cost,
            kept,
        } => vec![format!(
            "{} session {session}: {iterations} earlier iteration(s), {attempts} attempt(s), ${cost:.4} spent{}",
            bold("resuming"),
            if kept.is_empty() {
                String::new()
            } else {
                format!(" · with its {kept}")
            }
        )],
        RunEvent::Started(s) => vec![
            format!(
                "{} {} {}",
                bold("prdloop"),
                s.id.as_deref().unwrap_or(""),
                s.title
            ),
            format!(
                "  {}/{} passing · up to {} agents{} · at most {} iterations · session {}",
                s.passing,
                s.total,
                s.agents,
                // claude is the default and goes unsaid.
                if agent == Agent::Claude {
                    String::new()
                } else {
                    format!(" ({agent})")
                },
                s.max_iterations,
                s.session
            ),
            format!(
                "  workdir {} · logs {}",
                s.workdir.display(),
                s.log_dir.display()
            ),
        ],
        RunEvent::ChecksStarting { count } => {
            vec![dim(&format!("checking {count} Verify command(s)…"))]
        }
        RunEvent::StartCheck { id, failed } => vec![match failed {
            None => format!(
                "  {id} {} its Verify command already passes: ticked without an agent",
                green("PASS")
            ),
            Some(reason) => format!(
                "  {id} {} ticked, but its Verify command fails: unticked — {}",
                red("FAIL"),
                one_line(&reason.to_string(), 200)
            ),
        }],
        RunEvent::IterationStarted {
            iteration,
            passing,
            total,
            to_try,
            lanes,
        } => vec![
            String::new(),
            format!(
                "{} · {passing}/{total} passing · {to_try} to try in {lanes} lane(s)",
                bold(&format!("── iteration {iteration}"))
            ),
        ],
        RunEvent::WorkerStarted {
            lane,
            id,
            attempt,
            sample,
            setup,
            ..
        } => vec![format!(
            "  {} {id}{} {}{}",
            lane_tag(*lane),
            sample
                .as_ref()
                .map(SampleTag::describe)
                .or_else(|| setup.clone())
                .map(|t| format!(" {}", dim(&format!("[{t}]"))))
                .unwrap_or_default(),
            dim("started"),
            if *attempt > 1 {
                dim(&format!(" (attempt {attempt})"))
            } else {
                String::new()
            }
        )],
        RunEvent::WorkerEnded(w) => vec![worker_line(w)],
        RunEvent::Regressed { id, reason } => vec![format!(
            "  {id} {} its Verify command fails again: unticked — {}",
            red("REGRESSED"),
            one_line(&reason.to_string(), 200)
        )],
        RunEvent::Paused {
            label,
            until_ms,
            delay,
        } => {
            let clock = jiff::Timestamp::from_millisecond(*until_ms as i64)
                .map(|t| {
                    t.to_zoned_datetime(jiff::tz::TimeZone::system())
                        .strftime("%H:%M:%S")
                        .to_string()
                })
                .unwrap_or_default();
            vec![yellow(&format!(
                "{label}: no worker starts until {clock} (in {}); the attempt is retried then",
                report::duration(*delay)
            ))]
        }
        RunEvent::IterationEnded {
            iteration,
            passing,
            total,
            gained,
            cost,
            workers,
            elapsed,
            ..
        } => vec![format!(
            "{} {passing}/{total} passing (+{gained}) in {} · {} · {workers} worker(s)",
            bold(&format!("── iteration {iteration} done:")),
            report::duration(*elapsed),
            cost_text(agent, *cost)
        )],
        RunEvent::Asked { id, question, prd } => vec![
            format!("  {id} {} {}", yellow("asks:"), one_line(question, 300)),
            dim(&format!(
                "    parked until answered: prdloop answer {} {id} \"<answer>\"",
                crate::backend::claude::shell_quote(&prd.display().to_string())
            )),
        ],
        RunEvent::Answered { id, answer } => vec![format!(
            "  {id} {} {}: worked on again",
            green("answered:"),
            one_line(answer, 200)
        )],
        RunEvent::Finished(s) => summary_lines(s, agent),
    }
}

fn worker_line(w: &WorkerEnded) -> String {
    let tag = lane_tag(w.lane);
    let id = &match &w.sample {
        Some(t) => format!("{} {}", w.id, dim(&format!("[{}]", t.describe()))),
        None => w.id.clone(),
    };
    let took = report::duration(w.duration);
    let cost = w
        .cost
        .filter(|c| *c > 0.0)
        .map(|c| format!(" ${c:.4}"))
        .unwrap_or_default();
    match &w.ending {
        Ending::Pass(e) => {
            let landed = w
                .landing
                .as_ref()
                .map(|l| dim(&format!(" · {}", l.brief())))
                .unwrap_or_default();
            format!(
                "  {tag} {id} {} {took}{cost}{landed}",
                green(&format!("PASS ({})", e.word()))
            )
        }
        Ending::Fail(reason) => format!(
            "  {tag} {id} {} {took}{cost}: {}{}",
            red("FAIL"),
            one_line(&reason.to_string(), 200),
            match &w.landing {
                Some(l @ Landing::Discarded { files, .. }) if !files.is_empty() => {
                    dim(&format!(" · {}", l.brief()))
                }
                _ => String::new(),
            }
        ),
        Ending::Stuck(reason) => format!(
            "  {tag} {id} {} {took}{cost}: {}",
            red("STUCK"),
            one_line(&reason.to_string(), 300)
        ),
        Ending::NotStarted(reason) => format!("  {tag} {id} {} {reason}", red("FAIL")),
        Ending::Agent(reason, _) => format!(
            "  {tag} {id} {} {took} (not counted as an attempt): {}",
            yellow("AGENT"),
            one_line(&reason.to_string(), 200)
        ),
        Ending::Cancelled => format!("  {tag} {id} {} after {took}", yellow("cancelled")),
        Ending::Sibling => format!(
            "  {tag} {id} {} after {took}: a sibling won",
            yellow("ended")
        ),
        Ending::NotSelected => format!(
            "  {tag} {id} {} {took}{cost} {}",
            green("PASS"),
            dim("(another sample was selected)")
        ),
        Ending::CancelledWhileChecking => format!(
            "  {tag} {id} {} while its Verify command ran",
            yellow("cancelled")
        ),
        Ending::Question(q) => format!(
            "  {tag} {id} {} {took}{cost} (not counted as an attempt): {}",
            yellow("QUESTION"),
            one_line(q, 200)
        ),
    }
}

fn summary_lines(s: &Summary, agent: Agent) -> Vec<String> {
    let mut out = vec![String::new()];
    let headline = match s.tone {
        Tone::Good => green(&s.headline),
        Tone::Warn => yellow(&s.headline),
        Tone::Bad => red(&s.headline),
    };
    out.push(bold(&headline));
    for row in &s.rows {
        let state = match &row.state {
            RowState::Pass(e) => green(&format!("pass ({})", e.word())),
            RowState::NeedsPerson => yellow("needs a person"),
            RowState::Parked => yellow("waits for an answer"),
            RowState::Fail => red("fail"),
            RowState::Waiting(on) => yellow(&format!("waiting for {on}")),
        };
        let mut line = format!("  {:<16} {state}", row.id);
        if row.attempts > 0 {
            line.push_str(&format!(" · {} attempt(s)", row.attempts));
            if row.cost > 0.0 {
                line.push_str(&format!(", ${:.4}", row.cost));
            }
        }
        if row.regressions > 0 {
            line.push_str(&format!(", {} regression(s)", row.regressions));
        }
        if let Some(l) = &row.landing {
            line.push_str(&format!(" · {}", l.brief()));
        }
        if let Some(w) = &row.won_by {
            line.push_str(&format!(" · won by {w}"));
        }
        if let Some(q) = &row.question {
            line.push_str(&format!(" — asks: {}", one_line(q, 160)));
        } else if !matches!(row.state, RowState::Pass(_))
            && let Some(r) = &row.last_failure
        {
            line.push_str(&format!(" — {}", one_line(r, 160)));
        }
        out.push(line);
    }
    let per_pass = if s.passed_in_run > 0 && s.cost > 0.0 {
        format!(
            " (${:.4} per passed criterion)",
            s.cost / s.passed_in_run as f64
        )
    } else {
        String::new()
    };
    let iterations = if s.iterations == 1 {
        "1 iteration".to_string()
    } else {
        format!("{} iterations", s.iterations)
    };
    let tokens = if agent.reports_tokens() {
        format!(
            "tokens {} in, {} out, {} cache read",
            s.usage.input_tokens, s.usage.output_tokens, s.usage.cache_read_input_tokens,
        )
    } else {
        "tokens not reported".to_string()
    };
    out.push(format!(
        "  {}{per_pass} · {tokens} · {iterations} in {}",
        match cost_text(agent, s.cost) {
            c if c.starts_with('$') => format!("cost {c}"),
            c => c,
        },
        report::duration(s.elapsed)
    ));
    if s.reviews > 0 {
        out.push(format!(
            "  verifier: {} review{}{}",
            s.reviews,
            if s.reviews == 1 { "" } else { "s" },
            match cost_text(agent, s.review_cost) {
                c if c.starts_with('$') => format!(", {c} of the cost"),
                _ => String::new(),
            }
        ));
    }
    if s.conflicts > 0 {
        out.push(format!(
            "  conflicts: {} passing attempt{} collided with another lane's work and {} tried again",
            s.conflicts,
            if s.conflicts == 1 { "" } else { "s" },
            if s.conflicts == 1 { "was" } else { "were" },
        ));
    }
    if !s.refused_connections.is_empty() {
        let each: Vec<String> = s
            .refused_connections
            .iter()
            .map(|r| format!("{} {} ({})", r.criterion, r.host, r.count))
            .collect();
        let n: u32 = s.refused_connections.iter().map(|r| r.count).sum();
        out.push(format!(
            "  network: {n} connection(s) refused: {}",
            each.join(", ")
        ));
    }
    if !s.setup_wins.is_empty() {
        let wins: Vec<String> = s
            .setup_wins
            .iter()
            .map(|(setup, n)| format!("{setup} {n}"))
            .collect();
        out.push(format!("  criteria won per set-up: {}", wins.join(", ")));
    }
    if !s.questions.is_empty() {
        let prd = crate::backend::claude::shell_quote(&s.prd.display().to_string());
        out.push(format!(
            "  {} question(s) wait for an answer; answer each, then run again:",
            s.questions.len()
        ));
        for (id, _) in &s.questions {
            out.push(format!("    prdloop answer {prd} {id} \"<answer>\""));
        }
    }
    out.extend(per_pass_lines(&s.cost_per_pass, agent));
    // A run that can go on where it stopped says how.
    if matches!(
        s.end,
        crate::run::end::End::Interrupted
            | crate::run::end::End::PausedByRequest
            | crate::run::end::End::StoppedByRequest
    ) {
        let prd = crate::backend::claude::shell_quote(&s.prd.display().to_string());
        out.push(format!(
            "  go on where it stopped: prdloop resume {prd} (its session, attempts and settings)"
        ));
    }
    out.push(format!("  logs  {}", s.log_dir.display()));
    out.push(format!("  state {}", s.state.display()));
    out
}

/// The cost per passed criterion, per set-up and per domain (nothing before a worker ran).
fn per_pass_lines(c: &crate::state::CostPerPass, agent: Agent) -> Vec<String> {
    if c.by_setup.is_empty() {
        return Vec::new();
    }
    // The domains that ran the most workers, in their order: an ISA whose every id is its
    // own domain would fill the screen (the state file and `--json` have every one).
    let mut busiest: Vec<&crate::state::PerPass> = c.by_domain.iter().collect();
    busiest.sort_by_key(|p| std::cmp::Reverse(p.runs));
    busiest.truncate(DOMAIN_ROWS);
    let domains: Vec<&crate::state::PerPass> = c
        .by_domain
        .iter()
        .filter(|p| busiest.iter().any(|b| std::ptr::eq(*b, *p)))
        .collect();
    let width = c
        .by_setup
        .iter()
        .chain(domains.iter().copied())
        .map(|p| p.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut out =
        vec!["  per passed criterion (worker runs, agent time, tokens, cost):".to_string()];
    let rows = c.by_setup.iter().map(|p| ("set-up", p));
    for (kind, p) in rows.chain(domains.iter().map(|p| ("domain", *p))) {
        let mut line = format!("    {kind} {:<width$}  {} passed", p.name, p.passed);
        match p.runs_per_pass {
            Some(per) => {
                line.push_str(&format!(" · {per:.1} runs"));
                if let Some(t) = p.time_ms_per_pass {
                    line.push_str(&format!(
                        ", {}",
                        report::duration(std::time::Duration::from_millis(t))
                    ));
                }
                if agent.reports_tokens()
                    && let Some(t) = p.tokens_per_pass
                {
                    line.push_str(&format!(", {t} tokens"));
                }
                if let Some(c) = p.cost_usd_per_pass
                    && (c > 0.0 || agent.reports_cost())
                {
                    line.push_str(&format!(", ${c:.4}"));
                }
            }
            None => {
                let runs = if p.runs == 1 { "run" } else { "runs" };
                line.push_str(&format!(" · {} {runs}", p.runs));
                if p.cost_usd > 0.0 || agent.reports_cost() {
                    line.push_str(&format!(", ${:.4} spent", p.cost_usd));
                }
            }
        }
        if let Some(rate) = p.pass_at_1 {
            line.push_str(&format!(
                " · pass@1 {:.0}% ({}/{})",
                rate * 100.0,
                p.passed_runs,
                p.judged
            ));
        }
        out.push(line);
    }
    let more = c.by_domain.len() - domains.len();
    if more > 0 {
        out.push(format!(
            "    … and {more} more domain{} (every one in the state file and --json)",
            if more == 1 { "" } else { "s" }
        ));
    }
    out
}

/// How many domains the summary's cost-per-pass block shows.
const DOMAIN_ROWS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{CostPerPass, PerPass};

    #[test]
    fn the_cost_per_pass_block_shows_the_busiest_domains_and_counts_the_rest() {
        let row = |name: &str, runs: u32| PerPass {
            name: name.into(),
            runs,
            ..PerPass::default()
        };
        let c = CostPerPass {
            by_setup: vec![row("claude", 30)],
            // ISC-1 … ISC-10, each its own domain; ISC-3 and ISC-7 ran the most.
            by_domain: (1..=10)
                .map(|i| row(&format!("ISC-{i}"), if i == 3 || i == 7 { 5 } else { 2 }))
                .collect(),
        };
        let lines = per_pass_lines(&c, Agent::Claude);
        let domains: Vec<&String> = lines.iter().filter(|l| l.contains("domain ")).collect();
        assert_eq!(domains.len(), DOMAIN_ROWS, "{lines:#?}");
        assert!(domains.iter().any(|l| l.contains("ISC-3 ")), "{lines:#?}");
        assert!(domains.iter().any(|l| l.contains("ISC-7 ")), "{lines:#?}");
        assert_eq!(
            lines.last().unwrap(),
            "    … and 2 more domains (every one in the state file and --json)"
        );
    }
}
