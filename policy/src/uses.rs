//! Tools built from tools: which calls between tools the declared `USES` allow.
//!
//! Each tool's `USES` names other tools' functions; between tools that makes a graph (tool →
//! the tools it calls). A tool's declaration is accepted only when the graph with it stays
//! acyclic (a cycle would let two tools call each other without end) and no chain of calls
//! through it is longer than [`MAX_DEPTH`] calls: the tools that call it, transitively, and
//! the tools it calls, transitively, together. The same check runs again before every call,
//! on the versions mounted then, so a graph made cyclic by two supervisors creating at once
//! still never runs a cycle.
//!
//! What a trusted version of a tool declared is also a ceiling for its rewrites ([`widened`]):
//! a new version may call fewer of the functions its trusted versions called, or the same, but
//! not one none of them called.

use std::collections::{BTreeMap, BTreeSet};

/// The longest chain of calls between tools (A calls B calls C … : each arrow is one call).
pub const MAX_DEPTH: usize = 4;

/// Why a tool's `USES` are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The tool would call itself through the chain shown (first and last are the tool).
    #[error(
        "its USES make a cycle: {}; tools may call each other only one way (remove one of the \
         calls)",
        .0.join(" → ")
    )]
    Cycle(Vec<String>),
    /// The chain shown is longer than [`MAX_DEPTH`] calls.
    #[error(
        "it would be part of a chain of {} calls between tools ({}), more than the {MAX_DEPTH} \
         allowed; call fewer tools in a row",
        .0.len() - 1,
        .0.join(" → ")
    )]
    TooDeep(Vec<String>),
}

/// The functions `new` declares that `trusted` (what the tool's trusted versions declared) does
/// not: sorted, each once. Empty when `new` calls the same functions or fewer.
pub fn widened<T: AsRef<str>, N: AsRef<str>>(trusted: &[T], new: &[N]) -> Vec<String> {
    let trusted: BTreeSet<&str> = trusted.iter().map(AsRef::as_ref).collect();
    new.iter()
        .map(AsRef::as_ref)
        .filter(|n| !trusted.contains(n))
        .collect::<BTreeSet<&str>>()
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// Check `tool` calling `uses` (tool names) against `graph` (every other tool's callees; an
/// entry for `tool` itself is replaced by `uses`).
pub fn check(
    tool: &str,
    uses: &BTreeSet<String>,
    graph: &BTreeMap<String, BTreeSet<String>>,
) -> Result<(), Refusal> {
    let mut down: BTreeMap<&str, &BTreeSet<String>> = graph
        .iter()
        .filter(|(t, _)| t.as_str() != tool)
        .map(|(t, u)| (t.as_str(), u))
        .collect();
    down.insert(tool, uses);
    let mut up: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (caller, callees) in &down {
        for callee in callees.iter() {
            up.entry(callee.as_str())
                .or_default()
                .insert((*caller).to_string());
        }
    }
    let empty = BTreeSet::new();
    let below = longest(tool, &|t| down.get(t).copied().unwrap_or(&empty))?;
    let above = longest(tool, &|t| up.get(t).unwrap_or(&empty))?;
    if below.len() + above.len() - 2 > MAX_DEPTH {
        let mut chain: Vec<String> = above.into_iter().rev().collect();
        chain.extend(below.into_iter().skip(1));
        return Err(Refusal::TooDeep(chain));
    }
    Ok(())
}

/// The longest path from `start` following `next` (the path, `start` first); a path that comes
/// back to a tool on it is a cycle (through `start`, or among the tools it reaches). Paths are
/// followed only to one step past [`MAX_DEPTH`].
fn longest<'a>(
    start: &'a str,
    next: &dyn Fn(&str) -> &'a BTreeSet<String>,
) -> Result<Vec<String>, Refusal> {
    fn walk<'a>(
        path: &mut Vec<&'a str>,
        best: &mut Vec<String>,
        next: &dyn Fn(&str) -> &'a BTreeSet<String>,
    ) -> Result<(), Refusal> {
        if path.len() > best.len() {
            *best = path.iter().map(|s| s.to_string()).collect();
        }
        if path.len() > MAX_DEPTH + 1 {
            return Ok(());
        }
        let Some(&last) = path.last() else {
            return Ok(());
        };
        for n in next(last) {
            if let Some(at) = path.iter().position(|p| *p == n.as_str()) {
                let mut cycle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
                cycle.push(n.clone());
                return Err(Refusal::Cycle(cycle));
            }
            path.push(n.as_str());
            walk(path, best, next)?;
            path.pop();
        }
        Ok(())
    }
    let mut path = vec![start];
    let mut best = Vec::new();
    walk(&mut path, &mut best, next)?;
    Ok(best)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        edges.iter().map(|(t, u)| (t.to_string(), set(u))).collect()
    }

    #[test]
    fn a_cycle_through_the_new_declaration_is_refused() {
        let g = graph(&[("a", &["b"]), ("b", &[])]);
        assert_eq!(
            check("b", &set(&["a"]), &g),
            Err(Refusal::Cycle(vec!["b".into(), "a".into(), "b".into()]))
        );
        assert_eq!(
            check("a", &set(&["a"]), &g),
            Err(Refusal::Cycle(vec!["a".into(), "a".into()]))
        );
        let longer = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
        assert_eq!(
            check("c", &set(&["a"]), &longer).unwrap_err().to_string(),
            "its USES make a cycle: c → a → b → c; tools may call each other only one way \
             (remove one of the calls)"
        );
        // Control: the same tools one way round are fine, and a diamond is no cycle.
        assert_eq!(check("a", &set(&["b"]), &g), Ok(()));
        let diamond = graph(&[("b", &["d"]), ("c", &["d"]), ("d", &[])]);
        assert_eq!(check("a", &set(&["b", "c"]), &diamond), Ok(()));
    }

    #[test]
    fn chains_through_the_tool_are_bounded_above_and_below() {
        // x → a → (new) t → b → c: 4 calls, allowed.
        let g = graph(&[("x", &["a"]), ("a", &["t"]), ("b", &["c"]), ("c", &[])]);
        assert_eq!(check("t", &set(&["b"]), &g), Ok(()));
        // One more below makes 5.
        let g = graph(&[
            ("x", &["a"]),
            ("a", &["t"]),
            ("b", &["c"]),
            ("c", &["d"]),
            ("d", &[]),
        ]);
        assert_eq!(
            check("t", &set(&["b"]), &g),
            Err(Refusal::TooDeep(
                ["x", "a", "t", "b", "c", "d"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            ))
        );
    }

    #[test]
    fn a_rewrite_may_narrow_its_uses_but_not_widen_them() {
        let trusted = ["weather__forecast", "geo__lookup"];
        // Equal, narrower, none: nothing added.
        assert!(widened(&trusted, &["geo__lookup", "weather__forecast"]).is_empty());
        assert!(widened(&trusted, &["weather__forecast"]).is_empty());
        assert!(widened(&trusted, &[] as &[&str]).is_empty());
        // Each function none of the trusted versions called, once and sorted, even beside the
        // ones they did.
        assert_eq!(
            widened(
                &trusted,
                &[
                    "weather__forecast",
                    "bank__transfer",
                    "bank__balance",
                    "bank__transfer"
                ]
            ),
            ["bank__balance", "bank__transfer"]
        );
        // Another function of a tool it already calls is a widening too.
        assert_eq!(widened(&trusted, &["weather__alerts"]), ["weather__alerts"]);
        // A trusted version that called nothing: any call is a widening.
        assert_eq!(widened(&[] as &[&str], &["geo__lookup"]), ["geo__lookup"]);
    }

    #[test]
    fn a_cycle_the_tool_would_reach_is_refused_too() {
        let g = graph(&[("p", &["q"]), ("q", &["p"])]);
        assert_eq!(
            check("t", &set(&["p"]), &g),
            Err(Refusal::Cycle(vec!["p".into(), "q".into(), "p".into()]))
        );
    }
}
