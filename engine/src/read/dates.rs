//! Reading the dates and times a request says, on the one tokenizer: written dates ("October 13th,
//! 2024", "13th October", "November 10-13, 2024", ISO), holidays, bare days that continue a month
//! ("on the 7th", "from October 5th to 12th"), "Today is …", relative dates ("the day after
//! tomorrow", "two days later", "next week", weekdays) and times ("8 AM", "14:30", "noon", "9
//! o'clock in the morning").

use super::lexicon::lexicon;
use super::reading::mistyped;
use super::scan::{cues_at, small_number, RequestValues, Scan};
use chrono::{Datelike, Duration, Months, NaiveDate, Weekday};

/// The weekdays in the order of the lexicon's list (Monday first).
const WEEKDAY_ORDER: [Weekday; 7] =
    [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri, Weekday::Sat, Weekday::Sun];

/// The weekday `w` (lower-case) names.
pub(crate) fn weekday_of(w: &str) -> Option<Weekday> {
    lexicon().weekdays.position(w).map(|i| WEEKDAY_ORDER[i])
}

pub(crate) fn month_of(w: &str) -> Option<u32> {
    let w = w.to_ascii_lowercase();
    let w = w.trim_end_matches('.');
    if w.len() < 3 {
        return None;
    }
    lexicon()
        .months
        .iter()
        .position(|m| m.starts_with(w) && (w.len() == m.len() || w.len() == 3 || (w == "sept")))
        .map(|i| i as u32 + 1)
}

pub(crate) fn day_number(w: &str) -> Option<u32> {
    let w = w.to_ascii_lowercase();
    let digits = w.trim_end_matches("st").trim_end_matches("nd").trim_end_matches("rd").trim_end_matches("th");
    let d: u32 = digits.parse().ok()?;
    (1..=31).contains(&d).then_some(d)
}

pub(crate) fn year_number(w: &str) -> Option<i32> {
    let y: i32 = w.parse().ok()?;
    (1900..=2200).contains(&y).then_some(y)
}

fn iso_date(w: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(w, "%Y-%m-%d").ok().or_else(|| NaiveDate::parse_from_str(w, "%Y/%m/%d").ok())
}

/// A date written in figures: `12/05/2026` and `3/14` month first (a first part over 12 is the
/// day: `25/12/2026`), `05.12.2026` day first; a two-digit year is this century's. Without a
/// year only where `dated` (a word that places it in time stands before it): `3/4 cup` is no date.
fn numeric_date(w: &str, default_year: i32, dated: bool) -> Option<NaiveDate> {
    let (sep, day_first) = if w.contains('/') {
        ('/', false)
    } else if w.contains('.') {
        ('.', true)
    } else {
        return None;
    };
    let parts: Vec<&str> = w.split(sep).collect();
    if !(2..=3).contains(&parts.len())
        || parts.iter().any(|p| p.is_empty() || p.len() > 4 || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let (a, b): (u32, u32) = (parts[0].parse().ok()?, parts[1].parse().ok()?);
    if parts[0].len() > 2 || parts[1].len() > 2 {
        return None;
    }
    let year = match parts.get(2) {
        Some(y) if y.len() == 4 => y.parse().ok()?,
        Some(y) if y.len() == 2 => 2000 + y.parse::<i32>().ok()?,
        Some(_) => return None,
        None if dated && sep == '/' => default_year,
        None => return None,
    };
    let (month, day) = if day_first || (a > 12 && b <= 12) { (b, a) } else { (a, b) };
    NaiveDate::from_ymd_opt(year, month, day)
}

/// "the first Tuesday of April (2027)", "the last Friday in May": the day, in the year said
/// after it or else the default year. The ordinal's position and the last token used.
fn weekday_of_month(lower: &[String], i: usize, default_year: i32) -> Option<(NaiveDate, usize)> {
    let lex = lexicon();
    let nth = lex.week_ordinals.position(&lower[i]).or_else(|| lex.last_words.contains(&lower[i]).then_some(4))?;
    let weekday = weekday_of(lower.get(i + 1)?)?;
    if !lower.get(i + 2).is_some_and(|w| w == "of" || w == "in") {
        return None;
    }
    let month = month_of(lower.get(i + 3)?)?;
    let year = lower.get(i + 4).and_then(|w| year_number(w));
    let y = year.unwrap_or(default_year);
    let last = if year.is_some() { i + 4 } else { i + 3 };
    let first_of = NaiveDate::from_ymd_opt(y, month, 1)?;
    let first = next_weekday(first_of - Duration::days(1), weekday);
    let date = if nth == 4 {
        let next_month =
            if month == 12 { NaiveDate::from_ymd_opt(y + 1, 1, 1)? } else { NaiveDate::from_ymd_opt(y, month + 1, 1)? };
        let mut d = first;
        while d + Duration::days(7) < next_month {
            d += Duration::days(7);
        }
        d
    } else {
        first + Duration::days(7 * nth as i64)
    };
    (date.month() == month).then_some((date, last))
}

/// Whether a word (lower-case, a final dot read off) marks a time after noon (`Some(true)`: "pm",
/// "p.m.") or before it (`Some(false)`).
pub(crate) fn meridiem(w: &str) -> Option<bool> {
    let lex = lexicon();
    let w = w.trim_end_matches('.');
    if lex.ante_meridiem.contains(w) {
        Some(false)
    } else {
        lex.post_meridiem.contains(w).then_some(true)
    }
}

fn parse_time(w: &str, next: Option<&str>) -> Option<(String, bool)> {
    let lw = w.to_ascii_lowercase();
    let lex = lexicon();
    let strip = |list: &super::lexicon::Words| list.iter().find_map(|m| lw.strip_suffix(m)).map(str::to_string);
    let (body, suffix_in_word) = if let Some(b) = strip(&lex.ante_meridiem) {
        (b, Some(false))
    } else if let Some(b) = strip(&lex.post_meridiem) {
        (b, Some(true))
    } else {
        (lw.clone(), None)
    };
    let next_suffix = next.map(|n| n.to_ascii_lowercase()).and_then(|n| meridiem(&n));
    let pm = suffix_in_word.or(next_suffix);
    let (h, m) = match body.split_once(':') {
        Some((h, m)) => (h.parse::<u32>().ok()?, m.parse::<u32>().ok()?),
        None if pm.is_some() => (body.parse::<u32>().ok()?, 0),
        None => return None,
    };
    if m > 59 {
        return None;
    }
    let h = match pm {
        Some(true) if (1..12).contains(&h) => h + 12,
        Some(false) if h == 12 => 0,
        Some(_) if !(1..=12).contains(&h) => return None,
        _ if h > 23 => return None,
        _ => h,
    };
    Some((format!("{h:02}:{m:02}"), suffix_in_word.is_none() && next_suffix.is_some()))
}

/// A time said in words at token `i`: "9 o'clock (in the morning)", "3 in the afternoon",
/// "eight in the evening" → (`HH:MM`, the last token it used).
pub(crate) fn spoken_time(lower: &[String], i: usize) -> Option<(String, usize)> {
    let h = lower[i]
        .parse::<u32>()
        .ok()
        .or_else(|| small_number(&lower[i]).map(|n| n as u32))
        .filter(|h| (1..=12).contains(h))?;
    let at = |k: usize| lower.get(k).map(String::as_str).unwrap_or("");
    let lex = lexicon();
    let oclock = lex.oclock.contains(at(i + 1));
    let from = if oclock { i + 2 } else { i + 1 };
    let part = (at(from) == "in" && at(from + 1) == "the").then(|| at(from + 2));
    let pm = match part {
        Some(p) if lex.morning.contains(p) => Some(false),
        Some(p) if lex.evening.contains(p) => Some(true),
        _ if oclock => meridiem(at(from)),
        _ => None,
    };
    if !oclock && pm.is_none() {
        return None;
    }
    let last = if part.is_some() {
        from + 2
    } else if pm.is_some() {
        from
    } else {
        i + 1
    };
    let h = match pm {
        Some(true) if h < 12 => h + 12,
        Some(false) if h == 12 => 0,
        _ => h,
    };
    Some((format!("{h:02}:00"), last))
}

/// `2024-10-05`, `05.10.2024`, `10-05-24`: a date, not a phone number.
pub(crate) fn date_like(w: &str) -> bool {
    let g: Vec<&str> = w.split(['-', '.', '/']).collect();
    g.len() == 3
        && g[1].len() <= 2
        && (g[0].len() == 4 || g[2].len() == 4 || g[2].len() == 2)
        && g.iter().all(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit()))
}

/// Written dates this many days before today or more mark a request written on another day.
const WRITTEN_ELSEWHERE_DAYS: i64 = 7;

fn next_weekday(from: NaiveDate, day: Weekday) -> NaiveDate {
    let mut d = from + Duration::days(1);
    while d.weekday() != day {
        d += Duration::days(1);
    }
    d
}

/// The dates a request writes out, by the token they start at and in order: written dates,
/// holidays, bare days continuing a month. The tokens they use are marked in `scan.used`.
pub(crate) fn absolute_dates(scan: &mut Scan<'_>, fallback_today: NaiveDate) -> Vec<(usize, NaiveDate)> {
    let mut absolute = Vec::new();
    // A date said without its year, and no dated date before it, is in the year the request
    // says ("the 2024 Christmas holiday … tickets for December 26"), else in today's.
    let year = scan.toks.iter().find_map(|t| year_number(t.text)).unwrap_or(fallback_today.year());
    written_dates(scan, &mut absolute, year);
    holidays(scan, &mut absolute, year);
    bare_days(scan, &mut absolute);
    absolute.sort_by_key(|(p, _)| *p);
    absolute
}

/// "October 13th, 2024" / "Oct 13 2024" / "13th October 2024" / "October 13th" / "November
/// 10-13, 2024" (a range: two dates) / ISO dates. The year, when not said, is the date
/// before's, else `default_year`.
fn written_dates(scan: &mut Scan<'_>, absolute: &mut Vec<(usize, NaiveDate)>, default_year: i32) {
    let Scan { toks, used, lower } = scan;
    for i in 0..toks.len() {
        let dated = i.checked_sub(1).is_some_and(|j| lexicon().dating_words.contains(&lower[j]));
        if let Some(d) = iso_date(toks[i].text).or_else(|| numeric_date(toks[i].text, default_year, dated)) {
            absolute.push((i, d));
            used[i] = true;
            continue;
        }
        if let Some((d, last)) = weekday_of_month(lower, i, default_year) {
            absolute.push((i, d));
            for u in used.iter_mut().take(last + 1).skip(i) {
                *u = true;
            }
            continue;
        }
        // "October 13th, 2024" / "Oct 13 2024" / "13th October 2024" / "October 13th" /
        // "November 10-13, 2024" (a range: two dates)
        if let Some(m) = month_of(toks[i].text) {
            if let Some((a, b)) = toks
                .get(i + 1)
                .and_then(|t| t.text.split_once('-'))
                .and_then(|(a, b)| Some((day_number(a)?, day_number(b)?)))
            {
                let y = (i + 2..(i + 5).min(toks.len()))
                    .find_map(|j| year_number(toks[j].text))
                    .unwrap_or_else(|| absolute.last().map(|(_, d)| d.year()).unwrap_or(default_year));
                if let (Some(d1), Some(d2)) = (NaiveDate::from_ymd_opt(y, m, a), NaiveDate::from_ymd_opt(y, m, b)) {
                    absolute.push((i, d1));
                    absolute.push((i + 1, d2));
                    used[i] = true;
                    used[i + 1] = true;
                    if toks.get(i + 2).is_some_and(|t| year_number(t.text).is_some()) {
                        used[i + 2] = true;
                    }
                    continue;
                }
            }
            let day_after = toks.get(i + 1).and_then(|t| day_number(t.text));
            let day_before = i.checked_sub(1).and_then(|j| day_number(toks[j].text).filter(|_| !used[j]));
            let (day, first, last) = match (day_after, day_before) {
                (Some(d), _) => (d, i, i + 1),
                (None, Some(d)) => (d, i - 1, i),
                _ => continue,
            };
            let year = toks.get(last + 1).and_then(|t| year_number(t.text));
            let last = if year.is_some() { last + 1 } else { last };
            // "October 5th to 12th, 2024": the year may come a few words later.
            let ahead = (last + 1..(last + 5).min(toks.len())).find_map(|j| year_number(toks[j].text));
            let y = year.or(ahead).unwrap_or_else(|| absolute.last().map(|(_, d)| d.year()).unwrap_or(default_year));
            if let Some(d) = NaiveDate::from_ymd_opt(y, m, day) {
                absolute.push((first, d));
                for u in used.iter_mut().take(last + 1).skip(first) {
                    *u = true;
                }
            }
        }
    }
}

/// Holidays on a fixed day (the lexicon's: "Christmas (Eve)", "New Year's Eve", "Halloween"…),
/// in the year said near them, else the year of the date before, else `default_year`. The
/// longest phrase that matches is read.
fn holidays(scan: &mut Scan<'_>, absolute: &mut Vec<(usize, NaiveDate)>, default_year: i32) {
    let Scan { toks, lower, used } = scan;
    let reads = |k: usize, w: &str| lower.get(k).is_some_and(|x| x.replace('’', "'") == w);
    for i in 0..toks.len() {
        let found = lexicon()
            .holidays
            .iter()
            .filter(|h| h.phrase.iter().enumerate().all(|(k, w)| reads(i + k, w)))
            .max_by_key(|h| h.phrase.len());
        let Some(&super::lexicon::Holiday { month, day, ref phrase, .. }) = found else { continue };
        let span = phrase.len();
        if used[i] {
            continue;
        }
        let said = (i + span..(i + span + 3).min(toks.len())).find_map(|j| year_number(toks[j].text));
        let before = absolute.iter().filter(|(p, _)| *p < i).max_by_key(|(p, _)| *p).map(|(_, d)| *d);
        let year = said.unwrap_or_else(|| match before {
            Some(b) if month == 1 && b.month() == 12 => b.year() + 1,
            Some(b) => b.year(),
            None => default_year,
        });
        if let Some(d) = NaiveDate::from_ymd_opt(year, month, day) {
            absolute.push((i, d));
            for u in used.iter_mut().skip(i).take(span) {
                *u = true;
            }
        }
    }
}

/// Bare days that continue the month of a date before them: "on the 7th" (the next month when
/// the day has passed), "from October 5th to 12th".
fn bare_days(scan: &mut Scan<'_>, absolute: &mut Vec<(usize, NaiveDate)>) {
    let Scan { toks, lower, used } = scan;
    // "on the 7th": a bare ordinal day continues the month of the latest date before it (the
    // next month when the day has passed; that date's own day is that date: "from May 5th to
    // 9th … on the 5th").
    for i in 1..toks.len() {
        let ordinal = toks[i].text.chars().any(|c| c.is_ascii_alphabetic())
            && toks[i].text.chars().next().is_some_and(|c| c.is_ascii_digit());
        if used[i] || lower[i - 1] != "the" || !ordinal {
            continue;
        }
        let Some(day) = day_number(toks[i].text) else { continue };
        let Some((_, prev)) = absolute.iter().filter(|(p, _)| *p < i).max_by_key(|(p, _)| *p).copied() else {
            continue;
        };
        let same = NaiveDate::from_ymd_opt(prev.year(), prev.month(), day).filter(|d| *d >= prev);
        let next = || {
            let (y, m) = if prev.month() == 12 { (prev.year() + 1, 1) } else { (prev.year(), prev.month() + 1) };
            NaiveDate::from_ymd_opt(y, m, day)
        };
        if let Some(d) = same.or_else(next) {
            absolute.push((i, d));
            used[i] = true;
        }
    }
    // "from October 5th to 12th": a bare day after "to" continues the month of the date before.
    for i in 1..toks.len() {
        if used[i] || !lexicon().range_words.contains(&lower[i - 1]) {
            continue;
        }
        let Some(day) = day_number(toks[i].text)
            .filter(|_| toks[i].text.chars().any(|c| c.is_ascii_alphabetic()) || toks[i].punct.is_some())
        else {
            continue;
        };
        if let Some((_, prev)) = absolute.iter().rev().find(|(p, _)| *p < i && i - *p <= 4) {
            if let Some(d) = NaiveDate::from_ymd_opt(prev.year(), prev.month(), day).filter(|d| d > prev) {
                absolute.push((i, d));
                used[i] = true;
                // "to 20th, 2024": the range's year (read with its first date) is no number.
                if toks.get(i + 1).and_then(|t| year_number(t.text)) == Some(d.year()) {
                    used[i + 1] = true;
                }
            }
        }
    }
}

/// Today (where the request says "Today is <date>", else `fallback_today`) and every date the
/// request says — the written ones that are not today and the relative ones — into `v`, in order
/// of appearance with the words around each.
pub(crate) fn dates(
    scan: &mut Scan<'_>,
    absolute: Vec<(usize, NaiveDate)>,
    fallback_today: NaiveDate,
    v: &mut RequestValues,
) {
    let Scan { toks, lower, used } = scan;
    // "Today is <date>" sets today; it is not itself a date to use.
    let mut today = fallback_today;
    let mut dates: Vec<(usize, NaiveDate)> = Vec::new();
    for (pos, d) in absolute {
        // A weekday may stand between: "Today is Friday, March 1st".
        let mut at = pos;
        if at >= 1 && weekday_of(&lower[at - 1]).is_some() {
            at -= 1;
            used[at] = true;
        }
        let said_today =
            at >= 2 && lower[at - 1] == "is" && lower[at - 2] == "today" || at >= 1 && lower[at - 1] == "today";
        if said_today {
            today = d;
            v.today = Some(d);
        } else {
            dates.push((pos, d));
        }
    }
    // A request whose every written date lies well before today (and that says no "Today is")
    // was written on another day: a rental, a booking, a flight is not asked for in the past.
    // Its "tomorrow" is the writer's, so its first relative day names the written date nearest to
    // it ("on October 11, 2024, tomorrow morning"; "starting tomorrow. I'll pick up the car … on
    // October 10") — the same date, not another.
    let mut written_elsewhere = v.today.is_none()
        && !dates.is_empty()
        && dates.iter().all(|(_, d)| *d + Duration::days(WRITTEN_ELSEWHERE_DAYS) < fallback_today);
    // Relative dates.
    let lex = lexicon();
    let counted_days = |w: &str| lex.day_words.contains(w) || lex.week_words.contains(w);
    // Each span's position, the date it counts from and whether it lies before it.
    let mut spans: Vec<(usize, (usize, NaiveDate), bool)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let w = lower[i].as_str();
        let prev = |k: usize| i.checked_sub(k).map(|j| lower[j].as_str()).unwrap_or("");
        let rel = if w == "tomorrow" || mistyped(w, "tomorrow") {
            // "the day after tomorrow", "two days after tomorrow", "3 days after tomorrow"
            if prev(1) == "after" && lex.day_words.contains(prev(2)) {
                let n = if prev(2) == "day" {
                    1
                } else {
                    small_number(prev(3)).or_else(|| prev(3).parse().ok()).unwrap_or(1.0) as i64
                };
                Some(1 + n)
            } else {
                Some(1)
            }
        } else if w == "today" && lower.get(i + 1).is_none_or(|n| n != "is") && !dates.iter().any(|(p, _)| *p == i + 1)
        {
            Some(0).filter(|_| v.today.is_none() || prev(1) == "for" || prev(1) == "from")
        } else if counted_days(w) && prev(2) == "in" {
            let n = small_number(prev(1)).or_else(|| prev(1).parse().ok()).unwrap_or(1.0) as i64;
            Some(in_days(w, n))
        } else if w == "week" && prev(1) == "next" {
            Some(7)
        } else if let Some((d, base)) = span_date(lower, i, &dates) {
            spans.push((i, base, d < base.1));
            dates.push((i, d));
            None
        } else if let Some(day) = weekday_of(w) {
            (!used[i]).then(|| (next_weekday(today, day) - today).num_days())
        } else {
            None
        };
        if let Some(days) = rel {
            if written_elsewhere {
                written_elsewhere = false;
                if let Some((_, d)) = dates.iter().min_by_key(|(p, _)| p.abs_diff(i)) {
                    today = *d - Duration::days(days);
                }
            }
            if dates.iter().any(|(p, d)| *p != i && *d == today + Duration::days(days)) && v.today.is_none() {
                // Said twice, as written and as relative: one date.
                i += 1;
                continue;
            }
            dates.push((i, today + Duration::days(days)));
            if v.today.is_none() {
                v.unanchored.push(today + Duration::days(days));
            }
        }
        i += 1;
    }
    dates.sort_by_key(|(p, _)| *p);
    v.date_cues = dates.iter().map(|(p, _)| cues_at(toks, lower, *p, *p)).collect();
    v.date_at = dates.iter().map(|(p, _)| *p).collect();
    v.date_from = dates
        .iter()
        .map(|(p, _)| {
            let (_, base, before) = spans.iter().find(|(at, ..)| at == p)?;
            Some((dates.iter().position(|x| x == base)?, *before))
        })
        .collect();
    v.dates = dates.into_iter().map(|(_, d)| d).collect();
}

/// `n` of `unit` (days, or weeks of seven) in days.
fn in_days(unit: &str, n: i64) -> i64 {
    if lexicon().week_words.contains(unit) {
        7 * n
    } else {
        n
    }
}

/// A date said as a span from another: "two days later", "the day before", "a week after",
/// "three months later", "the same day next month". It counts from a date said right after
/// "before", "after", "prior (to)" ("two days before December 5"), else from the latest one said
/// before it; a span before counts from the first date of the range that one closes ("a fair from
/// May 10 to 12 … set up the day before": May 9). The date, and the one it counts from (where
/// it is said, and the date); `None` for no such span, or nothing to count from.
fn span_date(lower: &[String], i: usize, dates: &[(usize, NaiveDate)]) -> Option<(NaiveDate, (usize, NaiveDate))> {
    let lex = lexicon();
    let w = lower[i].as_str();
    let prev = |k: usize| i.checked_sub(k).map(|j| lower[j].as_str()).unwrap_or("");
    // "The day before … the day after" both count from the dates said; "two days later … three
    // days later" go on from each other.
    let said = |p: usize| {
        !lex.span_prepositions.contains(w)
            || !(lex.span_prepositions.contains(&lower[p]) || lex.month_words.contains(&lower[p]))
    };
    let latest = |at: usize| dates.iter().filter(|(p, _)| *p < at && said(*p)).max_by_key(|(p, _)| *p).copied();
    // "the same day (of) (the) next month": the day, a calendar month on.
    if lex.month_words.contains(w) && prev(1) == "next" {
        let same = (2..=5).any(|k| prev(k) == "same" && lex.same_day_words.contains(prev(k - 1)));
        return same
            .then(|| latest(i))
            .flatten()
            .and_then(|(p, d)| Some((d.checked_add_months(Months::new(1))?, (p, d))));
    }
    let later = lex.later_words.contains(w);
    let unit = prev(1);
    let months = lex.month_words.contains(unit);
    if !later && !lex.earlier_words.contains(w)
        || !(months || lex.day_words.contains(unit) || lex.week_words.contains(unit))
        || lower.get(i + 1).is_some_and(|n| n == "tomorrow" || n == "yesterday" || mistyped(n, "tomorrow"))
    {
        return None;
    }
    // How many: a number, "a"/"the" (one); "later" alone counts one, as it always did.
    let n = match small_number(prev(2)).or_else(|| prev(2).parse().ok()) {
        Some(n) if n >= 1.0 => n as i64,
        _ if prev(2) == "the" || lex.one_words.contains(prev(2)) || w == "later" => 1,
        _ => return None,
    };
    // The date it counts from: one said right after it, else the latest before it (a span
    // before: the first date of that one's range).
    let after = dates
        .iter()
        .filter(|(p, _)| lex.span_prepositions.contains(w) && *p > i && *p <= i + 4)
        .min_by_key(|(p, _)| *p)
        .copied();
    let base = match (after, latest(i)) {
        (Some(b), _) => b,
        (None, Some((p1, d1))) if !later => match latest(p1) {
            Some((p0, d0)) if p1 - p0 <= 4 && d0 < d1 && (p0 + 1..p1).any(|k| lex.range_words.contains(&lower[k])) => {
                (p0, d0)
            }
            _ => (p1, d1),
        },
        (None, Some(b)) => b,
        (None, None) => return None,
    };
    let from = base.1;
    if months {
        let m = Months::new(u32::try_from(n).ok()?);
        let d = if later { from.checked_add_months(m) } else { from.checked_sub_months(m) };
        return d.map(|d| (d, base));
    }
    let days = in_days(unit, n);
    Some((if later { from + Duration::days(days) } else { from - Duration::days(days) }, base))
}

/// The times a request says ("8 AM", "14:30", "noon", "9 o'clock in the morning"), into `v`.
pub(crate) fn times(scan: &Scan<'_>, v: &mut RequestValues) {
    let Scan { toks, lower, used } = scan;
    for i in 0..toks.len() {
        let t = match parse_time(toks[i].text, toks.get(i + 1).map(|t| t.text)) {
            Some((t, split)) => Some((t, if split { i + 1 } else { i })),
            None if lower[i] == "noon" => Some(("12:00".into(), i)),
            None if lower[i] == "midnight" => Some(("00:00".into(), i)),
            None if !used[i] => spoken_time(lower, i),
            None => None,
        };
        if let Some((t, last)) = t {
            v.times.push(t);
            v.time_cues.push(cues_at(toks, lower, i, last));
            v.time_at.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    #[test]
    fn a_request_written_on_another_day_says_tomorrow_of_its_own_dates() {
        use crate::read::values::RequestValues;
        let text = "Book the studio for a recording session starting tomorrow. We begin at 9 AM on \
                    March 4, 2025 and finish two days later.";
        // Read long after March 2025: the writer's tomorrow is March 4, said twice.
        let v = RequestValues::extract(text, day(2026, 12, 2));
        assert_eq!(v.dates, vec![day(2025, 3, 4), day(2025, 3, 6)]);
        // Read before it: tomorrow is tomorrow.
        let v = RequestValues::extract(text, day(2025, 2, 20));
        assert_eq!(v.dates, vec![day(2025, 2, 21), day(2025, 3, 4), day(2025, 3, 6)]);
        // The written date nearest the relative word is the one it names.
        let v = RequestValues::extract(
            "The shop opened on May 2, 2024. My parcel leaves the depot on June 11, 2024, tomorrow morning, \
             and I will be at home tonight.",
            day(2026, 12, 2),
        );
        assert_eq!(v.dates, vec![day(2024, 5, 2), day(2024, 6, 11)]);
    }

    #[test]
    fn a_date_said_as_a_span_from_another_counts_from_it() {
        use crate::read::values::RequestValues;
        let today = day(2026, 1, 10);
        let dates = |text: &str| RequestValues::extract(text, today).dates;
        // A span before a range counts from its first day; one after, from its last.
        assert_eq!(
            dates("The trade fair runs from May 10 to 12, 2026. We set up the stand the day before and ship the crates back the day after."),
            vec![day(2026, 5, 10), day(2026, 5, 12), day(2026, 5, 9), day(2026, 5, 13)]
        );
        // A date said after "before" is the one counted from.
        assert_eq!(
            dates("Remind me two days before June 3, 2026 to renew the lease."),
            vec![day(2026, 6, 1), day(2026, 6, 3)]
        );
        // Calendar months: the same day of the next month, and months later (at a month's end).
        assert_eq!(
            dates("My dentist check-up is on March 14, 2026 and the follow-up on the same day of the next month."),
            vec![day(2026, 3, 14), day(2026, 4, 14)]
        );
        assert_eq!(
            dates("The lease starts on January 31, 2026 and is reviewed a month later."),
            vec![day(2026, 1, 31), day(2026, 2, 28)]
        );
        // "Later" counts from the date before it, never from one said after it; hours are no date.
        assert_eq!(
            dates("We met on April 2, 2026. Two days later, on April 9, 2026, we met again, 3 hours after lunch."),
            vec![day(2026, 4, 2), day(2026, 4, 4), day(2026, 4, 9)]
        );
    }

    #[test]
    fn dates_in_figures_are_read_month_first_unless_they_cannot_be() {
        assert_eq!(numeric_date("12/05/2026", 2026, false), Some(day(2026, 12, 5)));
        assert_eq!(numeric_date("25/12/2026", 2026, false), Some(day(2026, 12, 25)));
        assert_eq!(numeric_date("05.12.2026", 2026, false), Some(day(2026, 12, 5)));
        assert_eq!(numeric_date("4/18/27", 2026, false), Some(day(2027, 4, 18)));
        // Without a year only after a word that dates it: a recipe's "3/4 cup" is no date.
        assert_eq!(numeric_date("3/14", 2026, true), Some(day(2026, 3, 14)));
        assert_eq!(numeric_date("3/4", 2026, false), None);
        assert_eq!(numeric_date("13/13/2026", 2026, false), None);
        assert_eq!(numeric_date("1.5", 2026, true), None, "a decimal is no date");
    }

    #[test]
    fn an_ordinal_weekday_of_a_month_is_that_day() {
        let lower = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(weekday_of_month(&lower("the first tuesday of april"), 1, 2026), Some((day(2026, 4, 7), 4)));
        assert_eq!(weekday_of_month(&lower("last friday in may 2027"), 0, 2026), Some((day(2027, 5, 28), 4)));
        assert_eq!(weekday_of_month(&lower("first tuesday meeting"), 0, 2026), None);
    }
}
