//! Scoring a method's runs against the gold chains: calls, data-flow edges, arguments, the
//! benchmark's own protocol, and the run's costs.

use super::scores::MethodScores;
use crate::gold::{args_equal, succeeded, Gold};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use toolgraph_engine::exec::refs::labels_in;
use toolgraph_engine::retrieval::metrics::quantile;
use toolgraph_engine::run::{RunReport, Status};

/// Data-flow edges (producer name → consumer name) of a chain given as (label, name, args).
pub(super) fn flow_edges(calls: &[(String, String, &Map<String, Value>)]) -> Vec<(String, String)> {
    let names: HashMap<&str, &str> = calls.iter().map(|(l, n, _)| (l.as_str(), n.as_str())).collect();
    let mut out = Vec::new();
    for (_, name, args) in calls {
        let mut labels: Vec<String> = args.values().flat_map(labels_in).collect();
        labels.sort();
        labels.dedup();
        for l in labels {
            if let Some(p) = names.get(l.as_str()) {
                out.push((p.to_string(), name.clone()));
            }
        }
    }
    out
}

/// |a ∩ b| as multisets.
pub(super) fn overlap<T: Ord + Clone>(a: &[T], b: &[T]) -> usize {
    let mut counts: BTreeMap<T, i64> = BTreeMap::new();
    for x in a {
        *counts.entry(x.clone()).or_default() += 1;
    }
    let mut n = 0;
    for x in b {
        if let Some(c) = counts.get_mut(x) {
            if *c > 0 {
                *c -= 1;
                n += 1;
            }
        }
    }
    n
}

#[derive(Default)]
pub(super) struct Tally {
    chains: usize,
    pred_calls: usize,
    gold_calls: usize,
    call_hits: usize,
    pred_edges: usize,
    gold_edges: usize,
    edge_hits: usize,
    args_same: usize,
    args_total: usize,
    exact: usize,
    success: usize,
    /// ComplexFuncBench's protocol: golden calls, correct calls (up to the first error), successes.
    cfb_golden: usize,
    cfb_correct: usize,
    cfb_success: usize,
    correct_calls: usize,
    all_correct: usize,
    answered: usize,
    partial: usize,
    answered_success: usize,
    needs_input: usize,
    gave_up: usize,
    recalled: usize,
    plans_completed: usize,
    llm_calls: Vec<f64>,
    llm_prompt_tokens: Vec<f64>,
    llm_completion_tokens: Vec<f64>,
    pub(super) seconds: Vec<f64>,
    planner_calls: Vec<f64>,
    engine_ms: Vec<f64>,
    embed_ms: Vec<f64>,
    retrieve_ms: Vec<f64>,
    sandbox_ms: Vec<f64>,
    http_calls: Vec<f64>,
}

impl Tally {
    pub(super) fn add(&mut self, protocol: &crate::complexfuncbench::Protocol, gold: &Gold, run: &RunReport) {
        self.chains += 1;
        let pred_names: Vec<String> = run.chain.iter().map(|c| c.name.clone()).collect();
        let gold_names: Vec<String> = gold.calls.iter().map(|c| c.name.clone()).collect();
        self.pred_calls += pred_names.len();
        self.gold_calls += gold_names.len();
        self.call_hits += overlap(&gold_names, &pred_names);
        let gold_flow: Vec<(String, String, &Map<String, Value>)> = gold
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("var{}", i + 1), c.name.clone(), &c.arguments))
            .collect();
        let pred_flow: Vec<(String, String, &Map<String, Value>)> =
            run.chain.iter().map(|c| (c.label.clone(), c.name.clone(), &c.arguments)).collect();
        let ge = flow_edges(&gold_flow);
        let pe = flow_edges(&pred_flow);
        self.gold_edges += ge.len();
        self.pred_edges += pe.len();
        self.edge_hits += overlap(&ge, &pe);
        // Align by name in order; compare resolved gold arguments with those sent.
        let mut used = vec![false; run.chain.len()];
        let mut all_same = run.chain.len() == gold.calls.len();
        for (gi, g) in gold.calls.iter().enumerate() {
            let m = run.chain.iter().enumerate().find(|(i, c)| !used[*i] && c.name == g.name).map(|(i, _)| i);
            let (same, total) = match m {
                Some(i) => {
                    used[i] = true;
                    if i != gi {
                        all_same = false;
                    }
                    args_equal(&g.resolved, &run.chain[i].sent)
                }
                None => (0, g.resolved.len()),
            };
            if same != total || m.is_none() {
                all_same = false;
            }
            self.args_same += same;
            self.args_total += total;
        }
        if all_same {
            self.exact += 1;
        }
        let success = succeeded(gold, run);
        if success {
            self.success += 1;
        }
        // The paper's figures by its own protocol: the engine's `answered` is not part of them.
        let sent = crate::complexfuncbench::sent_calls(&run.trace);
        let paper = crate::complexfuncbench::score(protocol, gold, &sent);
        self.cfb_golden += paper.golden;
        self.cfb_correct += paper.correct;
        self.cfb_success += usize::from(paper.success);
        let correct = crate::complexfuncbench::correct_calls(protocol, gold, &sent);
        self.correct_calls += correct;
        self.all_correct += usize::from(correct == gold.calls.len() && !gold.calls.is_empty());
        match run.status {
            Status::Answered => {
                self.answered += 1;
                if success {
                    self.answered_success += 1;
                }
            }
            Status::Partial => self.partial += 1,
            Status::NeedsInput => self.needs_input += 1,
            Status::GaveUp => self.gave_up += 1,
        }
        if run.stats.recalled {
            self.recalled += 1;
        }
        self.planner_calls.push(run.stats.planner_calls as f64);
        self.llm_calls.push(run.stats.llm.values().map(|u| u.calls as f64).sum::<f64>() + 0.0);
        self.llm_prompt_tokens.push(run.stats.llm.values().map(|u| u.prompt_tokens as f64).sum::<f64>());
        self.llm_completion_tokens.push(run.stats.llm.values().map(|u| u.completion_tokens as f64).sum::<f64>());
        if run.stats.planned && run.stats.plan_fallback_at.is_none() {
            self.plans_completed += 1;
        }
        self.engine_ms.push(run.stats.engine_ms);
        self.embed_ms.push(run.stats.embed_ms);
        self.retrieve_ms.push(run.stats.retrieve_ms);
        self.sandbox_ms.push(run.stats.http_ms);
        self.http_calls.push(run.stats.http_calls as f64);
    }

    pub(super) fn scores(&mut self, method: &str) -> MethodScores {
        let div = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let f1 = |p: f64, r: f64| if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) };
        let (cp, cr) = (div(self.call_hits, self.pred_calls), div(self.call_hits, self.gold_calls));
        let (ep, er) = (div(self.edge_hits, self.pred_edges), div(self.edge_hits, self.gold_edges));
        for v in [
            &mut self.planner_calls,
            &mut self.engine_ms,
            &mut self.embed_ms,
            &mut self.retrieve_ms,
            &mut self.sandbox_ms,
        ] {
            v.sort_by(f64::total_cmp);
        }
        let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
        MethodScores {
            method: method.to_string(),
            chains: self.chains,
            call_precision: cp,
            call_recall: cr,
            call_f1: f1(cp, cr),
            edge_precision: ep,
            edge_recall: er,
            edge_f1: f1(ep, er),
            argument_accuracy: div(self.args_same, self.args_total),
            exact_match: div(self.exact, self.chains),
            success: div(self.success, self.chains),
            overall_success_rate: div(self.cfb_success, self.chains),
            overall_call_acc: div(self.cfb_correct, self.cfb_golden),
            call_correctness: div(self.correct_calls, self.gold_calls),
            all_calls_correct: div(self.all_correct, self.chains),
            answered: self.answered,
            partial: self.partial,
            answered_precision: div(self.answered_success, self.answered),
            answered_recall: div(self.answered_success, self.success),
            needs_input: self.needs_input,
            gave_up: self.gave_up,
            recalled: self.recalled,
            planner_calls_mean: mean(&self.planner_calls),
            planner_calls_p50: quantile(&self.planner_calls, 0.5),
            llm_calls_mean: mean(&self.llm_calls),
            llm_prompt_tokens_mean: mean(&self.llm_prompt_tokens),
            llm_completion_tokens_mean: mean(&self.llm_completion_tokens),
            seconds_mean: mean(&self.seconds),
            plans_completed: self.plans_completed,
            engine_ms_p50: quantile(&self.engine_ms, 0.5),
            engine_ms_p99: quantile(&self.engine_ms, 0.99),
            embed_ms_p50: quantile(&self.embed_ms, 0.5),
            retrieve_ms_p50: quantile(&self.retrieve_ms, 0.5),
            sandbox_ms_p50: quantile(&self.sandbox_ms, 0.5),
            http_calls_mean: mean(&self.http_calls),
            gold_calls_mean: div(self.gold_calls, self.chains),
        }
    }
}
