//! How held-out chains are drawn: every k-th chain (`chains`, the usual k-fold), or by **kind**
//! (`families`): a chain's kind is the set of APIs it calls, those that only serve other calls left
//! out (an API every call of which a later call of its chain reads — a location search feeding a
//! rental search), and a fold holds out whole kinds, so no held-out chain has a kind its fold learned
//! from. A held-out chain calling an API no training chain of its fold calls cannot be planned by
//! anything learned: it is skipped and counted.

use std::collections::{BTreeMap, BTreeSet};
use toolgraph_ingest::complexfuncbench::Chain;

/// One fold: the chains learned from, and the held-out chains with their index in their file.
pub(super) type Fold<'a> = (Vec<&'a Chain>, Vec<(usize, &'a Chain)>);

/// How held-out chains are drawn (see the [module](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Split {
    /// Every k-th chain of the file.
    #[default]
    Chains,
    /// Whole kinds of chain.
    Families,
}

impl std::str::FromStr for Split {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "chains" => Ok(Split::Chains),
            "families" => Ok(Split::Families),
            _ => Err(format!("unknown split `{s}` (chains, families)")),
        }
    }
}

impl Split {
    pub fn name(self) -> &'static str {
        match self {
            Split::Chains => "chains",
            Split::Families => "families",
        }
    }
}

/// The label later calls read a call's output by.
fn label(call: &toolgraph_ingest::complexfuncbench::ChainCall, i: usize) -> String {
    call.label.clone().unwrap_or_else(|| format!("var{}", i + 1))
}

/// APIs every call of which a later call of its chain reads (`$label.…$` or `$label$`).
pub fn providers(chains: &[Chain]) -> BTreeSet<String> {
    let mut read: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for c in chains {
        for (i, call) in c.output.iter().enumerate() {
            let l = label(call, i);
            let (dotted, whole) = (format!("${l}."), format!("${l}$"));
            let later = c.output[i + 1..].iter().any(|n| {
                let text = n.arguments.to_string();
                text.contains(&dotted) || text.contains(&whole)
            });
            let e = read.entry(call.name.as_str()).or_default();
            e.0 += 1;
            e.1 += usize::from(later);
        }
    }
    read.into_iter().filter(|(_, (calls, read))| calls == read).map(|(api, _)| api.to_string()).collect()
}

/// A chain's kind: the APIs it calls, `providers` left out (all of them where it calls nothing else).
pub fn kind_of(chain: &Chain, providers: &BTreeSet<String>) -> BTreeSet<String> {
    let all: BTreeSet<String> = chain.output.iter().map(|c| c.name.clone()).collect();
    let own: BTreeSet<String> = all.iter().filter(|a| !providers.contains(*a)).cloned().collect();
    if own.is_empty() {
        all
    } else {
        own
    }
}

/// `k` folds over `chains` by kind; and a line for each held-out chain skipped because it calls an
/// API its fold's training chains never call. Kinds are dealt to folds in the order of their size
/// (largest first, each to the fold with the fewest held-out chains so far; ties by the kind's
/// names), so the folds are about even.
pub fn family_folds(chains: &[Chain], k: usize) -> (Vec<Fold<'_>>, Vec<String>) {
    let k = k.max(2);
    let providers = providers(chains);
    let kinds: Vec<BTreeSet<String>> = chains.iter().map(|c| kind_of(c, &providers)).collect();
    let mut members: BTreeMap<&BTreeSet<String>, Vec<usize>> = BTreeMap::new();
    for (i, kind) in kinds.iter().enumerate() {
        members.entry(kind).or_default().push(i);
    }
    let mut by_size: Vec<(&BTreeSet<String>, Vec<usize>)> = members.into_iter().collect();
    by_size.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(b.0)));
    let mut fold_of = vec![0usize; chains.len()];
    let mut sizes = vec![0usize; k];
    for (_, idx) in by_size {
        let f = (0..k).min_by_key(|&f| (sizes[f], f)).unwrap_or(0);
        sizes[f] += idx.len();
        for i in idx {
            fold_of[i] = f;
        }
    }
    let mut skipped = Vec::new();
    let folds = (0..k)
        .map(|f| {
            let train: Vec<&Chain> =
                chains.iter().enumerate().filter(|(i, _)| fold_of[*i] != f).map(|(_, c)| c).collect();
            let known: BTreeSet<&str> = train.iter().flat_map(|c| c.output.iter().map(|o| o.name.as_str())).collect();
            let mut test = Vec::new();
            for (i, c) in chains.iter().enumerate().filter(|(i, _)| fold_of[*i] == f) {
                match c.output.iter().find(|o| !known.contains(o.name.as_str())) {
                    Some(o) => skipped.push(format!(
                        "chain {i} (fold {f}): calls {}, which no training chain of its fold calls",
                        o.name
                    )),
                    None => test.push((i, c)),
                }
            }
            (train, test)
        })
        .collect();
    (folds, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chain(input: &str, calls: &[(&str, serde_json::Value)]) -> Chain {
        let output = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                serde_json::from_value(json!({"name": name, "arguments": args, "label": format!("var{}", i + 1)}))
                    .unwrap()
            })
            .collect();
        Chain { input: input.into(), output }
    }

    /// A library's chains: a book search always feeds another call (a provider); the kinds are
    /// what the chains do beyond it; a fold never learns a kind it holds out, and a held-out chain
    /// calling an API only it calls is skipped.
    #[test]
    fn folds_hold_out_whole_kinds() {
        let find = |q: &str| ("find_book", json!({"title": q}));
        let loans = ("loan_status", json!({"book": "$var1.id$"}));
        let reviews = ("reviews", json!({"book": "$var1.id$"}));
        let chains = vec![
            chain("is Dune on loan", &[find("Dune"), loans.clone()]),
            chain("is Emma on loan", &[find("Emma"), loans.clone()]),
            chain("reviews of Dune", &[find("Dune"), reviews.clone()]),
            chain("reviews of Ulysses", &[find("Ulysses"), reviews.clone()]),
            chain("Dune: on loan, and its reviews", &[find("Dune"), loans.clone(), reviews.clone()]),
            chain("reserve Emma", &[find("Emma"), ("reserve", json!({"book": "$var1.id$"}))]),
        ];
        let p = providers(&chains);
        assert_eq!(p.into_iter().collect::<Vec<_>>(), ["find_book"]);
        let kinds: BTreeSet<BTreeSet<String>> = chains.iter().map(|c| kind_of(c, &providers(&chains))).collect();
        assert_eq!(kinds.len(), 4);
        let (folds, skipped) = family_folds(&chains, 3);
        let mut held: Vec<usize> = Vec::new();
        for (train, test) in &folds {
            let learned: BTreeSet<BTreeSet<String>> = train.iter().map(|c| kind_of(c, &providers(&chains))).collect();
            for (i, c) in test {
                assert!(!learned.contains(&kind_of(c, &providers(&chains))), "chain {i}'s kind was learned");
                held.push(*i);
            }
        }
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(skipped[0].starts_with("chain 5 ") && skipped[0].contains("reserve"), "{skipped:?}");
        held.sort();
        assert_eq!(held, [0, 1, 2, 3, 4], "every other chain is held out once");
    }
}
