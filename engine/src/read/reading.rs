//! The request read once, by one tokenizer, for every part of the planner: the typed values
//! ([`super::values::RequestValues`]: dates, times, counts, names, labelled values), the words
//! the judge looks for ([`word_list`]), the meaning the long-term memory embeds
//! ([`meaning_text`]), the words an enumeration value is said in ([`words`], [`says`]), the
//! ordering a request asks for ([`ordering_words`]).
//!
//! Nothing else in the planner splits text; a test keeps it so.

use super::lexicon::lexicon;

/// A word of the text as written, with the punctuation that followed it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token<'a> {
    /// The word without trailing punctuation or leading brackets and quotes.
    pub text: &'a str,
    /// Punctuation that followed it (',' '.' '?' '!' ';' ':').
    pub punct: Option<char>,
    /// Whether it opened a bracket or a quote (`(11 AM`): what came before does not run on.
    pub opens: bool,
}

impl Token<'_> {
    /// Whether a sentence ends after it.
    pub(crate) fn ends_sentence(&self) -> bool {
        matches!(self.punct, Some('.' | '?' | '!'))
    }
}

/// The text's words as written, split at white space, trailing punctuation noted apart.
pub(crate) fn tokens(text: &str) -> Vec<Token<'_>> {
    text.split_whitespace()
        .map(|w| {
            let trimmed = w.trim_end_matches([',', '.', '?', '!', ';', ':', ')', '"', '\'']);
            let punct = w[trimmed.len()..].chars().find(|c| matches!(c, ',' | '.' | '?' | '!' | ';' | ':'));
            let text = trimmed.trim_start_matches(['(', '"', '\'']);
            Token { text, punct, opens: text.len() < trimmed.len() }
        })
        .filter(|t| !t.text.is_empty())
        .collect()
}

/// The parts of a word between signs, lower-case (`highest-rated` → `highest`, `rated`;
/// `PREMIUM_ECONOMY` → `premium`, `economy`).
fn parts(word: &str) -> impl Iterator<Item = String> + '_ {
    word.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// A word's lower-case parts between signs (`Wi-Fi` → `wi`, `fi`).
pub(crate) fn word_parts(word: &str) -> Vec<String> {
    parts(word).collect()
}

/// The text's lower-case words, split at every sign.
pub(crate) fn word_list(text: &str) -> Vec<String> {
    tokens(text).iter().flat_map(|t| parts(t.text)).collect()
}

/// Lower-case words joined by single spaces (`PREMIUM_ECONOMY` → `premium economy`).
pub(crate) fn words(text: &str) -> String {
    word_list(text).join(" ")
}

/// Whether `text` (as [`words`] gives it) says `value` as whole words.
pub(crate) fn says(text: &str, value: &str) -> bool {
    let w = words(value);
    !w.is_empty() && format!(" {text} ").contains(&format!(" {w} "))
}

/// Where `needle` next stands in `hay` as written, from byte `from` on, with no letter or digit
/// touching it on either side ("Paris" in "Paris, France", not in "Parisian"); an occurrence
/// that is part of a longer word is skipped whole.
pub(crate) fn whole_at(hay: &str, needle: &str, mut from: usize) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    while let Some(at) = hay.get(from..)?.find(needle).map(|p| p + from) {
        let end = at + needle.len();
        let bounded = hay[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric())
            && hay[end..].chars().next().is_none_or(|c| !c.is_alphanumeric());
        if bounded {
            return Some(at);
        }
        from = end;
    }
    None
}

/// White space folded to single spaces (a description shown in a prompt).
pub(crate) fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text's first word as written (`"Rome, Italy"` → `Rome,`), or `""`.
pub(crate) fn first_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or_default()
}

/// How many words the text has.
pub(crate) fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// The request as its structure reads: lower-case words, with numbers, capitalised words and
/// month names masked (`<num>`, `<name>`, `<month>`) and runs of one mask folded into one.
pub(crate) fn delexicalize(text: &str) -> Vec<String> {
    let lex = lexicon();
    let mut out: Vec<String> = Vec::new();
    let mut sentence_start = true;
    for t in tokens(text) {
        let w = t.text.trim_matches(|c: char| !c.is_alphanumeric());
        if w.is_empty() {
            sentence_start = t.ends_sentence() || sentence_start;
            continue;
        }
        let lower = w.to_lowercase();
        let token = if w.chars().any(|c| c.is_ascii_digit()) {
            "<num>".to_string()
        } else if lex.months.contains(&lower) {
            "<month>".to_string()
        } else if !sentence_start
            && w.chars().next().is_some_and(char::is_uppercase)
            && !lex.never_masked.contains(&lower)
        {
            "<name>".to_string()
        } else {
            lower
        };
        if !(token.starts_with('<') && out.last() == Some(&token)) {
            out.push(token);
        }
        sentence_start = t.ends_sentence();
    }
    out
}

/// The request's meaning as the long-term memory embeds it: its words with every place, name,
/// number and month masked (`rent a car at X at N am on M N`), so that two requests asking the
/// same thing of other places and days are near, however each is worded.
pub fn meaning_text(text: &str) -> String {
    delexicalize(text)
        .into_iter()
        .map(|t| match t.as_str() {
            "<num>" => "N".to_string(),
            "<month>" => "M".to_string(),
            "<name>" => "X".to_string(),
            _ => t,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn superlative(w: &str) -> bool {
    let lex = lexicon();
    lex.order_leads.contains(w)
        || (w.len() >= 6
            && w.ends_with("est")
            && w.chars().all(char::is_alphabetic)
            && !lex.not_superlatives.contains(w))
}

/// The ordering words a request says, each once, lower-case: every superlative ("cheapest",
/// "fastest", "nearest", "best") and the word it leads ("highest-rated" → `highest`, `rated`;
/// "most popular" → `most`, `popular`). What an ordering parameter's value is learned from.
pub fn ordering_words(text: &str) -> Vec<String> {
    // (word, joined to the next one by a hyphen, a name: capitalized inside its sentence —
    // "Budapest", "Best Western" — which orders nothing)
    let mut ws: Vec<(String, bool, bool)> = Vec::new();
    let toks = tokens(text);
    for (k, t) in toks.iter().enumerate() {
        let starts_sentence = k == 0 || toks[k - 1].ends_sentence();
        let name = !starts_sentence && t.text.chars().next().is_some_and(char::is_uppercase);
        for chunk in t.text.split(|c: char| !c.is_alphanumeric() && c != '-').filter(|c| !c.is_empty()) {
            let sub: Vec<String> = parts(chunk).collect();
            let n = sub.len();
            ws.extend(sub.into_iter().enumerate().map(|(i, w)| (w, i + 1 < n, name)));
        }
    }
    let mut out = Vec::new();
    for (i, (w, hyphen, name)) in ws.iter().enumerate() {
        if *name || !superlative(w) {
            continue;
        }
        out.push(w.clone());
        let next = ws.get(i + 1).filter(|(n, _, _)| n.len() >= 3 && n.chars().all(char::is_alphabetic));
        let leads = || lexicon().order_leads.position(w).is_some_and(|i| i > 0);
        if let Some((n, _, _)) = next.filter(|_| *hyphen || leads()) {
            out.push(n.clone());
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Whether `value` is `name` with one letter left out, added or changed (two for a name of a
/// dozen letters or more): a typing slip, not another name. Both lower-case; names of five
/// letters or more only.
pub(crate) fn mistyped(value: &str, name: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (value.chars().collect(), name.chars().collect());
    if b.len() < 5 || a == b {
        return false;
    }
    let allowed = if b.len() >= 12 { 2 } else { 1 };
    if a.len().abs_diff(b.len()) > allowed {
        return false;
    }
    // Levenshtein distance, one row at a time.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()] <= allowed
}

/// Whether `value` is the name `name` shortened, as a call is often sent one ("Stanford" of
/// "Stanford University", "Ursula Le Guin" of "Ursula Kroeber Le Guin"): its words are some of
/// the name's, in the name's order, beginning with the name's first word (a name keeps its head),
/// and fewer. Both lower-case.
pub(crate) fn shortened(value: &str, name: &str) -> bool {
    // A letter alone is no word of the name ("John's": the possessive's `s`).
    let (v, n) = (word_list(value), word_list(name));
    let n: Vec<String> = n.into_iter().filter(|w| w.chars().count() >= 2).collect();
    if v.is_empty() || v.len() >= n.len() || v[0] != n[0] || v[0].chars().count() < 3 {
        return false;
    }
    let mut rest = n.iter();
    v.iter().all(|w| rest.any(|x| x == w))
}

/// Whether the request compares options ("compare", "both", "each", …).
pub(crate) fn compares(request: &str) -> bool {
    word_list(request).iter().any(|w| lexicon().compare_words.contains(w))
}

/// How many options the request asks about one by one: a number from two to ten said before the
/// things it counts (a plural among the next three words), which the request later points back
/// at ("find the two highest-rated galleries and describe them", "list three repositories and
/// their licences"). Not a count of people, of units of time or of what an API takes as a number
/// ("2 adults", "three nights", "a family of four"). `None` where no count is said so, or where
/// two different counts are.
pub(crate) fn counted_options(request: &str) -> Option<usize> {
    let lex = lexicon();
    let toks = tokens(request);
    let lower: Vec<String> = toks.iter().map(|t| t.text.to_lowercase()).collect();
    let unit = |w: &str| {
        [&lex.function_words, &lex.person_words, &lex.counted, &lex.party_many, &lex.currency_words]
            .iter()
            .chain([&lex.night_words, &lex.day_words, &lex.week_words, &lex.month_words].iter())
            .chain([&lex.hour_words, &lex.minute_words].iter())
            .any(|l| l.contains(w))
    };
    let mut found: Option<usize> = None;
    for i in 0..toks.len() {
        let Some(n) = lower[i].parse::<f64>().ok().or_else(|| lex.number_words.position(&lower[i]).map(|n| n as f64))
        else {
            continue;
        };
        if !(2.0..=10.0).contains(&n) || n.fract() != 0.0 || toks[i].punct.is_some() {
            continue;
        }
        if i > 0 && lex.party_of.contains(&lower[i - 1]) {
            continue;
        }
        let next = lower.get(i + 1).map(String::as_str).unwrap_or_default();
        if next.is_empty() || unit(next) || lex.party_ages.iter().any(|a| next.starts_with(a)) {
            continue;
        }
        // The things counted: a plural within the clause, before its punctuation.
        let mut counted = false;
        for (k, w) in lower.iter().enumerate().skip(i + 1).take(3) {
            if unit(w) {
                break;
            }
            if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
                counted = true;
                break;
            }
            if toks[k].punct.is_some() {
                break;
            }
        }
        let pointed_at = lower.iter().skip(i + 2).any(|w| lex.option_references.contains(w));
        if !(counted && pointed_at) {
            continue;
        }
        match found {
            Some(m) if m != n as usize => return None,
            _ => found = Some(n as usize),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count of things the request then points back at is how many to ask about one by one;
    /// counts of people, of time and of what a call takes are not.
    #[test]
    fn a_count_the_request_points_back_at_is_how_many_options() {
        let n = counted_options;
        assert_eq!(n("List the two most-starred repositories and show their open issues."), Some(2));
        assert_eq!(n("Find 3 highly rated bakeries in Lyon and get the opening hours of each."), Some(3));
        assert_eq!(n("Pick the four newest papers on graph search and summarize them."), Some(4));
        // Nothing points back: one answer about a count, not a call per thing.
        assert_eq!(n("Show the two most-starred repositories."), None);
        // People, time, money and a group's size are not options.
        assert_eq!(n("Reserve a table for 4 people and confirm it with them."), None);
        assert_eq!(n("Rent a van for three days and tell me their rates."), None);
        assert_eq!(n("A family of five wants two museum passes: what do these cost?"), Some(2));
        assert_eq!(n("Our 2 children and their 3-year-old cousin need 5 euros each."), None);
        // Two different counts: which one the calls follow is not said.
        assert_eq!(n("Compare two laptops and three tablets and rank them."), None);
    }

    #[test]
    fn a_whole_word_occurrence_skips_those_inside_longer_words() {
        assert_eq!(whole_at("Parisian Paris, France", "Paris", 0), Some(9));
        assert_eq!(whole_at("Paris, France", "Paris", 1), None);
        assert_eq!(whole_at("Longueuil Shopping Mall", "Longueuil", 0), Some(0));
        assert_eq!(whole_at("anything", "", 0), None);
    }

    #[test]
    fn ordering_words_are_superlatives_and_the_word_they_lead() {
        assert_eq!(
            ordering_words("Find the highest-rated tours and the cheapest hotel."),
            ["cheapest", "highest", "rated"]
        );
        assert_eq!(
            ordering_words("Show me the most popular spots, top rated first"),
            ["most", "popular", "rated", "top"]
        );
        assert_eq!(ordering_words("Our best option: the fastest flight"), ["best", "fastest"]);
        assert!(ordering_words("I suggest a forest walk; any request of interest?").is_empty());
    }

    #[test]
    fn one_tokenizer_gives_every_reading_the_same_words() {
        let text = "Pick up at São Paulo's GRU (terminal 2) at 8 AM; drop-off: Rio, May 3rd.";
        assert_eq!(
            word_list(text),
            [
                "pick", "up", "at", "são", "paulo", "s", "gru", "terminal", "2", "at", "8", "am", "drop", "off", "rio",
                "may", "3rd"
            ]
        );
        assert_eq!(meaning_text(text), "pick up at X terminal N at N am drop-off X M N");
        assert!(says(&words(text), "drop off"));
        assert_eq!(
            toolgraph_schema::fields::name_key("Pick-up_Time"),
            toolgraph_schema::fields::name_key("pickUpTime")
        );
    }

    /// Nothing else in the reader, the memory, the filler, the planners or the run splits a text into words: every reading goes
    /// through this module, so two parts can no longer read one request two ways.
    #[test]
    fn the_typed_reading_is_the_only_tokenizer() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let splitters = [
            "split_whitespace(",
            "split(|c: char| !c.is_alphanumeric()",
            "split(char::is_whitespace",
            ".filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase)",
        ];
        let mut found = Vec::new();
        for dir in ["read", "memory", "fill", "plan", "run"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.file_name().is_some_and(|n| n == "reading.rs") || path.extension().is_none_or(|e| e != "rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    if splitters.iter().any(|s| line.contains(s)) {
                        found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(found.is_empty(), "text split outside read/reading.rs:\n{}", found.join("\n"));
    }

    /// The lexicon is the only place a word list lives: no list of string literals (`["a", "b"]`,
    /// `"a" | "b"`) in the code of the reader, the memory, the filler, the planners or the run,
    /// outside its tests. Lists that are not language (the JSON schemas of an LLM's replies, the
    /// operators of a plan program) are named here with why.
    #[test]
    fn the_lexicon_is_the_only_place_a_word_list_lives() {
        // (file, the list's text (empty: the whole file), why it is no language)
        let not_language = [
            ("plan/replies.rs", "", "the JSON schemas of the LLM's replies"),
            ("plan/program.rs", "", "the operators of the plan program's conditions"),
            ("memory/store.rs", r#"&["request", "chain"]"#, "the payload fields of the memory's points"),
            ("plan/llm.rs", r#""open" | """#, "the values of a setting"),
            ("read/spelling.rs", r#""words" | "phrase" | "cues""#, "the keys of the lexicon's own table"),
        ];
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let literal = r#""(?:[^"\\]|\\.)*""#;
        let array = regex_lite(&format!(r"\[\s*{literal}\s*,\s*{literal}"));
        let alternation = regex_lite(&format!(r"{literal}\s*\|\s*{literal}"));
        let mut found = Vec::new();
        for dir in ["read", "memory", "fill", "plan", "run"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                let name = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
                let whole = |(f, l, _): &(&str, &str, &str)| *f == name && l.is_empty();
                // A module's tests in a file of their own (`*_tests.rs`) are tests too.
                let tests = name.ends_with("_tests.rs");
                if path.extension().is_none_or(|e| e != "rs") || tests || not_language.iter().any(whole) {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                // Comment lines out; a list written over lines is read as one.
                let lines: Vec<&str> =
                    code.lines().map(|l| if l.trim_start().starts_with("//") { "" } else { l }).collect();
                let allowed =
                    |l: &str| not_language.iter().any(|(f, t, _)| *f == name && !t.is_empty() && l.contains(t));
                let flat = lines.iter().filter(|l| !allowed(l)).copied().collect::<Vec<_>>().join(" ");
                if array(&flat) || alternation(&flat) {
                    let at = lines.iter().position(|l| !allowed(l) && (array(l) || alternation(l)));
                    found
                        .push(format!("{name}: a word list (line {})", at.map_or("?".into(), |n| (n + 1).to_string())));
                }
            }
        }
        assert!(found.is_empty(), "word lists outside the lexicon (read/lexicon/en.toml):\n{}", found.join("\n"));
    }

    /// A tiny matcher for the two shapes above (no regex crate in the engine): `pattern` is one of
    /// the two built there, read as "a literal, a separator, a literal".
    fn regex_lite(pattern: &str) -> impl Fn(&str) -> bool {
        let array = pattern.starts_with(r"\[");
        move |line: &str| {
            let lits = literals(line);
            lits.windows(2).any(|w| {
                let between = line[w[0].1..w[1].0].trim();
                let before = line[..w[0].0].trim_end();
                if array {
                    between == "," && (before.ends_with('[') || before.ends_with("&["))
                } else {
                    between == "|"
                }
            })
        }
    }

    /// The string literals of a line: (start, end) byte offsets, quotes included.
    fn literals(line: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut start = None;
        let mut escaped = false;
        for (i, c) in line.char_indices() {
            match (start, c) {
                (Some(_), '\\') if !escaped => escaped = true,
                (Some(s), '"') if !escaped => {
                    out.push((s, i + 1));
                    start = None;
                }
                (None, '"') => start = Some(i),
                _ => escaped = false,
            }
        }
        out
    }
}
