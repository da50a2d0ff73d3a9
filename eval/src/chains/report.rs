//! A run's detail row, and the report as a Markdown table.

use super::scores::{ChainDetail, ChainReport};
use crate::gold::{succeeded, Gold};
use toolgraph_engine::run::RunReport;

pub(super) fn detail(
    protocol: &crate::complexfuncbench::Protocol,
    method: &str,
    gold: &Gold,
    r: &RunReport,
) -> ChainDetail {
    use toolgraph_engine::run::TraceEvent;
    let recall = r.trace.iter().find_map(|t| match t {
        TraceEvent::Recall { score, replayed, .. } => Some((*score, *replayed)),
        _ => None,
    });
    let recalled = r.trace.iter().find_map(|t| match t {
        TraceEvent::Recall { request, .. } => Some(request.chars().take(300).collect()),
        _ => None,
    });
    let first_failure = r.trace.iter().find_map(|t| match t {
        TraceEvent::RecallFailed { reason } => Some(format!("replay: {reason}")),
        TraceEvent::CallFailed { api, error, .. } => Some(format!("{api}: {error}")),
        TraceEvent::NeedsInput { api, missing } => Some(format!("{api} needs {}", missing.join(", "))),
        _ => None,
    });
    let sent_calls = crate::complexfuncbench::sent_calls(&r.trace);
    let paper = crate::complexfuncbench::score(protocol, gold, &sent_calls);
    ChainDetail {
        sent: sent_calls.iter().map(|c| c.api.clone()).collect(),
        asked: r
            .judgement
            .iter()
            .flat_map(|j| &j.coverage)
            .filter(|q| q.kind == toolgraph_engine::read::RequirementKind::Api)
            .map(|q| q.value.clone())
            .collect(),
        paper_correct: paper.correct,
        paper_first_error: paper.first_error,
        paper_success: paper.success,
        planner_calls: r.stats.planner_calls,
        composed: r
            .trace
            .iter()
            .filter_map(|t| match t {
                TraceEvent::Composed { api, error: None, .. } => Some(api.clone()),
                TraceEvent::Composed { api, error: Some(e), .. } => {
                    Some(format!("{api}: {}", e.chars().take(160).collect::<String>()))
                }
                _ => None,
            })
            .collect(),
        method: method.to_string(),
        request: gold.request.chars().take(300).collect(),
        gold: gold.calls.iter().map(|c| c.name.clone()).collect(),
        planned: r.chain.iter().map(|c| c.name.clone()).collect(),
        status: r.status.as_str().to_string(),
        failed_calls: r.stats.failed_calls,
        recall,
        recalled,
        first_failure,
        success: succeeded(gold, r),
        missing: r.judgement.as_ref().map(|j| toolgraph_engine::read::missing_text(&j.coverage)).unwrap_or_default(),
        // The run's plan is the last one it made (a remembered plan may have failed before it).
        plan: r
            .trace
            .iter()
            .rev()
            .find_map(|t| match t {
                TraceEvent::Plan { steps, .. } => {
                    Some(steps.iter().map(|s| s.rsplit('/').next().unwrap_or(s).to_string()).collect())
                }
                _ => None,
            })
            .unwrap_or_default(),
        plan_fallback: r
            .trace
            .iter()
            .skip(r.trace.iter().rposition(|t| matches!(t, TraceEvent::Plan { .. })).unwrap_or(0))
            .find_map(|t| match t {
                TraceEvent::PlanFailed { step, reason } => Some(format!("step {step}: {reason}")),
                _ => None,
            }),
    }
}

/// The name of a method's rows on the reworded requests.
pub fn reworded_name(method: &str) -> String {
    format!("{method} · reworded")
}

/// The report as a markdown table.
pub fn markdown(r: &ChainReport) -> String {
    let mut s = format!(
        "# Chain planning: {} train / {} test chains, {} fold(s){}\n\n| method | call P | call R | call F1 | edge F1 | arg acc | exact | success | answered | partial | gave up | needs input | answered P | answered R | recalled | planner calls (mean) | LLM calls (mean) | plans completed | engine ms p50 | engine ms p99 | of which retrieval p50 | embed ms p50 | sandbox ms p50 | API calls sent | gold calls |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        r.train_chains,
        r.test_chains,
        r.folds,
        if r.split == "families" {
            format!(
                " held out by kind ({} held-out chains skipped: they call an API their fold never learned)",
                r.skipped_held_out
            )
        } else {
            String::new()
        }
    );
    for m in &r.methods {
        s.push_str(&format!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {:.1} | {:.1} | {} | {:.3} | {:.3} | {:.3} | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            m.method, m.call_precision, m.call_recall, m.call_f1, m.edge_f1, m.argument_accuracy, m.exact_match, m.success, m.answered, m.partial, m.gave_up, m.needs_input, m.answered_precision, m.answered_recall, m.recalled, m.planner_calls_mean, m.llm_calls_mean, m.plans_completed, m.engine_ms_p50, m.engine_ms_p99, m.retrieve_ms_p50, m.embed_ms_p50, m.sandbox_ms_p50, m.http_calls_mean, m.gold_calls_mean
        ));
    }
    s.push_str(&paper_table(r));
    if r.methods.iter().any(|m| m.llm_calls_mean > 0.0) {
        s.push_str("\nLLM cost per request (ComplexFuncBench's protocol):\n\n| method | Overall Success | Overall Call Acc. | LLM calls | prompt tokens | completion tokens | seconds |\n|---|---:|---:|---:|---:|---:|---:|\n");
        for m in &r.methods {
            s.push_str(&format!(
                "| {} | {:.2} | {:.2} | {:.1} | {:.0} | {:.0} | {:.1} |\n",
                m.method,
                100.0 * m.overall_success_rate,
                100.0 * m.overall_call_acc,
                m.llm_calls_mean,
                m.llm_prompt_tokens_mean,
                m.llm_completion_tokens_mean,
                m.seconds_mean
            ));
        }
    }
    if !r.seed_recall.is_empty() {
        s.push_str("\nSeed retrieval of the gold chains' APIs (held-out requests):\n\n| retrieval | usage weight | requests | recall@3 | recall@5 | recall@10 |\n|---|---:|---:|---:|---:|---:|\n");
        for x in &r.seed_recall {
            s.push_str(&format!(
                "| {} | {:.2} | {} | {:.3} | {:.3} | {:.3} |\n",
                x.retrieval, x.usage_weight, x.requests, x.recall_at_3, x.recall_at_5, x.recall_at_10
            ));
        }
    }
    s.push_str(&crate::report::skipped_md("record", &r.skipped));
    s
}

/// The paper's table with toolgraph's rows among the published ones (best first).
pub fn paper_table(r: &ChainReport) -> String {
    let mut rows: Vec<(String, f64, f64, bool)> =
        crate::complexfuncbench::PUBLISHED.iter().map(|(m, s, c)| (m.to_string(), *s, *c, false)).collect();
    for m in &r.methods {
        rows.push((
            format!("**toolgraph `{}`**", m.method),
            100.0 * m.overall_success_rate,
            100.0 * m.overall_call_acc,
            true,
        ));
    }
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
    // What toolgraph learned from, next to models run zero-shot: not like for like.
    let learned = if r.folds > 1 {
        let k = r.folds;
        format!("toolgraph learned from the other {}/{k} of the {} chains (a memory of ~{} worked examples of the same request families) and is scored on the held-out ones", k - 1, r.train_chains, r.train_chains * (k - 1) / k)
    } else {
        format!(
            "toolgraph learned from {} training chains and is scored on {} test chains",
            r.train_chains, r.test_chains
        )
    };
    let mut s = format!(
        "\nComplexFuncBench's metrics ({} held-out chains per method), scored as the benchmark's published evaluation code does, without its LLM judge: a call only the judge would accept counts as wrong, so toolgraph's figures are a lower bound of the official ones (see the `complexfuncbench` module). **Not like for like:** {learned}; the published rows (the paper's Table 3) are models run zero-shot on all 1,000 samples.\n\n| model | Overall Success Rate | Overall Call Acc. |\n|---|---:|---:|\n",
        r.methods.first().map(|m| m.chains).unwrap_or(0)
    );
    for (m, sr, ca, ours) in rows {
        let (sr, ca) = if ours {
            (format!("**{sr:.2}**"), format!("**{ca:.2}**"))
        } else {
            (format!("{sr:.2}"), format!("{ca:.2}"))
        };
        s.push_str(&format!("| {m} | {sr} | {ca} |\n"));
    }
    s
}
