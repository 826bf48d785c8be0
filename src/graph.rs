//! The criteria graph: what each criterion needs to pass before it may start (`(after:
//! ISC-8)` in its text, ` | After: ISC-8` segments of a v3 line), checked (no unknown id, no
//! cycle: errors name `path:line`) and resolved to the criteria workers work on (a parent of
//! split ids is satisfied by its leaves; a parent's needs are its leaves' needs too); and the
//! files a criterion is predicted to touch (paths its text and Verify method name), which the
//! continuous scheduler keeps from running in two lanes at once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use crate::prd::{Criterion, Prd, id};

/// One dependency as written: `criterion` needs `needs` (line of `criterion`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Edge {
    pub criterion: String,
    pub needs: String,
    pub line: usize,
}

/// A PRD's dependencies, checked.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// The edges as written, in document order.
    pub edges: Vec<Edge>,
    /// Each worked-on criterion's needs, resolved to worked-on criteria (leaves for parents).
    needs: HashMap<String, Vec<String>>,
    /// The deferred tasks (not criteria, never worked on) that some criterion needs.
    deferred: HashSet<String>,
}

/// What is wrong with a PRD's dependencies: a line of the PRD and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError {
    pub line: usize,
    pub message: String,
}

/// Whether a word of an `(after: …)` list is an id (the rest is prose: `and`, `i.e.`).
fn is_id(word: &str) -> bool {
    id::is_isc_id(word) || id::is_legacy_id(word)
}

impl Graph {
    /// The graph of `prd`, or what is wrong with it (an unknown id, a cycle), at its line.
    pub fn of(prd: &Prd) -> Result<Graph, GraphError> {
        let mut g = Graph::default();
        // Each edge once, found by a set (not a scan of the edges so far: a long chain is
        // linear).
        let mut written: HashSet<(&str, &str)> = HashSet::new();
        for c in &prd.criteria {
            // A split claim written after its own parent (`ISC-8.1 (after: ISC-8)`) says where
            // it belongs, not what it waits for: its parent passes when it does.
            let own_ancestor = |need: &str| {
                c.id.strip_prefix(need)
                    .is_some_and(|rest| rest.starts_with('.'))
            };
            let exact = prd.list_format().exact_ids();
            for need in c
                .after
                .iter()
                .filter(|w| (exact || is_id(w)) && !own_ancestor(w))
            {
                if prd.criterion(need).is_none() {
                    // A dropped claim or a cancelled task will never pass: what needed it goes
                    // on without it (waiting for it would be waiting for ever).
                    if prd.is_tombstone(need) {
                        continue;
                    }
                    // A deferred task is set aside, not dropped: what needs it waits.
                    if prd.is_deferred(need) {
                        g.deferred.insert(need.clone());
                    } else {
                        return Err(GraphError {
                            line: c.line,
                            message: format!(
                                "{} needs {need} (after:), which is no criterion of this file",
                                c.id
                            ),
                        });
                    }
                }
                if written.insert((c.id.as_str(), need.as_str())) {
                    g.edges.push(Edge {
                        criterion: c.id.clone(),
                        needs: need.clone(),
                        line: c.line,
                    });
                }
            }
        }
        // A need on a parent is a need on its leaves; a parent's needs are its leaves' too.
        let resolve = |id: &str| -> Vec<String> {
            match prd.criterion(id) {
                Some(c) if c.is_parent() => c.leaves.clone(),
                _ => vec![id.to_string()],
            }
        };
        let mut edges_of: HashMap<&str, Vec<&Edge>> = HashMap::new();
        for e in &g.edges {
            edges_of.entry(e.criterion.as_str()).or_default().push(e);
        }
        let mut parents_of: HashMap<&str, Vec<&str>> = HashMap::new();
        for p in prd.criteria.iter().filter(|c| c.is_parent()) {
            for l in &p.leaves {
                parents_of
                    .entry(l.as_str())
                    .or_default()
                    .push(p.id.as_str());
            }
        }
        for c in prd.criteria.iter().filter(|c| !c.is_parent()) {
            let mut own: Vec<&str> = vec![c.id.as_str()];
            own.extend(parents_of.get(c.id.as_str()).into_iter().flatten());
            let mut needs = Vec::new();
            let mut listed = HashSet::new();
            for holder in own {
                for e in edges_of.get(holder).into_iter().flatten() {
                    for n in resolve(&e.needs) {
                        if listed.insert(n.clone()) {
                            needs.push(n);
                        }
                    }
                }
            }
            if !needs.is_empty() {
                g.needs.insert(c.id.clone(), needs);
            }
        }
        if let Some(cycle) = g.cycle(prd) {
            let first = prd.criterion(&cycle[0]).map_or(0, |c| c.line);
            return Err(GraphError {
                line: first,
                message: format!("the dependencies (after:) go round: {}", cycle.join(" → ")),
            });
        }
        Ok(g)
    }

    /// [`Graph::of`] with the error as `path:line: message`.
    pub fn checked(prd: &Prd, path: &Path) -> anyhow::Result<Graph> {
        Graph::of(prd).map_err(|e| anyhow::anyhow!("{}:{}: {}", path.display(), e.line, e.message))
    }

    /// What a worked-on criterion needs (resolved), in the order written.
    pub fn needs(&self, id: &str) -> &[String] {
        self.needs.get(id).map_or(&[], Vec::as_slice)
    }

    /// The deferred tasks `id` needs (resolved): it cannot start while they are deferred.
    pub fn deferred_needs(&self, id: &str) -> Vec<&str> {
        self.needs(id)
            .iter()
            .filter(|n| self.deferred.contains(n.as_str()))
            .map(String::as_str)
            .collect()
    }

    /// Whether any criterion needs another.
    pub fn is_empty(&self) -> bool {
        self.needs.is_empty()
    }

    /// A cycle, as the ids along it (the first again at the end), if there is one.
    fn cycle(&self, prd: &Prd) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Done,
        }
        let ids: Vec<&str> = prd.criteria.iter().map(|c| c.id.as_str()).collect();
        let mut mark: HashMap<&str, Mark> = ids.iter().map(|i| (*i, Mark::New)).collect();
        for &start in &ids {
            if mark[start] != Mark::New {
                continue;
            }
            // Iterative depth-first search: (node, index of its next need).
            let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
            mark.insert(start, Mark::Open);
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let needs = self.needs(node);
                if *next < needs.len() {
                    let n = needs[*next].as_str();
                    *next += 1;
                    match mark.get(n).copied() {
                        Some(Mark::New) => {
                            mark.insert(n, Mark::Open);
                            stack.push((n, 0));
                        }
                        Some(Mark::Open) => {
                            let from = stack.iter().position(|(s, _)| *s == n).unwrap_or(0);
                            let mut path: Vec<String> =
                                stack[from..].iter().map(|(s, _)| s.to_string()).collect();
                            path.push(n.to_string());
                            return Some(path);
                        }
                        _ => {}
                    }
                } else {
                    mark.insert(node, Mark::Done);
                    stack.pop();
                }
            }
        }
        None
    }

    /// The order the failing criteria can be worked in: wave 1 needs nothing that fails,
    /// wave 2 needs wave 1, and so on. `work` are the criteria to order (failing, worked on).
    pub fn waves(&self, work: &[&str]) -> Vec<Vec<String>> {
        let set: HashSet<&str> = work.iter().copied().collect();
        // Each criterion's depth: 0 without a need among `work`, else one more than its
        // deepest need's. The graph has no cycle; the walk keeps its own stack (a chain of
        // 100,000 would overflow the thread's).
        let mut depth: HashMap<&str, usize> = HashMap::new();
        for &id in work {
            let mut stack: Vec<(&str, usize)> = vec![(id, 0)];
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if depth.contains_key(node) {
                    stack.pop();
                    continue;
                }
                let needs = self.needs(node);
                match needs[*next..]
                    .iter()
                    .position(|n| set.contains(n.as_str()) && !depth.contains_key(n.as_str()))
                {
                    Some(i) => {
                        let n = needs[*next + i].as_str();
                        *next += i + 1;
                        stack.push((n, 0));
                    }
                    None => {
                        let d = needs
                            .iter()
                            .filter_map(|n| depth.get(n.as_str()).map(|d| d + 1))
                            .max()
                            .unwrap_or(0);
                        depth.insert(node, d);
                        stack.pop();
                    }
                }
            }
        }
        let mut waves: Vec<Vec<String>> = Vec::new();
        for &id in work {
            let d = depth[id];
            if waves.len() <= d {
                waves.resize(d + 1, Vec::new());
            }
            waves[d].push(id.to_string());
        }
        waves
    }

    /// The longest chain of needs among `work` (1 without dependencies, 0 for no work).
    pub fn depth(&self, work: &[&str]) -> usize {
        self.waves(work).len()
    }
}

/// The files a criterion is predicted to touch: the paths its text and Verify method name
/// (a word with a `/` or a file extension, as `src/auth.rs` or `Cargo.toml`; backticks and
/// punctuation around it dropped).
pub fn predicted_files(c: &Criterion) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let method = c.verify.as_ref().map(|v| v.method.as_str()).unwrap_or("");
    for text in [c.description.as_str(), method] {
        for word in text.split(|ch: char| ch.is_whitespace() || "`'\"()[]{},;<>|".contains(ch)) {
            let w = word.trim_end_matches(['.', ':', '!', '?']);
            if looks_like_path(w) {
                out.insert(w.trim_start_matches("./").to_string());
            }
        }
    }
    out
}

fn looks_like_path(w: &str) -> bool {
    if w.len() < 3 || w.contains("://") || w.starts_with('-') || w.starts_with("ISC-") {
        return false;
    }
    let name = w.rsplit('/').next().unwrap_or(w);
    let ext = name.rsplit_once('.');
    let has_ext = ext.is_some_and(|(stem, e)| {
        !stem.is_empty()
            && (1..=5).contains(&e.len())
            && e.bytes().all(|b| b.is_ascii_alphanumeric())
            && e.bytes().any(|b| b.is_ascii_alphabetic())
    });
    let ok_chars = w
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b));
    ok_chars && (has_ext || (w.contains('/') && !w.ends_with('/') && name.len() > 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prd(body: &str) -> Prd {
        Prd::parse(format!("# T\n\n## CRITERIA\n\n{body}")).unwrap()
    }

    #[test]
    fn needs_are_read_from_text_and_segments_and_resolved_to_leaves() {
        let p = prd("- [ ] ISC-1: base\n\
             - [ ] ISC-2: parent (after: ISC-1)\n\
             - [ ] ISC-2.1: leaf a\n\
             - [ ] ISC-2.2: leaf b\n\
             - [ ] ISC-3: top | Verify: CLI: `true` | After: ISC-2\n");
        let g = Graph::of(&p).unwrap();
        assert_eq!(g.needs("ISC-3"), ["ISC-2.1", "ISC-2.2"]);
        // A parent's needs are its leaves'.
        assert_eq!(g.needs("ISC-2.1"), ["ISC-1"]);
        assert_eq!(
            p.criterion("ISC-3")
                .unwrap()
                .verify
                .as_ref()
                .unwrap()
                .code
                .as_deref(),
            Some("true")
        );
        let work = ["ISC-1", "ISC-2.1", "ISC-2.2", "ISC-3"];
        assert_eq!(
            g.waves(&work),
            vec![vec!["ISC-1"], vec!["ISC-2.1", "ISC-2.2"], vec!["ISC-3"]]
        );
        assert_eq!(g.edges.len(), 2);
    }

    #[test]
    fn unknown_ids_and_cycles_are_errors_at_their_line() {
        let e = Graph::of(&prd("- [ ] ISC-1: a\n- [ ] ISC-2: b (after: ISC-9)\n")).unwrap_err();
        assert_eq!(e.line, 6);
        assert!(e.message.contains("ISC-9"), "{}", e.message);
        let e = Graph::of(&prd(
            "- [ ] ISC-1: a (after: ISC-3)\n- [ ] ISC-2: b (after: ISC-1)\n- [ ] ISC-3: c (after: ISC-2)\n",
        ))
        .unwrap_err();
        assert_eq!(e.line, 5);
        assert!(
            e.message.contains("ISC-1 → ISC-3 → ISC-2 → ISC-1"),
            "{}",
            e.message
        );
        // A leaf written after its own parent (or grandparent) is no cycle: it needs nothing.
        let g = Graph::of(&prd(
            "- [ ] ISC-1: a\n- [ ] ISC-2: p (after: ISC-1)\n- [ ] ISC-2.1: l (after: ISC-2)\n- [ ] ISC-2.2: m\n- [ ] ISC-2.2.1: n (after: ISC-2)\n- [ ] ISC-2.2.2: o (after: ISC-2.1)\n",
        ))
        .unwrap();
        assert_eq!(g.needs("ISC-2.1"), ["ISC-1"]);
        assert_eq!(g.needs("ISC-2.2.1"), ["ISC-1"]);
        assert_eq!(g.needs("ISC-2.2.2"), ["ISC-2.1", "ISC-1"]);
        // A parent that needs one of its own leaves does go round.
        assert!(Graph::of(&prd("- [ ] ISC-2: p (after: ISC-2.1)\n- [ ] ISC-2.1: l\n")).is_err());
        // Prose in the list is not an id.
        assert!(
            Graph::of(&prd(
                "- [ ] ISC-1: a\n- [ ] ISC-2: b (after: ISC-1 and the login)\n"
            ))
            .is_ok()
        );
    }

    /// A long chain: every link its own wave, its depth the chain's length (the walk keeps
    /// its own stack; a recursive one overflowed the test thread's long before 20,000).
    #[test]
    fn a_long_chain_is_one_wave_per_link() {
        let n = 20_000;
        let mut body = String::from("- [ ] ISC-C-1: step 1\n");
        for i in 2..=n {
            body.push_str(&format!(
                "- [ ] ISC-C-{i}: step {i} (after: ISC-C-{})\n",
                i - 1
            ));
        }
        let p = prd(&body);
        let g = Graph::of(&p).unwrap();
        assert_eq!(g.edges.len(), n - 1);
        assert_eq!(g.needs(&format!("ISC-C-{n}")), [format!("ISC-C-{}", n - 1)]);
        // In reverse order, so that the walk starts at the chain's far end.
        let work: Vec<&str> = p.criteria.iter().rev().map(|c| c.id.as_str()).collect();
        let waves = g.waves(&work);
        assert_eq!(waves.len(), n);
        assert_eq!(waves[0], ["ISC-C-1"]);
        assert_eq!(waves[n - 1], [format!("ISC-C-{n}")]);
        assert_eq!(
            g.depth(&work[..10]),
            10,
            "only the links among the work count"
        );
    }

    #[test]
    fn predicted_files_are_the_paths_named() {
        let p = prd(
            "- [ ] ISC-1: Add `login` to src/auth.rs and `Cargo.toml`, see https://x.io/a.html | Verify: CLI: `cargo test -p web --test it`\n",
        );
        let f = predicted_files(p.criterion("ISC-1").unwrap());
        assert_eq!(
            f.into_iter().collect::<Vec<_>>(),
            ["Cargo.toml", "src/auth.rs"]
        );
    }
}
