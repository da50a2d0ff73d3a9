//! Data flow between calls: an argument may be (or contain) a reference `$LABEL.path.to.field$`
//! to an earlier call's output (NESTFUL / ComplexFuncBench notation). A whole-string reference
//! takes the referenced value with its type; a reference inside a longer string is spliced in as
//! text. Paths go through objects by key and arrays by index; a path that meets an array without an
//! index takes its first element (`$var1.coordinates.latitude$` on a list of places).
//!
//! [`Reference`] is the one type for such a reference: the planner writes its arguments with it,
//! the learned model and the scorers read recorded arguments with it, and the executor resolves it.
//!
//! A reference may end in a [`Derive`]: `$var3.segments.0.arrivalTime@time+60$` is the time of
//! day one hour after the date-time the field holds ("pick the car up one hour after I land"),
//! `@date` its day. Written by the memory where a recorded value was such a field shifted by what
//! the request said; nothing else writes it.

use crate::read::stamps;
use serde_json::{Map, Value};
use std::borrow::Borrow;
use std::collections::HashMap;

/// A reference `$label.path$` to a field of an earlier call's output: the call's label and the
/// dotted path into its output (empty: the whole output). Between the dollars there is no space,
/// no dollar and no empty segment, so `$5 and $10` holds none.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Reference {
    /// The output it reads (`var1`).
    pub label: String,
    /// Dotted keys and indexes (`data.hotels.1.hotel_id`); empty for the whole output.
    pub path: String,
    /// A part of the date-time the field holds, shifted (`@time+60`); `None`: the value itself.
    pub derive: Option<Derive>,
}

/// Which part of a date-time a derived reference takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// `HH:MM`.
    Time,
    /// `YYYY-MM-DD`.
    Date,
}

/// A part of a date-time field, shifted by some minutes first (`@time-180`: three hours before).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Derive {
    /// Which part of a date-time it takes.
    pub part: Part,
    /// Minutes added to it before the part is taken.
    pub minutes: i64,
}

impl Derive {
    /// `time+60`, `date`, `time-180`.
    fn parse(s: &str) -> Option<Self> {
        let (part, rest) =
            if let Some(r) = s.strip_prefix("time") { (Part::Time, r) } else { (Part::Date, s.strip_prefix("date")?) };
        let minutes = match rest {
            "" => 0,
            r if r.starts_with(['+', '-']) && r.len() > 1 && r[1..].bytes().all(|b| b.is_ascii_digit()) => {
                r.parse::<i64>().ok().filter(|m| m.abs() <= 60 * 24 * 366)?
            }
            _ => return None,
        };
        Some(Derive { part, minutes })
    }

    /// The part of `v` (a date-time, `2024-12-01T09:10:00` or with a space, seconds optional)
    /// after the shift.
    pub fn apply(&self, v: &Value) -> Result<Value, String> {
        let at = date_time(v).ok_or_else(|| format!("holds {v}, not a date and time"))?;
        let at = at + chrono::Duration::minutes(self.minutes);
        Ok(Value::String(match self.part {
            Part::Time => stamps::time_text(at.time()),
            Part::Date => stamps::date_text(at.date()),
        }))
    }
}

/// The date-time a value holds (`2024-12-01T09:10:00`, `2024-12-01 09:10`), to the minute.
pub fn date_time(v: &Value) -> Option<chrono::NaiveDateTime> {
    stamps::moment_of(&v.as_str()?.trim().replace(' ', "T"))
}

impl std::fmt::Display for Derive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.part {
            Part::Time => "time",
            Part::Date => "date",
        })?;
        match self.minutes {
            0 => Ok(()),
            m => write!(f, "{m:+}"),
        }
    }
}

impl Reference {
    /// The reference `$label.path$`.
    pub fn new(label: impl Into<String>, path: impl Into<String>) -> Self {
        Reference { label: label.into(), path: path.into(), derive: None }
    }

    /// The same reference, taking `derive` of the date-time it holds.
    pub fn derived(self, derive: Derive) -> Self {
        Reference { derive: Some(derive), ..self }
    }

    /// The text between the dollars (`var2.data.id`, `var3.at@time+60`), if it is a reference.
    fn parse(inner: &str) -> Option<Self> {
        let (inner, derive) = match inner.rsplit_once('@') {
            Some((head, tail)) => (head, Some(Derive::parse(tail)?)),
            None => (inner, None),
        };
        if inner.is_empty() || inner.contains([' ', '$', '@']) || inner.split('.').any(str::is_empty) {
            return None;
        }
        let (label, path) = inner.split_once('.').unwrap_or((inner, ""));
        Some(Reference { derive, ..Reference::new(label, path) })
    }

    /// `s` is exactly one reference (`"$var1.id$"`, not `"near $var1.city$"`).
    pub fn whole(s: &str) -> Option<Self> {
        Self::parse(s.strip_prefix('$')?.strip_suffix('$')?)
    }

    /// Every reference a string holds, in order (`$a.b$ and $c$` → `a.b`, `c`).
    pub fn all_in(s: &str) -> Vec<Self> {
        let mut out = Vec::new();
        let mut rest = s;
        while let Some(start) = rest.find('$') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('$') else { break };
            match Self::parse(&after[..end]) {
                Some(r) => {
                    out.push(r);
                    rest = &after[end + 1..];
                }
                None => rest = &after[end..],
            }
        }
        out
    }

    /// The path's segments (none for the whole output).
    pub fn segments(&self) -> Vec<&str> {
        if self.path.is_empty() {
            Vec::new()
        } else {
            self.path.split('.').collect()
        }
    }

    /// The same reference `path` deeper (`$var1.data$` + `0.id` → `$var1.data.0.id$`; itself for
    /// an empty path).
    pub fn join(&self, path: &str) -> Self {
        let path = match (self.path.is_empty(), path.is_empty()) {
            (_, true) => self.path.clone(),
            (true, false) => path.to_string(),
            (false, false) => format!("{}.{path}", self.path),
        };
        Reference { derive: self.derive, ..Reference::new(self.label.clone(), path) }
    }

    /// The referenced value in `outputs` (call label → output), derived where it says so.
    pub fn resolve<V: Borrow<Value>>(&self, outputs: &HashMap<String, V>) -> Result<Value, String> {
        let label = &self.label;
        let out = outputs
            .get(label)
            .map(Borrow::borrow)
            .ok_or_else(|| format!("names `{label}`, which no earlier call produced"))?;
        let value = lookup(out, &self.segments())
            .ok_or_else(|| format!("has no value at `{}` in the output of `{label}`", self.path))?;
        match &self.derive {
            None => Ok(value.clone()),
            Some(d) => d.apply(value).map_err(|e| format!("at `{}` in the output of `{label}` {e}", self.path)),
        }
    }
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${}", self.label)?;
        if !self.path.is_empty() {
            write!(f, ".{}", self.path)?;
        }
        match &self.derive {
            Some(d) => write!(f, "@{d}$"),
            None => f.write_str("$"),
        }
    }
}

impl From<Reference> for Value {
    fn from(r: Reference) -> Value {
        Value::String(r.to_string())
    }
}

/// Whether `s` holds a reference (`"$5 and $10"` holds none).
pub fn holds_reference(s: &str) -> bool {
    !Reference::all_in(s).is_empty()
}

/// The labels a value references, in order, through arrays and objects (`$var1.x$` → `var1`).
pub fn labels_in(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => Reference::all_in(s).into_iter().map(|r| r.label).collect(),
        Value::Array(a) => a.iter().flat_map(labels_in).collect(),
        Value::Object(m) => m.values().flat_map(labels_in).collect(),
        _ => Vec::new(),
    }
}

/// Why a reference could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefError {
    /// The argument that holds it.
    pub argument: String,
    /// The reference as written between its dollars.
    pub reference: String,
    /// Why it cannot be resolved.
    pub reason: String,
}

impl std::fmt::Display for RefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "argument `{}`: reference ${}$ {}", self.argument, self.reference, self.reason)
    }
}

/// Follow `path` (dot-separated keys / indexes) into `v`. On a list, a segment
/// `min(price:units)` / `max(…)` takes the element whose field at that path (`:`-separated) is
/// the least / the greatest number ([`Extreme`]).
pub fn lookup<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(v);
    };
    match v {
        Value::Object(m) => lookup(m.get(*first)?, rest),
        Value::Array(items) => match (first.parse::<usize>(), Extreme::parse(first)) {
            (Ok(i), _) => lookup(items.get(i)?, rest),
            (_, Some(e)) => lookup(e.pick(items)?, rest),
            _ => lookup(items.first()?, path),
        },
        _ => None,
    }
}

/// A list element chosen by the least or the greatest value of one of its numeric fields: the
/// path segment `min(price:units)` ("the cheapest day" of a price calendar), written by the
/// memory where a recorded run took the one element of a list that was such an extreme.
#[derive(Debug, Clone, PartialEq)]
pub struct Extreme {
    /// The lowest (`min`) rather than the highest (`max`).
    pub least: bool,
    /// The field inside each element, as path segments.
    pub field: Vec<String>,
}

impl Extreme {
    /// Reads `min(field)` / `max(field)` from a path segment.
    pub fn parse(segment: &str) -> Option<Self> {
        let (least, inner) = match segment.strip_prefix("min(") {
            Some(i) => (true, i),
            None => (false, segment.strip_prefix("max(")?),
        };
        let field: Vec<String> = inner.strip_suffix(')')?.split(':').map(str::to_string).collect();
        field.iter().all(|f| !f.is_empty() && !f.contains(['(', ')'])).then_some(Extreme { least, field })
    }

    /// The element of `items` it chooses (the first of equals; elements without the field are
    /// passed over).
    pub fn pick<'a>(&self, items: &'a [Value]) -> Option<&'a Value> {
        let field: Vec<&str> = self.field.iter().map(String::as_str).collect();
        let mut best: Option<(&Value, f64)> = None;
        for item in items {
            let Some(x) = lookup(item, &field).and_then(Value::as_f64) else { continue };
            if best.is_none_or(|(_, b)| if self.least { x < b } else { x > b }) {
                best = Some((item, x));
            }
        }
        best.map(|(item, _)| item)
    }
}

impl std::fmt::Display for Extreme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", if self.least { "min" } else { "max" }, self.field.join(":"))
    }
}

fn resolve_value<V: Borrow<Value>>(arg: &str, v: &Value, outputs: &HashMap<String, V>) -> Result<Value, RefError> {
    let fail = |r: &Reference, reason: String| {
        let text = r.to_string();
        RefError { argument: arg.to_string(), reference: text[1..text.len() - 1].to_string(), reason }
    };
    match v {
        Value::String(s) => {
            if let Some(r) = Reference::whole(s) {
                return r.resolve(outputs).map_err(|e| fail(&r, e));
            }
            let all = Reference::all_in(s);
            if all.is_empty() {
                return Ok(v.clone());
            }
            let mut text = s.clone();
            for r in all {
                let value = r.resolve(outputs).map_err(|e| fail(&r, e))?;
                let piece = match value {
                    Value::String(x) => x,
                    other => other.to_string(),
                };
                text = text.replacen(&r.to_string(), &piece, 1);
            }
            Ok(Value::String(text))
        }
        Value::Array(items) => {
            items.iter().map(|i| resolve_value(arg, i, outputs)).collect::<Result<Vec<_>, _>>().map(Value::Array)
        }
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, x) in m {
                out.insert(k.clone(), resolve_value(arg, x, outputs)?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

/// Resolve every reference in `args` against the outputs of earlier calls (by label).
pub fn resolve<V: Borrow<Value>>(
    args: &Map<String, Value>,
    outputs: &HashMap<String, V>,
) -> Result<Map<String, Value>, RefError> {
    let mut out = Map::new();
    for (k, v) in args {
        out.insert(k.clone(), resolve_value(k, v, outputs)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_and_embedded_references() {
        let outputs: HashMap<String, Value> = [
            (
                "var1".to_string(),
                json!([{"city": "San Diego", "coordinates": {"latitude": 32.87, "longitude": -117.2}}]),
            ),
            ("var2".to_string(), json!({"data": {"hotels": [{"hotel_id": 7}, {"hotel_id": 9}]}})),
        ]
        .into_iter()
        .collect();
        let args = json!({
            "lat": "$var1.coordinates.latitude$",
            "hotel": "$var2.data.hotels.1.hotel_id$",
            "label": "near $var1.city$",
            "plain": "no refs here",
            "price": "$5 and $10"
        });
        let r = resolve(args.as_object().unwrap(), &outputs).unwrap();
        assert_eq!(r["lat"], json!(32.87));
        assert_eq!(r["hotel"], json!(9));
        assert_eq!(r["label"], json!("near San Diego"));
        assert_eq!(r["plain"], json!("no refs here"));
        assert_eq!(r["price"], json!("$5 and $10"), "dollar amounts are not references");

        let e = resolve(json!({"x": "$var3.id$"}).as_object().unwrap(), &outputs).unwrap_err();
        assert!(e.to_string().contains("var3") && e.to_string().contains("`x`"), "{e}");
        let e = resolve(json!({"x": "$var1.nope$"}).as_object().unwrap(), &outputs).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn one_reference_type_reads_and_writes_the_notation() {
        let r = Reference::whole("$var2.data.hotels.1.hotel_id$").unwrap();
        assert_eq!((r.label.as_str(), r.path.as_str()), ("var2", "data.hotels.1.hotel_id"));
        assert_eq!(r.segments(), vec!["data", "hotels", "1", "hotel_id"]);
        assert_eq!(r.to_string(), "$var2.data.hotels.1.hotel_id$", "written back as read");
        assert_eq!(Reference::whole("$var1$").unwrap(), Reference::new("var1", ""));
        assert_eq!(Reference::new("var1", "").to_string(), "$var1$");
        assert_eq!(Reference::new("var1", "data").join("0").to_string(), "$var1.data.0$");
        assert_eq!(Reference::new("var1", "").join("a.b").join("").to_string(), "$var1.a.b$");
        for not in ["near $var1.city$", "$5 and $10", "$$", "$a..b$", "$a.$", "$ a$", "$"] {
            assert_eq!(Reference::whole(not), None, "{not}");
        }
        let all = Reference::all_in("from $var1.city$ to $var2$, $5 and $10");
        assert_eq!(all, vec![Reference::new("var1", "city"), Reference::new("var2", "")]);
        assert!(holds_reference("near $var1.city$") && !holds_reference("US$ 5 or $10"));
        assert_eq!(labels_in(&json!({"a": ["$x.y$", {"b": "$z$ and $5"}], "c": 3})), vec!["x", "z"]);
        let v: Value = Reference::new("var3", "id").into();
        assert_eq!(v, json!("$var3.id$"));
    }

    #[test]
    fn an_extreme_segment_takes_the_element_with_the_least_or_greatest_field() {
        let outputs: HashMap<String, Value> = [(
            "var3".to_string(),
            json!([
                {"day": "2024-11-05", "price": {"units": 652}},
                {"day": "2024-11-06", "price": {"units": 498}},
                {"day": "2024-11-07"},
                {"day": "2024-11-08", "price": {"units": 498}},
                {"day": "2024-11-09", "price": {"units": 700}},
            ]),
        )]
        .into_iter()
        .collect();
        let r = Reference::whole("$var3.min(price:units).day$").unwrap();
        assert_eq!(r.to_string(), "$var3.min(price:units).day$");
        assert_eq!(r.resolve(&outputs).unwrap(), json!("2024-11-06"), "the first of equals");
        assert_eq!(Reference::new("var3", "max(price:units).day").resolve(&outputs).unwrap(), json!("2024-11-09"));
        assert!(Reference::new("var3", "min(nothing).day").resolve(&outputs).is_err());
        assert_eq!(Extreme::parse("min()"), None);
        assert_eq!(Extreme::parse("least(price)"), None);
        assert_eq!(Extreme::parse("max(a:b)").unwrap().to_string(), "max(a:b)");
    }

    #[test]
    fn a_derived_reference_takes_a_shifted_part_of_a_date_time() {
        let outputs: HashMap<String, Value> = [(
            "var3".to_string(),
            json!({"segments": [{"arrivalTime": "2024-12-01T23:10:00"}, {"departureTime": "2024-12-08 10:00"}]}),
        )]
        .into_iter()
        .collect();
        let r = Reference::whole("$var3.segments.0.arrivalTime@time+60$").unwrap();
        assert_eq!(r.derive, Some(Derive { part: Part::Time, minutes: 60 }));
        assert_eq!(r.path, "segments.0.arrivalTime");
        assert_eq!(r.to_string(), "$var3.segments.0.arrivalTime@time+60$", "written back as read");
        let args = json!({
            "pick_up_time": "$var3.segments.0.arrivalTime@time+60$",
            "pick_up_date": "$var3.segments.0.arrivalTime@date+60$",
            "drop_off_time": "$var3.segments.1.departureTime@time-180$",
            "landed": "$var3.segments.0.arrivalTime@time$",
        });
        let r = resolve(args.as_object().unwrap(), &outputs).unwrap();
        assert_eq!(r["pick_up_time"], json!("00:10"));
        assert_eq!(r["pick_up_date"], json!("2024-12-02"), "an hour after 23:10 is the next day");
        assert_eq!(r["drop_off_time"], json!("07:00"));
        assert_eq!(r["landed"], json!("23:10"));
        let e = resolve(json!({"x": "$var3.segments@time$"}).as_object().unwrap(), &outputs).unwrap_err();
        assert!(e.to_string().contains("not a date and time"), "{e}");
        for not in ["$var3.at@hour+1$", "$var3.at@time+$", "$var3.at@time+1h$", "$@time$", "$a@b@time$"] {
            assert_eq!(Reference::whole(not), None, "{not}");
        }
        assert_eq!(Reference::new("v", "a").derived(Derive { part: Part::Date, minutes: 0 }).to_string(), "$v.a@date$");
    }
}
