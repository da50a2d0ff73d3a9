//! Moments said as other moments shifted by a span ("pick it up at 1 pm on December 5 … return it
//! 24 hours later"): a remembered call's date and time arguments carried to a new request as its
//! counterpart moment shifted by its counterpart span (see [`super::spans`]).

use super::analogy::{Analogy, Transfer};
use super::spans::counterpart;
use crate::read::stamps;
use chrono::{Duration, NaiveDateTime};
use serde_json::{Map, Value};

impl Analogy {
    /// The date and time arguments of one remembered call that are another pair of its arguments
    /// shifted by a span the old request says ("pick it up at 1 pm on December 5 … return it 24
    /// hours later": the drop-off is the pick-up + 1,440 minutes, its time equal to a said time
    /// only by chance), each with the new request's value: the counterpart moment shifted by the
    /// counterpart span ("… 30 hours later" → the next day, 6 hours later in the day). A pair the
    /// old request said outright keeps its said values; the date goes with the time named like it
    /// (`drop_off_time` → `drop_off_date`).
    pub(crate) fn moments_after(&self, args: &Map<String, Value>) -> Map<String, Value> {
        let moment = |time_key: &String| {
            let date_key = time_key.replace("time", "date");
            let at = stamps::moment(args.get(&date_key)?.as_str()?, args.get(time_key)?.as_str()?)?;
            Some((date_key, time_key.clone(), at))
        };
        let pairs: Vec<_> = args.keys().filter(|k| k.contains("time")).filter_map(moment).collect();
        let said = |d: NaiveDateTime| {
            self.old.dates.contains(&d.date()) && self.old.times.contains(&stamps::time_text(d.time()))
        };
        let mut out = Map::new();
        for (date_key, time_key, at) in &pairs {
            if said(*at) {
                continue;
            }
            let from = pairs.iter().find_map(|(dk, tk, base)| {
                let span = self.old.shifts.iter().find(|s| **s != 0 && *base + Duration::minutes(**s) == *at)?;
                said(*base).then_some((dk, tk, *span))
            });
            let Some((dk, tk, span)) = from else { continue };
            let mapped = |k: &String| match self.transfer(&args[k], None) {
                Transfer::Mapped(Value::String(v)) => Some(v),
                _ => None,
            };
            let new_base = mapped(dk).zip(mapped(tk)).and_then(|(d, t)| stamps::moment(&d, &t));
            let Some(shifted) = new_base
                .zip(counterpart(&self.old.shifts, &self.new.shifts, span))
                .map(|(b, s)| b + Duration::minutes(s))
            else {
                continue;
            };
            out.insert(date_key.clone(), Value::String(stamps::date_text(shifted.date())));
            out.insert(time_key.clone(), Value::String(stamps::time_text(shifted.time())));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::memory::analogy::Analogy;
    use crate::read::scan::RequestValues;
    use chrono::NaiveDate;
    use serde_json::json;

    #[test]
    fn a_moment_said_as_another_plus_a_span_takes_the_new_moment_and_span() {
        let day = NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let old = "Rent a car in Gold Coast at 1 pm on December 5th, 2024, and return it in Brisbane 24 hours later.";
        let new = "Hand the car back in Sydney 30 hours after I collect it in Canberra at 3 pm on December 20th, 2024.";
        let a = Analogy::new(old, new, &RequestValues::extract(new, day), day);
        let args = json!({"pick_up_date": "2024-12-05", "pick_up_time": "13:00", "drop_off_date": "2024-12-06", "drop_off_time": "13:00", "driver_age": 30});
        let moments = a.moments_after(args.as_object().unwrap());
        // The drop-off is the pick-up + 30 hours; the pick-up, said, is the transfer's.
        assert_eq!(
            serde_json::Value::Object(moments),
            json!({"drop_off_date": "2024-12-21", "drop_off_time": "21:00"})
        );
        // Said outright, a pair is no moment after another.
        let said =
            "Rent a car at 1 pm on December 5th, 2024, and return it at 1 pm on December 6th, 2024, 24 hours later.";
        let a = Analogy::new(said, new, &RequestValues::extract(new, day), day);
        assert!(a.moments_after(args.as_object().unwrap()).is_empty());
        // No span in the new request to take: left to the transfer.
        let plain = "Collect it in Canberra at 3 pm on December 20th, 2024 and return it in Sydney.";
        let a = Analogy::new(old, plain, &RequestValues::extract(plain, day), day);
        assert!(a.moments_after(args.as_object().unwrap()).is_empty());
    }
}
