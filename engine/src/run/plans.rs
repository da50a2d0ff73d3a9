//! Plan mode (SoAy) and chains a person wrote: one decision writes a whole program over the
//! closest solutions of the library; it runs step by step (`for_each`, `if`, `$varN.field$`
//! references) and a failing step hands over to the graph search from where it stopped.

use super::engine::{Ended, Engine, Here, RunState};
use super::report::{RunOptions, RunReport, Status};
use super::trace::TraceEvent;
use crate::exec::refs::Reference;
use crate::fill::filler::fill_arguments;
use crate::plan::judge::judge_path;
use crate::plan::program::{Plan, SolutionLibrary, SolutionView};
use crate::plan::{ApiView, ArgSource, Filled};
use crate::Result;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use toolgraph_schema::Mode;

impl Engine {
    /// Check a chain a person wrote without running it: APIs known and usable, argument names,
    /// required arguments, literal values' types against the schema, `$varN.field$` references to
    /// earlier steps only. `Err`: every problem found first, with its step.
    pub fn check_chain(&self, request: &str, chain: &Value) -> std::result::Result<(), String> {
        let st = self.new_state(request, Map::new(), Vec::new(), None, &RunOptions::default());
        let steps = chain.get("steps").and_then(Value::as_array).ok_or("`steps` must be a list")?;
        let mut named = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            let id = s.get("api").and_then(Value::as_str).ok_or_else(|| format!("step {}: `api` is missing", i + 1))?;
            match self.apis.get(id) {
                Some(a) => named.push(a.clone()),
                None => {
                    return Err(format!(
                    "step {}: no usable API `{id}` (ids look like category/tool/api; invalid APIs cannot be called)",
                    i + 1
                ))
                }
            }
        }
        let plan = crate::plan::program::parse_plan(chain, &st.ctx, &named, "user")?;
        for (i, step) in plan.steps.iter().enumerate() {
            let Some(api) = self.apis.get(&step.api) else { continue };
            for (k, v) in step.arguments.iter().flatten() {
                let literal = crate::exec::refs::labels_in(v).is_empty();
                if let (true, Some(p)) = (literal, api.params.iter().find(|p| &p.name == k)) {
                    let mut one = p.clone();
                    one.required = false;
                    let args: Map<String, Value> = [(k.clone(), v.clone())].into_iter().collect();
                    if let Err(problems) = crate::exec::validate(&[one], &args) {
                        let text: Vec<String> =
                            problems.iter().map(|p| format!("{}: {}", p.argument, p.problem)).collect();
                        return Err(format!("step {} ({}): {}", i + 1, api.name, text.join("; ")));
                    }
                }
            }
        }
        Ok(())
    }

    /// Execute a chain a person wrote (developer mode): `{"steps": [{"api", "arguments"?, "for_each"?,
    /// "if"?}]}` with `$varN.field$` references to earlier steps' outputs, checked like a planned
    /// chain before anything is sent (`Err`: what is wrong, nothing ran). Steps without arguments
    /// are filled like planned calls (Reverse Chain included). The run is judged deterministically
    /// and never remembered as a plan (a person's chain is not the engine's judgement).
    pub async fn execute_chain(
        &self,
        request: &str,
        chain: &Value,
        given: Map<String, Value>,
        sink: Option<&tokio::sync::mpsc::Sender<TraceEvent>>,
        opts: RunOptions,
    ) -> Result<std::result::Result<RunReport, String>> {
        let mut st = self.new_state(request, given, Vec::new(), sink, &opts);
        let named: Vec<Arc<ApiView>> = chain
            .get("steps")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("api").and_then(Value::as_str))
            .filter_map(|id| self.apis.get(id).cloned())
            .collect();
        let plan = match crate::plan::program::parse_plan(chain, &st.ctx, &named, "user") {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        st.deterministic_judge = true;
        st.emit(TraceEvent::Plan {
            source: "user".into(),
            solution: Vec::new(),
            steps: plan.steps.iter().map(|s| s.api.clone()).collect(),
        })
        .await;
        let usage: crate::plan::RunUsage = Default::default();
        let ended = crate::plan::RUN_USAGE.scope(usage.clone(), self.execute_plan(&mut st, &plan)).await?;
        let ended = match ended {
            Ok(()) => Ended::Finished,
            Err((n, reason)) => {
                st.emit(TraceEvent::PlanFailed { step: n, reason: reason.clone() }).await;
                Ended::GaveUp(reason)
            }
        };
        let failed = matches!(ended, Ended::GaveUp(_));
        let mut settings_off = self.settings.clone();
        settings_off.remember = false;
        let mut r = self.conclude_with(st, ended, &[], false, &settings_off).await?;
        if failed && r.status == Status::Answered {
            r.status = Status::Partial;
        }
        r.stats.llm = usage.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(Ok(r))
    }

    /// Plan mode: one decision writes the whole plan; it runs; a failing step (or a path that
    /// does not cover the request) hands over to the graph search from where it stopped (the mode
    /// becomes `graph`). `true`: the plan ran and its path passed the judgement.
    pub(crate) async fn run_plan(&self, st: &mut RunState<'_>) -> Result<bool> {
        let views = self.solution_views(st.here());
        st.stats.planner_calls += 1;
        let plan = st.how.planner.plan(&st.ctx, &views).await?;
        let fallback = match plan {
            None => (0, format!("no solution of the library fits the request ({} offered)", views.len())),
            Some(p) => {
                st.stats.planned = true;
                // This plan is the run's plan now (a remembered one may have failed before it).
                st.stats.plan_fallback_at = None;
                let solution = p
                    .solution
                    .and_then(|i| self.solutions.get().and_then(|l| l.solutions.get(i)))
                    .map(|s| s.apis.clone())
                    .unwrap_or_default();
                st.emit(TraceEvent::Plan {
                    source: p.source.clone(),
                    solution,
                    steps: p.steps.iter().map(|s| s.api.clone()).collect(),
                })
                .await;
                match self.execute_plan(st, &p).await? {
                    Ok(()) => {
                        let j = judge_path(&st.ctx);
                        if j.pass {
                            return Ok(true);
                        }
                        (p.steps.len() + 1, format!("the plan ran but {}", j.reason))
                    }
                    Err(failed) => failed,
                }
            }
        };
        st.stats.plan_fallback_at = Some(fallback.0);
        st.emit(TraceEvent::PlanFailed { step: fallback.0, reason: fallback.1 }).await;
        st.how.mode = Mode::Graph;
        Ok(false)
    }

    /// The valid solutions closest to the request (plan mode), without excluded or degraded APIs.
    pub(crate) fn solution_views(&self, (ctx, leads, how): Here<'_>) -> Vec<SolutionView> {
        let lib = self
            .solutions
            .get_or_init(|| SolutionLibrary::build(&self.graph, &self.apis, self.settings.plan_max_steps, 20));
        let want = self.settings.plan_solutions.max(1);
        let mut out = Vec::new();
        for (index, score) in lib.rank(&leads.sims, self.settings.min_similarity, want * 20) {
            let apis: Option<Vec<Arc<ApiView>>> = lib.solutions[index]
                .apis
                .iter()
                .map(|id| {
                    self.apis
                        .get(id)
                        .filter(|a| !ctx.excluded_tools.contains(&a.tool) && !self.degraded(how, id))
                        .cloned()
                })
                .collect();
            // Valid: the request (or the user's values) can give the first API's inputs.
            if let Some(apis) = apis.filter(|a| a.first().is_some_and(|f| fill_arguments(ctx, f).missing.is_empty())) {
                out.push(SolutionView { index, score, apis });
            }
            if out.len() >= want {
                break;
            }
        }
        out
    }

    /// Run a plan step by step. `Err((step, why))` (1-based) at the first step that cannot run:
    /// the search takes over from there, the steps before it kept.
    pub(crate) async fn execute_plan(
        &self,
        st: &mut RunState<'_>,
        plan: &Plan,
    ) -> Result<std::result::Result<(), (usize, String)>> {
        // Plan label (var1, var2, …) → the label of that step's (first) call on the path.
        let mut labels: HashMap<String, String> = HashMap::new();
        for (i, step) in plan.steps.iter().enumerate() {
            let n = i + 1;
            let Some(api) = self.apis.get(&step.api).filter(|_| !self.degraded(&st.how, &step.api)).cloned() else {
                return Ok(Err((n, format!("{} is not an active API", step.api))));
            };
            let outputs: HashMap<String, &Value> = labels
                .iter()
                .filter_map(|(pl, al)| {
                    st.ctx.path.iter().find(|s| &s.label == al).map(|s| (pl.clone(), s.response.as_ref()))
                })
                .collect();
            if let Some(c) = &step.when {
                match crate::plan::program::holds(c, &outputs) {
                    Ok(true) => {}
                    Ok(false) => {
                        drop(outputs);
                        st.emit(TraceEvent::PlanSkipped {
                            step: n,
                            api: api.id.clone(),
                            reason: format!("{} {} {} does not hold", c.reference, c.op, c.value),
                        })
                        .await;
                        continue;
                    }
                    Err(e) => return Ok(Err((n, e))),
                }
            }
            let items: Vec<Option<Reference>> = match &step.for_each {
                None => vec![None],
                Some(r) => {
                    let list_ref = match crate::plan::program::rewrite(&Value::String(r.clone()), &labels, None) {
                        Ok(x) => x.as_str().and_then(Reference::whole),
                        Err(e) => return Ok(Err((n, e))),
                    };
                    let Some(list_ref) = list_ref else {
                        return Ok(Err((n, "for_each is not a reference".into())));
                    };
                    let list = st
                        .ctx
                        .path
                        .iter()
                        .find(|s| s.label == list_ref.label)
                        .and_then(|s| crate::exec::refs::lookup(&s.response, &list_ref.segments()).cloned());
                    match list {
                        Some(Value::Array(a)) if !a.is_empty() => (0..a.len().min(crate::plan::program::MAX_ITEMS))
                            .map(|k| Some(list_ref.join(&k.to_string())))
                            .collect(),
                        _ => return Ok(Err((n, format!("for_each {r} is not a non-empty list")))),
                    }
                }
            };
            drop(outputs);
            let mut first: Option<String> = None;
            for item in items {
                let ok = match &step.arguments {
                    None => self.call_api(st, &api, 0, true).await?,
                    Some(args) => {
                        let arguments =
                            match crate::plan::program::rewrite(&Value::Object(args.clone()), &labels, item.as_ref()) {
                                Ok(Value::Object(m)) => m,
                                Ok(_) => Map::new(),
                                Err(e) => return Ok(Err((n, e))),
                            };
                        let mut f = Filled { arguments, ..Filled::default() };
                        for (k, v) in &f.arguments {
                            f.sources.insert(k.clone(), ArgSource::of_reference(v).unwrap_or(ArgSource::Given));
                        }
                        self.execute(st, &api, f).await
                    }
                };
                if !ok {
                    return Ok(Err((n, format!("step {n} ({}) failed", api.name))));
                }
                if first.is_none() {
                    first = st.ctx.path.last().map(|s| s.label.clone());
                }
            }
            if let Some(l) = first {
                labels.insert(format!("var{n}"), l);
            }
        }
        Ok(Ok(()))
    }
}
