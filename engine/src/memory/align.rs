//! Aligning two requests' mentions of one kind: which mention of the new request plays the part
//! each mention of the remembered request played. Dates (and the times that go with them) by
//! their order in time; the rest by the role the old mention played in the remembered chain
//! (learned from recorded runs), the word said right before each, the words around them, the last
//! word of a name ("… Airport" for "… Airport") and, last, their order in the text — and whether the reading is sure of the result ([`unsure_of`]), so
//! that a planner can be asked where it is not.

use crate::fill::learned::{Kind, Mention};
use std::collections::HashSet;

/// How an old request's mention maps onto the new request's mentions of the same kind by the role
/// it played in the remembered chain (learned from recorded runs: the words around the mentions a
/// parameter took): for an old mention of `kind`, a score per new mention, `None` when nothing was
/// learned for its role.
pub(crate) type Roles<'a> = &'a dyn Fn(Kind, &Mention, &[Mention]) -> Option<Vec<f64>>;

/// A word as role cues compare it: its first four letters ("leave", "leaving" → `leav`).
fn stem(w: &str) -> String {
    w.chars().take(4).collect()
}

/// The words around two mentions in common (Jaccard of their stems, 0..1).
fn cue_overlap(a: &[String], b: &[String]) -> f64 {
    let (a, b): (HashSet<String>, HashSet<String>) =
        (a.iter().map(|w| stem(w)).collect(), b.iter().map(|w| stem(w)).collect());
    let u = a.union(&b).count();
    if u == 0 {
        0.0
    } else {
        a.intersection(&b).count() as f64 / u as f64
    }
}

/// What two names ending in the same word (of three letters or more) score together.
const HEAD_WEIGHT: f64 = 0.5;

/// Whether two names of two words or more end in the same word, case aside ("Perth Airport",
/// "Milan Malpensa Airport"): the same kind of place. A one-word name ("Sydney") names no kind.
fn same_head(a: &str, b: &str) -> bool {
    let last = |s: &str| {
        let mut ws = crate::read::reading::word_list(s);
        ws.pop().filter(|w| !ws.is_empty() && w.len() >= 3 && w.chars().all(char::is_alphabetic))
    };
    last(a).is_some_and(|x| last(b).as_deref() == Some(x.as_str()))
}

/// Pairs by descending score, each mention used once; `complete`: every pair may be taken (the
/// two requests have as many mentions of the kind), else only pairs with some evidence.
fn assign(scores: &[Vec<f64>], new_len: usize, complete: bool) -> Vec<Option<usize>> {
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    for (i, row) in scores.iter().enumerate() {
        for (j, s) in row.iter().enumerate() {
            pairs.push((*s, i, j));
        }
    }
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut map = vec![None; scores.len()];
    let mut taken = vec![false; new_len];
    for (s, i, j) in pairs {
        if (complete || s > 0.0) && map[i].is_none() && !taken[j] {
            map[i] = Some(j);
            taken[j] = true;
        }
    }
    map
}

/// Ranks of `keys` (ties in order of appearance).
fn ranks<K: Ord>(keys: &[K]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|a, b| keys[*a].cmp(&keys[*b]).then(a.cmp(b)));
    let mut rank = vec![0; keys.len()];
    for (r, i) in order.into_iter().enumerate() {
        rank[i] = r;
    }
    rank
}

/// Align by the order of `keys` in time (the pick-up before the drop-off, the check-in before the
/// check-out, whichever clause says it first): old mention of rank r ↔ new mention of rank r.
fn by_time<K: Ord>(old: &[K], new: &[K]) -> Vec<Option<usize>> {
    let (ro, rn) = (ranks(old), ranks(new));
    ro.iter().map(|r| rn.iter().position(|x| x == r)).collect()
}

/// The date a time goes with: the date mention nearest to it in the same request (within 12 words).
fn date_of(time: &Mention, dates: &[Mention]) -> Option<String> {
    dates
        .iter()
        .filter(|d| d.at.abs_diff(time.at) <= 12)
        .min_by_key(|d| d.at.abs_diff(time.at))
        .map(|d| d.value.clone())
}

/// How close two alignments of the same mentions may score and the reading still call the
/// better one sure: less than one shared lead word (0.4) and a little more than the order
/// tie-break (0.1).
const UNSURE_MARGIN: f64 = 0.25;

/// Every order of `0..n` (n ≤ 3 here).
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

/// Whether the best two one-to-one alignments of 2–3 mentions a side score within
/// [`UNSURE_MARGIN`] of each other: nothing the reading knows tells them apart.
fn unsure_of(scores: &[Vec<f64>]) -> bool {
    let n = scores.len();
    if !(2..=3).contains(&n) || scores.iter().any(|r| r.len() != n) {
        return false;
    }
    let mut totals: Vec<f64> =
        permutations(n).iter().map(|p| p.iter().enumerate().map(|(i, &j)| scores[i][j]).sum()).collect();
    totals.sort_by(|a, b| b.total_cmp(a));
    totals[0] - totals[1] < UNSURE_MARGIN
}

/// Old mentions of one kind ↔ new ones, by role: dates and dated times by their order in time;
/// the rest by the role the old mention played (`roles`), the words around them and, last, their
/// order in the text. `true` beside the alignment: the reading is unsure of it ([`unsure_of`]).
pub(crate) fn align(
    kind: Kind,
    (old, new): (&[Mention], &[Mention]),
    dates: (&[Mention], &[Mention]),
    leads: (&[Vec<String>], &[Vec<String>]),
    roles: Option<Roles<'_>>,
) -> (Vec<Option<usize>>, bool) {
    let equal = old.len() == new.len();
    if equal && old.len() == 1 {
        return (vec![Some(0)], false);
    }
    if equal && kind == Kind::Date {
        let map = by_time(
            &old.iter().map(|m| m.value.clone()).collect::<Vec<_>>(),
            &new.iter().map(|m| m.value.clone()).collect::<Vec<_>>(),
        );
        return (map, false);
    }
    if equal && kind == Kind::Time {
        let dated = |ms: &[Mention], ds: &[Mention]| -> Option<Vec<(String, String)>> {
            ms.iter().map(|m| date_of(m, ds).map(|d| (d, m.value.clone()))).collect()
        };
        if let (Some(o), Some(n)) = (dated(old, dates.0), dated(new, dates.1)) {
            return (by_time(&o, &n), false);
        }
    }
    let scores: Vec<Vec<f64>> = old
        .iter()
        .enumerate()
        .map(|(i, o)| {
            // The learned role as a share of belief over the new mentions (0..1 each).
            let role: Vec<f64> = roles
                .and_then(|r| r(kind, o, new))
                .filter(|s| s.len() == new.len() && s.iter().all(|x| x.is_finite()))
                .map(|s| {
                    let top = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
                    let sum: f64 = e.iter().sum();
                    e.into_iter().map(|x| x / sum).collect()
                })
                .unwrap_or_else(|| vec![0.0; new.len()]);
            new.iter()
                .enumerate()
                .map(|(j, n)| {
                    let order = if i == j { 0.1 } else { 0.0 };
                    // Said with the same word right before it ("from", "to", "near", "drop-off:").
                    let lead = match (leads.0.get(i), leads.1.get(j)) {
                        (Some(a), Some(b)) => {
                            0.4 * a.iter().filter(|w| b.iter().any(|x| stem(x) == stem(w))).count() as f64
                        }
                        _ => 0.0,
                    };
                    // Names of one kind of thing: the same last word ("Perth Airport", "Fiumicino
                    // Airport"; not "Italy").
                    let head = if kind == Kind::Name && same_head(&o.value, &n.value) { HEAD_WEIGHT } else { 0.0 };
                    cue_overlap(&o.cues, &n.cues) + role[j] + lead + order + head
                })
                .collect()
        })
        .collect();
    (assign(&scores, new.len(), equal), equal && unsure_of(&scores))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(value: &str, at: usize) -> Mention {
        Mention { value: value.into(), cues: Vec::new(), at }
    }

    /// A remembered "a recital at Carnegie Hall" and a new "a tour of Boston with a recital at
    /// Symphony Hall": the hall plays the hall's part, not the city said first.
    #[test]
    fn names_ending_in_the_same_word_play_the_same_part() {
        let old = [named("Carnegie Hall", 4)];
        let new = [named("Boston", 3), named("Symphony Hall", 8)];
        let (map, _) = align(Kind::Name, (&old, &new), (&[], &[]), (&[], &[]), None);
        assert_eq!(map, [Some(1)]);
        // A one-word name names no kind: the order decides.
        let (map, _) = align(Kind::Name, (&[named("Boston", 2)], &new), (&[], &[]), (&[], &[]), None);
        assert_eq!(map, [Some(0)]);
        assert!(same_head("Perth Airport", "Milan Malpensa airport"));
        assert!(!same_head("Sydney", "Sydney"));
    }
}
