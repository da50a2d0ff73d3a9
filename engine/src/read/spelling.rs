//! Typing slips in plain words ("the cheapets flihgt tomorow"): a lower-case word that neither
//! the learned requests nor the lexicon know is read as the one known word it is one slip from —
//! a letter left out or added, a neighbouring key struck, or two neighbours swapped — where one
//! such word is the likeliest (said by the most learned requests, and by at least [`MIN_SAID`]),
//! and only where the learned requests cover their language ([`MAX_UNSEEN`]). Names, places and
//! figures are never touched: a capitalised word, a word with digits, an apostrophe or a hyphen
//! stays as written, and so does a known word's plural or other form ("hotels" where "hotel" is
//! known). The vocabulary is the ask model's (every content word of the learned requests, with
//! how many said it) and the lexicon's words: nothing is listed for a domain.

use std::collections::{BTreeMap, HashSet};

/// A known word is a reading of a slip only where this many learned requests said it (or the
/// lexicon holds it).
const MIN_SAID: u32 = 3;

/// Slips are read only where the learned requests cover their language: where the words said by
/// one learned request alone are at most this share of all words said (the Good–Turing estimate
/// of how often the next word is one never seen). Where new words are common, a word unknown is
/// more often a word than a slip ("shoes" is no slip of "shows").
const MAX_UNSEEN: f64 = 0.05;

/// Words shorter than this are left as written: a slip in a short word is mostly another word.
const MIN_LETTERS: usize = 5;

/// The request with its slips read as the known words they stand for, and each change made
/// (as written, as read), in the order said.
pub(crate) fn respelled(request: &str, said: &BTreeMap<String, u32>) -> (String, Vec<(String, String)>) {
    if unseen_share(said) > MAX_UNSEEN {
        return (request.to_string(), Vec::new());
    }
    let lexicon = vocabulary();
    let mut out = String::with_capacity(request.len());
    let mut changes = Vec::new();
    let mut last = 0;
    for (start, end) in plain_words(request) {
        let w = &request[start..end];
        if let Some(read) = reading(w, said, lexicon) {
            out.push_str(&request[last..start]);
            out.push_str(&read);
            changes.push((w.to_string(), read));
            last = end;
        }
    }
    if changes.is_empty() {
        return (request.to_string(), changes);
    }
    out.push_str(&request[last..]);
    (out, changes)
}

/// Every word of the lexicon in use (the words of its phrases one by one): words the reader
/// knows, whichever list holds them.
fn vocabulary() -> &'static HashSet<String> {
    static WORDS: std::sync::OnceLock<HashSet<String>> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| {
        let mut out = HashSet::new();
        if let Ok(table) = toml::from_str::<toml::Value>(super::lexicon::text_in_use()) {
            strings(&table, false, &mut out);
        }
        out
    })
}

/// The words of every string under a `words`, `phrase` or `cues` key of `v`.
fn strings(v: &toml::Value, listed: bool, out: &mut HashSet<String>) {
    match v {
        toml::Value::String(s) if listed => out.extend(super::reading::word_list(s)),
        toml::Value::Array(a) => a.iter().for_each(|x| strings(x, listed, out)),
        toml::Value::Table(t) => {
            for (k, x) in t {
                strings(x, listed || matches!(k.as_str(), "words" | "phrase" | "cues"), out);
            }
        }
        _ => {}
    }
}

/// The share of the words said that only one learned request said (1 where none was learned).
fn unseen_share(said: &BTreeMap<String, u32>) -> f64 {
    let total: u64 = said.values().map(|&n| u64::from(n)).sum();
    let once = said.values().filter(|&&n| n == 1).count();
    if total == 0 {
        return 1.0;
    }
    once as f64 / total as f64
}

/// The byte spans of the text's plain words: its words (as the typed reading splits it, see
/// [`super::reading::tokens`]) that are lower-case ASCII letters only, MIN_LETTERS or more — a
/// word with a capital, a digit, a hyphen, an apostrophe, a dot, a slash or `@` inside is a
/// name, a figure, a code or an address and stays whole.
fn plain_words(text: &str) -> Vec<(usize, usize)> {
    super::reading::tokens(text)
        .into_iter()
        .filter(|t| t.text.len() >= MIN_LETTERS && t.text.bytes().all(|c| c.is_ascii_lowercase()))
        .map(|t| {
            let start = t.text.as_ptr() as usize - text.as_ptr() as usize;
            (start, start + t.text.len())
        })
        .collect()
}

/// The known word `w` is a slip of, or `None` where `w` is known itself, a form of a known word,
/// or no one known word is the likeliest.
fn reading(w: &str, said: &BTreeMap<String, u32>, lexicon: &HashSet<String>) -> Option<String> {
    let known = |x: &str| said.contains_key(x) || lexicon.contains(x);
    if known(w) || forms(w).any(|stem| known(&stem)) {
        return None;
    }
    let allowed = if w.len() >= 12 { 2 } else { 1 };
    let mut best: Option<(u32, String)> = None;
    let mut tied = false;
    let said_words = said.iter().filter(|(_, n)| **n >= MIN_SAID).map(|(k, n)| (k.as_str(), *n));
    let lexicon_words = lexicon.iter().map(|k| (k.as_str(), u32::MAX));
    let lex = super::lexicon::lexicon();
    let longest = lex.plural_endings.iter().map(str::len).max().unwrap_or(0);
    for (k, n) in said_words.chain(lexicon_words) {
        // A slip keeps the first letter, and a form too long or too short is none: most known
        // words are passed over here.
        let (first, len) = (k.as_bytes().first(), k.len());
        if first != w.as_bytes().first() || len > w.len() + allowed || len + longest + allowed < w.len() {
            continue;
        }
        // The known word, or its plural (the ask model counts words singular): the first form
        // one slip away.
        let forms = std::iter::once(k.to_string()).chain(lex.plural_endings.iter().map(|e| format!("{k}{e}")));
        let Some(form) = forms
            .filter(|f| f.len().abs_diff(w.len()) <= allowed && f.len() >= MIN_LETTERS)
            .find(|f| slip_of(w, f, allowed))
        else {
            continue;
        };
        match &best {
            Some((m, _)) if *m > n => {}
            Some((m, _)) if *m == n => tied = true,
            _ => {
                best = Some((n, form));
                tied = false;
            }
        }
    }
    best.filter(|_| !tied).map(|(_, form)| form)
}

/// What `w` is a form of: its stem without a plural, past or participle ending.
fn forms(w: &str) -> impl Iterator<Item = String> + '_ {
    super::lexicon::lexicon().form_endings.iter().filter_map(move |e| {
        let stem = w.strip_suffix(e)?;
        // "cities" is a form of "city".
        (stem.len() >= 3).then(|| if e == "ies" { format!("{stem}y") } else { stem.to_string() })
    })
}

/// Whether `a` is `b` with at most `allowed` slips: a letter left out or added, a key struck
/// instead of its neighbour on the keyboard, or two neighbouring letters swapped (the optimal
/// string alignment distance, a change of letter counting one only between neighbouring keys).
/// The first letter is kept: a slip there mostly makes another word.
fn slip_of(a: &str, b: &str, allowed: usize) -> bool {
    let (a, b): (Vec<u8>, Vec<u8>) = (a.bytes().collect(), b.bytes().collect());
    if a.first() != b.first() || a == b {
        return false;
    }
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut low = usize::MAX;
        for j in 1..=b.len() {
            let cost = if a[i - 1] == b[j - 1] {
                0
            } else if neighbours(a[i - 1], b[j - 1]) {
                1
            } else {
                2
            };
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
            low = low.min(v);
        }
        if low > allowed {
            return false;
        }
    }
    d[a.len()][b.len()] <= allowed
}

/// Whether two letters are neighbouring keys: side by side on a row, or touching across two rows
/// (a row's key `i` lies between keys `i` and `i + 1` of the row above).
fn neighbours(x: u8, y: u8) -> bool {
    let rows = &super::lexicon::lexicon().keyboard_rows;
    let at = |c: u8| rows.iter().enumerate().find_map(|(r, row)| row.bytes().position(|k| k == c).map(|i| (r, i)));
    let (Some((rx, ix)), Some((ry, iy))) = (at(x), at(y)) else { return false };
    match ry as isize - rx as isize {
        0 => ix.abs_diff(iy) == 1,
        1 => iy == ix || iy + 1 == ix,
        -1 => ix == iy || ix + 1 == iy,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library's learned requests: which words they said, and how many.
    fn library() -> BTreeMap<String, u32> {
        [("borrow", 9), ("novel", 7), ("author", 5), ("renew", 4), ("overdue", 3), ("journal", 3), ("jornal", 1)]
            .into_iter()
            .map(|(w, n)| (w.to_string(), n))
            .collect()
    }

    #[test]
    fn a_slip_in_a_plain_word_is_read_as_the_known_word() {
        let (read, changes) = respelled("I want to borow two novles by the same athor", &library());
        assert_eq!(read, "I want to borrow two novels by the same author");
        assert_eq!(
            changes,
            vec![
                ("borow".into(), "borrow".into()),
                ("novles".into(), "novels".into()),
                ("athor".into(), "author".into())
            ]
        );
        // The lexicon's words are known too (the days, the relative dates).
        assert_eq!(respelled("renew it tomorow", &library()).0, "renew it tomorrow");
    }

    #[test]
    fn names_figures_forms_and_unknown_words_stay_as_written() {
        let library = library();
        for text in [
            "Books by Borow Athor",            // capitalised: a name
            "the journals overdue",            // a plural of a known word, a known word
            "renewed and borrowing",           // forms of known words
            "call 555-borow or b.athor@x.org", // parts of a number, an address
            "a paperback",                     // unknown, and no known word one slip from it
        ] {
            assert_eq!(respelled(text, &library).0, text, "{text}");
        }
        // One slip from "journal" (said three times) and from "jornal" (once: too few to be read).
        assert_eq!(respelled("the jurnal", &library).0, "the journal");
    }

    #[test]
    fn a_vocabulary_where_new_words_are_common_reads_no_slip() {
        let mut young = library();
        for w in ["shelf", "atlas", "poetry", "comic", "memoir"] {
            young.insert(w.to_string(), 1);
        }
        assert_eq!(respelled("I want to borow it", &young).0, "I want to borow it");
        assert_eq!(respelled("I want to borow it", &library()).0, "I want to borrow it");
        assert_eq!(respelled("I want to borow it", &BTreeMap::new()).0, "I want to borow it");
    }

    #[test]
    fn no_reading_where_two_known_words_are_as_likely() {
        // "careds": "cards" with an "e" added, or "cares" with a "d" added.
        let said =
            |card: u32| -> BTreeMap<String, u32> { [("card".to_string(), card), ("care".to_string(), 3)].into() };
        assert_eq!(respelled("two careds", &said(3)).0, "two careds");
        assert_eq!(respelled("two careds", &said(4)).0, "two cards");
    }

    #[test]
    fn slips_are_one_edit_or_one_swap_keeping_the_first_letter() {
        assert!(slip_of("novle", "novel", 1));
        assert!(slip_of("nvel", "novel", 1));
        assert!(slip_of("noveel", "novel", 1));
        assert!(slip_of("nobel", "novel", 1), "b is v's neighbour");
        assert!(!slip_of("nomel", "novel", 1), "m is not");
        assert!(slip_of("novwl", "novel", 1));
        assert!(!slip_of("lovel", "novel", 1), "the first letter is kept");
        assert!(!slip_of("nvoel", "novel", 0));
        assert!(!slip_of("nveol", "novel", 1), "two slips");
    }
}
