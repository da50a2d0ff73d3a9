//! The end of a run: the judgement, the status, the answer (per subtask when searched per subtask),
//! the long-term memory of a run judged complete, and the report.

use super::engine::{Ended, Engine, RunState};
use super::report::{ChainCall, RunReport, Status};
use super::trace::TraceEvent;
use super::RunSettings;
use crate::memory::store::MemoryStep;
use crate::plan::judge::{bad_response, judge_path};
use crate::plan::{Context, Judgement, Planner, Step};
use crate::read::{Requirement, RequirementKind as Kind};
use crate::Result;

/// What decides a finished run's status.
struct Outcome {
    steps: usize,
    passed: bool,
    usable_steps: usize,
    needs_input: bool,
    failed_calls: u64,
}

/// The API a run gave up on: it ran out of guesses (`run.max_failed_calls` failed calls) and its
/// last failed call's API has no call on the path. The run needed that call: it is not done,
/// whatever the calls it made cover.
fn gave_up_on(ctx: &Context, failed_calls: u64, max_failed_calls: usize) -> Option<&str> {
    if (failed_calls as usize) < max_failed_calls.max(1) {
        return None;
    }
    let last = ctx.dead_ends.last()?;
    (!ctx.path.iter().any(|s| s.api.id == last.api)).then_some(last.api.as_str())
}

/// Answered only when judged complete. Only a missing value blocked the run (no tool failed): ask
/// the user; some usable calls: partial; otherwise give up (the report still names the missing
/// value).
fn status_of(o: &Outcome) -> Status {
    let blocked_on_input = o.needs_input && o.failed_calls == 0;
    if o.steps == 0 {
        if blocked_on_input {
            Status::NeedsInput
        } else {
            Status::GaveUp
        }
    } else if o.passed {
        Status::Answered
    } else if blocked_on_input {
        Status::NeedsInput
    } else if o.usable_steps > 0 {
        Status::Partial
    } else {
        Status::GaveUp
    }
}

impl Engine {
    /// The answer: the planner's; for a request searched subtask by subtask, in parts that say
    /// which subtask each answers. When the whole request asks for a quantity (a price compared
    /// across subtasks' calls …) the whole path's answer comes first and each part names the calls
    /// that served it; otherwise each part is composed from its own subtask's calls. An LLM's
    /// answer (one call) leads, the parts follow.
    pub(crate) async fn answer(&self, planner: &dyn Planner, ctx: &Context) -> Result<String> {
        let subtasks = &ctx.subtasks;
        if subtasks.len() < 2 || ctx.step_subtask.is_empty() {
            return planner.answer(ctx).await;
        }
        let deterministic = planner.composes_answers();
        let whole = !crate::read::coverage::asked_quantities(&ctx.request).is_empty();
        let head = if !deterministic {
            Some(planner.answer(ctx).await?)
        } else if whole {
            Some(crate::plan::answer::compose(ctx))
        } else {
            None
        };
        let mut parts = Vec::new();
        for (i, sub) in subtasks.iter().enumerate() {
            let steps: Vec<&Step> = ctx.path.iter().filter(|s| ctx.step_subtask.get(&s.label) == Some(&i)).collect();
            let text = if steps.is_empty() {
                "nothing found for this part".to_string()
            } else if head.is_some() {
                format!(
                    "served by {}",
                    steps.iter().map(|s| format!("{} ({})", s.api.name, s.label)).collect::<Vec<_>>().join(", ")
                )
            } else {
                let mut sc = ctx.clone();
                sc.request = sub.request.clone();
                sc.path.retain(|s| ctx.step_subtask.get(&s.label) == Some(&i));
                crate::plan::answer::compose(&sc)
            };
            parts.push(format!("[{}] {} — {}\n{}", i + 1, sub.name, sub.request, text));
        }
        let by_part = parts.join("\n\n");
        Ok(match head {
            Some(h) => format!("{h}\n\n{by_part}"),
            None => by_part,
        })
    }

    pub(crate) async fn conclude(
        &self,
        st: RunState<'_>,
        ended: Ended,
        meaning: &[f32],
        recalled: bool,
    ) -> Result<RunReport> {
        self.conclude_with(st, ended, meaning, recalled, &self.settings).await
    }

    /// The long-term memory of a run judged complete: its chain (the argument model learns from
    /// the run in `learn_from`, with the graph's counts).
    async fn remember_run(&self, ctx: &Context, meaning: &[f32]) -> Result<()> {
        if let Some(mem) = &self.memory {
            let chain: Vec<MemoryStep> = ctx
                .path
                .iter()
                .map(|s| MemoryStep {
                    api: s.api.id.clone(),
                    arguments: s.arguments.clone(),
                    sources: s.sources.clone(),
                })
                .collect();
            mem.remember(&ctx.request, meaning.to_vec(), chain).await?;
        }
        Ok(())
    }

    /// A run out of guesses on a call it never made work ([`gave_up_on`]) is not done: the
    /// judgement fails and names that call.
    fn out_of_guesses(&self, ctx: &Context, failed_calls: u64, settings: &RunSettings, j: &mut Judgement) {
        if let Some(id) = gave_up_on(ctx, failed_calls, settings.max_failed_calls) {
            let name = self.apis.get(id).map_or(id, |a| a.name.as_str());
            let what = format!("a call of {name} that works ({} calls failed)", failed_calls);
            j.pass = false;
            j.reason = format!("the run ran out of guesses before {what}");
            j.coverage.push(Requirement { kind: Kind::Completion, value: what, covered_by: None });
        }
    }

    pub(crate) async fn conclude_with(
        &self,
        mut st: RunState<'_>,
        ended: Ended,
        meaning: &[f32],
        recalled: bool,
        settings: &RunSettings,
    ) -> Result<RunReport> {
        let judgement = if st.ctx.path.is_empty() {
            None
        } else if recalled {
            Some(st.recalled_judgement.take().unwrap_or_else(|| judge_path(&st.ctx)))
        } else if st.deterministic_judge {
            Some(judge_path(&st.ctx))
        } else {
            st.stats.planner_calls += 1;
            Some(st.how.planner.judge(&st.ctx).await?)
        };
        let mut judgement = judgement;
        if let Some(j) = judgement.as_mut() {
            self.out_of_guesses(&st.ctx, st.stats.failed_calls, settings, j);
            st.emit(TraceEvent::Judge { judgement: j.clone() }).await;
        }
        let status = status_of(&Outcome {
            steps: st.ctx.path.len(),
            passed: judgement.as_ref().is_some_and(|j| j.pass),
            usable_steps: st.ctx.path.iter().filter(|s| bad_response(&s.response).is_none()).count(),
            needs_input: st.ledger.needs_input.is_some(),
            failed_calls: st.stats.failed_calls,
        });
        let answer = match status {
            // A dry run has no results to write an answer from: it says what it planned.
            Status::Answered if st.how.dry_run => {
                let a = crate::plan::answer::planned(&st.ctx);
                st.emit(TraceEvent::Finish { answer: a.clone() }).await;
                a
            }
            Status::Answered => {
                if !recalled {
                    st.stats.planner_calls += 1;
                }
                let a = if recalled {
                    crate::plan::answer::compose(&st.ctx)
                } else {
                    self.answer(st.how.planner.as_ref(), &st.ctx).await?
                };
                st.emit(TraceEvent::Finish { answer: a.clone() }).await;
                a
            }
            Status::Partial => {
                if !recalled && !st.how.dry_run {
                    st.stats.planner_calls += 1;
                }
                let done = if st.how.dry_run {
                    crate::plan::answer::planned(&st.ctx)
                } else if recalled {
                    crate::plan::answer::compose(&st.ctx)
                } else {
                    self.answer(st.how.planner.as_ref(), &st.ctx).await?
                };
                let missing =
                    judgement
                        .as_ref()
                        .map(|j| {
                            if j.complete() {
                                j.reason.clone()
                            } else {
                                crate::read::coverage::missing_text(&j.coverage)
                            }
                        })
                        .unwrap_or_default();
                let a = format!("Partly done; not covered: {missing}.\n{done}");
                st.emit(TraceEvent::Finish { answer: a.clone() }).await;
                a
            }
            Status::NeedsInput => st.ledger.needs_input.as_ref().map(|n| n.message.clone()).unwrap_or_default(),
            Status::GaveUp => {
                let reason = match &ended {
                    Ended::GaveUp(r) => r.clone(),
                    Ended::Finished => "no API call succeeded".to_string(),
                };
                st.emit(TraceEvent::GiveUp { reason: reason.clone() }).await;
                reason
            }
        };
        // Long-term memory of runs judged complete (the graph learns in `learn_from`, once per run).
        if judgement.is_some() && !recalled {
            // Only a run judged complete is a plan worth recalling.
            if status == Status::Answered && settings.remember && !st.how.dry_run {
                self.remember_run(&st.ctx, meaning).await?;
            }
        }
        let chain = st
            .ctx
            .path
            .iter()
            .map(|s| ChainCall {
                label: s.label.clone(),
                api: s.api.id.clone(),
                name: s.api.name.clone(),
                arguments: s.arguments.clone(),
                sent: st.ledger.sent.get(&s.label).cloned().unwrap_or_default(),
                subtask: st.ctx.step_subtask.get(&s.label).copied(),
            })
            .collect();
        st.stats.total_ms = st.how.started.elapsed().as_secs_f64() * 1000.0;
        st.stats.engine_ms = (st.stats.total_ms - st.stats.http_ms - st.stats.embed_ms).max(0.0);
        let responses = st.ctx.path.iter().map(|s| s.response.clone()).collect();
        Ok(RunReport {
            request: st.ctx.request.clone(),
            status,
            answer,
            chain,
            needs_input: st.ledger.needs_input.clone(),
            judgement,
            trace: st.trace.events,
            stats: st.stats,
            responses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(steps: usize, passed: bool, usable_steps: usize, needs_input: bool, failed_calls: u64) -> Outcome {
        Outcome { steps, passed, usable_steps, needs_input, failed_calls }
    }

    #[test]
    fn a_run_is_answered_only_when_judged_complete() {
        assert_eq!(status_of(&outcome(2, true, 2, false, 0)), Status::Answered);
        assert_eq!(
            status_of(&outcome(2, false, 1, false, 0)),
            Status::Partial,
            "usable calls that do not cover the request"
        );
        assert_eq!(status_of(&outcome(2, false, 0, false, 0)), Status::GaveUp, "no usable response");
    }

    #[test]
    fn only_a_missing_value_with_no_failed_tool_asks_the_user() {
        assert_eq!(status_of(&outcome(0, false, 0, true, 0)), Status::NeedsInput);
        assert_eq!(status_of(&outcome(0, false, 0, true, 1)), Status::GaveUp, "a tool failed: asking would not help");
        assert_eq!(
            status_of(&outcome(1, false, 1, true, 0)),
            Status::NeedsInput,
            "a usable call, then a value only the user has"
        );
        assert_eq!(status_of(&outcome(1, true, 1, true, 0)), Status::Answered, "a path judged complete wins");
        assert_eq!(status_of(&outcome(0, false, 0, false, 0)), Status::GaveUp);
    }

    #[test]
    fn a_run_out_of_guesses_on_a_call_it_never_made_work_is_not_done() {
        use crate::plan::test_support::api;
        use crate::plan::DeadEnd;
        let mut c = Context::new("fly and show the seat map", Default::default());
        c.path.push(Step {
            api: api("flights", vec![]),
            label: "var1".into(),
            arguments: Default::default(),
            sources: Default::default(),
            observation: String::new(),
            response: std::sync::Arc::new(serde_json::json!({"token": "t"})),
            repeat: 0,
        });
        let dead = |a: &str| DeadEnd { api: a.into(), arguments: Default::default(), reason: "no result".into() };
        c.dead_ends = vec![dead("flights"), dead("seats"), dead("seats")];
        assert_eq!(gave_up_on(&c, 3, 3), Some("seats"), "three failed calls, the last of an API never made");
        assert_eq!(gave_up_on(&c, 2, 3), None, "guesses left: the search decided to stop");
        c.dead_ends.push(dead("flights"));
        assert_eq!(gave_up_on(&c, 4, 3), None, "the last failed API has a call that worked");
    }
}
