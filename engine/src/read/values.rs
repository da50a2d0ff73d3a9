//! Typed values found in a request: dates (absolute and relative: "tomorrow", "the day after
//! tomorrow", "in 3 days", "next Friday"), times ("8 AM" → `08:00`), numbers with the word they
//! count ("2 adults"), quoted strings, capitalised names ("San Diego Marriott La Jolla"), emails
//! and URLs. The deterministic planner fills arguments from these, in the order they appear.

use super::dates::{self, date_like, spoken_time, year_number};
use super::lexicon::lexicon;
use super::names::{self, is_capitalised};
use super::reading::{tokens, word_list, Token};
use crate::memory::spans;
use chrono::NaiveDate;
use toolgraph_schema::fields::name_key;

pub(crate) use super::scan::{amount, cues_at, small_number, Scan};
pub(crate) use super::scan::{Counted, RequestValues};

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

impl RequestValues {
    /// Extract the values of `text`; `fallback_today` is used for relative dates when the text does
    /// not say what day it is.
    pub fn extract(text: &str, fallback_today: NaiveDate) -> Self {
        let toks = tokens(text);
        let lower: Vec<String> = toks.iter().map(|t| t.text.to_ascii_lowercase()).collect();
        let mut scan = Scan { used: vec![false; toks.len()], toks, lower };
        let mut v = RequestValues::default();
        // Absolute dates first (they fix "today"), remembering which tokens they used.
        let absolute = dates::absolute_dates(&mut scan, fallback_today);
        dates::dates(&mut scan, absolute, fallback_today, &mut v);
        dates::times(&scan, &mut v);
        v.ranges = ranges(&scan);
        counts(&scan, &mut v);
        spans::read(&scan, &mut v);
        quoted(text, &mut v);
        labelled(&mut scan, &mut v);
        contacts(&scan, &mut v);
        names::names(&scan, &mut v);
        v
    }

    /// The number counted by `param` ("adults" ← "2 adults", "room_qty" ← "two rooms"); for a
    /// parameter that counts people ("adults", "guest_qty"), else the first number counted in
    /// people ("for 4 guests", "my two friends and I": 3 people).
    pub fn count_for(&self, param: &str) -> Option<f64> {
        let p = param.to_ascii_lowercase();
        let stems: Vec<String> = word_list(&p).into_iter().filter(|s| s.len() >= 3).collect();
        let own = self.numbers.iter().find_map(|c| {
            let w = c.word.trim_end_matches('s');
            (w.len() >= 3
                && stems.iter().any(|s| {
                    s.trim_end_matches('s') == w || s.starts_with(w) || w.starts_with(s.trim_end_matches('s'))
                }))
            .then_some(c.value)
        });
        let people = &lexicon().person_words;
        own.or_else(|| {
            stems
                .iter()
                .any(|s| people.contains(s))
                .then(|| self.numbers.iter().find(|c| people.contains(&c.word)).map(|c| c.value))
                .flatten()
        })
    }
}

/// The ranges a request bounds a quantity by: a number, an amount or a count, then a word of the
/// lexicon's `range_joins` and another, after a word of its `range_leads` ("between 600 and 900
/// USD", "from $40 to $60"), the low one first. Not dates or times (their tokens are used).
fn ranges(scan: &Scan<'_>) -> Vec<(f64, f64)> {
    let lex = lexicon();
    let Scan { toks, lower, used } = scan;
    let number = |k: usize| -> Option<f64> {
        (!used[k]).then(|| amount(toks[k].text).map(|(n, _)| n).or_else(|| small_number(toks[k].text))).flatten()
    };
    let mut out = Vec::new();
    for i in 0..toks.len().saturating_sub(3) {
        if !lex.range_leads.contains(&lower[i]) || !lex.range_joins.contains(&lower[i + 2]) {
            continue;
        }
        if toks[i].punct.is_some() || toks[i + 1].punct.is_some() {
            continue;
        }
        if let (Some(a), Some(b)) = (number(i + 1), number(i + 3)) {
            if a < b {
                out.push((a, b));
            }
        }
    }
    out
}

/// A proper fraction in figures ("3/4 cup", "1/2 teaspoon"): its value. Not "24/7", not a date
/// (read before, and its token used).
fn fraction(w: &str) -> Option<f64> {
    let (a, b) = w.split_once('/')?;
    let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
    (a >= 1 && a < b && b <= 16).then(|| f64::from(a) / f64::from(b))
}

/// Whether the word at `i` is a number spelled out and capitalised inside a sentence, before
/// another capitalised word: a part of a name ("the Four Seasons Grill", "Seven Dials Market"),
/// not a count. A sentence's first word may be capitalised for the sentence alone.
fn spelled_in_name(toks: &[Token<'_>], i: usize) -> bool {
    let spelled = toks[i].text.chars().all(|c| c.is_alphabetic() || c == '-');
    spelled
        && is_capitalised(toks[i].text)
        && i > 0
        && !toks[i - 1].ends_sentence()
        && toks[i].punct.is_none()
        && toks.get(i + 1).is_some_and(|t| is_capitalised(t.text))
}

/// Counted numbers: "2 adults", "two rooms", "3/4 cup"; not parts of dates or times.
fn counts(scan: &Scan<'_>, v: &mut RequestValues) {
    let Scan { toks, lower, used } = scan;
    // A party counted from its members ("my two friends and I": 3 people) stands before the
    // numbers it is said with.
    let parties = super::party::parties(scan);
    v.child_ages = super::party::child_ages(scan);
    let sizes: Vec<usize> = parties.iter().filter_map(|p| p.size_at).collect();
    let mut parties = parties.into_iter().peekable();
    for i in 0..toks.len() {
        while let Some(p) = parties.next_if(|p| p.first <= i) {
            v.numbers.push(Counted { value: p.value, word: p.word });
            v.number_cues.push(cues_at(toks, lower, p.first, p.last));
        }
        if used[i] || sizes.contains(&i) || toks[i].text.contains(':') {
            continue;
        }
        // A number joined to what it counts ("3-year-old", "10-day"): the number, counting its
        // first word.
        let joined =
            toks[i].text.split_once('-').filter(|_| small_number(toks[i].text).is_none()).and_then(|(n, w)| {
                let word = w.split('-').next().filter(|w| w.len() >= 3 && w.chars().all(char::is_alphabetic))?;
                let n =
                    amount(n).filter(|(_, currency)| currency.is_none()).map(|(x, _)| x).or_else(|| small_number(n))?;
                Some((n, word.to_lowercase()))
            });
        if spelled_in_name(toks, i) {
            continue;
        }
        let (n, currency) = match amount(toks[i].text).or_else(|| fraction(toks[i].text).map(|f| (f, None))) {
            Some(a) => a,
            None => match small_number(toks[i].text).filter(|_| lower[i] != "a" && lower[i] != "an") {
                Some(n) => (n, None),
                None => match &joined {
                    Some((n, _)) => (*n, None),
                    None => continue,
                },
            },
        };
        let next = match &joined {
            Some((_, w)) => w.as_str(),
            None => lower.get(i + 1).map(String::as_str).unwrap_or(""),
        };
        if dates::meridiem(next).is_some()
            || year_number(toks[i].text).is_some() && next.is_empty()
            || spoken_time(lower, i).is_some()
        {
            continue;
        }
        let word = match currency {
            Some(code) => code.to_string(),
            None if toks[i].punct.is_some() && joined.is_none() => String::new(),
            None => next.to_string(),
        };
        v.numbers.push(Counted { value: n, word });
        v.number_cues.push(cues_at(toks, lower, i, i));
    }
}

/// Quoted strings ("…" and “…”), under 200 characters.
fn quoted(text: &str, v: &mut RequestValues) {
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
}

/// Labelled values: "latitude: 35.7721", "Hotel ID: 6374805", "(longitude: 140.386, ...)",
/// "latitude=40.7128,", identifiers after their label ("user ID 2"). A label is not a name.
fn labelled(scan: &mut Scan<'_>, v: &mut RequestValues) {
    let Scan { toks, used, .. } = scan;
    for i in 1..toks.len() {
        if toks[i - 1].punct != Some(':') || toks[i].text.is_empty() {
            continue;
        }
        let value = toks[i].text.trim_matches(|c: char| c == '(' || c == ')');
        if value.is_empty() || !value.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '-') {
            continue;
        }
        let one: String = name_key(toks[i - 1].text);
        let two = if i >= 2 && toks[i - 2].punct.is_none() {
            format!("{}{one}", name_key(toks[i - 2].text))
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
        if i >= 2 && toks[i - 2].punct.is_none() && is_capitalised(toks[i - 2].text) && is_capitalised(toks[i - 1].text)
        {
            used[i - 2] = true;
        }
    }
    // Labelled with "=" ("latitude=40.7128,") and identifiers after their label ("user ID 2").
    for i in 0..toks.len() {
        let t = toks[i].text.trim_matches(|c: char| c == '(' || c == ')');
        if let Some((k, val)) = t.split_once('=') {
            let key: String = name_key(k);
            if key.len() >= 2 && !val.is_empty() && !t.contains("://") {
                v.labelled.push((key, val.to_string()));
                used[i] = true;
            }
            continue;
        }
        let label = toks[i].text.to_ascii_lowercase();
        if i + 1 < toks.len() && toks[i].punct.is_none() && lexicon().labels.contains(&label) {
            let val = toks[i + 1].text;
            if val.chars().next().is_some_and(|c| c.is_ascii_digit())
                && val.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                let before: String =
                    if i >= 1 && toks[i - 1].punct.is_none() { name_key(toks[i - 1].text) } else { String::new() };
                let short = if label == "number" || label == "no" || label == "#" { "number" } else { "id" };
                if !before.is_empty() {
                    v.labelled.push((format!("{before}{short}"), val.to_string()));
                }
                v.labelled.push((short.to_string(), val.to_string()));
            }
        }
    }
}

/// Emails, URLs, phone numbers and file names.
fn contacts(scan: &Scan<'_>, v: &mut RequestValues) {
    let toks = &scan.toks;
    for t in toks {
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
            if ext_ok && base_ok && !lexicon().web_domains.contains(ext) {
                v.files.push(bare.to_string());
            }
        }
    }
}

/// Whether a declared type is a number's (`integer`, `NUMBER`, `float`, `double`).
pub(crate) fn is_numeric(ty: &str) -> bool {
    let t = ty.to_ascii_lowercase();
    t.starts_with("int") || t.starts_with("number") || t.starts_with("float") || t.starts_with("double")
}

/// Whether a parameter takes a date, judged by its name and description.
pub(crate) fn is_date_param(name: &str, description: &str) -> bool {
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

pub(crate) fn is_time_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with("time") || n.ends_with("_hour")
}

/// Whether a date parameter names the end of a span (drop-off, departure, return, check-out, max).
pub fn is_end_param(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    lexicon().end_date_params.any_in(&n)
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
        // The day of the date before is that date, not the next month's.
        let v = RequestValues::extract(
            "The choir tours from May 5th to 9th, 2025; book the rehearsal hall at 4 pm on the 5th.",
            d(2030, 1, 1),
        );
        assert_eq!(v.dates, vec![d(2025, 5, 5), d(2025, 5, 9), d(2025, 5, 5)]);
        let v = RequestValues::extract(
            "I'll check in on Christmas Eve and check out on New Year's Day. We rent a car for Christmas in 2024.",
            d(2024, 6, 1),
        );
        assert_eq!(v.dates, vec![d(2024, 12, 24), d(2025, 1, 1), d(2024, 12, 25)]);
        // A date said without a year is in the year the request says, not today's.
        let v = RequestValues::extract(
            "With the 2024 Christmas holiday coming up, check ticket availability for December 26.",
            d(2026, 11, 27),
        );
        assert_eq!(v.dates, vec![d(2024, 12, 25), d(2024, 12, 26)]);
        let v = RequestValues::extract("A car for Halloween in 2024, and Valentine's Day 2025.", d(2024, 6, 1));
        assert_eq!(v.dates, vec![d(2024, 10, 31), d(2025, 2, 14)]);
        // Ages joined to what they count are numbers (after the party they are said in: the
        // speaker, one adult, with two children).
        let counted = |t: &str| -> Vec<(f64, String)> {
            RequestValues::extract(t, d(2024, 6, 1)).numbers.into_iter().map(|c| (c.value, c.word)).collect()
        };
        assert_eq!(
            counted("Fly with my 3-year-old and 8-year-old kids."),
            [(1.0, "adults".into()), (3.0, "year".into()), (8.0, "year".into())]
        );
        // The year of a range of days ("from March 3rd to 5th, 2025") is the dates', no number.
        assert_eq!(
            counted("Book the studio from March 3rd to 5th, 2025 or from April 7th to 9th, 2025 for 2 musicians."),
            [(2.0, "musicians".into())]
        );
        // A number spelled out and capitalised inside a sentence, before another capitalised
        // word, is a part of a name; at a sentence's start it counts.
        assert_eq!(counted("Book a table at the Four Seasons Grill for 2 people."), [(2.0, "people".into())]);
        assert_eq!(counted("Two tickets for Seven Dials Market, please."), [(2.0, "tickets".into())]);
        // Tens spelled out, alone or with a unit.
        assert_eq!(
            counted("Hotels within thirty kilometers, forty-five minutes away."),
            [(30.0, "kilometers".into()), (45.0, "minutes".into())]
        );
    }

    #[test]
    fn amounts_of_money_are_numbers_in_their_currency() {
        let v = RequestValues::extract(
            "Find a hotel under $400 near the Colosseum, between 600 and 900 USD a night, or €1,200.50 in all for 2 adults.",
            d(2024, 6, 1),
        );
        let read: Vec<(f64, &str, bool)> = v.numbers.iter().map(|c| (c.value, c.word.as_str(), c.is_money())).collect();
        assert_eq!(
            read,
            vec![
                (400.0, "usd", true),
                (600.0, "and", false),
                (900.0, "usd", true),
                (1200.5, "eur", true),
                (2.0, "adults", false)
            ]
        );
        assert_eq!(v.number_cues[0][..2], ["under".to_string(), "hotel".to_string()], "the words around $400");
        assert_eq!(amount("1,2,3"), None, "not thousands");
        assert_eq!(amount("12,345"), Some((12345.0, None)));
        assert_eq!(amount("US$15"), Some((15.0, Some("usd"))));
        assert_eq!(amount("$"), None);
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

    /// A pronoun's contraction, a bracket that opens, a sentence's first word that is a verb or
    /// said in lower case elsewhere, and a feast do not become (part of) a name.
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
        // A feast whose date moves names a time, not a place.
        let v = RequestValues::extract("With the 2025 Diwali holiday coming up, order lanterns from Ikea.", d);
        assert_eq!(v.names, ["Ikea"]);
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
        let v = RequestValues::extract("A taxi from 5815 Rue Durocher; my address is 13350 Dallas Parkway.", d);
        assert_eq!(v.names, ["5815 Rue Durocher", "13350 Dallas Parkway"]);
        let v = RequestValues::extract("Book 2 Hilton rooms.", d);
        assert_eq!(v.names, ["Hilton"]);
    }
}
