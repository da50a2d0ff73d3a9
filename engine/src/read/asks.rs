//! Which words ask for which API, learned from recorded runs across every kind of request: for
//! each word a request says (mentions masked, function words left out, a plural read as its
//! singular), in how many learned requests it was said, and in how many of those the chain called
//! each API. A word **asks for** an API when the API's own name or description uses it (the
//! prior: what the API says it is about) and more than [`MIN_SHARE`] of the at least
//! [`MIN_SUPPORT`] learned requests that said it had chains that called the API ("taxi" → the
//! taxi search, "lyrics" → the lyrics lookup): a request saying it is not served until a call of
//! that API is made. A word asks for one API, the one most called after it (an API called
//! after it too is mostly called with that one, and needs a word of its own). Words that merely
//! co-occur with an API in a few runs ("whether", "back") ask for nothing: the documentation
//! gate keeps the model to what an API is for, which holds in wordings it never saw. A word several APIs are about, none of them called after it most of
//! the time but one of them together ("detailed": a hotel's, a car's, a flight's details; their
//! shares summed), asks for one of them: any call of them serves it, and composition takes the
//! one the calls made lead to.
//!
//! The counts are kept with the argument model (stored with the graph as counters, learned by
//! `ingest` and by every run remembered); nothing here names an API or a domain. A replayed
//! memory whose request said the word too served it without the API (its chain was judged good),
//! so only the words a request says beyond the remembered one ask for more than that chain did.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

/// Requests a word must have been said in before it asks for anything.
pub(crate) const MIN_SUPPORT: u32 = 3;
/// The share of those requests whose chains called the API (chosen on ComplexFuncBench's dev
/// folds: a higher share misses asks of new kinds, a lower one flags reworded requests).
pub(crate) const MIN_SHARE: f64 = 0.5;
/// Words kept in all (the first ones seen) and per API; words of one request counted.
const MAX_WORDS: usize = 20_000;
const MAX_API_WORDS: usize = 400;
const MAX_REQUEST_WORDS: usize = 64;

/// An API a request's words ask for, as a run holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Asked {
    pub api: String,
    /// Its name, as the answer names it.
    pub name: String,
    /// The word that asked for it; the words of its name, space-separated, where the request
    /// said its name (see the `named` module).
    pub word: String,
    /// The APIs whose name or description uses the word, sorted: a call of any of them serves it
    /// (one hotel search for another).
    pub about: Vec<String>,
    /// No one of them was learned to follow the word: `api` only stands for them all, and which
    /// serves is decided by the calls made (or a planner).
    pub open: bool,
}

/// Word → the APIs whose name or description uses it ([`doc_words`]), built once per graph.
pub(crate) fn documented_index<'a>(
    apis: impl IntoIterator<Item = (&'a str, &'a [String])>,
) -> HashMap<String, Vec<String>> {
    let mut index: HashMap<String, Vec<String>> = HashMap::new();
    for (id, words) in apis {
        for w in words {
            index.entry(w.clone()).or_default().push(id.to_string());
        }
    }
    index.values_mut().for_each(|v| v.sort());
    index
}

/// One learned word that asks for an API.
#[derive(Debug, Clone, PartialEq)]
pub struct Cue {
    pub api: String,
    pub word: String,
    /// The share of the requests saying it whose chains called the API (of those about the word,
    /// summed, where `open`).
    pub share: f64,
    /// The word asks for one of several APIs, none learned to follow it by itself.
    pub open: bool,
}

/// The counts (see the [module](self)).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Asks {
    /// Word → learned requests that said it.
    pub words: BTreeMap<String, u32>,
    /// API → word → learned requests that said it and whose chains called the API.
    pub apis: BTreeMap<String, BTreeMap<String, u32>>,
    /// Word → the APIs called after it, with their share (built on first use, after the last
    /// change).
    #[serde(skip)]
    index: OnceLock<HashMap<String, Vec<(String, f64)>>>,
}

impl Asked {
    /// Whether `words` (as [`ask_words`] gives them) say what asked for it: its word, or every
    /// word of its name where it was asked for by name (see the `named` module), in any of its
    /// forms ([`says_word`], [`same_stem`]: "available" says "availability").
    pub(crate) fn said_in(&self, words: &[String]) -> bool {
        self.word.split(' ').all(|w| says_word(words, w) || words.iter().any(|x| same_stem(x, w)))
    }

    /// Whether a call of `api` serves it: its API or one its word is about.
    pub(crate) fn served_by(&self, api: &str) -> bool {
        self.api == api || self.about.binary_search_by(|m| m.as_str().cmp(api)).is_ok()
    }
}

/// Narrows what serves each ask to calls that can: a lookup its API reads (a provider: chains
/// always go on after it, and the asked API's recorded calls read its output) serves the ask only
/// through the call that reads it — the place search a car rental reads does not serve "rent a
/// car". An ask's own API always serves it; `provides(api, lookup)` says whether `api`'s
/// recorded calls read `lookup`'s output.
pub(crate) fn narrow_about(
    asked: &mut [Asked],
    is_lookup: impl Fn(&str) -> bool,
    provides: impl Fn(&str, &str) -> bool,
) {
    for h in asked.iter_mut() {
        let api = h.api.clone();
        h.about.retain(|id| *id == api || !(is_lookup(id) && provides(&api, id)));
    }
}

impl PartialEq for Asks {
    fn eq(&self, other: &Self) -> bool {
        self.words == other.words && self.apis == other.apis
    }
}

/// The words of `request` the ask model counts: lower-case, mentions (names, numbers, months)
/// masked, function words and words under three letters left out, a plural read as its singular
/// (`cars` → `car`, `cities` → `city`), each once, in the order said.
pub(crate) fn ask_words(request: &str) -> Vec<String> {
    // A pure function of the text, asked of the same few requests many times a run (this one,
    // and each remembered one weighed): kept per thread, the first [`KEPT_READINGS`] texts.
    thread_local! {
        static READ: std::cell::RefCell<HashMap<String, Vec<String>>> = std::cell::RefCell::new(HashMap::new());
    }
    if let Some(words) = READ.with(|r| r.borrow().get(request).cloned()) {
        return words;
    }
    let words = content_words(super::reading::word_list(&super::reading::meaning_text(request)), MAX_REQUEST_WORDS);
    READ.with(|r| {
        let mut r = r.borrow_mut();
        if r.len() >= KEPT_READINGS {
            r.clear();
        }
        r.insert(request.to_string(), words.clone());
    });
    words
}

/// Request texts whose ask words a thread keeps (then it starts over).
const KEPT_READINGS: usize = 4096;

/// The words of an API's name and description as [`ask_words`] reads a request's (nothing
/// masked: a documentation names no one).
pub(crate) fn doc_words(name: &str, description: &str) -> Vec<String> {
    content_words(super::reading::word_list(&format!("{name} {description}")), 4 * MAX_REQUEST_WORDS)
}

/// [`ask_words`] in the order said, one a word of the request: `None` where a word is one the
/// ask model does not count (so that positions are the request's).
pub(crate) fn ask_word_seq(request: &str) -> Vec<Option<String>> {
    super::reading::word_list(&super::reading::meaning_text(request))
        .into_iter()
        .map(|w| content_words(vec![w], 1).pop())
        .collect()
}

/// Whether two words are one word in two forms: equal, or sharing a start of five letters or more
/// that leaves at most three of the shorter ("describe" and "description", "summary" and
/// "summarize"; not "price" and "prime").
pub(crate) fn same_stem(a: &str, b: &str) -> bool {
    let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    a == b || (common >= 5 && common + 3 >= a.len().min(b.len()))
}

/// Whether `words` (as [`ask_words`] gives them) say `word`: the word itself or its "-ed" /
/// "-ing" form.
pub(crate) fn says_word(words: &[String], word: &str) -> bool {
    words.iter().any(|w| {
        w == word
            || w.strip_prefix(word).is_some_and(|rest| super::lexicon::lexicon().participle_endings.contains(rest))
    })
}

fn content_words(words: Vec<String>, cap: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words {
        // A spelled-out number is a mention ("three songs"), masked like the digits.
        let number = super::scan::small_number(&w).is_some();
        if w.len() < 3
            || number
            || !w.chars().all(|c| c.is_ascii_lowercase())
            || super::lexicon::lexicon().function_words.contains(&w)
        {
            continue;
        }
        let w = singular(&w);
        if !out.contains(&w) && out.len() < cap {
            out.push(w);
        }
    }
    out
}

/// `cars` → `car`, `cities` → `city`, `boxes` → `box`; `glass`, `bus`, `news` stay.
fn singular(w: &str) -> String {
    if w.len() > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..w.len() - 3]);
    }
    for end in super::lexicon::lexicon().sibilant_plurals.iter() {
        if w.len() > end.len() + 1 && w.ends_with(end) {
            return w[..w.len() - 2].to_string();
        }
    }
    if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("ews") {
        return w[..w.len() - 1].to_string();
    }
    w.to_string()
}

impl Asks {
    /// Learn one request and the APIs its chain called; returns the words it counted.
    pub fn learn<'a>(&mut self, request: &str, apis: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let words = ask_words(request);
        let apis: BTreeSet<&str> = apis.into_iter().collect();
        let mut counted = Vec::new();
        for w in &words {
            if self.words.len() < MAX_WORDS || self.words.contains_key(w) {
                *self.words.entry(w.clone()).or_default() += 1;
                counted.push(w.clone());
            } else {
                continue;
            }
            for api in &apis {
                let per = self.apis.entry((*api).to_string()).or_default();
                if per.len() < MAX_API_WORDS || per.contains_key(w) {
                    *per.entry(w.clone()).or_default() += 1;
                }
            }
        }
        self.index = OnceLock::new();
        counted
    }

    /// The APIs `words` (as [`ask_words`] gives them) ask for, each with the word that asks most
    /// surely; the most sure first. `documented(api, word)`: whether the API's name or
    /// description uses the word (see [`doc_words`]).
    pub fn cues(&self, words: &[String], documented: impl Fn(&str, &str) -> bool) -> Vec<Cue> {
        let index = self.index.get_or_init(|| self.build_index());
        let mut best: BTreeMap<&str, Cue> = BTreeMap::new();
        for w in words {
            let about: Vec<&(String, f64)> =
                index.get(w).into_iter().flatten().filter(|(api, _)| documented(api, w)).collect();
            let mut asks: Vec<(&String, f64, bool)> =
                about.iter().filter(|(_, share)| *share > MIN_SHARE).map(|(api, share)| (api, *share, false)).collect();
            // A word asks for one API: the one most called after it. Another one also called
            // after it most of the time is mostly called with that one (an attraction's details
            // after the attraction search), and needs a word of its own ("details").
            asks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
            asks.truncate(1);
            // No one API the word is about was called after it most of the time, but one of
            // them was ("detailed": the details of a hotel, of a car, of a flight): the word
            // asks for one of them, the most called standing for all.
            let together: f64 = about.iter().map(|(_, share)| share).sum();
            if asks.is_empty() && about.len() > 1 && together > MIN_SHARE {
                if let Some((api, _)) = about.iter().max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0))) {
                    asks.push((api, together.min(1.0), true));
                }
            }
            for (api, share, open) in asks {
                let better = best.get(api.as_str()).is_none_or(|c| (!open, share) > (!c.open, c.share));
                if better {
                    best.insert(api, Cue { api: api.clone(), word: w.clone(), share, open });
                }
            }
        }
        let mut out: Vec<Cue> = best.into_values().collect();
        out.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.api.cmp(&b.api)));
        out
    }

    /// The share of the learned requests saying `word` whose chains called `api`; `None` where
    /// fewer than [`MIN_SUPPORT`] said it.
    pub fn share(&self, api: &str, word: &str) -> Option<f64> {
        let said = self.words.get(word).copied().filter(|s| *s >= MIN_SUPPORT)?;
        let called = self.apis.get(api).and_then(|m| m.get(word)).copied().unwrap_or(0);
        Some(f64::from(called) / f64::from(said))
    }

    fn build_index(&self) -> HashMap<String, Vec<(String, f64)>> {
        let mut index: HashMap<String, Vec<(String, f64)>> = HashMap::new();
        for (api, words) in &self.apis {
            for (w, n) in words {
                let Some(said) = self.words.get(w).copied().filter(|s| *s >= MIN_SUPPORT) else { continue };
                let share = f64::from(*n) / f64::from(said);
                index.entry(w.clone()).or_default().push((api.clone(), share));
            }
        }
        index
    }

    /// Only the counts of these APIs and words (what a store update of them writes).
    pub fn only(&self, apis: &BTreeSet<String>, words: &BTreeSet<String>) -> Asks {
        Asks {
            words: self.words.iter().filter(|(w, _)| words.contains(*w)).map(|(w, n)| (w.clone(), *n)).collect(),
            apis: self
                .apis
                .iter()
                .filter(|(a, _)| apis.contains(*a))
                .map(|(a, m)| {
                    let m = m.iter().filter(|(w, _)| words.contains(*w)).map(|(w, n)| (w.clone(), *n)).collect();
                    (a.clone(), m)
                })
                .collect(),
            index: OnceLock::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library's loan ask: the branch finder (a lookup the loan's calls read) is about "loan"
    /// too, but serves the ask only through the loan call that reads it; the renewal, no lookup,
    /// still serves it, and so does a lookup the loan does not read (the catalog's isbn search).
    #[test]
    fn a_lookup_the_asked_api_reads_does_not_serve_the_ask() {
        let about = vec!["loans.branch".to_string(), "loans.isbn".into(), "loans.loan".into(), "loans.renew".into()];
        let mut asked =
            vec![Asked { api: "loans.loan".into(), name: "Loan".into(), word: "loan".into(), about, open: false }];
        assert!(asked[0].served_by("loans.branch"), "before: {asked:?}");
        let lookups = ["loans.branch", "loans.isbn"];
        narrow_about(&mut asked, |id| lookups.contains(&id), |api, id| api == "loans.loan" && id == "loans.branch");
        assert!(!asked[0].served_by("loans.branch"), "{asked:?}");
        assert!(asked[0].served_by("loans.loan") && asked[0].served_by("loans.renew"), "{asked:?}");
        assert!(asked[0].served_by("loans.isbn"), "a lookup the loan does not read: {asked:?}");
    }

    /// Two forms of one word are one word; two words that only start alike are not.
    #[test]
    fn a_word_and_its_other_forms_share_a_stem() {
        for (a, b) in
            [("describe", "description"), ("summary", "summarize"), ("detail", "detailed"), ("locate", "location")]
        {
            assert!(same_stem(a, b) && same_stem(b, a), "{a} / {b}");
        }
        for (a, b) in [("price", "prime"), ("search", "seared"), ("contact", "content")] {
            assert!(!same_stem(a, b), "{a} / {b}");
        }
        // An ask is said in another form of its word too.
        let asked = |word: &str| Asked {
            api: "venues.availability".into(),
            name: "Venue_Availability".into(),
            word: word.into(),
            about: vec!["venues.availability".into()],
            open: false,
        };
        assert!(asked("availability").said_in(&ask_words("Is the concert hall available on Friday?")));
        assert!(!asked("availability").said_in(&ask_words("Is the concert hall open on Friday?")));
    }

    #[test]
    fn words_are_masked_singular_and_without_function_words() {
        let w = ask_words("Find the lyrics of three songs by Adele and the albums they are on, please.");
        assert_eq!(w, ["find", "lyric", "song", "album"]);
        assert_eq!(singular("cities"), "city");
        assert_eq!(singular("boxes"), "box");
        assert_eq!(singular("bus"), "bus");
        assert_eq!(singular("news"), "news");
    }

    fn music_docs(api: &str, word: &str) -> bool {
        let (name, description) = match api {
            "music.search" => ("Search_Songs", "Find songs by title or artist"),
            "music.lyrics" => ("Get_Lyrics", "The lyrics of a song"),
            "music.album" => ("Album_Details", "The album a track is on, with its tracks"),
            _ => return false,
        };
        doc_words(name, description).iter().any(|w| w == word)
    }

    /// "song" was said in every request, and the lyrics were fetched in 6 of 10: both the search
    /// and the lyrics were called after it most of the time, but the lyrics always with the
    /// search. The word asks for the search only; the lyrics need their own word.
    #[test]
    fn a_word_asks_for_the_one_api_most_called_after_it() {
        let mut a = Asks::default();
        for i in 0..6 {
            a.learn(&format!("Show the lyrics of song number {i}"), ["music.search", "music.lyrics"]);
        }
        for i in 0..4 {
            a.learn(&format!("Play song number {i}"), ["music.search"]);
        }
        let apis = |text: &str| -> Vec<(String, String)> {
            a.cues(&ask_words(text), music_docs).into_iter().map(|c| (c.api, c.word)).collect()
        };
        assert_eq!(apis("Play that song"), [("music.search".to_string(), "song".to_string())]);
        let both = apis("Show the lyrics of that song");
        assert!(both.contains(&("music.lyrics".to_string(), "lyric".to_string())), "{both:?}");
        assert!(both.contains(&("music.search".to_string(), "song".to_string())), "{both:?}");
    }

    /// Music requests: "lyrics" was said only where the chain fetched lyrics, "song" everywhere
    /// (every chain searched songs), "album" where the album lookup ran; "tonight" was said in
    /// the album requests only, but no API is about it.
    #[test]
    fn a_word_asks_for_the_api_its_requests_called_and_its_docs_name() {
        let mut a = Asks::default();
        for i in 0..6 {
            a.learn(&format!("Show the lyrics of song number {i}"), ["music.search", "music.lyrics"]);
            a.learn(&format!("Which album has song number {i} tonight"), ["music.search", "music.album"]);
        }
        a.learn("Play a song", ["music.search"]);
        a.learn("Play two songs", ["music.search"]);
        let cues = a.cues(&ask_words("Tonight: the album and the lyrics of that song"), music_docs);
        let apis: Vec<(&str, &str)> = cues.iter().map(|c| (c.api.as_str(), c.word.as_str())).collect();
        assert!(apis.contains(&("music.lyrics", "lyric")), "{apis:?}");
        assert!(apis.contains(&("music.album", "album")), "{apis:?}");
        assert!(apis.contains(&("music.search", "song")), "{apis:?}");
        assert!(!apis.iter().any(|(_, w)| *w == "tonight"), "{apis:?}");
        // "song" asks for the search only: half the requests saying it fetched no lyrics.
        assert!(!apis.contains(&("music.lyrics", "song")), "{apis:?}");
        // Too few requests said "play": it asks for nothing yet.
        assert!(a.cues(&ask_words("play it"), music_docs).is_empty());
        // The parts a store writes read back to the same cues.
        let all: BTreeSet<String> = a.words.keys().cloned().collect();
        let apis: BTreeSet<String> = a.apis.keys().cloned().collect();
        assert_eq!(a.only(&apis, &all), a);
    }

    fn library_docs(api: &str, word: &str) -> bool {
        let (name, description) = match api {
            "lib.books" => ("Search_Books", "Find books by title"),
            "lib.book" => ("Book_Details", "The details of a book"),
            "lib.author" => ("Author_Details", "The details of an author"),
            "lib.film" => ("Film_Details", "The details of a film"),
            _ => return false,
        };
        doc_words(name, description).iter().any(|w| w == word)
    }

    /// A library: "details" was followed by a book's, an author's or a film's details, none of
    /// them most of the time but one of them always; it asks for one of them, the most called
    /// standing for all. "find" is about the book search alone, called after it less than half
    /// the time: it asks for nothing.
    #[test]
    fn a_word_several_apis_are_about_asks_for_one_of_them() {
        let mut a = Asks::default();
        for i in 0..4 {
            a.learn(&format!("Show the details of book number {i}"), ["lib.books", "lib.book"]);
            a.learn(&format!("Show the details of author number {i}"), ["lib.author"]);
            a.learn(&format!("Find film number {i} and its details"), ["lib.film"]);
        }
        for i in 0..3 {
            a.learn(&format!("Find book number {i}"), ["lib.books"]);
        }
        let cues = a.cues(&ask_words("I want the details"), library_docs);
        assert_eq!(cues.len(), 1, "{cues:?}");
        assert_eq!(cues[0].word, "detail");
        assert!(["lib.book", "lib.author", "lib.film"].contains(&cues[0].api.as_str()), "{cues:?}");
        assert!(cues[0].share > MIN_SHARE && cues[0].share <= 1.0);
        // Three of the seven requests saying "find" called the book search, the one API about
        // it: no group stands in for one API.
        assert!(a.cues(&ask_words("find it"), library_docs).is_empty());
    }
}
