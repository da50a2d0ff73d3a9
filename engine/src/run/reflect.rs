//! Reflection (thesis §4.3): a searched path the planner judges not good enough is kept as the best
//! so far when it ranks higher, and the search goes on — extended from the end when every call was
//! usable but the request is not covered, resumed from the first bad step (the bad call a dead
//! end), or restarted without the tools judged irrelevant — for `run.reflection_rounds` rounds.
//! A failed reflection ends with the best path seen.

use super::engine::{Ended, Engine, RunState};
use super::trace::TraceEvent;
use crate::plan::judge::{bad_response, judge_path};
use crate::plan::{Context, DeadEnd, Judgement};
use crate::Result;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// How good a judged path is: (steps with unusable responses, grade). An answer is built from
/// usable responses only, so fewer bad steps rank first, then the higher grade.
type Rank = (usize, f64);

fn rank(ctx: &Context, grade: f64) -> Rank {
    (ctx.path.iter().filter(|s| bad_response(&s.response).is_some()).count(), grade)
}

/// Whether a path ranked `a` is better than one ranked `b`.
fn better(a: Rank, b: Rank) -> bool {
    a.0 < b.0 || (a.0 == b.0 && a.1 > b.1)
}

impl Engine {
    /// Search (per subtask the first time when `per_subtask`), then judge and reflect until the
    /// judgement passes, the rounds or the budget are spent, or nothing was found.
    pub(crate) async fn search_and_reflect(&self, st: &mut RunState<'_>, per_subtask: bool) -> Result<Ended> {
        // The best judged path so far: grade, context, arguments as sent.
        type Best = (Rank, Context, HashMap<String, Map<String, Value>>);
        let mut best: Option<Best> = None;
        let mut round = 0;
        let mut first = true;
        let ended = loop {
            let ended = if first && per_subtask { self.search_subtasks(st).await? } else { self.search(st).await? };
            first = false;
            if st.ctx.path.is_empty()
                || round >= self.settings.reflection_rounds
                || self.out_of_budget(&st.how, &st.ledger, &st.stats).is_some()
            {
                break ended;
            }
            st.stats.planner_calls += 1;
            let j = st.how.planner.judge(&st.ctx).await?;
            if j.pass {
                break ended;
            }
            let r = rank(&st.ctx, j.grade);
            if best.as_ref().is_none_or(|b| better(r, b.0)) {
                best = Some((r, st.ctx.clone(), st.ledger.sent.clone()));
            }
            round += 1;
            st.stats.reflections += 1;
            match j.first_bad_step {
                None if !j.complete() => {
                    // Every call was usable but the request is not covered: go on from the end
                    // of the path, with what is missing in context.
                    let missing = crate::read::coverage::missing_text(&j.coverage);
                    st.ctx.notes.push(format!("round {round}: not covered yet: {missing}"));
                    st.emit(TraceEvent::Reflect {
                        round,
                        mode: "extend".into(),
                        reason: j.reason.clone(),
                        resume_at: Some(st.ctx.path.len()),
                        excluded_tools: vec![],
                    })
                    .await;
                }
                Some(i) if i > 0 => {
                    // Resume from the first bad step: keep what came before, mark the bad call dead.
                    let bad = st.ctx.path[i].clone();
                    st.ctx.dead_ends.push(DeadEnd {
                        api: bad.api.id.clone(),
                        arguments: bad.arguments.clone(),
                        reason: j.reason.clone(),
                    });
                    self.truncate(st, i);
                    st.ctx.notes.push(format!("round {round}: {}", j.reason));
                    st.emit(TraceEvent::Reflect {
                        round,
                        mode: "resume".into(),
                        reason: j.reason.clone(),
                        resume_at: Some(i),
                        excluded_tools: vec![],
                    })
                    .await;
                }
                _ => {
                    // Restart without the tools judged irrelevant; a tool that holds every seed
                    // (one-tool domains) loses only the APIs of the bad steps instead.
                    let excluded = self.exclude_for_restart(&mut st.ctx, &st.leads.seeds, &j);
                    st.ctx.notes.push(format!("round {round}: {}", j.reason));
                    st.emit(TraceEvent::Reflect {
                        round,
                        mode: "restart".into(),
                        reason: j.reason.clone(),
                        resume_at: None,
                        excluded_tools: excluded,
                    })
                    .await;
                    self.truncate(st, 0);
                }
            }
        };
        // A failed reflection keeps the best path seen.
        if let Some((seen, ctx, sent)) = best {
            let now = rank(&st.ctx, judge_path(&st.ctx).grade);
            if st.ctx.path.is_empty() || better(seen, now) {
                let trace = std::mem::take(&mut st.ctx.dead_ends);
                st.ctx = ctx;
                st.ctx.dead_ends.extend(trace);
                st.ledger.sent = sent;
            }
        }
        Ok(ended)
    }

    /// What a restart leaves out: the tools judged irrelevant — except a tool that holds every seed
    /// (one-tool domains), which loses only the APIs of the bad steps (from the first bad step on,
    /// or the whole path when none was bad); when that excludes nothing, the first bad step's API.
    /// Recorded in `ctx`; returns what was newly excluded.
    fn exclude_for_restart(&self, ctx: &mut Context, seeds: &[String], j: &Judgement) -> Vec<String> {
        let mut excluded = Vec::new();
        let bad_apis: Vec<String> = match j.first_bad_step {
            Some(i) => ctx.path[i..].iter().map(|s| s.api.id.clone()).collect(),
            None => ctx.path.iter().map(|s| s.api.id.clone()).collect(),
        };
        for t in &j.irrelevant_tools {
            let holds_all = !seeds.is_empty() && seeds.iter().all(|id| self.apis.get(id).is_some_and(|a| &a.tool == t));
            if holds_all {
                for id in bad_apis.iter().filter(|id| self.apis.get(*id).is_some_and(|a| &a.tool == t)) {
                    if !ctx.excluded_apis.contains(id) {
                        ctx.excluded_apis.push(id.clone());
                        excluded.push(id.clone());
                    }
                }
            } else if !ctx.excluded_tools.contains(t) {
                ctx.excluded_tools.push(t.clone());
                excluded.push(t.clone());
            }
        }
        if excluded.is_empty() {
            if let Some(first) = bad_apis.first() {
                ctx.excluded_apis.push(first.clone());
                excluded.push(first.clone());
            }
        }
        excluded
    }

    /// Cut the path back to `len` steps (their arguments as sent and field indexes with them).
    pub(crate) fn truncate(&self, st: &mut RunState<'_>, len: usize) {
        while st.ctx.path.len() > len {
            if let Some(s) = st.ctx.path.pop() {
                st.ledger.sent.remove(&s.label);
                st.ctx.fields.remove(&s.label);
            }
        }
        st.ledger.next_label = st.ctx.path.len() + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewer_unusable_steps_rank_before_a_higher_grade() {
        assert!(better((0, 0.2), (1, 0.9)), "a path with no bad step beats a better-graded one with one");
        assert!(better((1, 0.5), (1, 0.4)));
        assert!(!better((1, 0.4), (1, 0.4)), "a tie is not better: the first best path stays");
        assert!(!better((2, 1.0), (1, 0.0)));
    }
}
