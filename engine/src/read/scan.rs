//! What reading a request produces and works on: the typed values ([`RequestValues`]), the scan
//! its phases share, and the words around a mention. The phases are in `values.rs` (the order),
//! `dates.rs` and `names.rs`; this file uses none of them.

use super::lexicon::lexicon;
use super::reading::Token;
use chrono::NaiveDate;

/// A number and the word after it (`2 adults` → (2, "adults")); an amount of money has its
/// currency's code for a word (`$400` → (400, "usd")), as one written with it after (`900 USD`).
#[derive(Debug, Clone, PartialEq)]
pub struct Counted {
    pub value: f64,
    pub word: String,
}

impl Counted {
    /// Whether it is an amount of money (`$400`, `900 USD`, `50 euros`).
    pub fn is_money(&self) -> bool {
        lexicon().currency_words.contains(&self.word)
    }
}

/// A number as written, with its thousands grouped (`1,200.50`) and a currency sign before it
/// (`$400`, `€1,200`): its value and the sign's currency code.
pub(crate) fn amount(word: &str) -> Option<(f64, Option<&'static str>)> {
    let (digits, currency) = lexicon()
        .currency_signs
        .pairs
        .iter()
        .find_map(|(sign, code)| word.strip_prefix(sign.as_str()).map(|rest| (rest, Some(code.as_str()))))
        .unwrap_or((word, None));
    let plain: String = if digits.contains(',') {
        let mut groups = digits.split(',');
        let head = groups.next()?;
        let grouped = (1..=3).contains(&head.len())
            && head.bytes().all(|b| b.is_ascii_digit())
            && groups.all(|g| {
                let whole = g.split_once('.').map_or(g, |(w, _)| w);
                whole.len() == 3 && whole.bytes().all(|b| b.is_ascii_digit())
            });
        if !grouped {
            return None;
        }
        digits.replace(',', "")
    } else {
        digits.to_string()
    };
    let value = plain.parse::<f64>().ok().filter(|f| f.is_finite())?;
    (currency.is_none() || value >= 0.0).then_some((value, currency))
}

/// Everything typed a request holds, each list in order of appearance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestValues {
    /// The day the request says is today ("Today is October 13th, 2024"), else the caller's today.
    pub today: Option<NaiveDate>,
    /// The dates, in the order the request says them.
    pub dates: Vec<NaiveDate>,
    /// `HH:MM`, 24-hour.
    pub times: Vec<String>,
    /// The numbers, each with the word it counts.
    pub numbers: Vec<Counted>,
    /// Spans of time said relative to an event, in signed minutes and in order ("one hour after
    /// I land" → 60, "three hours before my flight" → -180, "half an hour after" → 30).
    pub shifts: Vec<i64>,
    /// Quoted text, as written.
    pub quoted: Vec<String>,
    /// Names (runs of capitalized words), as written.
    pub names: Vec<String>,
    /// E-mail addresses.
    pub emails: Vec<String>,
    /// URLs.
    pub urls: Vec<String>,
    /// Phone numbers as written ("555-123-4567", "+1234567890", "(1234567890)" without brackets).
    pub phones: Vec<String>,
    /// File names ("example.txt", "report.pdf").
    pub files: Vec<String>,
    /// Values named in the text: "latitude: 35.77", "Hotel ID: 6374805" → (normalized label, text).
    pub labelled: Vec<(String, String)>,
    /// The ages of the children the request says, in order ("my 3-year-old and 10-year-old
    /// kids", "two children aged 4 and 9": 3, 10 / 4, 9).
    pub child_ages: Vec<f64>,
    /// Ranges the request bounds a quantity by ("a budget between 600 and 900 USD", "from $40
    /// to $60"): (low, high), in order.
    pub ranges: Vec<(f64, f64)>,
    /// Dates computed relative to the caller's today because the request does not say what day
    /// it is ("starting tomorrow" with no "Today is …"): guesses, which a judge does not require.
    pub unanchored: Vec<NaiveDate>,
    /// The words around each date, time, counted number and name (parallel to their lists): what
    /// the learned filler ([`crate::fill::learned`]) tells mentions of one kind apart by.
    pub date_cues: Vec<Vec<String>>,
    /// The words around each time (same order as `times`).
    pub time_cues: Vec<Vec<String>>,
    /// The words around each number (same order as `numbers`).
    pub number_cues: Vec<Vec<String>>,
    /// The words around each name (same order as `names`).
    pub name_cues: Vec<Vec<String>>,
    /// Where each date, time and name stands (its first word's index among the request's words,
    /// parallel to their lists): which time goes with which date, whatever the clause order.
    pub date_at: Vec<usize>,
    /// For each date said as a span from another ("arrive the day before"), the date it counts
    /// from (its index in `dates`) and whether it lies before it (parallel to `dates`).
    pub date_from: Vec<Option<(usize, bool)>>,
    /// The token each time starts at.
    pub time_at: Vec<usize>,
    /// The token each name starts at.
    pub name_at: Vec<usize>,
}

/// Words before a mention (up to 6, within its sentence) and the 2 after it, in lower case: the
/// context the learned filler reads ("return it at the same place at | 5 PM | seven days").
pub(crate) fn cues_at(toks: &[Token<'_>], lower: &[String], first: usize, last: usize) -> Vec<String> {
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

/// A number spelled out, up to ninety-nine ("three", "thirty", "forty-five"), or "a", "couple"…
pub(crate) fn small_number(w: &str) -> Option<f64> {
    let w = w.to_ascii_lowercase();
    let lex = lexicon();
    if let Some(i) = lex.number_words.position(&w) {
        return Some(i as f64);
    }
    let tens = |t: &str| lex.tens_words.position(t).map(|i| 20.0 + 10.0 * i as f64);
    if let Some(n) = tens(&w) {
        return Some(n);
    }
    if let Some((t, u)) = w.split_once('-') {
        let unit = lex.number_words.position(u).filter(|i| (1..10).contains(i)).map(|i| i as f64);
        if let (Some(t), Some(u)) = (tens(t), unit) {
            return Some(t + u);
        }
    }
    if lex.one_words.contains(&w) {
        Some(1.0)
    } else {
        lex.two_words.contains(&w).then_some(2.0)
    }
}

/// A request being read: its tokens, their lower-case texts, and which tokens a reading has used
/// (a date's, a label's), so that no other reading takes them.
pub(crate) struct Scan<'t> {
    pub toks: Vec<Token<'t>>,
    pub lower: Vec<String>,
    pub used: Vec<bool>,
}
