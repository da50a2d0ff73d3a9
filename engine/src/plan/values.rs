//! Typed values found in a request: dates (absolute and relative: "tomorrow", "the day after
//! tomorrow", "in 3 days", "next Friday"), times ("8 AM" → `08:00`), numbers with the word they
//! count ("2 adults"), quoted strings, capitalised names ("San Diego Marriott La Jolla"), emails
//! and URLs. The deterministic planner fills arguments from these, in the order they appear.

use super::reading::{key, tokens, word_list, Token, MONTHS};
use chrono::{Datelike, Duration, NaiveDate, Weekday};

/// A number and the word after it (`2 adults` → (2, "adults")).
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    pub value: f64,
    pub word: String,
}

/// Everything typed a request holds, each list in order of appearance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestValues {
    /// The day the request says is today ("Today is October 13th, 2024"), else the caller's today.
    pub today: Option<NaiveDate>,
    pub dates: Vec<NaiveDate>,
    /// `HH:MM`, 24-hour.
    pub times: Vec<String>,
    pub numbers: Vec<Counted>,
    pub quoted: Vec<String>,
    pub names: Vec<String>,
    pub emails: Vec<String>,
    pub urls: Vec<String>,
    /// Phone numbers as written ("555-123-4567", "+1234567890", "(1234567890)" without brackets).
    pub phones: Vec<String>,
    /// File names ("example.txt", "report.pdf").
    pub files: Vec<String>,
    /// Values named in the text: "latitude: 35.77", "Hotel ID: 6374805" → (normalized label, text).
    pub labelled: Vec<(String, String)>,
    /// Dates computed relative to the caller's today because the request does not say what day
    /// it is ("starting tomorrow" with no "Today is …"): guesses, which a judge does not require.
    pub unanchored: Vec<NaiveDate>,
    /// The words around each date, time, counted number and name (parallel to their lists): what
    /// the learned filler ([`super::learned`]) tells mentions of one kind apart by.
    pub date_cues: Vec<Vec<String>>,
    pub time_cues: Vec<Vec<String>>,
    pub number_cues: Vec<Vec<String>>,
    pub name_cues: Vec<Vec<String>>,
    /// Where each date, time and name stands (its first word's index among the request's words,
    /// parallel to their lists): which time goes with which date, whatever the clause order.
    pub date_at: Vec<usize>,
    pub time_at: Vec<usize>,
    pub name_at: Vec<usize>,
}

/// Words before a mention (up to 6, within its sentence) and the 2 after it, in lower case: the
/// context the learned filler reads ("return it at the same place at | 5 PM | seven days").
fn cues_at(toks: &[Token<'_>], lower: &[String], first: usize, last: usize) -> Vec<String> {
    let ends_sentence = |k: usize| toks[k].punct.is_some_and(|p| matches!(p, '.' | '?' | '!' | ';'));
    let mut out = Vec::new();
    let mut k = first;
    while k > 0 && first - k < 6 && !ends_sentence(k - 1) {
        k -= 1;
        out.push(lower[k].clone());
    }
    let mut k = last;
    while k + 1 < toks.len() && k - last < 2 && !ends_sentence(k) {
        k += 1;
        out.push(lower[k].clone());
    }
    out.retain(|w| w.chars().any(char::is_alphabetic));
    out
}

const WEEKDAYS: [(&str, Weekday); 7] = [
    ("monday", Weekday::Mon),
    ("tuesday", Weekday::Tue),
    ("wednesday", Weekday::Wed),
    ("thursday", Weekday::Thu),
    ("friday", Weekday::Fri),
    ("saturday", Weekday::Sat),
    ("sunday", Weekday::Sun),
];
const SMALL: [&str; 13] =
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];

fn month_of(w: &str) -> Option<u32> {
    let w = w.to_ascii_lowercase();
    let w = w.trim_end_matches('.');
    if w.len() < 3 {
        return None;
    }
    MONTHS
        .iter()
        .position(|m| m.starts_with(w) && (w.len() == m.len() || w.len() == 3 || (w == "sept")))
        .map(|i| i as u32 + 1)
}

fn small_number(w: &str) -> Option<f64> {
    let w = w.to_ascii_lowercase();
    if let Some(i) = SMALL.iter().position(|s| *s == w) {
        return Some(i as f64);
    }
    match w.as_str() {
        "a" | "an" | "single" => Some(1.0),
        "couple" | "pair" | "double" => Some(2.0),
        _ => None,
    }
}

/// The words right before each place the request says `phrase` (lower-case, as whole words), unless
/// a sentence ends between: the roles a mention is said in ("from", "to", "near", "pick-up:").
/// `at`: the mention's first word, for a phrase the words cannot find (a date written out).
/// `toks` and `lower`: the request's [`tokens`] and their lower-case texts, read once a request.
pub(crate) fn words_before(toks: &[Token<'_>], lower: &[String], phrase: &str, at: usize) -> Vec<String> {
    let want: Vec<String> = tokens(phrase).iter().map(|t| t.text.to_lowercase()).collect();
    let mut starts: Vec<usize> = if want.is_empty() {
        Vec::new()
    } else {
        // Whole mentions only: not "Miami" of "Miami International Airport".
        let capital = |t: Option<&Token<'_>>| t.is_some_and(|t| t.text.chars().next().is_some_and(char::is_uppercase));
        (0..lower.len())
            .filter(|i| lower[*i..].starts_with(&want))
            .filter(|i| {
                let end = i + want.len() - 1;
                let joined_before = *i > 0 && toks[i - 1].punct.is_none() && capital(toks.get(i - 1));
                let joined_after = toks[end].punct.is_none() && capital(toks.get(end + 1));
                !joined_before && !joined_after
            })
            .collect()
    };
    if starts.is_empty() {
        starts.push(at);
    }
    let mut out: Vec<String> = starts
        .into_iter()
        .filter_map(|i| {
            let prev = toks.get(i.checked_sub(1)?)?;
            (!prev.punct.is_some_and(|p| matches!(p, '.' | '?' | '!' | ';'))).then(|| prev.text.to_lowercase())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn day_number(w: &str) -> Option<u32> {
    let w = w.to_ascii_lowercase();
    let digits = w.trim_end_matches("st").trim_end_matches("nd").trim_end_matches("rd").trim_end_matches("th");
    let d: u32 = digits.parse().ok()?;
    (1..=31).contains(&d).then_some(d)
}

fn year_number(w: &str) -> Option<i32> {
    let y: i32 = w.parse().ok()?;
    (1900..=2200).contains(&y).then_some(y)
}

fn iso_date(w: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(w, "%Y-%m-%d").ok().or_else(|| NaiveDate::parse_from_str(w, "%Y/%m/%d").ok())
}

fn parse_time(w: &str, next: Option<&str>) -> Option<(String, bool)> {
    let lw = w.to_ascii_lowercase();
    let (body, suffix_in_word) = if let Some(b) = lw.strip_suffix("am").or_else(|| lw.strip_suffix("a.m")) {
        (b.to_string(), Some(false))
    } else if let Some(b) = lw.strip_suffix("pm").or_else(|| lw.strip_suffix("p.m")) {
        (b.to_string(), Some(true))
    } else {
        (lw.clone(), None)
    };
    let next_suffix = next.map(|n| n.to_ascii_lowercase()).and_then(|n| match n.trim_end_matches('.') {
        "am" | "a.m" => Some(false),
        "pm" | "p.m" => Some(true),
        _ => None,
    });
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
fn spoken_time(lower: &[String], i: usize) -> Option<(String, usize)> {
    let h = lower[i]
        .parse::<u32>()
        .ok()
        .or_else(|| small_number(&lower[i]).map(|n| n as u32))
        .filter(|h| (1..=12).contains(h))?;
    let at = |k: usize| lower.get(k).map(String::as_str).unwrap_or("");
    let oclock = matches!(at(i + 1), "o'clock" | "o’clock" | "oclock");
    let from = if oclock { i + 2 } else { i + 1 };
    let part = (at(from) == "in" && at(from + 1) == "the").then(|| at(from + 2));
    let pm = match part {
        Some("morning") => Some(false),
        Some("afternoon" | "evening" | "night") => Some(true),
        _ => match at(from).trim_end_matches('.') {
            "am" | "a.m" if oclock => Some(false),
            "pm" | "p.m" if oclock => Some(true),
            _ => None,
        },
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
fn date_like(w: &str) -> bool {
    let g: Vec<&str> = w.split(['-', '.', '/']).collect();
    g.len() == 3
        && g[1].len() <= 2
        && (g[0].len() == 4 || g[2].len() == 4 || g[2].len() == 2)
        && g.iter().all(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_digit()))
}

/// Whether a name ends like a street's ("Pine St", "Bay St.", "Fifth Avenue", "Abbey Road").
fn is_street(w: &str) -> bool {
    const STREETS: [&str; 16] = [
        "st",
        "street",
        "ave",
        "avenue",
        "rd",
        "road",
        "blvd",
        "boulevard",
        "ln",
        "lane",
        "dr",
        "drive",
        "way",
        "pl",
        "place",
        "w",
    ];
    STREETS.contains(&w.trim_end_matches('.').to_lowercase().as_str())
}

fn is_capitalised(w: &str) -> bool {
    let mut cs = w.chars();
    matches!(cs.next(), Some(c) if c.is_uppercase()) && w.chars().any(|c| c.is_alphabetic())
}

/// Words that start a sentence or name a date/time, never part of a place or product name.
const PRONOUNS: [&str; 16] = [
    "i", "you", "he", "she", "it", "we", "they", "that", "there", "here", "what", "who", "let", "its", "your", "their",
];

pub(crate) fn is_stop_name(w: &str) -> bool {
    const STOP: &[&str] = &[
        "i",
        "i'm",
        "i'd",
        "i'll",
        "please",
        "could",
        "can",
        "would",
        "will",
        "what",
        "which",
        "where",
        "when",
        "how",
        "who",
        "find",
        "get",
        "show",
        "tell",
        "give",
        "help",
        "check",
        "search",
        "book",
        "today",
        "tomorrow",
        "yesterday",
        "my",
        "we",
        "our",
        "the",
        "a",
        "an",
        "is",
        "are",
        "and",
        "also",
        "then",
        "after",
        "if",
        "also,",
        "am",
        "pm",
        "it",
        "this",
        "that",
        "there",
        "do",
        "does",
        "for",
        "from",
        "to",
        "in",
        "on",
        "at",
        "with",
        "by",
        "of",
        "let",
        "let's",
        "want",
        "need",
        "next",
        "last",
    ];
    let l = w.to_lowercase().replace('’', "'");
    // A pronoun's contraction ("I've", "It's", "We're") is the pronoun.
    let stem = ["'s", "'ve", "'re", "'ll", "'d", "'m"].iter().find_map(|c| l.strip_suffix(c)).unwrap_or(&l);
    STOP.contains(&l.as_str())
        || (PRONOUNS.contains(&stem) || STOP.contains(&stem)) && stem != l
        || month_of(&l).is_some()
        || WEEKDAYS.iter().any(|(d, _)| *d == l)
        || l.chars().all(|c| c.is_ascii_digit())
}

fn next_weekday(from: NaiveDate, day: Weekday) -> NaiveDate {
    let mut d = from + Duration::days(1);
    while d.weekday() != day {
        d += Duration::days(1);
    }
    d
}

impl RequestValues {
    /// Extract the values of `text`; `fallback_today` is used for relative dates when the text does
    /// not say what day it is.
    pub fn extract(text: &str, fallback_today: NaiveDate) -> Self {
        let toks = tokens(text);
        let lower: Vec<String> = toks.iter().map(|t| t.text.to_ascii_lowercase()).collect();
        let mut v = RequestValues::default();
        // Absolute dates first (they fix "today"), remembering which tokens they used.
        let mut used = vec![false; toks.len()];
        let mut absolute: Vec<(usize, NaiveDate)> = Vec::new();
        for i in 0..toks.len() {
            if let Some(d) = iso_date(toks[i].text) {
                absolute.push((i, d));
                used[i] = true;
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
                        .unwrap_or_else(|| absolute.last().map(|(_, d)| d.year()).unwrap_or(fallback_today.year()));
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
                let y = year
                    .or(ahead)
                    .unwrap_or_else(|| absolute.last().map(|(_, d)| d.year()).unwrap_or(fallback_today.year()));
                if let Some(d) = NaiveDate::from_ymd_opt(y, m, day) {
                    absolute.push((first, d));
                    for u in used.iter_mut().take(last + 1).skip(first) {
                        *u = true;
                    }
                }
            }
        }
        // Holidays: "Christmas (Eve)", "New Year's Eve", "New Year's Day", in the year said near
        // them, else the year of the date before, else this year.
        for i in 0..toks.len() {
            let next = lower.get(i + 1).map(String::as_str).unwrap_or("");
            let (month, day, span) = match lower[i].as_str() {
                "christmas" if next == "eve" => (12, 24, 2),
                "christmas" => (12, 25, if next == "day" { 2 } else { 1 }),
                "new" if matches!(next, "year's" | "year’s" | "years") => {
                    match lower.get(i + 2).map(String::as_str) {
                        Some("eve") => (12, 31, 3),
                        Some("day") => (1, 1, 3),
                        _ => continue,
                    }
                }
                _ => continue,
            };
            if used[i] {
                continue;
            }
            let said = (i + span..(i + span + 3).min(toks.len())).find_map(|j| year_number(toks[j].text));
            let before = absolute.iter().filter(|(p, _)| *p < i).max_by_key(|(p, _)| *p).map(|(_, d)| *d);
            let year = said.unwrap_or_else(|| match before {
                Some(b) if month == 1 && b.month() == 12 => b.year() + 1,
                Some(b) => b.year(),
                None => fallback_today.year(),
            });
            if let Some(d) = NaiveDate::from_ymd_opt(year, month, day) {
                absolute.push((i, d));
                for u in used.iter_mut().skip(i).take(span) {
                    *u = true;
                }
            }
        }
        // "on the 7th": a bare ordinal day continues the month of the latest date before it (the
        // next month when the day has passed).
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
            let same = NaiveDate::from_ymd_opt(prev.year(), prev.month(), day).filter(|d| *d > prev);
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
            if used[i] || !matches!(lower[i - 1].as_str(), "to" | "until" | "through" | "till" | "and") {
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
                }
            }
        }
        absolute.sort_by_key(|(p, _)| *p);
        // "Today is <date>" sets today; it is not itself a date to use.
        let mut today = fallback_today;
        let mut dates: Vec<(usize, NaiveDate)> = Vec::new();
        for (pos, d) in absolute {
            // A weekday may stand between: "Today is Friday, March 1st".
            let mut at = pos;
            if at >= 1 && WEEKDAYS.iter().any(|(w, _)| *w == lower[at - 1]) {
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
        // Relative dates.
        let mut i = 0;
        while i < toks.len() {
            let w = lower[i].as_str();
            let prev = |k: usize| i.checked_sub(k).map(|j| lower[j].as_str()).unwrap_or("");
            let rel = if w == "tomorrow" {
                // "the day after tomorrow", "two days after tomorrow", "3 days after tomorrow"
                if prev(1) == "after" && (prev(2) == "day" || prev(2) == "days") {
                    let n = if prev(2) == "day" {
                        1
                    } else {
                        small_number(prev(3)).or_else(|| prev(3).parse().ok()).unwrap_or(1.0) as i64
                    };
                    Some(1 + n)
                } else {
                    Some(1)
                }
            } else if w == "today"
                && lower.get(i + 1).is_none_or(|n| n != "is")
                && !dates.iter().any(|(p, _)| *p == i + 1)
            {
                Some(0).filter(|_| v.today.is_none() || prev(1) == "for" || prev(1) == "from")
            } else if (w == "days" || w == "day" || w == "weeks" || w == "week") && prev(2) == "in" {
                let n = small_number(prev(1)).or_else(|| prev(1).parse().ok()).unwrap_or(1.0) as i64;
                Some(if w.starts_with("week") { 7 * n } else { n })
            } else if w == "week" && prev(1) == "next" {
                Some(7)
            } else if w == "later" && matches!(prev(1), "day" | "days" | "week" | "weeks") {
                let n = small_number(prev(2)).or_else(|| prev(2).parse().ok()).unwrap_or(1.0) as i64;
                let n = if prev(1).starts_with("week") { 7 * n } else { n };
                // Relative to the latest date mentioned before it.
                let before = dates.iter().filter(|(p, _)| *p < i).max_by_key(|(p, _)| *p).map(|(_, d)| *d);
                if let Some(b) = before {
                    dates.push((i, b + Duration::days(n)));
                }
                None
            } else if let Some((_, day)) = WEEKDAYS.iter().find(|(d, _)| *d == w) {
                (!used[i]).then(|| (next_weekday(today, *day) - today).num_days())
            } else {
                None
            };
            if let Some(days) = rel {
                dates.push((i, today + Duration::days(days)));
                if v.today.is_none() {
                    v.unanchored.push(today + Duration::days(days));
                }
            }
            i += 1;
        }
        dates.sort_by_key(|(p, _)| *p);
        v.date_cues = dates.iter().map(|(p, _)| cues_at(&toks, &lower, *p, *p)).collect();
        v.date_at = dates.iter().map(|(p, _)| *p).collect();
        v.dates = dates.into_iter().map(|(_, d)| d).collect();
        // Times.
        for i in 0..toks.len() {
            let t = match parse_time(toks[i].text, toks.get(i + 1).map(|t| t.text)) {
                Some((t, split)) => Some((t, if split { i + 1 } else { i })),
                None if lower[i] == "noon" => Some(("12:00".into(), i)),
                None if lower[i] == "midnight" => Some(("00:00".into(), i)),
                None if !used[i] => spoken_time(&lower, i),
                None => None,
            };
            if let Some((t, last)) = t {
                v.times.push(t);
                v.time_cues.push(cues_at(&toks, &lower, i, last));
                v.time_at.push(i);
            }
        }
        // Counted numbers: "2 adults", "two rooms"; not parts of dates or times.
        for i in 0..toks.len() {
            if used[i] || toks[i].text.contains(':') {
                continue;
            }
            let n = toks[i]
                .text
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .or_else(|| small_number(toks[i].text).filter(|_| lower[i] != "a" && lower[i] != "an"));
            let Some(n) = n else { continue };
            let next = lower.get(i + 1).map(String::as_str).unwrap_or("");
            if matches!(next, "am" | "pm" | "a.m." | "p.m.")
                || year_number(toks[i].text).is_some() && next.is_empty()
                || spoken_time(&lower, i).is_some()
            {
                continue;
            }
            let word = if toks[i].punct.is_some() { String::new() } else { next.to_string() };
            v.numbers.push(Counted { value: n, word });
            v.number_cues.push(cues_at(&toks, &lower, i, i));
        }
        // Quoted strings.
        for q in ['"', '“'] {
            let close = if q == '“' { '”' } else { '"' };
            let mut rest = text;
            while let Some(s) = rest.find(q) {
                let after = &rest[s + q.len_utf8()..];
                let Some(e) = after.find(close) else { break };
                let inner = after[..e].trim();
                if !inner.is_empty() && inner.len() < 200 {
                    v.quoted.push(inner.to_string());
                }
                rest = &after[e + close.len_utf8()..];
            }
        }
        // Labelled values: "latitude: 35.7721", "Hotel ID: 6374805", "(longitude: 140.386, ...)".
        for i in 1..toks.len() {
            if toks[i - 1].punct != Some(':') || toks[i].text.is_empty() {
                continue;
            }
            let value = toks[i].text.trim_matches(|c: char| c == '(' || c == ')');
            if value.is_empty() || !value.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '-') {
                continue;
            }
            let one: String = key(toks[i - 1].text);
            let two = if i >= 2 && toks[i - 2].punct.is_none() {
                format!("{}{one}", key(toks[i - 2].text))
            } else {
                one.clone()
            };
            v.labelled.push((two, value.to_string()));
            if one != v.labelled.last().map(|l| l.0.clone()).unwrap_or_default() {
                v.labelled.push((one, value.to_string()));
            }
            used[i] = true;
            // The label is not a name ("Hotel ID: 7181225").
            used[i - 1] = true;
            if i >= 2
                && toks[i - 2].punct.is_none()
                && is_capitalised(toks[i - 2].text)
                && is_capitalised(toks[i - 1].text)
            {
                used[i - 2] = true;
            }
        }
        // Labelled with "=" ("latitude=40.7128,") and identifiers after their label ("user ID 2").
        for i in 0..toks.len() {
            let t = toks[i].text.trim_matches(|c: char| c == '(' || c == ')');
            if let Some((k, val)) = t.split_once('=') {
                let key: String = key(k);
                if key.len() >= 2 && !val.is_empty() && !t.contains("://") {
                    v.labelled.push((key, val.to_string()));
                    used[i] = true;
                }
                continue;
            }
            let label = toks[i].text.to_ascii_lowercase();
            if i + 1 < toks.len() && toks[i].punct.is_none() && matches!(label.as_str(), "id" | "number" | "no" | "#") {
                let val = toks[i + 1].text;
                if val.chars().next().is_some_and(|c| c.is_ascii_digit())
                    && val.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                {
                    let before: String =
                        if i >= 1 && toks[i - 1].punct.is_none() { key(toks[i - 1].text) } else { String::new() };
                    let short = if label == "number" || label == "no" || label == "#" { "number" } else { "id" };
                    if !before.is_empty() {
                        v.labelled.push((format!("{before}{short}"), val.to_string()));
                    }
                    v.labelled.push((short.to_string(), val.to_string()));
                }
            }
        }
        // Emails, URLs, phone numbers and file names.
        for t in &toks {
            let w = t.text;
            let bare = w.trim_matches(|c: char| c == '(' || c == ')' || c == '\'' || c == '"');
            let digits = bare.chars().filter(|c| c.is_ascii_digit()).count();
            if w.starts_with("http://") || w.starts_with("https://") {
                v.urls.push(w.to_string());
            } else if let Some((a, d)) = w.split_once('@') {
                if !a.is_empty() && d.contains('.') && !d.starts_with('.') {
                    v.emails.push(w.to_string());
                }
            } else if (7..=15).contains(&digits)
                && !date_like(bare)
                && bare.chars().all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | '(' | ')'))
                && !bare.contains("..")
                && bare.chars().filter(|c| *c == '.').count() != 1
            {
                v.phones.push(bare.to_string());
            } else if let Some((base, ext)) = bare.rsplit_once('.') {
                let ext_ok = (2..=4).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphabetic())
                    && ext.chars().any(|c| c.is_ascii_lowercase());
                let base_ok = !base.is_empty()
                    && base.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
                    && base.chars().any(|c| c.is_alphabetic());
                if ext_ok && base_ok && !matches!(ext, "com" | "org" | "net" | "io" | "edu" | "gov") {
                    v.files.push(bare.to_string());
                }
            }
        }
        // Capitalised names: runs of capitalised words (joined by short lower-case links such as
        // "de", "la", "of") that do not start a sentence alone.
        let mut i = 0;
        while i < toks.len() {
            let starts_sentence = i == 0 || toks[i - 1].punct.is_some_and(|p| matches!(p, '.' | '?' | '!'));
            // "The" written capitalised inside a sentence is part of the name ("at The Peninsula
            // Paris"); a lower-case "the" is not ("the Sydney Opera House").
            let titled = toks[i].text == "The"
                && !starts_sentence
                && toks[i].punct.is_none()
                && toks.get(i + 1).is_some_and(|t| is_capitalised(t.text) && !is_stop_name(t.text));
            if used[i] || !is_capitalised(toks[i].text) || is_stop_name(toks[i].text) && !titled {
                i += 1;
                continue;
            }
            // A sentence's first word is not the start of the name after it where the request
            // says it in lower case elsewhere ("Pick-up … pick it up"), it reads as an adverb
            // ("Currently"), or the name after it stands alone elsewhere ("Leaving Toronto …
            // back to Toronto").
            let next_name = toks.get(i + 1).filter(|t| !t.opens && is_capitalised(t.text) && !is_stop_name(t.text));
            let common = |t: &str, next: &str| {
                let l = t.to_lowercase();
                let said_lower =
                    |o: &Token<'_>| o.text.chars().next().is_some_and(char::is_lowercase) && o.text.to_lowercase() == l;
                let alone_elsewhere = (0..toks.len()).any(|k| {
                    k != i + 1
                        && toks[k].text == next
                        && (k == 0 || !is_capitalised(toks[k - 1].text) || is_stop_name(toks[k - 1].text))
                        && toks.get(k + 1).is_none_or(|t| !is_capitalised(t.text) || toks[k].punct.is_some())
                });
                // A compound of a lower-case word ("Pick-up", "Drop-off", "Check-in").
                let compound = t.split('-').skip(1).any(|p| p.chars().next().is_some_and(char::is_lowercase));
                l.len() > 4 && l.ends_with("ly") || compound || toks.iter().any(said_lower) || alone_elsewhere
            };
            if starts_sentence && toks[i].punct.is_none() && next_name.is_some_and(|n| common(toks[i].text, n.text)) {
                i += 1;
                continue;
            }
            let mut j = i;
            let mut words = vec![toks[i].text];
            // A house number is part of the street it numbers ("2405 Pine St").
            let numbered = i > 0
                && !used[i - 1]
                && toks[i - 1].punct.is_none()
                && !toks[i].opens
                && (1..=5).contains(&toks[i - 1].text.len())
                && toks[i - 1].text.chars().all(|c| c.is_ascii_digit());
            // An initial ("John F. Kennedy") does not end a name.
            let initial = |t: &Token<'_>| {
                t.text.len() == 1 && t.text.chars().all(|c| c.is_ascii_uppercase()) && t.punct == Some('.')
            };
            while (toks[j].punct.is_none() || initial(&toks[j])) && j + 1 < toks.len() {
                let n = toks[j + 1].text;
                if toks[j + 1].opens {
                    break;
                }
                if !used[j + 1] && is_capitalised(n) && !is_stop_name(n)
                    || (n.chars().all(|c| c.is_ascii_digit()) && n.len() <= 3 && !used[j + 1])
                {
                    words.push(n);
                    j += 1;
                } else if matches!(n, "de" | "la" | "del" | "of" | "du" | "van" | "von" | "da" | "le" | "y")
                    && toks[j + 1].punct.is_none()
                    && toks.get(j + 2).is_some_and(|t| is_capitalised(t.text) && !is_stop_name(t.text))
                {
                    words.push(n);
                    words.push(toks[j + 2].text);
                    j += 2;
                } else {
                    break;
                }
            }
            let name = words
                .iter()
                .enumerate()
                .map(
                    |(k, w)| if initial(&toks[i + k]) && k + 1 < words.len() { format!("{w}.") } else { w.to_string() },
                )
                .collect::<Vec<_>>()
                .join(" ");
            let lone_sentence_start = starts_sentence && words.len() == 1;
            let (name, first) = if numbered && words.len() >= 2 && is_street(words.last().copied().unwrap_or_default())
            {
                (format!("{} {name}", toks[i - 1].text), i - 1)
            } else {
                (name, i)
            };
            if !lone_sentence_start && !v.names.contains(&name) {
                v.names.push(name);
                v.name_cues.push(cues_at(&toks, &lower, first, j));
                v.name_at.push(first);
            }
            i = j + 1;
        }
        v
    }

    /// The number counted by `param` ("adults" ← "2 adults", "room_qty" ← "two rooms").
    pub fn count_for(&self, param: &str) -> Option<f64> {
        let p = param.to_ascii_lowercase();
        let stems: Vec<String> = word_list(&p).into_iter().filter(|s| s.len() >= 3).collect();
        self.numbers.iter().find_map(|c| {
            let w = c.word.trim_end_matches('s');
            (w.len() >= 3
                && stems.iter().any(|s| {
                    s.trim_end_matches('s') == w || s.starts_with(w) || w.starts_with(s.trim_end_matches('s'))
                }))
            .then_some(c.value)
        })
    }
}

/// Whether a parameter takes a date, judged by its name and description.
pub fn is_date_param(name: &str, description: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let d = description.to_ascii_lowercase();
    n.contains("date")
        || n.ends_with("day") && !n.contains("days")
        || d.contains("yyyy-mm-dd")
        || n == "checkin"
        || n == "checkout"
        || n.contains("check_in")
        || n.contains("check_out")
}

pub fn is_time_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with("time") || n.ends_with("_hour")
}

/// Whether a date parameter names the end of a span (drop-off, departure, return, check-out, max).
pub fn is_end_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["drop", "departure", "return", "checkout", "check_out", "max", "end", "to_date", "until"]
        .iter()
        .any(|k| n.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(y: i32, m: u32, day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, day).unwrap()
    }

    #[test]
    fn complexfuncbench_request() {
        let text = " Today is October 13th, 2024. I want to rent a car for a day at the San Diego Marriott La Jolla. Could you compare the price differences for picking up the car at 8 AM tomorrow and the day after tomorrow at the same place for a 24-hour rental?";
        let v = RequestValues::extract(text, d(2030, 1, 1));
        assert_eq!(v.today, Some(d(2024, 10, 13)));
        assert_eq!(v.dates, vec![d(2024, 10, 14), d(2024, 10, 15)]);
        assert_eq!(v.times, vec!["08:00"]);
        assert_eq!(v.names, vec!["San Diego Marriott La Jolla"]);
    }

    #[test]
    fn relative_days_and_counts() {
        let v = RequestValues::extract("Book 2 rooms for three adults at the Hotel Ritz in Paris, France from tomorrow until two days after tomorrow at 5:30pm", d(2024, 2, 27));
        assert_eq!(v.dates, vec![d(2024, 2, 28), d(2024, 3, 1)]);
        assert_eq!(v.times, vec!["17:30"]);
        assert_eq!(v.count_for("room_qty"), Some(2.0));
        assert_eq!(v.count_for("adults"), Some(3.0));
        assert_eq!(v.names, vec!["Hotel Ritz", "Paris", "France"]);
        let v = RequestValues::extract("Flights from New York to London on 2024-12-01, return in 3 days. Mail \"summary\" to me@example.org, see https://x.io/a", d(2024, 1, 1));
        assert_eq!(v.dates, vec![d(2024, 12, 1), d(2024, 1, 4)]);
        assert_eq!(v.names, vec!["New York", "London"]);
        assert_eq!(v.quoted, vec!["summary"]);
        assert_eq!(v.emails, vec!["me@example.org"]);
        assert_eq!(v.urls, vec!["https://x.io/a"]);
        let v =
            RequestValues::extract("Today is Friday, March 1st 2024. What is on next Monday at noon?", d(2020, 1, 1));
        assert_eq!(v.dates, vec![d(2024, 3, 4)]);
        assert_eq!(v.times, vec!["12:00"]);
    }

    #[test]
    fn ranges_later_and_labels() {
        let v = RequestValues::extract(
            "My two friends and I are planning a trip to Vancouver from November 10-13, 2024.",
            d(2030, 1, 1),
        );
        assert_eq!(v.dates, vec![d(2024, 11, 10), d(2024, 11, 13)]);
        assert_eq!(v.names, vec!["Vancouver"]);
        let v = RequestValues::extract(
            "I'm on vacation from October 5th to 12th, 2024, flying from Berlin to Barcelona.",
            d(2030, 1, 1),
        );
        assert_eq!(v.dates, vec![d(2024, 10, 5), d(2024, 10, 12)]);
        let v = RequestValues::extract("I'll pick up the car at 10 AM on October 10, 2024 at Narita International Airport in Tokyo (longitude: 140.386, latitude: 35.7721) and return it three days later at Kansai (longitude: 135.243, latitude: 34.4362). Stay at the Lestel Maru (Hotel ID: 6374805).", d(2030, 1, 1));
        assert_eq!(v.dates, vec![d(2024, 10, 10), d(2024, 10, 13)]);
        let lat: Vec<&str> = v.labelled.iter().filter(|(l, _)| l == "latitude").map(|(_, x)| x.as_str()).collect();
        assert_eq!(lat, ["35.7721", "34.4362"]);
        assert!(v.labelled.contains(&("hotelid".to_string(), "6374805".to_string())), "{:?}", v.labelled);
        let v = RequestValues::extract(
            "I will return it at John F. Kennedy International Airport tomorrow.",
            d(2024, 1, 1),
        );
        assert_eq!(v.names, vec!["John F. Kennedy International Airport"]);
    }

    #[test]
    fn spoken_times_holidays_and_bare_ordinal_days() {
        let v = RequestValues::extract("Rent a car at Charles de Gaulle Airport at 3 in the afternoon on October 1st, 2024, and return it at Orly Airport at 1 in the afternoon on the 7th.", d(2030, 1, 1));
        assert_eq!(v.times, vec!["15:00", "13:00"]);
        assert_eq!(v.dates, vec![d(2024, 10, 1), d(2024, 10, 7)]);
        assert!(v.numbers.is_empty(), "{:?}", v.numbers);
        let v = RequestValues::extract("My friend will pick it up at 9 o'clock in the morning on November 18th, 2024, and return it at 8 o'clock on the 2nd.", d(2030, 1, 1));
        assert_eq!(v.times, vec!["09:00", "08:00"]);
        assert_eq!(v.dates, vec![d(2024, 11, 18), d(2024, 12, 2)]);
        let v = RequestValues::extract(
            "I'll check in on Christmas Eve and check out on New Year's Day. We rent a car for Christmas in 2024.",
            d(2024, 6, 1),
        );
        assert_eq!(v.dates, vec![d(2024, 12, 24), d(2025, 1, 1), d(2024, 12, 25)]);
    }

    #[test]
    fn param_kinds() {
        assert!(is_date_param("pick_up_date", ""));
        assert!(is_date_param("departDate", ""));
        assert!(is_date_param("min", "Min date, format yyyy-mm-dd"));
        assert!(!is_date_param("query", "a city"));
        assert!(is_end_param("drop_off_date") && is_end_param("departure_date") && is_end_param("returnDate"));
        assert!(!is_end_param("arrival_date") && !is_end_param("pick_up_date"));
        assert!(is_time_param("pick_up_time"));
    }

    #[test]
    fn phones_files_and_labels_with_equals_or_after_an_id() {
        let v = RequestValues::extract(
            "Call my friend at 555-123-4567, or the office (1234567890) and +44 20 7946 0958 later.",
            d(2024, 1, 1),
        );
        assert_eq!(v.phones, ["555-123-4567", "1234567890"]);
        let v = RequestValues::extract(
            "I finished a document called 'example.txt' and the slides report_v2.pdf; see example.com or version 2.5.",
            d(2024, 1, 1),
        );
        assert_eq!(v.files, ["example.txt", "report_v2.pdf"]);
        let v = RequestValues::extract(
            "Get the forecast for a location (latitude=40.7128, longitude=74.006) and the likes of user ID 2.",
            d(2024, 1, 1),
        );
        assert!(v.labelled.contains(&("latitude".to_string(), "40.7128".to_string())), "{:?}", v.labelled);
        assert!(v.labelled.contains(&("longitude".to_string(), "74.006".to_string())), "{:?}", v.labelled);
        assert!(v.labelled.contains(&("userid".to_string(), "2".to_string())), "{:?}", v.labelled);
        // A date or a price is no phone number.
        let v = RequestValues::extract("On 2024-10-05 it costs 1234.50 dollars.", d(2024, 1, 1));
        assert!(v.phones.is_empty(), "{:?}", v.phones);
    }

    /// A pronoun's contraction, a bracket that opens, and a sentence's first word that is a verb
    /// or said in lower case elsewhere do not become (part of) a name.
    #[test]
    fn contractions_brackets_and_sentence_verbs_are_not_names() {
        let d = NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let v = RequestValues::extract("It's 8 o'clock and I've just had breakfast at the Hyatt Regency Dallas.", d);
        assert_eq!(v.names, ["Hyatt Regency Dallas"]);
        let v = RequestValues::extract(
            "A rental from Adelaide Airport (11 AM, December 1st) to Canberra Airport (5 PM).",
            d,
        );
        assert_eq!(v.names, ["Adelaide Airport", "Canberra Airport"]);
        let v = RequestValues::extract("Leaving Toronto on December 2 for Vancouver, and flying back to Toronto.", d);
        assert_eq!(v.names, ["Toronto", "Vancouver"]);
        let v =
            RequestValues::extract("Get the summary. Pick-up Seattle Airport at 11 AM; I return the car in Tacoma.", d);
        assert_eq!(v.names, ["Seattle Airport", "Tacoma"]);
        let v = RequestValues::extract("Beijing Capital Airport at 9 AM, then Beijing Railway Station.", d);
        assert_eq!(v.names, ["Beijing Capital Airport", "Beijing Railway Station"]);
    }

    /// A label is not a name, and a house number belongs to its street.
    #[test]
    fn labels_are_not_names_and_house_numbers_belong_to_their_street() {
        let d = NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let v = RequestValues::extract("We stay at the Resivation Hotel in Dubai (Hotel ID: 7181225) for New Year.", d);
        assert_eq!(v.names, ["Resivation Hotel", "Dubai", "New Year"]);
        let v =
            RequestValues::extract("A taxi from 2405 Pine St to the University of Utah, then back to 717 Bay St.", d);
        assert_eq!(v.names, ["2405 Pine St", "University of Utah", "717 Bay St"]);
        let v = RequestValues::extract("Book 2 Hilton rooms.", d);
        assert_eq!(v.names, ["Hilton"]);
    }
}
