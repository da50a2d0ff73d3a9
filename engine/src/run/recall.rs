//! Long-term memory at the start of a run: a recalled chain close enough to the request is replayed
//! (references kept, other arguments re-filled from this request) with zero planning calls; the
//! memories below the replay threshold still vote for the steps their chains made.

use super::memory::MemoryStep;
use super::trace::TraceEvent;
use super::{Engine, RunState};
use crate::plan::fill::fill_arguments;
use crate::plan::judge::judge_path;
use crate::plan::ArgSource;
use crate::Result;
use toolgraph_schema::{END_ID, START_ID};

impl Engine {
    /// Recall memories for the request's `vector`: record their votes, and replay the best one
    /// when it is close enough. `true`: a replay passed (the run is concluded as recalled); a
    /// replay that failed leaves the run as it was before it.
    pub(super) async fn recall(&self, st: &mut RunState<'_>, vector: &[f32]) -> Result<bool> {
        if !self.settings.use_memory {
            return Ok(false);
        }
        let Some(mem) = &self.memory else { return Ok(false) };
        let hits = mem.recall(vector, self.settings.memory_hints.max(1)).await?;
        // Memories below the replay threshold still vote for the steps their chains made.
        for h in hits.iter().filter(|h| h.score >= self.settings.hint_threshold) {
            let mut prev = START_ID.to_string();
            for step in &h.entry.chain {
                let e = st.hints.entry((prev.clone(), step.api.clone())).or_insert(0.0);
                *e = e.max(h.score as f64);
                prev = step.api.clone();
            }
            let e = st.hints.entry((prev, END_ID.to_string())).or_insert(0.0);
            *e = e.max(h.score as f64);
        }
        let Some(hit) = hits.into_iter().next() else { return Ok(false) };
        let replay = hit.score >= self.settings.memory_threshold;
        st.emit(TraceEvent::Recall { request: hit.entry.request.clone(), score: hit.score, chain: hit.entry.chain.iter().map(|s| s.api.clone()).collect(), replayed: replay }).await;
        if !replay {
            return Ok(false);
        }
        match self.replay(st, &hit.entry.chain).await {
            Ok(()) => {
                st.stats.recalled = true;
                Ok(true)
            }
            Err(reason) => {
                st.emit(TraceEvent::RecallFailed { reason }).await;
                st.ctx.path.clear();
                st.ctx.fields.clear();
                st.sent.clear();
                st.next_label = 1;
                Ok(false)
            }
        }
    }

    /// Replay a remembered chain: references kept, other arguments re-filled from this request.
    pub(super) async fn replay(&self, st: &mut RunState<'_>, chain: &[MemoryStep]) -> std::result::Result<(), String> {
        for step in chain {
            let api = self.apis.get(&step.api).filter(|_| !self.health.as_ref().is_some_and(|h| h.is_degraded(&step.api))).cloned().ok_or_else(|| format!("{} is no longer an active API", step.api))?;
            let mut f = fill_arguments(&st.ctx, &api);
            for (name, source) in &step.sources {
                if matches!(source, ArgSource::Output { .. }) {
                    if let Some(v) = step.arguments.get(name) {
                        f.arguments.insert(name.clone(), v.clone());
                        f.sources.insert(name.clone(), source.clone());
                        f.missing.retain(|m| m != name);
                    }
                }
            }
            if !f.missing.is_empty() {
                return Err(format!("{} needs {} for this request", api.name, f.missing.join(", ")));
            }
            if !self.execute(st, &api, f).await {
                return Err(format!("the call to {} failed", api.name));
            }
        }
        let j = judge_path(&st.ctx);
        if !j.pass {
            return Err(j.reason);
        }
        Ok(())
    }
}
