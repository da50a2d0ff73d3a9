//! Numbers carried from a remembered request to a new one: a number the old request said takes
//! its counterpart, and so does each item of a list of numbers said one by one ("my 3-year-old
//! and 8-year-old kids" → `children: "3, 8"`).

use super::analogy::{Analogy, Transfer};
use crate::fill::learned::Kind;
use serde_json::Value;

impl Analogy {
    /// A number the old request said: its counterpart (`Unsaid`: a constant).
    pub(crate) fn transfer_number(&self, n: f64) -> Transfer {
        let olds = self.old_mentions(Kind::Number);
        let Some(i) = olds.iter().position(|m| m.value.parse::<f64>().is_ok_and(|v| v == n)) else {
            return Transfer::Unsaid;
        };
        match self.counterpart(Kind::Number, i).and_then(|m| m.value.parse::<f64>().ok()) {
            Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => Transfer::Mapped(Value::from(v as i64)),
            Some(v) => {
                serde_json::Number::from_f64(v).map(|x| Transfer::Mapped(Value::Number(x))).unwrap_or(Transfer::Unsaid)
            }
            None => Transfer::Unmatched(Kind::Number),
        }
    }

    /// A comma-separated list of numbers, each a number the old request said: each item's
    /// counterpart, in the list's own format (`"3, 8"` → `"5, 10"`, `"3,8"` → `"5,10"`). `None`:
    /// not such a list, or an item the old request did not say (a constant); `Unmatched` when an
    /// item has no counterpart.
    pub(crate) fn transfer_numbers(&self, s: &str) -> Option<Transfer> {
        let items: Vec<&str> = s.split(',').collect();
        if items.len() < 2 {
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        for item in &items {
            let n = item.trim().parse::<f64>().ok()?;
            match self.transfer_number(n) {
                Transfer::Mapped(v) => {
                    let lead = &item[..item.len() - item.trim_start().len()];
                    out.push(format!("{lead}{}", v.as_i64().map_or_else(|| v.to_string(), |i| i.to_string())));
                }
                Transfer::Unmatched(k) => return Some(Transfer::Unmatched(k)),
                Transfer::Unsaid => return None,
            }
        }
        debug_assert!(out.len() == items.len());
        Some(Transfer::Mapped(Value::String(out.join(","))))
    }
}

#[cfg(test)]
mod tests {
    use crate::fill::learned::Kind;
    use crate::memory::analogy::{Analogy, Transfer};
    use crate::read::scan::RequestValues;
    use chrono::NaiveDate;
    use serde_json::json;

    #[test]
    fn a_list_said_item_by_item_takes_each_items_counterpart() {
        let day = NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let old =
            "Fly from Vancouver to Amsterdam with my 3-year-old and 8-year-old kids and my wife on December 25, 2024.";
        let new = "Miami to Berlin on November 10, 2024 with my wife and our kids, aged 5 and 10.";
        let a = Analogy::new(old, new, &RequestValues::extract(new, day), day);
        assert_eq!(a.transfer(&json!("3, 8"), None), Transfer::Mapped(json!("5, 10")));
        assert_eq!(a.transfer(&json!("3,8"), None), Transfer::Mapped(json!("5,10")));
        // An item the old request never said: a constant, left alone.
        assert_eq!(a.transfer(&json!("3, 12"), None), Transfer::Unsaid);
        let one = "Miami to Berlin on November 10, 2024 with my wife and our 5-year-old.";
        let a = Analogy::new(old, one, &RequestValues::extract(one, day), day);
        assert_eq!(a.transfer(&json!("3, 8"), None), Transfer::Unmatched(Kind::Number));
    }
}
