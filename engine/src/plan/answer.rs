//! The deterministic answer: what the calls found, in words.
//!
//! The calls of the final API are the options the request asked about (one, or one per compared
//! date / place). From each option's response the answer takes the item that best fits the
//! asked-for quantity (the lowest price when the request asks what is cheapest or compares prices,
//! the highest rating when it asks for the best …), with the item's name and currency, fields found
//! by their names in the response. Compared options are ranked and the difference given. When the
//! request asks for no quantity the response is summarised (the compressed observation).

use super::planner::Context;
use crate::read::coverage::{asked_quantities, sent_arguments};
use serde_json::{Map, Value};
use toolgraph_schema::fields::name_key;

/// One item of a response that holds the asked-for quantity.
#[derive(Debug, Clone, PartialEq)]
struct Item {
    value: f64,
    currency: Option<String>,
    label: Option<String>,
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|f| f.is_finite())
}

/// Breadth-first within `v` (depth ≤ 3): the first numeric leaf whose key matches `fields`, the
/// first currency, the first name-like string.
fn item_of(v: &Value, fields: &[String]) -> Option<Item> {
    let mut value = None;
    let mut currency = None;
    let mut label = None;
    let mut queue: std::collections::VecDeque<(&Value, usize)> = [(v, 0)].into();
    let mut seen = 0;
    while let Some((node, depth)) = queue.pop_front() {
        seen += 1;
        if seen > 200 {
            break;
        }
        let Value::Object(m) = node else { continue };
        if value.is_none() {
            // The currency beside the value wins over one found elsewhere.
            if let Some(found) = m.iter().find(|(k, x)| {
                fields.iter().any(|f| name_key(k).contains(f.as_str()))
                    && !name_key(k).contains("currency")
                    && number(x).is_some()
            }) {
                value = number(found.1);
                if let Some(c) = m.iter().find(|(k, x)| name_key(k) == "currency" && x.is_string()).or_else(|| {
                    m.iter().find(|(k, x)| {
                        name_key(k).ends_with("currency") && !name_key(k).starts_with("base") && x.is_string()
                    })
                }) {
                    currency = c.1.as_str().map(str::to_string);
                }
            }
        }
        for (k, x) in m {
            let nk = name_key(k);
            match x {
                Value::Object(_) if depth < 3 => queue.push_back((x, depth + 1)),
                Value::String(s) if currency.is_none() && nk.contains("currency") && s.len() <= 8 => {
                    currency = Some(s.clone())
                }
                Value::String(s)
                    if label.is_none()
                        && (nk.ends_with("name") || nk.contains("title"))
                        && !nk.contains("currency")
                        && !s.is_empty()
                        && s.len() <= 120 =>
                {
                    label = Some(s.clone())
                }
                _ => {}
            }
        }
    }
    value.map(|value| Item { value, currency, label })
}

/// The items of a response: the elements of the first array (breadth-first) whose elements hold
/// the quantity, else the response itself.
fn items_of(v: &Value, fields: &[String]) -> Vec<Item> {
    let mut queue: std::collections::VecDeque<(&Value, usize)> = [(v, 0)].into();
    let mut seen = 0;
    while let Some((node, depth)) = queue.pop_front() {
        seen += 1;
        if seen > 300 || depth > 4 {
            break;
        }
        match node {
            Value::Array(a) => {
                let items: Vec<Item> = a.iter().take(500).filter_map(|x| item_of(x, fields)).collect();
                if !items.is_empty() {
                    return items;
                }
                a.iter().take(3).for_each(|x| queue.push_back((x, depth + 1)));
            }
            Value::Object(m) => m.values().for_each(|x| queue.push_back((x, depth + 1))),
            _ => {}
        }
    }
    item_of(v, fields).into_iter().collect()
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.2}")
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What distinguishes option `i` from the others: its arguments whose values differ.
fn distinguishing(sent: &[&Map<String, Value>], i: usize) -> String {
    let mine = sent[i];
    let mut parts = Vec::new();
    for (k, v) in mine {
        if sent.iter().any(|o| o.get(k) != Some(v)) {
            parts.push(format!("{k} {}", scalar_text(v)));
        }
    }
    parts.join(", ")
}

/// Whether the request wants the lowest value of its quantity (the cheapest, the shortest …).
fn wants_lowest(request: &str, quantity: &str) -> bool {
    let l = request.to_lowercase();
    let lex = crate::read::lexicon();
    if lex.lowest_words.any_in(&l) {
        return true;
    }
    if lex.highest_words.any_in(&l) {
        return false;
    }
    quantity != "rating"
}

/// The answer of a dry run: the planned calls in order, each with its arguments (`$varN.field$`
/// where an earlier call's output will provide the value). Nothing was sent, so there are no
/// results to report.
pub(crate) fn planned(ctx: &Context) -> String {
    if ctx.path.is_empty() {
        return "No chain could be planned for this request (a dry run: nothing was sent).".to_string();
    }
    let steps: Vec<String> = ctx
        .path
        .iter()
        .map(|s| {
            let args: Vec<String> = s
                .arguments
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
                .collect();
            format!("{} = {}({})", s.label, s.api.name, args.join(", "))
        })
        .collect();
    let n = ctx.path.len();
    format!("Planned {n} call{} (a dry run: nothing was sent): {}", if n == 1 { "" } else { "s" }, steps.join("; "))
}

/// The answer for `ctx`'s path.
pub(crate) fn compose(ctx: &Context) -> String {
    let Some(last) = ctx.path.last() else {
        return "No API call succeeded for this request.".to_string();
    };
    let chain: Vec<&str> = ctx.path.iter().map(|s| s.api.name.as_str()).collect();
    let fallback = || format!("Called {}. Result of {}: {}", chain.join(" → "), last.api.name, last.observation);
    let Some((quantity, fields)) = asked_quantities(&ctx.request).into_iter().next() else {
        return fallback();
    };
    let sent_all = sent_arguments(ctx);
    let options: Vec<usize> =
        ctx.path.iter().enumerate().filter(|(_, s)| s.api.id == last.api.id).map(|(i, _)| i).collect();
    let sent: Vec<&Map<String, Value>> = options.iter().map(|i| &sent_all[*i]).collect();
    let lowest = wants_lowest(&ctx.request, quantity);
    let word = if lowest { "lowest" } else { "highest" };
    let mut best: Vec<(String, Option<Item>, usize)> = Vec::new();
    for (n, &i) in options.iter().enumerate() {
        let items = items_of(&ctx.path[i].response, fields);
        let pick = items.iter().cloned().reduce(|a, b| {
            if (lowest && b.value < a.value) || (!lowest && b.value > a.value) {
                b
            } else {
                a
            }
        });
        let what = if options.len() > 1 {
            format!("{} ({})", last.api.name, distinguishing(&sent, n))
        } else {
            last.api.name.clone()
        };
        best.push((what, pick, items.len()));
    }
    if best.iter().all(|(_, p, _)| p.is_none()) {
        return fallback();
    }
    let money = |it: &Item| {
        format!("{}{}", fmt_num(it.value), it.currency.as_ref().map(|c| format!(" {c}")).unwrap_or_default())
    };
    let mut lines = Vec::new();
    for (what, pick, count) in &best {
        lines.push(match pick {
            Some(it) => format!(
                "{what}: {word} {quantity} {}{} of {count} result{}",
                money(it),
                it.label.as_ref().map(|l| format!(" ({l})")).unwrap_or_default(),
                if *count == 1 { "" } else { "s" }
            ),
            None => format!("{what}: no {quantity} in the response"),
        });
    }
    let priced: Vec<(usize, &Item)> =
        best.iter().enumerate().filter_map(|(i, (_, p, _))| p.as_ref().map(|p| (i, p))).collect();
    if priced.len() >= 2 {
        let (wi, w) = priced
            .iter()
            .copied()
            .reduce(|a, b| if (lowest && b.1.value < a.1.value) || (!lowest && b.1.value > a.1.value) { b } else { a })
            .unwrap_or(priced[0]);
        let (oi, o) = priced
            .iter()
            .copied()
            .filter(|(i, _)| *i != wi)
            .reduce(|a, b| if (lowest && b.1.value < a.1.value) || (!lowest && b.1.value > a.1.value) { b } else { a })
            .unwrap_or(priced[0]);
        let diff = (w.value - o.value).abs();
        let adjective = match (quantity, lowest) {
            ("price", true) => "cheaper",
            ("price", false) => "dearer",
            (_, true) => "lower",
            (_, false) => "higher",
        };
        if diff == 0.0 {
            lines.push(format!("Both cost the same: {}.", money(w)));
        } else {
            let pct = if o.value != 0.0 { format!(" ({:.1}%)", diff / o.value.abs() * 100.0) } else { String::new() };
            lines.push(format!(
                "{} is {adjective} than {} by {}{}{pct}.",
                best[wi].0,
                best[oi].0,
                fmt_num(diff),
                w.currency.as_ref().map(|c| format!(" {c}")).unwrap_or_default()
            ));
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ApiView, Step};
    use crate::read::values::RequestValues;
    use chrono::NaiveDate;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn compared_rentals_are_named_priced_and_ranked() {
        let text = "Today is October 13th, 2024. Could you compare the price differences for picking up the car at 8 AM tomorrow and the day after tomorrow?";
        let mut c = Context::new(text, RequestValues::extract(text, NaiveDate::from_ymd_opt(2030, 1, 1).unwrap()));
        let rent = Arc::new(ApiView {
            id: "r".into(),
            name: "Search_Car_Rentals".into(),
            tool: "t".into(),
            category: "c".into(),
            description: String::new(),
            params: vec![],
            output_fields: vec![],
            availability: None,
            ends: None,
        });
        for (i, (day, prices)) in [("2024-10-14", [61.5, 45.25]), ("2024-10-15", [52.0, 70.0])].iter().enumerate() {
            let results: Vec<Value> = prices.iter().enumerate().map(|(k, p)| json!({"vehicle_info": {"v_name": format!("Car {day} {k}")}, "pricing_info": {"price": p, "currency": "USD"}})).collect();
            c.path.push(Step {
                api: rent.clone(),
                label: format!("var{}", i + 1),
                arguments: json!({"pick_up_date": day, "pick_up_time": "08:00"}).as_object().unwrap().clone(),
                sources: Default::default(),
                observation: String::new(),
                response: Arc::new(json!({"data": {"search_results": results}})),
                repeat: i,
            });
        }
        let a = compose(&c);
        assert!(
            a.contains(
                "Search_Car_Rentals (pick_up_date 2024-10-14): lowest price 45.25 USD (Car 2024-10-14 1) of 2 results"
            ),
            "{a}"
        );
        assert!(
            a.contains("Search_Car_Rentals (pick_up_date 2024-10-15): lowest price 52 USD (Car 2024-10-15 0)"),
            "{a}"
        );
        assert!(a.contains("(pick_up_date 2024-10-14) is cheaper than Search_Car_Rentals (pick_up_date 2024-10-15) by 6.75 USD (13.0%)"), "{a}");
        assert!(!a.contains('{'), "not a JSON dump: {a}");
    }
}
