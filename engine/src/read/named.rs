//! An API asked for by its name: a request that says every word of an API's name ("the flight
//! details", "the seat map", "nearby cities") asks for that API, where the name takes two words or
//! more (asking verbs and function words aside: "Get_Flight_Details" → flight, detail) and the
//! learned runs called the API after one of those words often enough ([`NAME_SHARE`]). The single
//! words ask through the learned model ([`super::asks`]); the name is what tells the detail of a
//! flight from that of a hotel when "details" alone stands for several APIs. A word is said in
//! its own form or with "-ed" / "-ing" ("detailed" says "detail"). Where two names are said and
//! one's words are all the other's, the longer name is the ask.

use super::asks::{says_word, Asks, MIN_SHARE};
use std::collections::HashMap;

/// A name's words ask for its API only where one of them alone was followed by a call of it at
/// least this share of the learned requests that said it (the learned runs do read the word as
/// pointing at the API; chosen on ComplexFuncBench's dev folds of new kinds).
pub(crate) const NAME_SHARE: f64 = MIN_SHARE / 2.0;

/// The words of an API's name that say what it is, as [`super::asks::ask_words`] reads a request, the
/// asking verbs left out ("Search_Flights_Multi_Stops" → flight, multi, stop).
pub(crate) fn name_words(name: &str) -> Vec<String> {
    let verbs = &super::lexicon::lexicon().asking_verbs;
    super::asks::doc_words(name, "").into_iter().filter(|w| !verbs.contains(w)).collect()
}

/// The words of a request that could say a name word: the words and, for "-ed" / "-ing" forms,
/// their stems.
fn stems(words: &[String]) -> Vec<String> {
    let mut out = words.to_vec();
    for w in words {
        for end in super::lexicon::lexicon().participle_endings.iter() {
            if let Some(stem) = w.strip_suffix(end).filter(|s| s.len() >= 3) {
                out.push(stem.to_string());
            }
        }
    }
    out
}

/// Whether the request (its words in order, [`super::asks::ask_word_seq`]) says every one of
/// `words` within a phrase: the nearest occurrences of them all span at most [`NAME_SPAN`]
/// words more than the name has ("the details of the flights", not "the flight … then the
/// hotel's details").
fn said_together(seq: &[Option<String>], words: &[String]) -> bool {
    let at: Vec<Vec<usize>> = words
        .iter()
        .map(|w| {
            seq.iter()
                .enumerate()
                .filter(|(_, s)| s.as_ref().is_some_and(|s| says_word(std::slice::from_ref(s), w)))
                .map(|(i, _)| i)
                .collect()
        })
        .collect();
    if at.iter().any(Vec::is_empty) {
        return false;
    }
    // For each occurrence of the first word as an anchor, the nearest occurrence of each other.
    let limit = words.len() + NAME_SPAN;
    at[0].iter().any(|&a| {
        let (mut lo, mut hi) = (a, a);
        for others in &at[1..] {
            let near = others.iter().min_by_key(|&&i| i.abs_diff(a)).copied().unwrap_or(a);
            lo = lo.min(near);
            hi = hi.max(near);
        }
        hi - lo < limit
    })
}

/// Words besides a name's own that may stand between them ("the details of the flights": one).
pub(crate) const NAME_SPAN: usize = 3;

/// The APIs whose names take two words or more, indexed by their words (built once per graph).
#[derive(Debug, Default)]
pub(crate) struct NameIndex {
    names: Vec<(String, Vec<String>)>,
    by_word: HashMap<String, Vec<usize>>,
}

impl NameIndex {
    /// `apis`: (id, name) of the APIs a request may ask for by name.
    pub(crate) fn build<'a>(apis: impl IntoIterator<Item = (&'a str, &'a str)>) -> NameIndex {
        let mut index = NameIndex::default();
        for (id, name) in apis {
            let words = name_words(name);
            if words.len() < 2 {
                continue;
            }
            for w in &words {
                index.by_word.entry(w.clone()).or_default().push(index.names.len());
            }
            index.names.push((id.to_string(), words));
        }
        index
    }

    /// The APIs `request` asks for by name (see the [module](self)), with the name's words as
    /// said: only where `asks` learned a call of the API after one of them often enough.
    pub(crate) fn asked(&self, request: &str, asks: &Asks) -> Vec<(String, Vec<String>)> {
        let seq = super::asks::ask_word_seq(request);
        let said: Vec<String> = seq.iter().flatten().cloned().collect();
        let mut seen: Vec<usize> = Vec::new();
        for w in stems(&said) {
            for i in self.by_word.get(&w).into_iter().flatten() {
                if !seen.contains(i) {
                    seen.push(*i);
                }
            }
        }
        let learned = |api: &str, words: &[String]| {
            words.iter().filter_map(|w| asks.share(api, w)).any(|share| share > NAME_SHARE)
        };
        let found: Vec<&(String, Vec<String>)> = seen
            .into_iter()
            .map(|i| &self.names[i])
            .filter(|(api, words)| said_together(&seq, words) && learned(api, words))
            .collect();
        let within = |a: &[String], b: &[String]| a.len() < b.len() && a.iter().all(|w| b.contains(w));
        let mut out: Vec<(String, Vec<String>)> = found
            .iter()
            .filter(|(_, words)| !found.iter().any(|(_, other)| within(words, other)))
            .map(|(api, words)| (api.clone(), words.clone()))
            .collect();
        out.sort();
        out
    }
}

/// Whether a word's ask for `api` gives way to a name the request says (`named`, as
/// [`NameIndex::asked`] gives them): the word is one of the name's, first said within the name's
/// phrase and after it only as a back-reference to it ("the flights for this multi-stop trip …
/// before my flight": [`said_only_in`]), the word is about the named API too (`about`), and
/// neither API reads the other's output (`reads(a, b)`: recorded calls of `a` read an output of
/// `b`). Then the two are alternatives and the name says which one ("multi-stop flights": the
/// multi-stop search, not the one "flights" alone asks for); a named call that reads the other
/// ("the flight details" read a search's token) leaves it asked. `seq`:
/// [`super::asks::ask_word_seq`]; `said`: the request's words at the same positions
/// ([`said_words`]).
pub(crate) fn gives_way(
    word: &str,
    api: &str,
    about: &[String],
    named: &[(String, Vec<String>)],
    seq: &[Option<String>],
    said: &[String],
    reads: impl Fn(&str, &str) -> bool,
) -> bool {
    // Most asks meet no name: the request's words are counted only for one that does.
    let sibling = |(other, words): &&(String, Vec<String>)| {
        other != api
            && words.iter().any(|w| w == word)
            && about.iter().any(|a| a == other)
            && !reads(other, api)
            && !reads(api, other)
    };
    named.iter().filter(sibling).any(|(_, words)| said_only_in(word, words, seq, said))
}

/// The request's lower-case words at the positions of [`super::asks::ask_word_seq`].
pub(crate) fn said_words(request: &str) -> Vec<String> {
    super::reading::word_list(&super::reading::meaning_text(request))
}

/// Whether `word` is first said within a phrase saying every word of `name` and, after it, only
/// right after a word pointing back (lexicon `back_references`: "my flight", "the flight").
fn said_only_in(word: &str, name: &[String], seq: &[Option<String>], said: &[String]) -> bool {
    let at = |w: &str| -> Vec<usize> {
        seq.iter()
            .enumerate()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| says_word(std::slice::from_ref(s), w)))
            .map(|(i, _)| i)
            .collect()
    };
    let own = at(word);
    let Some(&first) = own.first() else { return false };
    let limit = name.len() + NAME_SPAN;
    let in_name = name.iter().all(|w| at(w).iter().any(|&i| i.abs_diff(first) < limit));
    let back = super::lexicon::lexicon();
    let pointed_back = |i: usize| i > 0 && said.get(i - 1).is_some_and(|w| back.back_references.contains(w));
    in_name && own[1..].iter().all(|&i| pointed_back(i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::asks::ask_words;

    #[test]
    fn a_name_is_its_words_without_asking_verbs() {
        assert_eq!(name_words("Get_Lyrics_Of_Song"), ["lyric", "song"]);
        assert_eq!(name_words("search_podcast_episodes"), ["podcast", "episode"]);
        assert!(says_word(&ask_words("the detailed lyrics"), "detail"));
        assert!(says_word(&ask_words("tracks rated five"), "rate"));
        assert!(!says_word(&ask_words("the details"), "detailed"));
    }

    /// A music catalogue: "details" was said before an album's, an artist's and a track's
    /// details, none of them most of the time, so the word alone asks for none of them. The
    /// request that says "album" and "details" asks for the album's details by name; the
    /// artist's details, whose words were never followed by its call, stay unasked.
    #[test]
    fn a_request_saying_every_word_of_a_name_asks_for_it() {
        let mut asks = Asks::default();
        for i in 0..4 {
            asks.learn(&format!("Show the details of album number {i}"), ["music.album_details"]);
            asks.learn(&format!("Show the details of track number {i}"), ["music.track_details"]);
            asks.learn(&format!("Play the album number {i}"), ["music.play"]);
        }
        for i in 0..4 {
            asks.learn(&format!("Who is the artist of song number {i}"), ["music.search"]);
        }
        let index = NameIndex::build([
            ("music.album_details", "Get_Album_Details"),
            ("music.track_details", "Track_Details"),
            ("music.artist_details", "Get_Artist_Details"),
            ("music.search", "Search_Songs"),
        ]);
        let asked = index.asked("I'd like the detailed album info, and the artist too", &asks);
        assert_eq!(asked, [("music.album_details".to_string(), vec!["album".to_string(), "detail".to_string()])]);
        // The words of the name said apart, in two asks, are not its name.
        assert!(index.asked("Show the album of that track, then the artist's details", &asks).is_empty());
        // One word of the name is not enough.
        assert!(index.asked("Play an album", &asks).is_empty());
        // Nothing learned: the name alone asks for nothing.
        assert!(index.asked("the album details", &Asks::default()).is_empty());
    }

    /// A podcast catalogue: "episode" alone asks for the episode search; "the episode
    /// transcripts" names the transcript search, an alternative to it (neither reads the other),
    /// so the word said once gives way. Said again apart, or where the named call reads the
    /// other's output, the word's ask stays.
    #[test]
    fn a_word_said_once_in_a_sibling_name_gives_way_to_it() {
        let mut asks = Asks::default();
        for i in 0..4 {
            asks.learn(&format!("Find episode number {i}"), ["pod.episodes"]);
            asks.learn(&format!("Search the episode transcripts for topic {i}"), ["pod.transcripts"]);
        }
        let index = NameIndex::build([("pod.episodes", "Search_Episodes"), ("pod.transcripts", "Episode_Transcripts")]);
        let about = ["pod.episodes".to_string(), "pod.transcripts".to_string()];
        let way = |request: &str, reads: &dyn Fn(&str, &str) -> bool| {
            let named = index.asked(request, &asks);
            let seq = crate::read::asks::ask_word_seq(request);
            gives_way("episode", "pod.episodes", &about, &named, &seq, &said_words(request), reads)
        };
        let none = |_: &str, _: &str| false;
        assert!(way("Which episode transcripts mention Mars?", &none));
        assert!(!way("Find an episode about Mars and its episode transcripts", &none), "said twice");
        // Said again as the one the name said ("that episode"): still the name's.
        assert!(way("Which episode transcripts mention Mars? Play that episode after.", &none));
        assert!(!way("Which episode transcripts mention Mars? Play an episode after.", &none), "another one");
        assert!(!way("Which episode transcripts mention Mars?", &|a, b| a == "pod.transcripts" && b == "pod.episodes"));
        assert!(!way("Find an episode about Mars", &none), "no name said");
    }

    #[test]
    fn the_longer_name_said_is_the_ask() {
        let mut asks = Asks::default();
        for i in 0..4 {
            asks.learn(&format!("the price of stock number {i}"), ["fin.price", "fin.price_history"]);
        }
        let index = NameIndex::build([("fin.price", "Stock_Price"), ("fin.price_history", "Stock_Price_History")]);
        let asked = index.asked("the stock price history", &asks);
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0].0, "fin.price_history");
        assert_eq!(index.asked("the stock price", &asks)[0].0, "fin.price");
    }
}
