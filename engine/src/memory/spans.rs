//! Spans of time said relative to an event ("one hour after I land", "three hours before my
//! flight takes off", "half an hour after the tour ends"): read as signed minutes
//! ([`RequestValues::shifts`]), and carried from a remembered request to a new one — the old
//! request's span becomes the new one's counterpart: the same sign (after / before) and the same
//! place among the spans of that sign. The memory writes a value derived from an output by such a
//! span as a derived reference (`$var3.….arrivalTime@time+60$`, see [`crate::exec::refs`]); the
//! replay gives it the new request's span.

use crate::exec::refs::Reference;
use crate::read::lexicon::lexicon;
use crate::read::scan::{amount, small_number, RequestValues, Scan};
use chrono::{Datelike, Months, NaiveDate};

/// Spans of time before or after an event: a number (`one`, `2`, `1.5`, `an`, `half an`), a
/// unit (hours, minutes), maybe `and a half`, then `after` / `later` (+) or `before` / `earlier` /
/// `prior` (-); or after `in` ("a taxi in 40 minutes": +).
pub(crate) fn read(scan: &Scan<'_>, v: &mut RequestValues) {
    let Scan { toks, lower, .. } = scan;
    let lex = lexicon();
    let word = |k: usize| lower.get(k).map(String::as_str).unwrap_or("");
    for i in 0..toks.len() {
        let unit = match word(i + 1) {
            w if lex.hour_words.contains(w) => 60.0,
            w if lex.minute_words.contains(w) => 1.0,
            _ => continue,
        };
        let n = if word(i) == "an" && word(i.wrapping_sub(1)) == "half" {
            0.5
        } else {
            match amount(toks[i].text).filter(|(_, c)| c.is_none()).map(|(n, _)| n).or_else(|| small_number(&lower[i]))
            {
                Some(n) if n > 0.0 => n,
                _ => continue,
            }
        };
        let (half, k) =
            if toks[i + 1].punct.is_none() && word(i + 2) == "and" && word(i + 3) == "a" && word(i + 4) == "half" {
                (0.5, i + 5)
            } else {
                (0.0, i + 2)
            };
        // "a taxi in 15 minutes": that long after the moment said.
        let after_in = word(i.wrapping_sub(1)) == "in";
        let sign = match word(k) {
            w if lex.later_words.contains(w) => 1.0,
            w if lex.earlier_words.contains(w) => -1.0,
            _ if after_in => 1.0,
            _ => continue,
        };
        if toks[k - 1].punct.is_some() && !after_in {
            continue;
        }
        let minutes = sign * (n + half) * unit;
        if minutes.fract() == 0.0 && minutes.abs() <= 60.0 * 24.0 * 31.0 {
            v.shifts.push(minutes as i64);
        }
    }
}

/// The day `d` is after `o`, taken from `base`: the same day of a later month where the request
/// counts in months ("return on the same day of the next month": December 25 → January 25 is one
/// month, so November 10 → December 10, not 31 days later), else as many days.
pub(crate) fn shift_date(o: NaiveDate, d: NaiveDate, base: NaiveDate, in_months: bool) -> Option<NaiveDate> {
    let months = (d.year() * 12 + d.month() as i32) - (o.year() * 12 + o.month() as i32);
    if in_months && months > 0 && d.day() == o.day() {
        if let Some(n) = base.checked_add_months(Months::new(months as u32)) {
            return Some(n);
        }
    }
    base.checked_add_signed(d - o)
}

/// The days a request counts, in order: "a four-day business trip", "five days of fun",
/// "3 nights" → 4, 5, 3.
pub(crate) fn day_counts(v: &RequestValues) -> Vec<i64> {
    v.numbers
        .iter()
        .filter(|c| c.value.fract() == 0.0 && c.value > 0.0 && c.value <= 366.0)
        .filter(|c| lexicon().day_words.contains(&c.word) || lexicon().night_words.contains(&c.word))
        .map(|c| c.value as i64)
        .collect()
}

/// The new request's days for an offset of `days` the old request said as consecutive day counts
/// (one, or several summed: "a four-day trip, then five days of fun" is 9 days to the flight
/// home): the sum of the new request's counts in the same places. `None` where the two requests
/// count days differently often or no run of the old counts makes `days`.
pub(crate) fn days_counterpart(old: &[i64], new: &[i64], days: i64) -> Option<i64> {
    if days <= 0 || old.len() != new.len() {
        return None;
    }
    (1..=old.len()).find_map(|len| {
        (0..=old.len() - len)
            .find(|&s| old[s..s + len].iter().sum::<i64>() == days)
            .map(|s| new[s..s + len].iter().sum())
    })
}

/// The new request's span for the old request's span of `minutes`: the same sign, the same place
/// among the spans of that sign. `None`: the old request said no such span (or none: 0), or the
/// new one has no counterpart.
pub(crate) fn counterpart(old: &[i64], new: &[i64], minutes: i64) -> Option<i64> {
    let i = old.iter().position(|m| *m == minutes).filter(|_| minutes != 0)?;
    let same_sign = |m: &&i64| m.signum() == minutes.signum();
    let rank = old[..i].iter().filter(same_sign).count();
    new.iter().filter(same_sign).nth(rank).copied()
}

/// `s` with each derived reference's span replaced by its counterpart ([`counterpart`]); a span
/// with no counterpart is kept.
pub(crate) fn reshift(s: &str, old: &[i64], new: &[i64]) -> String {
    let mut out = s.to_string();
    for r in Reference::all_in(s) {
        let Some(mut d) = r.derive else { continue };
        if let Some(m) = counterpart(old, new, d.minutes) {
            d.minutes = m;
            out = out.replacen(&r.to_string(), &r.clone().derived(d).to_string(), 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::analogy::{Analogy, Transfer};
    use chrono::NaiveDate;
    use serde_json::json;

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2024, 6, 1).unwrap()
    }

    #[test]
    fn spans_before_and_after_an_event_are_signed_minutes() {
        let read = |t: &str| RequestValues::extract(t, day()).shifts;
        assert_eq!(
            read(
                "Pick up the car one hour after arriving in Rome and return it three hours before my flight takes off."
            ),
            vec![60, -180]
        );
        assert_eq!(
            read("A taxi half an hour after the plane lands, another 45 minutes before the tour."),
            vec![30, -45]
        );
        assert_eq!(read("Collect it an hour and a half after I land; return it 26 hours later."), vec![90, 1560]);
        assert_eq!(read("Book 2 hours of tennis after lunch. Two hours. After that, rest."), Vec::<i64>::new());
        assert_eq!(read("It takes 1.5 hours before noon"), vec![-90]);
        assert_eq!(read("It's 9 o'clock. I want a taxi from 887 Springer Ave in 40 minutes."), vec![40]);
    }

    #[test]
    fn a_span_takes_the_counterpart_of_its_sign_and_place() {
        assert_eq!(counterpart(&[60, -180], &[-120, 30], 60), Some(30));
        assert_eq!(counterpart(&[60, -180], &[-120, 30], -180), Some(-120));
        assert_eq!(counterpart(&[60, 90], &[45], 90), None, "no second span after");
        assert_eq!(counterpart(&[60], &[45], 0), None, "no span is no span");
        assert_eq!(counterpart(&[60], &[45], 15), None, "a span the old request did not say");
    }

    #[test]
    fn a_time_derived_from_an_output_takes_the_span_the_new_request_says() {
        let old = "Pick up the car one hour after I land in Rome and return it three hours before my flight back.";
        let new = "Return the car two hours before the flight home; collect it 30 minutes after landing in Oslo.";
        let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
        let args = json!({
            "pick_up_time": "$var3.segments.0.arrivalTime@time+60$",
            "pick_up_date": "$var3.segments.0.arrivalTime@date+60$",
            "drop_off_time": "$var3.segments.1.departureTime@time-180$",
            "id": "$var4.id$",
        });
        assert_eq!(
            a.transfer_deep(&args, None).unwrap(),
            json!({
                "pick_up_time": "$var3.segments.0.arrivalTime@time+30$",
                "pick_up_date": "$var3.segments.0.arrivalTime@date+30$",
                "drop_off_time": "$var3.segments.1.departureTime@time-120$",
                "id": "$var4.id$",
            })
        );
    }

    #[test]
    fn a_time_said_then_shifted_by_a_span_takes_the_new_time_and_span() {
        let old = "I arrive at Bruxelles-Central at 11:15am. Book a taxi 35 minutes after my train gets there.";
        let new = "Taxi needed 20 minutes after my train reaches Gare du Nord, which is at 9:40am.";
        let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
        assert_eq!(a.transfer(&json!("11:50"), None), Transfer::Mapped(json!("10:00")));
        assert_eq!(a.transfer(&json!("11:15"), None), Transfer::Mapped(json!("09:40")));
    }

    #[test]
    fn a_date_after_two_stays_takes_the_new_stays_summed() {
        let old = "I'm flying to San Francisco for a four-day business trip on November 15, 2024. After my work is done, I'll travel to a nearby city for five days of fun, then fly back to Seattle.";
        let new = "Multi-stop flights, please: I fly to Madrid on December 5, 2024 for a seven-day business trip, then go to a nearby city for four days of fun, and from there fly straight back to Rome.";
        let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
        assert_eq!(a.transfer(&json!("2024-11-24"), None), Transfer::Mapped(json!("2024-12-16")));
        // One stay: its own counterpart; a date no count explains keeps its offset.
        assert_eq!(a.transfer(&json!("2024-11-19"), None), Transfer::Mapped(json!("2024-12-12")));
        assert_eq!(a.transfer(&json!("2024-11-17"), None), Transfer::Mapped(json!("2024-12-07")));
        assert_eq!(days_counterpart(&[4, 5], &[7], 9), None);
    }

    #[test]
    fn the_same_day_of_the_next_month_is_a_month_later_not_as_many_days() {
        let old = "Fly from Vancouver to Amsterdam on December 25, 2024, and return on the same day of the next month.";
        let new = "Out from Miami to Berlin on November 10, 2024; back the same day of the next month.";
        let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
        assert_eq!(a.transfer(&json!("2025-01-25"), None), Transfer::Mapped(json!("2024-12-10")));
        // Counted in days: as many days.
        let old = "Fly from Vancouver to Amsterdam on December 25, 2024, and return 31 days later.";
        let new = "Out from Miami to Berlin on November 10, 2024; back 31 days later.";
        let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
        assert_eq!(a.transfer(&json!("2025-01-25"), None), Transfer::Mapped(json!("2024-12-11")));
        let d = |m, d| NaiveDate::from_ymd_opt(2024, m, d).unwrap();
        assert_eq!(shift_date(d(1, 31), d(2, 29), d(3, 31), true), Some(d(4, 29)), "not the same day: days");
        assert_eq!(shift_date(d(10, 15), d(12, 15), d(12, 31), true), NaiveDate::from_ymd_opt(2025, 2, 28));
    }
}
