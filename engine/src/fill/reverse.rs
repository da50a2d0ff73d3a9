//! Reverse Chain: a call whose required arguments nothing fills gets a provider — an API whose
//! output has the field (a FEEDS edge first) — called before it, nested up to `run.reverse_depth`;
//! what nothing provides ends in `needs_input` naming exactly those parameters.

use crate::fill::filler::fill_arguments;
use crate::memory::legs::ROUTE;
use crate::plan::{ApiView, ArgSource, DeadEnd, Filled, Offer};
use crate::run::engine::{Engine, RunState};
use crate::run::report::NeedsInput;
use crate::run::trace::TraceEvent;
use crate::Result;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Providers offered per missing parameter to a planner that looks at them.
const OFFERS_PER_PARAM: usize = 3;
/// Providers of one parameter called at most, the best first, while those before failed.
const PROVIDERS_TRIED: usize = 2;

/// A walk over providers that calls nothing ([`Engine::unreachable`]): the APIs being completed
/// on its way, the providers found reaching or not, and the first (deepest) one that did not.
struct Reach {
    inserting: Vec<String>,
    known: HashMap<String, bool>,
    leaf: Option<Leaf>,
}

/// A provider a walk found short, and the parameters it lacked.
type Leaf = (Arc<ApiView>, Vec<String>);

/// What finding a provider reads: where the search stands, and the APIs being completed now.
pub(crate) type Providing<'s> = (crate::run::engine::Here<'s>, &'s [String]);

impl Engine {
    /// The providers of parameter `param` of `api` (Reverse Chain), best first: a FEEDS edge naming
    /// the field, else an API whose documented output has that field; by graph weight, similarity.
    /// APIs excluded, degraded or already being completed are left out.
    pub(crate) fn providers_of(&self, st: Providing<'_>, api: &ApiView, param: &str) -> Vec<Arc<ApiView>> {
        let ((ctx, leads, how), inserting) = st;
        let mut scored: Vec<(f64, Arc<ApiView>)> = Vec::new();
        for (cand, feeds) in self.providers.candidates(&api.id, param) {
            if ctx.excluded_tools.contains(&cand.tool) || inserting.contains(&cand.id) || self.degraded(how, &cand.id) {
                continue;
            }
            let w = self.graph.next.get(&(cand.id.clone(), api.id.clone())).map(|e| e.dynamic_weight).unwrap_or(0.0);
            let score = (if feeds { 1.0 } else { 0.0 })
                + w
                + leads
                    .sims(ctx.focus)
                    .get(&cand.id)
                    .copied()
                    .unwrap_or(0.0)
                    .max(leads.sims.get(&cand.id).copied().unwrap_or(0.0))
                    * 0.5;
            scored.push((score, cand));
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
        scored.into_iter().map(|(_, a)| a).collect()
    }

    pub(crate) fn provider_for(&self, st: Providing<'_>, api: &ApiView, param: &str) -> Option<Arc<ApiView>> {
        self.providers_of(st, api, param).into_iter().next()
    }

    /// Provider offers for the required parameters of `api` no earlier output or request value fills.
    pub(crate) fn offers(&self, st: Providing<'_>, api: &ApiView) -> Vec<Offer> {
        let open = fill_arguments((st.0).0, api).missing;
        api.params
            .iter()
            .filter(|p| p.required && open.contains(&p.name))
            .map(|p| Offer {
                param: p.name.clone(),
                providers: self.providers_of(st, api, &p.name).into_iter().take(OFFERS_PER_PARAM).collect(),
            })
            .filter(|o| !o.providers.is_empty())
            .collect()
    }

    /// The open parameters of `api` (as `filled` left them) that no chain of providers reaches:
    /// each is tried as the loop of [`Engine::call_api`] would (the planner's pick, else the best
    /// provider), a provider reaching where its own open parameters do, as deep as Reverse Chain
    /// nests; nothing is called (a list of legs the route lays was laid before). With them, the
    /// deepest provider whose own were not reached and those (what the user would be asked
    /// first, had the providers been called).
    fn unreachable(
        &self,
        st: &RunState<'_>,
        api: &ApiView,
        filled: &Filled,
        nesting: usize,
    ) -> (Vec<String>, Option<Leaf>) {
        let mut walk = Reach {
            inserting: st.ledger.inserting.iter().cloned().chain([api.id.clone()]).collect(),
            known: HashMap::new(),
            leaf: None,
        };
        let room = self.settings.max_depth.saturating_sub(st.ctx.path.len() + 1);
        let mut beyond = Vec::new();
        for param in &filled.missing {
            let pick = filled.from_api.iter().find(|p| p.param == *param).and_then(|p| self.apis.get(&p.api).cloned());
            if filled.ask_user.contains(param) || !self.reaches(st, &mut walk, (api, param), pick, (nesting, room)) {
                beyond.push(param.clone());
            }
        }
        (beyond, walk.leaf)
    }

    /// Whether `param` of `api` can come from a provider (`pick`, else the best one) whose own open
    /// parameters are reached the same way; `(nesting, room)`: Reverse Chain's depth here, and the
    /// calls the path has room for.
    fn reaches(
        &self,
        st: &RunState<'_>,
        walk: &mut Reach,
        (api, param): (&ApiView, &str),
        pick: Option<Arc<ApiView>>,
        (nesting, room): (usize, usize),
    ) -> bool {
        if nesting >= self.settings.reverse_depth || room == 0 {
            return false;
        }
        let pick = pick.filter(|a| !walk.inserting.contains(&a.id));
        let Some(provider) = pick.or_else(|| self.provider_for((st.here(), &walk.inserting), api, param)) else {
            return false;
        };
        if let Some(&ok) = walk.known.get(&provider.id) {
            return ok;
        }
        let open = fill_arguments(&st.ctx, &provider);
        walk.inserting.push(provider.id.clone());
        let unreached: Vec<String> = open
            .missing
            .iter()
            .filter(|p| {
                open.ask_user.contains(p) || !self.reaches(st, walk, (&provider, p), None, (nesting + 1, room - 1))
            })
            .cloned()
            .collect();
        walk.inserting.pop();
        let ok = unreached.is_empty();
        if !ok && walk.leaf.is_none() {
            walk.leaf = Some((provider.clone(), unreached));
        }
        walk.known.insert(provider.id.clone(), ok);
        ok
    }

    /// `api` cannot be called without `missing`: traced, the user asked (the first time in a run)
    /// and a dead end noted with the `arguments` it had.
    async fn needs(&self, st: &mut RunState<'_>, api: &ApiView, missing: &[String], arguments: &Map<String, Value>) {
        let them = if missing.len() == 1 { "it" } else { "them" };
        let message = format!(
            "{} needs {} and no earlier output or API can provide {them}; please give {them}",
            api.name,
            missing.join(", ")
        );
        st.emit(TraceEvent::NeedsInput { api: api.id.clone(), missing: missing.to_vec() }).await;
        if st.ledger.needs_input.is_none() {
            st.ledger.needs_input = Some(NeedsInput { api: api.id.clone(), missing: missing.to_vec(), message });
        }
        st.ctx.dead_ends.push(DeadEnd {
            api: api.id.clone(),
            arguments: arguments.clone(),
            reason: format!("missing {}", missing.join(", ")),
        });
    }

    /// Call `first`, the provider of `param` of `api`, nested; where it is called and fails — no
    /// result, an error — and the run may still spend, the next best provider not tried yet is
    /// called instead, up to [`PROVIDERS_TRIED`] in all (a place one lookup does not know: its
    /// coordinates from another that gives them too). Returns whether a provider's call succeeded.
    async fn provide(
        &self,
        st: &mut RunState<'_>,
        api: &Arc<ApiView>,
        param: &str,
        first: Arc<ApiView>,
        nesting: usize,
        deterministic: bool,
    ) -> Result<bool> {
        let mut provider = first;
        let mut tried = vec![provider.id.clone()];
        loop {
            st.emit(TraceEvent::Insert {
                api: api.id.clone(),
                argument: param.to_string(),
                provider: provider.id.clone(),
            })
            .await;
            let (failed_before, asked_before) = (st.stats.failed_calls, st.ledger.needs_input.is_some());
            if self.call_api(st, &provider, nesting + 1, deterministic).await? {
                return Ok(true);
            }
            // Only a call that failed gives way. Where the user is asked for a value — by this
            // provider, or for a parameter before this one — the call waits on the user anyway:
            // no more calls are spent on it.
            let failed = st.stats.failed_calls > failed_before && !asked_before && st.ledger.needs_input.is_none();
            if !failed || tried.len() >= PROVIDERS_TRIED || self.out_of_budget(&st.how, &st.ledger, &st.stats).is_some()
            {
                return Ok(false);
            }
            let next = self
                .providers_of((st.here(), &st.ledger.inserting), api, param)
                .into_iter()
                .find(|p| !tried.contains(&p.id));
            let Some(next) = next else { return Ok(false) };
            tried.push(next.id.clone());
            provider = next;
        }
    }

    /// Fill and execute one call; on success the step is on the path. Missing arguments are
    /// completed Reverse-Chain style: each gets its provider (the planner's pick, else the best
    /// one) called first, nesting at most `run.reverse_depth` deep; what nothing provides — or what
    /// the planner says only the user knows — ends in `needs_input` naming exactly those
    /// parameters. The planner is asked to fill only when the shared filler leaves a required
    /// argument open. `deterministic`: fill without the planner (plan steps). Returns whether the
    /// call succeeded.
    pub(crate) fn call_api<'s, 'b>(
        &'s self,
        st: &'s mut RunState<'b>,
        api: &'s Arc<ApiView>,
        nesting: usize,
        deterministic: bool,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<bool>> + Send + 's>>
    where
        'b: 's,
    {
        Box::pin(async move {
            // The planner fills only what the shared filler (rules and what recorded runs taught
            // it) leaves open: a call it fills completely costs no planner decision (and no LLM
            // call); one with a required argument open is the planner's, with the providers.
            let filled_now = |st: &RunState<'b>| fill_arguments(&st.ctx, api);
            let ask = |st: &mut RunState<'b>| {
                let offers = if st.how.planner.wants_offers() {
                    self.offers((st.here(), &st.ledger.inserting), api)
                } else {
                    Vec::new()
                };
                st.stats.planner_calls += 1;
                offers
            };
            let rules = filled_now(st);
            let mut filled: Filled = if deterministic || rules.missing.is_empty() {
                rules
            } else {
                let offers = ask(st);
                st.how.planner.fill(&st.ctx, api, &offers).await?
            };
            // A list of legs nothing fills: laid along the route the request says, after a
            // remembered call of the API (see `memory::legs`).
            if !filled.missing.is_empty() {
                if let Some((param, list)) = self.route_list(st, api, &filled.missing).await {
                    filled.arguments.insert(param.clone(), list);
                    filled.sources.insert(param.clone(), ArgSource::Request { kind: ROUTE.into() });
                    filled.missing.retain(|p| *p != param);
                }
            }
            // Where the planner fills by rules alone, the providers are looked at before any is
            // called: a parameter no chain of providers can reach from the request and this run's
            // outputs needs the user, and calling the others first would only spend calls.
            // (Once, for the call the search chose: its providers' own were looked at with it.)
            let (beyond, leaf) =
                if filled.missing.is_empty() || nesting > 0 || !(deterministic || st.how.planner.fills_by_rules()) {
                    (Vec::new(), None)
                } else {
                    self.unreachable(st, api, &filled, nesting)
                };
            if !beyond.is_empty() {
                // The user is asked first for what the deepest provider lacks, as when it is called.
                if let Some((leaf, missing)) = leaf {
                    self.needs(st, &leaf, &missing, &Map::new()).await;
                }
                filled.missing = beyond;
            } else if !filled.missing.is_empty() {
                let mut inserted = false;
                st.ledger.inserting.push(api.id.clone());
                for param in filled.missing.clone() {
                    if filled.ask_user.contains(&param) {
                        continue;
                    }
                    if nesting >= self.settings.reverse_depth || st.ctx.path.len() + 1 >= self.settings.max_depth {
                        break;
                    }
                    // An output inserted for an earlier parameter may provide this one too.
                    if inserted && !fill_arguments(&st.ctx, api).missing.contains(&param) {
                        continue;
                    }
                    let pick = filled
                        .from_api
                        .iter()
                        .find(|p| p.param == param)
                        .and_then(|p| self.apis.get(&p.api).cloned())
                        .filter(|a| !st.ledger.inserting.contains(&a.id));
                    let Some(first) =
                        pick.or_else(|| self.provider_for((st.here(), &st.ledger.inserting), api, &param))
                    else {
                        continue;
                    };
                    if self.provide(st, api, &param, first, nesting, deterministic).await? {
                        inserted = true;
                    }
                }
                st.ledger.inserting.pop();
                if inserted {
                    let rules = filled_now(st);
                    filled = if deterministic || rules.missing.is_empty() {
                        rules
                    } else {
                        let offers = ask(st);
                        st.how.planner.fill(&st.ctx, api, &offers).await?
                    };
                }
            }
            if !filled.missing.is_empty() {
                self.needs(st, api, &filled.missing, &filled.arguments).await;
                return Ok(false);
            }
            Ok(self.execute(st, api, filled).await)
        })
    }
}
