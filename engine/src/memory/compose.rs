//! Compose by parts: what a request's words ask for beyond the remembered request a replay
//! followed (an API the learned ask model ties to a word only this request says, see
//! [`crate::read::asks`], where no call made is of an API about that word) is served by a **fragment** of another memory — the calls of that API
//! in the nearest memory (by meaning) whose chain made them, with the calls they read from — replayed
//! by that memory's own analogy after the calls made so far. A fragment's call this run already
//! made with the same arguments (the same location lookup) is not sent again: its references
//! point to the call made. What no memory serves stays missing, and the judge names it.

pub(crate) use super::join::leaves;
use super::store::MemoryStep;
use crate::exec::refs::Reference;
use crate::plan::{ApiView, Context};
use crate::read::asks::Asked;
use crate::run::engine::{Engine, RunState};
use crate::run::trace::TraceEvent;
use std::collections::{BTreeSet, HashMap};

/// The most APIs a planner is asked to choose among for one word.
const ASK_CHOICES: usize = 5;

/// Which API serves an ask: the one learned to follow its word, or several a planner may choose
/// among (nothing composed where it does not).
enum Serving {
    Api(String, String),
    Unsure(Vec<ApiView>),
    /// Too many or too few to choose among: nothing is composed for it (the judge names it).
    Undecided,
}

/// Memories looked at for a fragment, nearest by meaning first.
const FRAGMENT_POOL: usize = 64;
/// Fragments sent for one API before it is left unserved (each failed one cost calls).
const FRAGMENT_TRIES: usize = 2;

/// `s` with each reference's label replaced by its counterpart in `labels` (the others kept).
pub(crate) fn relabel(s: &str, labels: &HashMap<String, String>) -> String {
    let refs = Reference::all_in(s);
    if refs.iter().all(|r| !labels.contains_key(&r.label)) {
        return s.to_string();
    }
    // Two passes through placeholders: a new label may be an old one of another reference.
    let mut out = s.to_string();
    let mut back = Vec::new();
    for (i, r) in refs.iter().enumerate() {
        let Some(new) = labels.get(&r.label) else { continue };
        let hold = format!("\u{0}{i}\u{0}");
        out = out.replacen(&r.to_string(), &hold, 1);
        let mut n = r.clone();
        n.label = new.clone();
        back.push((hold, n.to_string()));
    }
    for (hold, new) in back {
        out = out.replacen(&hold, &new, 1);
    }
    out
}

/// The steps of `chain` (indexes, in order) that the calls of `api` need: those calls and,
/// transitively, every earlier call whose output they read.
pub(crate) fn fragment(chain: &[MemoryStep], api: &str) -> Vec<usize> {
    fragment_of(chain, |a| a == api)
}

/// The steps of `chain` (indexes, in order) whose API is `wanted`, with every earlier call
/// whose output they read, transitively.
pub(crate) fn fragment_of(chain: &[MemoryStep], wanted: impl Fn(&str) -> bool) -> Vec<usize> {
    fragment_at(chain, |i| wanted(&chain[i].api), |_, _| true)
}

/// The steps of `chain` (indexes, in order) `wanted` by index, with every earlier call whose
/// output they read, transitively, where `pull(reader, read)` lets that call in (one it does not
/// is left out; what read from it is filled afresh at replay).
pub(crate) fn fragment_at(
    chain: &[MemoryStep],
    wanted: impl Fn(usize) -> bool,
    pull: impl Fn(usize, usize) -> bool,
) -> Vec<usize> {
    let label_of: HashMap<String, usize> = (0..chain.len()).map(|i| (format!("var{}", i + 1), i)).collect();
    let mut need: BTreeSet<usize> = (0..chain.len()).filter(|i| wanted(*i)).collect();
    let mut todo: Vec<usize> = need.iter().copied().collect();
    while let Some(i) = todo.pop() {
        for v in chain[i].arguments.values() {
            for l in crate::exec::refs::labels_in(v) {
                if let Some(&j) = label_of.get(&l).filter(|j| **j < i && pull(i, **j)) {
                    if need.insert(j) {
                        todo.push(j);
                    }
                }
            }
        }
    }
    need.into_iter().collect()
}

/// Where in the request (a position of [`crate::read::asks::ask_word_seq`]) `asked`'s word is
/// first said (the first word of a name said in several).
pub(crate) fn position(seq: &[Option<String>], asked: &Asked) -> Option<usize> {
    let first = asked.word.split(' ').next().unwrap_or(&asked.word);
    seq.iter().position(|w| w.as_deref() == Some(first))
}

/// The position in the request (its words `seq`, see [`position`]) of the first ask that a call
/// of one of `apis` serves.
pub(crate) fn first_served<'a>(
    ctx: &Context,
    seq: &[Option<String>],
    apis: impl Iterator<Item = &'a str> + Clone,
) -> Option<usize> {
    ctx.asked_apis.iter().filter(|a| apis.clone().any(|api| a.served_by(api))).filter_map(|a| position(seq, a)).min()
}

/// The asks `only` lets through that no call made serves and the remembered request (its words
/// `old_words`) did not make, in the order the request says them (the ask model ranks its cues
/// by how often runs called the API after the word; the calls follow the request).
fn left_to_compose(ctx: &Context, old_words: &[String], only: &(dyn Fn(&Asked) -> bool + Sync)) -> Vec<Asked> {
    let mut asks: Vec<Asked> = ctx
        .asked_apis
        .iter()
        .filter(|a| only(a) && !a.said_in(old_words) && !ctx.path.iter().any(|s| a.served_by(&s.api.id)))
        .cloned()
        .collect();
    let seq = crate::read::asks::ask_word_seq(&ctx.request);
    asks.sort_by_key(|a| position(&seq, a).unwrap_or(usize::MAX));
    asks
}

impl Engine {
    /// Which steps of a remembered chain are a last call (no call kept, those `dropped` aside,
    /// reads its output), not asked for by this request's words, that only the remembered
    /// request's words point to: it said a word the API's documentation uses that this request
    /// does not say, and every word this request says that the documentation uses is documented
    /// by an earlier call of the chain too ("car" for a rental search before a car's details).
    /// Words are compared by stem ([`crate::read::asks::same_stem`]). The ask model speaks for
    /// the words it learned; this is the documentation's word for the rest (a vehicle's details
    /// asked for by "the vehicle").
    pub(super) fn said_only_there(
        &self,
        ctx: &Context,
        old_request: &str,
        chain: &[MemoryStep],
        dropped: &[bool],
        said_here: &[String],
    ) -> Vec<bool> {
        // The outputs the calls kept so far read.
        let read: std::collections::HashSet<String> = chain
            .iter()
            .zip(dropped)
            .filter(|(_, d)| !**d)
            .flat_map(|(s, _)| s.arguments.values())
            .flat_map(crate::exec::refs::labels_in)
            .collect();
        let mut last = vec![false; chain.len()];
        let candidates: Vec<usize> = (0..chain.len())
            .filter(|&i| {
                !dropped[i]
                    && !read.contains(&format!("var{}", i + 1))
                    && !ctx.asked_apis.iter().any(|a| a.api == chain[i].api)
            })
            .collect();
        if candidates.is_empty() {
            return last;
        }
        let docs: Vec<&[String]> =
            chain.iter().map(|s| self.doc_words.get(&s.api).map(Vec::as_slice).unwrap_or_default()).collect();
        let old_words = crate::read::asks::ask_words(old_request);
        let documents = |d: &[String], w: &str| d.iter().any(|x| crate::read::asks::same_stem(x, w));
        for i in candidates {
            last[i] = old_words.iter().any(|w| documents(docs[i], w) && !documents(said_here, w))
                && said_here.iter().all(|w| !documents(docs[i], w) || docs[..i].iter().any(|d| documents(d, w)));
        }
        last
    }

    /// Whether two APIs, neither a lookup, are documented by a word of `said` (this request's
    /// ask words): a search for gyms near coordinates and one for gyms in a city, where the
    /// request says "gym".
    pub(super) fn siblings(&self, said: &[String], a: &str, b: &str) -> bool {
        self.plain(a) && self.plain(b) && self.documented_together(said, a, b)
    }

    /// Whether a call made of `made` may stand in for a fragment's `producer` (see
    /// [`super::join`]): a word of `said` documents both, lookups too (the hotel search by
    /// coordinates made, for the hotel-name lookup a fragment's reviews read: `join` still
    /// checks that the call's response holds what the reviews read).
    fn stands_in(&self, said: &[String], made: &str, producer: &str) -> bool {
        self.documented_together(said, made, producer)
    }

    fn plain(&self, id: &str) -> bool {
        self.apis.get(id).is_some_and(|x| !x.is_lookup())
    }

    fn documented_together(&self, said: &[String], a: &str, b: &str) -> bool {
        said.iter().any(|w| {
            self.documented.get(w).is_some_and(|apis| {
                apis.binary_search_by(|x| x.as_str().cmp(a)).is_ok()
                    && apis.binary_search_by(|x| x.as_str().cmp(b)).is_ok()
            })
        })
    }

    /// Whether recorded calls of `api` read an output of a sibling of `other` (see
    /// [`Self::siblings`]; not `other` itself): the hours of a gym, read from the city search,
    /// where `other` is the search near a place.
    pub(super) fn reads_a_sibling_of(&self, ctx: &Context, said: &[String], api: &str, other: &str) -> bool {
        let Some(slots) = ctx.args.as_deref().and_then(|m| m.slots.get(api)) else { return false };
        slots.values().flat_map(|s| s.producers.keys()).any(|p| p != other && self.siblings(said, p, other))
    }

    /// Whether a fragment's call of `api` serves this request (composing `wanted`): the API
    /// itself, one the request's words ask for, or a lookup chains always go on from.
    fn wanted_here(&self, ctx: &Context, api: &str, wanted: &str) -> bool {
        api == wanted
            || ctx.asked_apis.iter().any(|a| a.api == api)
            || self.apis.get(api).is_some_and(|a| a.is_lookup())
    }

    /// The API (id, name) that serves `asked` after this run's calls: the API learned to follow
    /// its word. A word that asks for one of several APIs, none learned to follow it by itself
    /// (see [`crate::read::asks`]), is not composed by rule: the graph's links from the calls made
    /// pointed as often at a call the request never wanted as at the right one (dev folds). A
    /// planner may choose among 2–5 ([`Serving::Unsure`]), those a call made leads to first (the
    /// data-flow links, then NEXT weight); else the judge names the ask.
    fn serving(&self, ctx: &Context, asked: &crate::read::asks::Asked) -> Serving {
        if !asked.open {
            return Serving::Api(asked.api.clone(), asked.name.clone());
        }
        // How a call made leads to `member`: (feeds it, the best NEXT weight to it).
        let link = |member: &str| {
            ctx.path
                .iter()
                .map(|s| {
                    let key = (s.api.id.clone(), member.to_string());
                    let feeds = self.graph.feeds.get(&key).is_some_and(|f| !f.is_empty());
                    (feeds, self.graph.next.get(&key).map_or(0.0, |e| e.dynamic_weight))
                })
                .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
                .unwrap_or_default()
        };
        let mut members: Vec<((bool, f64), ApiView)> = asked
            .about
            .iter()
            .filter_map(|m| self.apis.get(m))
            .filter(|a| !a.is_lookup())
            .map(|a| (link(&a.id), a.as_ref().clone()))
            .collect();
        members.sort_by(|a, b| b.0 .0.cmp(&a.0 .0).then(b.0 .1.total_cmp(&a.0 .1)));
        if (2..=ASK_CHOICES).contains(&members.len()) {
            Serving::Unsure(members.into_iter().map(|(_, a)| a).collect())
        } else {
            Serving::Undecided
        }
    }

    /// Serve each API this request's words ask for (of those `only` lets through) that the path
    /// has not called and the remembered request (its words `old_words`) did not ask for, by a
    /// fragment of another memory. Best effort: what stays unserved is named by the judge.
    pub(crate) async fn compose_missing(
        &self,
        st: &mut RunState<'_>,
        old_words: &[String],
        meaning: &[f32],
        only: &(dyn Fn(&Asked) -> bool + Sync),
    ) {
        let asks = left_to_compose(&st.ctx, old_words, only);
        let said = crate::read::asks::ask_words(&st.ctx.request);
        let mut wanted = Vec::new();
        for a in &asks {
            wanted.extend(match self.serving(&st.ctx, a) {
                Serving::Api(id, name) => Some((id, name)),
                Serving::Undecided => None,
                Serving::Unsure(members) => {
                    match st.how.planner.choose_api(&st.ctx, &a.word, &members).await.ok().flatten() {
                        Some(i) if i < members.len() => {
                            let m = &members[i];
                            st.emit(TraceEvent::Unsure {
                                about: format!("the API \"{}\" asks for", a.word),
                                answer: m.name.clone(),
                            })
                            .await;
                            Some((m.id.clone(), m.name.clone()))
                        }
                        _ => None,
                    }
                }
            });
        }
        if wanted.is_empty() || !self.settings.use_memory {
            return;
        }
        let Some(mem) = &self.memory else { return };
        let hits = match mem.recall(meaning, FRAGMENT_POOL).await {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!(target: "run.compose", error = %e, "no memories for fragments");
                return;
            }
        };
        for (api, name) in wanted {
            // An earlier fragment may have called it.
            if st.ctx.path.iter().any(|s| s.api.id == api) {
                continue;
            }
            let mut why = format!("no remembered chain calls {name}");
            // The fragments that bring the fewest calls this request does not ask for (a
            // lookup aside) first, then the nearer by meaning; at most FRAGMENT_TRIES sent.
            let mut offers: Vec<(usize, usize, Vec<usize>)> = hits
                .iter()
                .enumerate()
                .filter(|(_, h)| h.entry.chain.iter().any(|s| s.api == api))
                .map(|(n, h)| {
                    let part = fragment(&h.entry.chain, &api);
                    let extra =
                        part.iter().filter(|i| !self.wanted_here(&st.ctx, &h.entry.chain[**i].api, &api)).count();
                    (extra, n, part)
                })
                .collect();
            offers.sort();
            let mut sent = 0;
            for (_, n, part) in offers {
                if sent == FRAGMENT_TRIES {
                    break;
                }
                let hit = &hits[n];
                let chain = &hit.entry.chain;
                // A producer a sibling call made stands in for is not sent (see `join`).
                let keep: BTreeSet<usize> = part.iter().copied().collect();
                let without = |stood: &BTreeSet<usize>| {
                    fragment_at(chain, |i| keep.contains(&i) && chain[i].api == api, |_, read| !stood.contains(&read))
                };
                let joined =
                    super::join::join(&st.ctx, chain, &part, &api, |a, b| self.stands_in(&said, a, b), without);
                let step_at = |i: usize| joined.steps.get(&i).unwrap_or(&chain[i]);
                let steps: Vec<MemoryStep> = joined.part.iter().map(|i| step_at(*i).clone()).collect();
                let analogy = self.analogy(&st.ctx, &hit.entry.request, chain);
                if !self.fit_steps(&st.ctx, &analogy, &steps) {
                    why = format!("the values of the remembered {name} calls have no counterpart here");
                    continue;
                }
                sent += 1;
                let mut labels = joined.labels.clone();
                let mut done = Ok(());
                for &i in &joined.part {
                    // Legs go along this request's route, as the replay's own do.
                    let routed = self.routed_legs(st, (&hit.entry.request, &analogy), (chain, step_at(i)), false).await;
                    match self.replay_step(st, &analogy, routed.as_ref().unwrap_or(step_at(i)), &labels, true).await {
                        Ok(label) => {
                            labels.insert(format!("var{}", i + 1), label);
                        }
                        Err(e) => {
                            done = Err(e);
                            break;
                        }
                    }
                }
                st.emit(TraceEvent::Composed {
                    api: name.clone(),
                    from: hit.entry.request.clone(),
                    error: done.clone().err(),
                })
                .await;
                match done {
                    Ok(()) => break,
                    Err(e) => why = e,
                }
            }
            if sent == 0 {
                // No fragment was sent: the trace says why none could be.
                st.emit(TraceEvent::Composed { api: name.clone(), from: String::new(), error: Some(why) }).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(api: &str, args: serde_json::Value) -> MemoryStep {
        MemoryStep {
            api: api.into(),
            arguments: args.as_object().cloned().unwrap_or_default(),
            sources: HashMap::new(),
        }
    }

    /// A library's chain: find the author, list their books, find a shop; the books' fragment is
    /// the author lookup and the listing, not the shop.
    #[test]
    fn a_fragment_is_the_api_and_what_it_reads_from() {
        let chain = [
            step("authors.find", json!({"name": "Le Guin"})),
            step("shops.near", json!({"city": "Portland"})),
            step("books.by_author", json!({"author_id": "$var1.id$"})),
        ];
        assert_eq!(fragment(&chain, "books.by_author"), [0, 2]);
        assert_eq!(fragment(&chain, "shops.near"), [1]);
        assert!(fragment(&chain, "films.find").is_empty());
    }

    #[test]
    fn references_are_relabelled_at_once() {
        let map: HashMap<String, String> =
            [("var1".to_string(), "var3".to_string()), ("var3".to_string(), "var5".to_string())].into();
        assert_eq!(relabel("$var1.id$ and $var3.items.0.name$", &map), "$var3.id$ and $var5.items.0.name$");
        assert_eq!(relabel("$var2$ costs $5", &map), "$var2$ costs $5");
    }
}
