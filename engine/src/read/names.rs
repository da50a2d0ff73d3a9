//! Reading the names a request says, on the one tokenizer: runs of capitalised words (joined by
//! short lower-case links such as "de", "la", "of"), not a sentence's lone first word, a verb or
//! adverb that opens a sentence, a pronoun's contraction, a label; a house number joins its street.

use super::dates::{month_of, weekday_of};
use super::lexicon::lexicon;
use super::reading::Token;
use super::scan::{cues_at, RequestValues, Scan};

/// Whether a name ends like a street's ("Pine St", "Bay St.", "Fifth Avenue", "Abbey Road",
/// "Dallas Parkway").
fn is_street(w: &str) -> bool {
    lexicon().street_ends.contains(&w.trim_end_matches('.').to_lowercase())
}

/// Whether a name opens like a street's in the languages that put the word first ("Rue
/// Durocher", "Via Roma", "Calle Mayor", "Avenida Paulista", "Boulevard Saint-Germain").
fn opens_street(w: &str) -> bool {
    lexicon().street_starts.contains(&w.to_lowercase())
}

pub(crate) fn is_capitalised(w: &str) -> bool {
    let mut cs = w.chars();
    matches!(cs.next(), Some(c) if c.is_uppercase()) && w.chars().any(|c| c.is_alphabetic())
}

/// Whether `w` opens a request or names a day or a pronoun's contraction: never part of a place
/// or product name.
pub(crate) fn is_stop_name(w: &str) -> bool {
    let lex = lexicon();
    let l = w.to_lowercase().replace('’', "'");
    // A pronoun's contraction ("I've", "It's", "We're") is the pronoun.
    let stem = lex.contractions.iter().find_map(|c| l.strip_suffix(c)).unwrap_or(&l);
    lex.not_names.contains(&l)
        || (lex.pronouns.contains(stem) || lex.not_names.contains(stem)) && stem != l
        || month_of(&l).is_some()
        || weekday_of(&l).is_some()
        || l.chars().all(|c| c.is_ascii_digit())
}

/// The names the request says, into `v` (with the words around each and where each starts).
pub(crate) fn names(scan: &Scan<'_>, v: &mut RequestValues) {
    let Scan { toks, lower, used } = scan;
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
        let initial =
            |t: &Token<'_>| t.text.len() == 1 && t.text.chars().all(|c| c.is_ascii_uppercase()) && t.punct == Some('.');
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
            } else if lexicon().name_links.contains(n)
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
            .map(|(k, w)| if initial(&toks[i + k]) && k + 1 < words.len() { format!("{w}.") } else { w.to_string() })
            .collect::<Vec<_>>()
            .join(" ");
        // A sentence's first word is capitalised by grammar: alone, or with only a count after
        // it ("Order 2 kilograms", "Convert 350 degrees"), it is no name.
        let counted = words.len() == 2 && words[1].chars().all(|c| c.is_ascii_digit());
        let lone_sentence_start = starts_sentence && (words.len() == 1 || counted);
        let street = is_street(words.last().copied().unwrap_or_default()) || opens_street(words[0]);
        let (name, first) = if numbered && words.len() >= 2 && street {
            (format!("{} {name}", toks[i - 1].text), i - 1)
        } else {
            (name, i)
        };
        if !lone_sentence_start && !v.names.contains(&name) {
            v.names.push(name);
            v.name_cues.push(cues_at(toks, lower, first, j));
            v.name_at.push(first);
        }
        i = j + 1;
    }
}

#[cfg(test)]
mod tests {
    use crate::memory::analogy::{Analogy, Transfer};
    use crate::read::RequestValues;
    use chrono::NaiveDate;
    use serde_json::json;

    #[test]
    fn a_street_address_takes_the_new_address_whole_with_its_house_number() {
        let d = NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let old = "I want to take a taxi from 717 Bay St. to York University in 10 minutes.";
        let new = "I want to take a taxi from 5815 Rue Durocher to McGill University in 15 minutes.";
        let a = Analogy::new(old, new, &RequestValues::extract(new, d), d);
        assert_eq!(a.transfer(&json!("717 Bay St."), None), Transfer::Mapped(json!("5815 Rue Durocher")));
        let b = Analogy::new(new, old, &RequestValues::extract(old, d), d);
        assert_eq!(b.transfer(&json!("5815 Rue Durocher"), None), Transfer::Mapped(json!("717 Bay St")));
    }
}
