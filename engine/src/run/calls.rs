//! Sending one call: approval, the executor, the response check, and the step on the path; in a
//! dry run, the planned call "returns" the skeleton of its documented output.

use super::engine::{Engine, RunState};
use super::report::{ApprovalDecision, PendingCall};
use super::trace::TraceEvent;
use crate::exec::refs::Reference;
use crate::exec::{compress, keep_set, CallError, CallSpec};
use crate::fill::filler::FieldIndex;
use crate::plan::{ApiView, DeadEnd, Filled, Step};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// What a planned-only call "returns": its documented output fields (dotted paths) as nested
/// objects whose leaves hold their own reference (`$var2.hotel.id$`), so a later argument that
/// takes the field is written as that reference. An API with no documented output returns one
/// field, `result`.
pub fn skeleton(fields: &[String], label: &str) -> Value {
    fn put(m: &mut Map<String, Value>, parts: &[&str], full: &str, label: &str) {
        let Some((head, rest)) = parts.split_first() else { return };
        if rest.is_empty() {
            m.entry(head.to_string()).or_insert_with(|| Reference::new(label, full).into());
            return;
        }
        let e = m.entry(head.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if !e.is_object() {
            *e = Value::Object(Map::new());
        }
        if let Value::Object(sub) = e {
            put(sub, rest, full, label);
        }
    }
    let mut root = Map::new();
    // Longest paths first, so a parent (`hotel`) becomes an object rather than a leaf.
    let mut sorted: Vec<&String> = fields.iter().filter(|f| !f.is_empty()).collect();
    sorted.sort_by_key(|f| std::cmp::Reverse(f.matches('.').count()));
    for f in sorted.into_iter().take(256) {
        let parts: Vec<&str> = f.split('.').collect();
        put(&mut root, &parts, f, label);
    }
    if root.is_empty() {
        root.insert("result".into(), Reference::new(label, "result").into());
    }
    Value::Object(root)
}

/// A call that failed or was refused: remembered (`failed`: the call's key and why) so that it is
/// not sent again, a dead end for the planner, and a `call_failed` event. Always `false`.
async fn call_failed(
    st: &mut RunState<'_>,
    api: &str,
    arguments: Map<String, Value>,
    failed: Option<(String, String)>,
    reason: String,
    error: CallError,
    sent: Option<Map<String, Value>>,
) -> bool {
    if let Some((key, why)) = failed {
        st.ledger.failed.insert(key, why);
    }
    st.ctx.dead_ends.push(DeadEnd { api: api.to_string(), arguments: arguments.clone(), reason });
    st.emit(TraceEvent::CallFailed { api: api.to_string(), arguments, error, sent }).await;
    false
}

impl Engine {
    /// Send one call; push it on the path when it succeeds with a usable response.
    pub(crate) async fn execute(&self, st: &mut RunState<'_>, api: &Arc<ApiView>, filled: Filled) -> bool {
        let Some(node) = self.graph.apis.get(&api.id) else { return false };
        let spec = CallSpec::from_node(node);
        let label = format!("var{}", st.ledger.next_label);
        if st.how.dry_run {
            return self.execute_dry(st, api, filled, label).await;
        }
        // The arguments as they would be sent: a call that failed with exactly these is not sent
        // again (nor put to a person for approval).
        let resolved = {
            let outputs: HashMap<String, &Value> =
                st.ctx.path.iter().map(|s| (s.label.clone(), s.response.as_ref())).collect();
            crate::exec::refs::resolve(&filled.arguments, &outputs).unwrap_or_else(|_| filled.arguments.clone())
        };
        let key = call_key(&api.id, &resolved);
        if let Some(earlier) = st.ledger.failed.get(&key).cloned() {
            let error = CallError::Repeated { earlier };
            return call_failed(st, &api.id, filled.arguments, None, error.to_string(), error, None).await;
        }
        if let Some(approver) = st.how.approver.clone().filter(|a| a.requires(&api.id)) {
            let call = PendingCall { api: api.id.clone(), name: api.name.clone(), arguments: resolved };
            st.emit(TraceEvent::AwaitingApproval { label: label.clone(), call: call.clone() }).await;
            let decision = approver.decide(&call).await;
            st.emit(TraceEvent::Approval { api: api.id.clone(), decision: decision.clone() }).await;
            if let ApprovalDecision::Rejected { by, reason } = decision {
                let error = CallError::NotApproved { by, reason };
                let failed = Some((key, error.to_string()));
                return call_failed(st, &api.id, filled.arguments, failed, error.to_string(), error, None).await;
            }
        }
        st.emit(TraceEvent::Call {
            label: label.clone(),
            api: api.id.clone(),
            arguments: filled.arguments.clone(),
            sources: filled.sources.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
        .await;
        st.ledger.calls_made += 1;
        st.stats.http_calls += 1;
        let t = Instant::now();
        let outputs: HashMap<String, &Value> =
            st.ctx.path.iter().map(|s| (s.label.clone(), s.response.as_ref())).collect();
        let span = tracing::info_span!("tool_call", api = %api.id, label = %label);
        let result = {
            use tracing::Instrument;
            self.executor.call(&spec, &filled.arguments, &outputs).instrument(span.clone()).await
        };
        span.in_scope(|| match &result {
            Ok(o) => tracing::debug!(
                status = o.status,
                attempts = o.attempts,
                ms = o.elapsed_ms as u64,
                "tool call answered"
            ),
            Err(e) => tracing::debug!(error = %e, "tool call failed"),
        });
        drop(outputs);
        st.stats.http_ms += t.elapsed().as_secs_f64() * 1000.0;
        let outcome = match result {
            Ok(o) => o,
            Err(error) => {
                st.stats.failed_calls += 1;
                // Refused before sending for its arguments (invalid, unresolvable): the same
                // arguments would be refused again; sent and failed: likewise not sent twice.
                let failed = Some((key, error.to_string()));
                return call_failed(st, &api.id, filled.arguments, failed, error.to_string(), error, None).await;
            }
        };
        // An error-shaped response is a failed call; an empty one goes on the path, where the
        // judgement finds it and reflection resumes from it.
        if let Some(problem) = crate::exec::response_problem(&outcome.response) {
            st.stats.failed_calls += 1;
            let failed = Some((key, problem.chars().take(200).collect()));
            let error = CallError::Rejected { status: outcome.status, body: problem.clone() };
            return call_failed(st, &api.id, filled.arguments, failed, problem, error, Some(outcome.arguments)).await;
        }
        let next_params: Vec<String> = self
            .graph
            .successors(&api.id, self.settings.top_k)
            .iter()
            .filter_map(|s| self.apis.get(&s.id))
            .flat_map(|a| a.params.iter().map(|p| p.name.clone()))
            .collect();
        let observation = compress(
            &outcome.response,
            &keep_set(&st.ctx.request, next_params.iter().map(String::as_str)),
            self.settings.observation_chars,
        );
        let response = Arc::new(outcome.response);
        st.emit(TraceEvent::Response {
            label: label.clone(),
            api: api.id.clone(),
            status: outcome.status,
            attempts: outcome.attempts,
            elapsed_ms: outcome.elapsed_ms,
            observation: observation.clone(),
            response: response.clone(),
            sent: Some(outcome.arguments.clone()),
        })
        .await;
        let repeat = st.ctx.calls_of(&api.id);
        st.ctx.fields.insert(label.clone(), Arc::new(FieldIndex::build(&response)));
        if let Some(i) = st.ctx.focus {
            st.ctx.step_subtask.insert(label.clone(), i);
        }
        st.ledger.sent.insert(label.clone(), outcome.arguments);
        st.ctx.path.push(Step {
            api: api.clone(),
            label,
            arguments: filled.arguments,
            sources: filled.sources,
            observation,
            response,
            repeat,
        });
        st.ledger.next_label = st.ctx.path.len() + 1;
        true
    }

    /// A planned call in a dry run: on the path with the skeleton of its output as response.
    pub(crate) async fn execute_dry(
        &self,
        st: &mut RunState<'_>,
        api: &Arc<ApiView>,
        filled: Filled,
        label: String,
    ) -> bool {
        // Every dry call "succeeds": the same call twice would only loop (its answer would be
        // the same), so it is a dead end.
        if st.ctx.path.iter().any(|s| s.api.id == api.id && s.arguments == filled.arguments) {
            let reason = format!("{} was planned with the same arguments already", api.name);
            st.ctx.dead_ends.push(DeadEnd {
                api: api.id.clone(),
                arguments: filled.arguments.clone(),
                reason: reason.clone(),
            });
            st.emit(TraceEvent::CallFailed {
                api: api.id.clone(),
                arguments: filled.arguments,
                error: CallError::BadRequest { message: reason },
                sent: None,
            })
            .await;
            return false;
        }
        // Literal values are checked against the schema as a real call's are (references are
        // filled only when calls run).
        let literal: Map<String, Value> = filled
            .arguments
            .iter()
            .filter(|(_, v)| !v.as_str().is_some_and(crate::exec::refs::holds_reference))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let params: Vec<toolgraph_schema::ParamDoc> = api
            .params
            .iter()
            .filter(|p| literal.contains_key(&p.name))
            .cloned()
            .map(|mut p| {
                p.required = false;
                p
            })
            .collect();
        if let Err(problems) = crate::exec::validate(&params, &literal) {
            let error = CallError::InvalidArguments { problems };
            st.ctx.dead_ends.push(DeadEnd {
                api: api.id.clone(),
                arguments: filled.arguments.clone(),
                reason: error.to_string(),
            });
            st.emit(TraceEvent::CallFailed { api: api.id.clone(), arguments: filled.arguments, error, sent: None })
                .await;
            return false;
        }
        st.emit(TraceEvent::Call {
            label: label.clone(),
            api: api.id.clone(),
            arguments: filled.arguments.clone(),
            sources: filled.sources.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
        .await;
        st.ledger.calls_made += 1;
        let response = Arc::new(skeleton(&api.output_fields, &label));
        let observation =
            compress(&response, &keep_set(&st.ctx.request, std::iter::empty()), self.settings.observation_chars);
        st.emit(TraceEvent::Response {
            label: label.clone(),
            api: api.id.clone(),
            status: 0,
            attempts: 0,
            elapsed_ms: 0.0,
            observation: observation.clone(),
            response: response.clone(),
            sent: None,
        })
        .await;
        let repeat = st.ctx.calls_of(&api.id);
        st.ctx.fields.insert(label.clone(), Arc::new(FieldIndex::build(&response)));
        if let Some(i) = st.ctx.focus {
            st.ctx.step_subtask.insert(label.clone(), i);
        }
        st.ledger.sent.insert(label.clone(), filled.arguments.clone());
        st.ctx.path.push(Step {
            api: api.clone(),
            label,
            arguments: filled.arguments,
            sources: filled.sources,
            observation,
            response,
            repeat,
        });
        st.ledger.next_label = st.ctx.path.len() + 1;
        true
    }
}

/// A call's identity within a run: its API and its arguments as sent, objects' keys in sorted
/// order at every depth (equal arguments in any order give equal keys).
pub(crate) fn call_key(api: &str, arguments: &Map<String, Value>) -> String {
    format!("{api}\u{0}{}", crate::fill::filler::canonical(arguments))
}

#[cfg(test)]
mod tests {
    use super::{call_key, skeleton};
    use serde_json::json;

    #[test]
    fn a_planned_call_returns_its_documented_fields_as_references_to_themselves() {
        let fields = vec!["hotel".to_string(), "hotel.id".to_string(), "hotel.name".to_string(), "price".to_string()];
        assert_eq!(
            skeleton(&fields, "var2"),
            json!({"hotel": {"id": "$var2.hotel.id$", "name": "$var2.hotel.name$"}, "price": "$var2.price$"})
        );
        assert_eq!(
            skeleton(&[], "var1"),
            json!({"result": "$var1.result$"}),
            "no documented output: one `result` field"
        );
    }

    #[test]
    fn a_call_is_the_same_call_whatever_the_order_of_its_arguments() {
        let a = json!({"from": "LAX", "date": "2024-11-16"}).as_object().cloned().unwrap();
        let b = json!({"date": "2024-11-16", "from": "LAX"}).as_object().cloned().unwrap();
        let c = json!({"date": "2024-11-17", "from": "LAX"}).as_object().cloned().unwrap();
        let nested_a = json!({"car": {"type": "suv", "seats": 5}}).as_object().cloned().unwrap();
        let nested_b = json!({"car": {"seats": 5, "type": "suv"}}).as_object().cloned().unwrap();
        assert_eq!(call_key("x", &nested_a), call_key("x", &nested_b));
        assert_eq!(call_key("x", &a), call_key("x", &b));
        assert_ne!(call_key("x", &a), call_key("x", &c));
        assert_ne!(call_key("x", &a), call_key("y", &a));
    }
}
