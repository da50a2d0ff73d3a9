//! The language the engine knows, as data: every word list of the reader, the memory, the filler
//! and the planners lives in one table (`lexicon/en.toml`, English, the default), each list with
//! what it is for and whether it is general knowledge or picked for a domain. The reader takes
//! the table in use from [`lexicon`]; another language or domain is another table
//! (`run.lexicon`, installed once at start with [`install`]), not new code.

use serde::Deserialize;
use std::sync::OnceLock;

/// The English table, compiled in.
const ENGLISH: &str = include_str!("lexicon/en.toml");

/// A list of words (lower-case), with why it exists.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Words {
    /// What the list is for.
    pub why: String,
    /// "general", or the domain or convention it was picked for.
    pub scope: String,
    words: Vec<String>,
}

impl Words {
    /// Whether `w` is one of the words.
    pub fn contains(&self, w: &str) -> bool {
        self.words.iter().any(|x| x == w)
    }

    /// The position of `w` in the list.
    pub fn position(&self, w: &str) -> Option<usize> {
        self.words.iter().position(|x| x == w)
    }

    /// The words, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.words.iter().map(String::as_str)
    }

    /// The word at position `i`.
    pub fn get(&self, i: usize) -> Option<&str> {
        self.words.get(i).map(String::as_str)
    }

    /// How many words the list has.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Whether any word of the list is a part of `text` (phrases and prefixes of names).
    pub fn any_in(&self, text: &str) -> bool {
        self.words.iter().any(|w| text.contains(w.as_str()))
    }

    /// Whether `text` starts with any word of the list.
    pub fn starts(&self, text: &str) -> bool {
        self.words.iter().any(|w| text.starts_with(w.as_str()))
    }
}

/// Pairs of a sign and what it stands for (a currency sign and its code).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pairs {
    /// What the pairs are for.
    pub why: String,
    /// "general", or the domain it was picked for.
    pub scope: String,
    /// (sign, meaning), in the order they are tried.
    pub pairs: Vec<(String, String)>,
}

/// A holiday on a fixed day: the words that name it and its month and day.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Holiday {
    /// Why it is read (said on the first entry).
    #[serde(default)]
    pub why: String,
    /// Its words, lower-case ("christmas", "eve").
    pub phrase: Vec<String>,
    /// Its month, 1–12.
    pub month: u32,
    /// Its day of the month.
    pub day: u32,
}

/// A quantity a request asks of a result (a price, a duration): the words that ask for it and the
/// field names that hold it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantity {
    /// Why it is read (said on the first entry).
    #[serde(default)]
    pub why: String,
    /// Its name ("price").
    pub name: String,
    /// Words that ask for it; one of two words or more is matched as a phrase, else as a prefix.
    pub cues: Vec<String>,
    /// Normalized field names that hold it.
    pub fields: Vec<String>,
}

/// The language the engine knows. Every list is required: a table that lacks one is refused.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // each list says what it is for in the table itself (`why`)
pub struct Lexicon {
    pub months: Words,
    pub weekdays: Words,
    pub ante_meridiem: Words,
    pub post_meridiem: Words,
    pub oclock: Words,
    pub morning: Words,
    pub evening: Words,
    pub dating_words: Words,
    pub week_ordinals: Words,
    pub last_words: Words,
    pub range_words: Words,
    pub day_words: Words,
    pub week_words: Words,
    pub month_words: Words,
    pub same_day_words: Words,
    pub span_prepositions: Words,
    pub night_words: Words,
    pub hour_words: Words,
    pub minute_words: Words,
    pub later_words: Words,
    pub earlier_words: Words,
    pub number_words: Words,
    pub tens_words: Words,
    pub one_words: Words,
    pub two_words: Words,
    pub currency_words: Words,
    pub currency_signs: Pairs,
    pub street_ends: Words,
    pub street_starts: Words,
    pub name_links: Words,
    pub pronouns: Words,
    pub contractions: Words,
    pub not_names: Words,
    pub never_masked: Words,
    pub labels: Words,
    pub web_domains: Words,
    pub order_leads: Words,
    pub age_leads: Words,
    pub measure_units: Words,
    pub range_leads: Words,
    pub range_joins: Words,
    pub range_low_params: Words,
    pub range_high_params: Words,
    pub ordering_glosses: Pairs,
    pub not_superlatives: Words,
    pub compare_words: Words,
    pub every_words: Words,
    pub item_words: Words,
    pub them_words: Words,
    pub option_references: Words,
    pub back_references: Words,
    pub counted: Words,
    pub party_possessives: Words,
    pub party_speakers: Words,
    pub party_joiners: Words,
    pub party_companions: Words,
    pub party_one: Words,
    pub party_many: Words,
    pub party_ages: Words,
    pub party_pairs: Words,
    pub party_children: Words,
    pub party_groups: Words,
    pub party_of: Words,
    pub party_units: Words,
    pub person_words: Words,
    pub route_origin_leads: Words,
    pub route_via_leads: Words,
    pub route_dest_leads: Words,
    pub route_return_leads: Words,
    pub stay_words: Words,
    pub each_words: Words,
    pub stay_places: Words,
    pub function_words: Words,
    pub option_meaning_words: Words,
    pub clause_links: Words,
    pub sibilant_plurals: Words,
    pub form_endings: Words,
    pub plural_endings: Words,
    pub keyboard_rows: Words,
    pub participle_endings: Words,
    pub asking_verbs: Words,
    pub highest_words: Words,
    pub lowest_words: Words,
    pub start_params: Words,
    pub end_params: Words,
    pub end_date_params: Words,
    pub name_params: Words,
    pub text_params: Words,
    pub file_params: Words,
    pub holidays: Vec<Holiday>,
    pub quantities: Vec<Quantity>,
}

/// A table that cannot be used, with what is wrong and where.
#[derive(Debug, thiserror::Error)]
#[error("lexicon {source_name}: {message}")]
pub struct LexiconError {
    source_name: String,
    message: String,
}

impl Lexicon {
    /// Reads a table (TOML), checking what the reader relies on: twelve months, seven weekdays,
    /// twenty number words and eight tens, lower-case words.
    pub fn parse(text: &str, source_name: &str) -> Result<Lexicon, LexiconError> {
        let error = |message: String| LexiconError { source_name: source_name.to_string(), message };
        let lex: Lexicon = toml::from_str(text).map_err(|e| error(e.to_string()))?;
        for (name, list, len) in [
            ("months", &lex.months, 12),
            ("weekdays", &lex.weekdays, 7),
            ("number_words", &lex.number_words, 20),
            ("tens_words", &lex.tens_words, 8),
            ("week_ordinals", &lex.week_ordinals, 4),
        ] {
            if list.len() != len {
                return Err(error(format!("`{name}` must hold {len} words in order, it holds {}", list.len())));
            }
        }
        if let Some(h) = lex.holidays.iter().find(|h| chrono::NaiveDate::from_ymd_opt(2024, h.month, h.day).is_none()) {
            return Err(error(format!("holiday {:?}: no day {}-{}", h.phrase.join(" "), h.month, h.day)));
        }
        Ok(lex)
    }

    /// The English table compiled into the engine.
    pub fn english() -> Lexicon {
        Lexicon::parse(ENGLISH, "en.toml").expect("the compiled-in English lexicon is valid")
    }
}

/// The table in use and the text it was read from.
static IN_USE: OnceLock<(String, Lexicon)> = OnceLock::new();

/// The table in use: the one [`install`]ed at start, else English.
pub fn lexicon() -> &'static Lexicon {
    &IN_USE.get_or_init(|| (ENGLISH.to_string(), Lexicon::english())).1
}

/// The text of the table in use (TOML).
pub(crate) fn text_in_use() -> &'static str {
    lexicon();
    IN_USE.get().map(|(t, _)| t.as_str()).unwrap_or(ENGLISH)
}

/// Makes the table `text` (read from `source_name`) the one in use, before the first request is
/// read. A process reads one language: installing another table once one is in use is refused
/// (the same table again is no change).
pub fn install(text: &str, source_name: &str) -> Result<(), LexiconError> {
    let lex = Lexicon::parse(text, source_name)?;
    let (used, _) = IN_USE.get_or_init(|| (text.to_string(), lex));
    if used != text {
        return Err(LexiconError {
            source_name: source_name.to_string(),
            message: "another lexicon is already in use by this process; restart it to change the language".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_english_table_is_whole_and_every_list_says_why() {
        let lex = Lexicon::english();
        assert_eq!(lex.months.position("march"), Some(2));
        assert_eq!(lex.weekdays.get(6), Some("sunday"));
        let text = ENGLISH;
        let lists = text.lines().filter(|l| l.starts_with('[') && !l.starts_with("[[")).count();
        let whys = text.lines().filter(|l| l.starts_with("why = ")).count();
        assert_eq!(whys, lists + 2, "every list, and the first holiday and quantity, say why");
        for l in text.lines().filter(|l| l.starts_with("scope = ")) {
            assert!(l.len() > "scope = \"\"".len(), "{l}");
        }
    }

    #[test]
    fn a_table_that_lacks_a_list_or_breaks_an_order_is_refused_naming_it() {
        let no_months = ENGLISH.replace("[months]", "[months_gone]");
        let e = Lexicon::parse(&no_months, "de.toml").unwrap_err().to_string();
        assert!(e.starts_with("lexicon de.toml:") && e.contains("months"), "{e}");
        let short = ENGLISH.replace("\"saturday\", \"sunday\"", "\"saturday\"");
        let e = Lexicon::parse(&short, "de.toml").unwrap_err().to_string();
        assert!(e.contains("`weekdays` must hold 7 words"), "{e}");
    }
}
