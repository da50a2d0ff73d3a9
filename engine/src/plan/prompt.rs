//! The LLM planner's prompts, rendered short enough for small local models: every prompt opens
//! with its fixed instructions (after the fixed system prompt), so a server's prompt cache reuses
//! that prefix from one call to the next, and puts what changes — candidates, earlier calls, the
//! request — after it. Each variable part is cut to fit a token budget: a decision's prompt
//! ([`DECISION_TOKENS`]) and plan mode's one program ([`PLAN_TOKENS`]) never exceed theirs,
//! estimated conservatively as one token per [`CHARS_PER_TOKEN`] characters (real tokenizers
//! give English and JSON 3.5–4.5).

use super::planner::{ApiView, Candidate, Context, MemoryView, Offer, UnsureMentions};
use super::program::SolutionView;
use serde_json::{Map, Value};

/// The system prompt every call starts with.
pub const SYSTEM: &str = include_str!("../../prompts/system.prompt.md");
/// Split a request into subtasks.
pub const DECOMPOSE: &str = include_str!("../../prompts/decompose.prompt.md");
/// Choose among the candidates at a node.
pub const CHOOSE: &str = include_str!("../../prompts/choose.prompt.md");
/// Fill a call's arguments.
pub const FILL: &str = include_str!("../../prompts/fill.prompt.md");
/// Judge a finished path.
pub const JUDGE: &str = include_str!("../../prompts/judge.prompt.md");
/// Answer from the path's results.
pub const ANSWER: &str = include_str!("../../prompts/answer.prompt.md");
/// Write a whole plan (plan mode).
pub const PLAN: &str = include_str!("../../prompts/plan.prompt.md");
/// Pick the remembered chain that serves the request.
pub const RECALL: &str = include_str!("../../prompts/recall.prompt.md");
/// Align this request's mentions with a remembered request's.
pub const ALIGN: &str = include_str!("../../prompts/align.prompt.md");
/// Pick the API a word of the request asks for, where no learned cue decides.
pub const ASK: &str = include_str!("../../prompts/ask.prompt.md");

/// The most a decision's prompt (system prompt included) may take: choose, fill, judge, answer.
pub const DECISION_TOKENS: usize = 800;
/// The most plan mode's program prompt (system prompt included) may take.
pub const PLAN_TOKENS: usize = 2_500;
/// Characters counted per token by [`approx_tokens`].
pub(crate) const CHARS_PER_TOKEN: usize = 3;

/// A conservative token count of `text` (characters / [`CHARS_PER_TOKEN`], rounded up).
pub fn approx_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(CHARS_PER_TOKEN)
}

/// Fill `{{name}}` placeholders in one pass. Text put in (a request, a tool's response) is not
/// scanned again: a response that contains `{{notes}}` stays data. Unknown names stay as written.
pub fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}").map(|end| (&after[..end], end)) {
            Some((name, end)) if vars.iter().any(|(k, _)| *k == name) => {
                out.push_str(vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v).unwrap_or_default());
                rest = &after[end + 2..];
            }
            _ => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

pub(crate) fn or_none(s: String) -> String {
    if s.trim().is_empty() {
        "(none)".to_string()
    } else {
        s
    }
}

/// At most `n` characters of `s`, marked `…` when cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n.saturating_sub(1)).collect::<String>())
    }
}

/// Lines joined while they fit in `chars`; the rest counted (`… N more`).
fn fit(lines: Vec<String>, chars: usize) -> String {
    let total = lines.len();
    let mut out = String::new();
    for (i, l) in lines.into_iter().enumerate() {
        let used = out.chars().count();
        let len = l.chars().count() + usize::from(used > 0);
        if used + len > chars {
            // A first line too long is cut rather than lost, when there is room for some of it.
            if i == 0 && chars >= 40 {
                out.push_str(&cut(&l, chars - 12));
                if total > 1 {
                    out.push_str(&format!("\n… {} more", total - 1));
                }
                return out;
            }
            if used > 0 {
                out.push('\n');
            }
            out.push_str(&format!("… {} more", total - i));
            return out;
        }
        if used > 0 {
            out.push('\n');
        }
        out.push_str(&l);
    }
    or_none(out)
}

/// The last lines that fit in `chars`, in their order, after a `… N more` line when some are
/// left out: the most recent calls of a path.
fn fit_recent(mut lines: Vec<String>, chars: usize) -> String {
    lines.reverse();
    let fitted = fit(lines, chars);
    let mut kept: Vec<&str> = fitted.lines().collect();
    kept.reverse();
    kept.join("\n")
}

/// Characters left for the variable parts once the template, the system prompt and the fixed
/// variables are counted, against a budget of `tokens`.
fn room(tokens: usize, template: &str, fixed: &[&str]) -> usize {
    let used =
        SYSTEM.chars().count() + template.chars().count() + fixed.iter().map(|s| s.chars().count()).sum::<usize>();
    (tokens * CHARS_PER_TOKEN).saturating_sub(used + 32)
}

/// An API in one line: `name(a*: string, b: number) — description`.
pub fn compact_api(a: &ApiView, description: usize) -> String {
    let params = a
        .params
        .iter()
        .map(|p| format!("{}{}: {}", p.name, if p.required { "*" } else { "" }, p.ty))
        .collect::<Vec<_>>()
        .join(", ");
    let d = crate::read::reading::squash(&a.description);
    if d.is_empty() || description == 0 {
        format!("{}({params})", a.name)
    } else {
        format!("{}({params}) — {}", a.name, cut(&d, description))
    }
}

/// The path as prompt lines, each observation cut to `observation` characters.
fn path_entries(ctx: &Context, observation: usize) -> Vec<String> {
    ctx.path
        .iter()
        .map(|s| {
            format!(
                "{} {} {} → {}",
                s.label,
                s.api.name,
                Value::Object(s.arguments.clone()),
                cut(&s.observation, observation)
            )
        })
        .collect()
}

/// The path as prompt lines (whole observations).
pub fn path_lines(ctx: &Context) -> String {
    or_none(path_entries(ctx, usize::MAX).join("\n"))
}

fn dead_end_lines(ctx: &Context) -> Vec<String> {
    ctx.dead_ends
        .iter()
        .map(|d| {
            format!(
                "{} {}: {}",
                d.api.rsplit('/').next().unwrap_or(&d.api),
                Value::Object(d.arguments.clone()),
                d.reason
            )
        })
        .collect()
}

/// The candidates as prompt lines: index, compact schema, where it came from.
pub fn candidate_lines(candidates: &[Candidate]) -> String {
    candidate_lines_with(candidates, 100)
}

fn candidate_lines_with(candidates: &[Candidate], description: usize) -> String {
    candidates
        .iter()
        .enumerate()
        .map(|(i, c)| match &c.api {
            None => format!("[{i}] END — the chain is complete"),
            Some(a) => format!(
                "[{i}] {} [{}]",
                compact_api(a, description),
                if c.source == super::planner::Source::Graph {
                    format!("graph {:.2}", c.weight)
                } else {
                    format!("similarity {:.2}", c.similarity)
                }
            ),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The choice prompt: every candidate (their descriptions shortened, then dropped, to fit), then
/// as much of the path, failures and notes as fits [`DECISION_TOKENS`], the most recent kept.
pub fn render_choose(ctx: &Context, candidates: &[Candidate]) -> String {
    let request = cut(&ctx.request, 600);
    let all = room(DECISION_TOKENS, CHOOSE, &[&request]);
    let cands = [100, 50, 0]
        .into_iter()
        .map(|d| candidate_lines_with(candidates, d))
        .find(|c| c.chars().count() <= all * 3 / 5)
        .unwrap_or_else(|| cut(&candidate_lines_with(candidates, 0), all * 3 / 5));
    let left = all.saturating_sub(cands.chars().count());
    let path = fit_recent(path_entries(ctx, 160), left * 3 / 5);
    let dead = fit(dead_end_lines(ctx), left / 5);
    let notes = fit(ctx.notes.clone(), left / 5);
    render(
        CHOOSE,
        &[("candidates", &cands), ("path", &path), ("dead_ends", &dead), ("notes", &notes), ("request", &request)],
    )
}

/// The request's typed values as one line: what an open parameter can take.
pub(crate) fn mention_line(ctx: &Context) -> String {
    let v = &ctx.values;
    let mut parts = Vec::new();
    let join = |xs: Vec<String>| xs.join(", ");
    if !v.dates.is_empty() {
        parts.push(format!("dates {}", join(v.dates.iter().map(|d| d.to_string()).collect())));
    }
    if !v.times.is_empty() {
        parts.push(format!("times {}", join(v.times.clone())));
    }
    if !v.numbers.is_empty() {
        parts.push(format!(
            "numbers {}",
            join(
                v.numbers
                    .iter()
                    .map(|n| if n.word.is_empty() {
                        format!("{}", n.value)
                    } else {
                        format!("{} ({})", n.value, n.word)
                    })
                    .collect()
            )
        ));
    }
    if !v.names.is_empty() {
        parts.push(format!("names {}", join(v.names.clone())));
    }
    if !v.quoted.is_empty() {
        parts.push(format!("quoted {}", join(v.quoted.iter().map(|q| format!("\"{q}\"")).collect())));
    }
    for (label, val) in &v.labelled {
        parts.push(format!("{label}: {val}"));
    }
    or_none(parts.join("; "))
}

/// The fill prompt: only the parameters `filled` leaves open (every parameter when it is empty),
/// the request's typed values, then earlier outputs and providers as far as they fit
/// [`DECISION_TOKENS`].
pub fn render_fill(ctx: &Context, api: &ApiView, offers: &[Offer], filled: &Map<String, Value>) -> String {
    let mut open: Vec<&toolgraph_schema::ParamDoc> =
        api.params.iter().filter(|p| !filled.contains_key(&p.name) && (filled.is_empty() || p.required)).collect();
    // Required parameters first: what does not fit is optional.
    open.sort_by_key(|p| !p.required);
    let open: Vec<String> = open
        .into_iter()
        .map(|p| {
            format!(
                "- {}{}: {} — {}",
                p.name,
                if p.required { "*" } else { "" },
                p.ty,
                cut(&crate::read::reading::squash(&p.description), 90)
            )
        })
        .collect();
    let already = or_none(filled.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "));
    let already = cut(&already, 300);
    let description = cut(&crate::read::reading::squash(&api.description), 150);
    let request = cut(&ctx.request, 600);
    let today = ctx.values.today.map(|d| d.to_string()).unwrap_or_else(|| "(not stated)".into());
    let mentions = cut(&mention_line(ctx), 300);
    let given = cut(&or_none(ctx.given.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")), 200);
    let fixed = room(DECISION_TOKENS, FILL, &[&api.name, &description, &already, &request, &today, &mentions, &given]);
    let params = fit(open, fixed / 2);
    let left = fixed.saturating_sub(params.chars().count());
    let outputs = fit_recent(path_entries(ctx, 200), left * 2 / 3);
    let providers = fit(
        offers
            .iter()
            .filter(|o| !o.providers.is_empty() && !filled.contains_key(&o.param))
            .map(|o| {
                format!(
                    "{}: {}",
                    o.param,
                    o.providers
                        .iter()
                        .take(3)
                        .map(|a| format!(
                            "{} (outputs {})",
                            a.name,
                            a.output_fields.iter().take(6).cloned().collect::<Vec<_>>().join(", ")
                        ))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            })
            .collect(),
        left / 3,
    );
    render(
        FILL,
        &[
            ("api", &api.name),
            ("description", &description),
            ("filled", &already),
            ("params", &params),
            ("mentions", &mentions),
            ("outputs", &outputs),
            ("providers", &providers),
            ("given", &given),
            ("today", &today),
            ("request", &request),
        ],
    )
}

/// The solutions as prompt lines: each path with its APIs' compact schemas and output fields.
pub fn solution_lines(solutions: &[SolutionView]) -> Vec<String> {
    solutions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let apis = s
                .apis
                .iter()
                .map(|a| {
                    format!(
                        "    {} → {}",
                        compact_api(a, 90),
                        a.output_fields.iter().take(10).cloned().collect::<Vec<_>>().join(", ")
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            format!("[{i}] {}\n{apis}", s.apis.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(" → "))
        })
        .collect()
}

/// Plan mode's prompt: as many of the solutions (best first) as fit [`PLAN_TOKENS`].
pub fn render_plan(ctx: &Context, solutions: &[SolutionView]) -> String {
    let today = ctx.values.today.map(|d| d.to_string()).unwrap_or_else(|| "(not stated)".into());
    let given = cut(&or_none(ctx.given.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")), 300);
    let request = cut(&ctx.request, 800);
    let left = room(PLAN_TOKENS, PLAN, &[&today, &given, &request]);
    let sols = fit(solution_lines(solutions), left);
    render(PLAN, &[("request", &request), ("today", &today), ("solutions", &sols), ("given", &given)])
}

/// The prompt that asks which of 2–3 remembered requests (each with the APIs its chain called)
/// asks for the same things as this one: within [`DECISION_TOKENS`], the request and each
/// memory cut to share what is left.
pub fn render_recall(ctx: &Context, memories: &[MemoryView]) -> String {
    let request = cut(&ctx.request, 500);
    let each = room(DECISION_TOKENS, RECALL, &[&request]) / memories.len().max(1);
    let lines: Vec<String> = memories
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let chain = cut(&m.chain.join(" → "), each / 3);
            let head = format!("{}. ", i + 1);
            let text = cut(&m.request, each.saturating_sub(chain.chars().count() + head.len() + 12));
            format!("{head}{text}\n   chain: {chain}")
        })
        .collect();
    render(RECALL, &[("memories", &lines.join("\n")), ("request", &request)])
}

/// The prompt that asks which of this request's 2–3 mentions of a kind plays the part each of the
/// remembered request's played: within [`DECISION_TOKENS`].
pub fn render_align(ctx: &Context, old_request: &str, unsure: &UnsureMentions) -> String {
    let list = |xs: &[String]| xs.iter().map(|x| format!("\"{}\"", cut(x, 80))).collect::<Vec<_>>().join(", ");
    let (old, new) = (list(&unsure.old), list(&unsure.new));
    let guess = unsure
        .old
        .iter()
        .zip(&unsure.guess)
        .filter_map(|(o, j)| unsure.new.get(*j).map(|n| format!("\"{}\" → \"{}\"", cut(o, 80), cut(n, 80))))
        .collect::<Vec<_>>()
        .join(", ");
    let left =
        room(DECISION_TOKENS, ALIGN, &[&old, &new, &guess, &unsure.kind, &unsure.kind, &unsure.kind, &unsure.kind]);
    render(
        ALIGN,
        &[
            ("kind", &unsure.kind),
            ("old_request", &cut(old_request, left / 2)),
            ("request", &cut(&ctx.request, left / 2)),
            ("old", &old),
            ("new", &new),
            ("guess", &guess),
        ],
    )
}

/// The prompt that asks which of 2–5 APIs a word of the request asks for (no learned cue decides
/// it): within [`DECISION_TOKENS`], each API in one line, the calls made by name.
pub fn render_ask(ctx: &Context, word: &str, apis: &[ApiView]) -> String {
    let calls = ctx.path.iter().map(|s| s.api.name.as_str()).collect::<Vec<_>>().join(", ");
    let calls = cut(if calls.is_empty() { "none" } else { &calls }, 300);
    let (word, request) = (cut(word, 40), cut(&ctx.request, 800));
    let each = room(DECISION_TOKENS, ASK, &[&word, &calls, &request]) / apis.len().max(1);
    let lines: Vec<String> = apis
        .iter()
        .enumerate()
        .map(|(i, a)| cut(&format!("{}. {}", i + 1, compact_api(a, each.saturating_sub(a.name.len() + 8) / 2)), each))
        .collect();
    render(ASK, &[("word", &word), ("apis", &lines.join("\n")), ("calls", &calls), ("request", &request)])
}

/// The judge's prompt (asked only when a model decides everything).
pub fn render_judge(ctx: &Context) -> String {
    let request = cut(&ctx.request, 600);
    let left = room(DECISION_TOKENS, JUDGE, &[&request]);
    let path = fit(
        ctx.path
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    "{i}. {} {} {} → {}",
                    s.label,
                    s.api.name,
                    Value::Object(s.arguments.clone()),
                    cut(&s.observation, 200)
                )
            })
            .collect(),
        left * 4 / 5,
    );
    let dead = fit(dead_end_lines(ctx), left / 5);
    render(JUDGE, &[("request", &request), ("path", &path), ("dead_ends", &dead)])
}

/// The answer's prompt: the observations as far as they fit.
pub fn render_answer(ctx: &Context) -> String {
    let request = cut(&ctx.request, 600);
    let left = room(DECISION_TOKENS, ANSWER, &[&request]);
    let path = fit(path_entries(ctx, 400), left);
    render(ANSWER, &[("request", &request), ("path", &path)])
}

/// The decomposition's prompt.
pub fn render_decompose(ctx: &Context, categories: &[String]) -> String {
    let cats = cut(&or_none(categories.join(", ")), 600);
    render(DECOMPOSE, &[("request", &cut(&ctx.request, 800)), ("categories", &cats)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::replies::parse_pick;
    use crate::plan::test_support::{api, ctx};
    use serde_json::json;

    /// A museum's request and five APIs about "details", each with a long description: the prompt
    /// lists all five by number and stays within a decision's budget; the answer is a number.
    #[test]
    fn the_ask_prompt_lists_every_api_within_the_budget() {
        let long = "Returns the full record, with every field the museum keeps about it. ".repeat(40);
        let apis: Vec<ApiView> = ["Painting_Details", "Artist_Details", "Room_Details", "Tour_Details", "Shop_Details"]
            .iter()
            .map(|n| ApiView { name: n.to_string(), description: long.clone(), ..(*api(n, vec![])).clone() })
            .collect();
        let c = ctx(&"Show me the details of the painting by Vermeer in the second room. ".repeat(30));
        let p = render_ask(&c, "detail", &apis);
        assert!(approx_tokens(SYSTEM) + approx_tokens(&p) <= DECISION_TOKENS, "~{} tokens", approx_tokens(&p));
        for (i, a) in apis.iter().enumerate() {
            assert!(p.contains(&format!("{}. {}", i + 1, a.name)), "{p}");
        }
        assert_eq!(parse_pick(&json!({"pick": 2}), 5), Ok(Some(1)));
        assert_eq!(parse_pick(&json!({"pick": 0}), 5), Ok(None));
        assert!(parse_pick(&json!({"pick": 6}), 5).is_err());
    }
}
