//! A party counted from its members, a count of people the request never writes as one number:
//! "my two friends and I" are 3, "my partner, my parents, and I" 4, "me and my brother" 2, "fly
//! with my 3-year-old and 10-year-old kids and my wife" 2 adults (and two children), "our research
//! group of five" 5. The members are the lexicon's (`party_one`, `party_many`); a list of them is
//! a party only where the speaker is in it ("… and I", "me and …", "with my …").

use super::lexicon::lexicon;
use super::scan::{small_number, Scan};

/// A party the request says: the tokens it spans, how many it counts and in what word (the
/// lexicon's `party_units`: everyone where no child is in it, else its adults).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Party {
    pub first: usize,
    pub last: usize,
    pub value: f64,
    pub word: String,
    /// The token of the number it reads as the party's size ("a group of **five** plans"), not
    /// a count of the word after it.
    pub size_at: Option<usize>,
}

/// A member said in a party: how many (unknown for "my friends"), whether children, its last token.
struct Member {
    count: Option<f64>,
    child: bool,
    end: usize,
}

/// The parties a request says, in order.
pub(crate) fn parties(scan: &Scan<'_>) -> Vec<Party> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < scan.toks.len() {
        match members_from(scan, i).or_else(|| group_at(scan, i)) {
            Some(p) => {
                i = p.last + 1;
                out.push(p);
            }
            None => i += 1,
        }
    }
    out
}

/// A number said before a member or after a group ("two", "3"), up to 99; not "a" or "single".
fn number(w: &str) -> Option<f64> {
    let lex = lexicon();
    if let Ok(n) = w.parse::<u32>() {
        return (1..100).contains(&n).then_some(f64::from(n));
    }
    if lex.one_words.contains(w) || lex.two_words.contains(w) {
        return None;
    }
    small_number(w).filter(|n| *n >= 1.0)
}

/// An age written as one word ("3-year-old"): the years.
fn age(w: &str) -> Option<f64> {
    let (n, rest) = w.split_once('-')?;
    lexicon().party_ages.contains(rest).then(|| number(n)).flatten()
}

/// The ages of the children a request says, in order: an age written as one word under 18 ("my
/// 3-year-old and 10-year-old kids", "a four-year-old child", "our seven-year-old"), and the
/// numbers listed after an age word (the lexicon's `age_leads`) in a sentence that names
/// children, each under 18 ("two kids in the group, aged seven and ten", "children aged 4 and 9").
pub(crate) fn child_ages(scan: &Scan<'_>) -> Vec<f64> {
    let lex = lexicon();
    let Scan { toks, lower, .. } = scan;
    let young = |a: &f64| *a < 18.0;
    let mut out = Vec::new();
    let mut sentence_start = 0;
    let mut i = 0;
    while i < toks.len() {
        if i > 0 && toks[i - 1].ends_sentence() {
            sentence_start = i;
        }
        if let Some(a) = age(&lower[i]).filter(young) {
            out.push(a);
        } else if lex.age_leads.contains(&lower[i]) && toks[i].punct.is_none() {
            let children_named = (sentence_start..i).any(|k| lex.party_children.contains(&lower[k]));
            let (mut listed, mut k) = (Vec::new(), i + 1);
            while let Some(n) = lower.get(k).and_then(|w| number(w)) {
                listed.push(n);
                let joined = toks[k].punct.is_none_or(|p| p == ',')
                    && lower.get(k + 1).is_some_and(|w| lex.party_joiners.contains(w));
                if toks[k].punct.is_some_and(|p| p != ',') || !(joined || toks[k].punct == Some(',')) {
                    break;
                }
                k += if joined { 2 } else { 1 };
            }
            if children_named && !listed.is_empty() && listed.iter().all(young) {
                out.extend(listed);
                i = k;
            }
        }
        i += 1;
    }
    out
}

/// A member from token `i` on (after its possessive): "two friends", "3-year-old and
/// 10-year-old kids", "three family members", "best friend"; the member word within three
/// words, the words before it plain words of one clause.
fn member(scan: &Scan<'_>, mut i: usize) -> Option<Member> {
    let lex = lexicon();
    let Scan { toks, lower, .. } = scan;
    let count = lower.get(i).and_then(|w| number(w));
    if count.is_some() {
        i += 1;
    }
    let mut ages = Vec::new();
    while let Some(a) = lower.get(i).and_then(|w| age(w)) {
        ages.push(a);
        i += 1;
        let joined = toks[i - 1].punct.is_none() && lower.get(i).is_some_and(|w| lex.party_joiners.contains(w));
        if joined && lower.get(i + 1).and_then(|w| age(w)).is_some() {
            i += 1;
        }
    }
    if count.is_some() || !ages.is_empty() {
        // "my two, and…" is no member.
        if toks[i - 1].punct.is_some() {
            return None;
        }
    }
    for k in i..(i + 3).min(toks.len()) {
        let w = lower[k].as_str();
        let (one, many) = (lex.party_one.contains(w), lex.party_many.contains(w));
        if one || many {
            let child = lex.party_children.contains(w) || (!ages.is_empty() && ages.iter().all(|a| *a < 18.0));
            let n = count.or_else(|| (!ages.is_empty()).then_some(ages.len() as f64)).or_else(|| {
                if one {
                    Some(1.0)
                } else {
                    lex.party_pairs.contains(w).then_some(2.0)
                }
            });
            return Some(Member { count: n, child, end: k });
        }
        let plain = w.chars().all(|c| c.is_alphabetic() || c == '-');
        if toks[k].punct.is_some() || !plain || lex.party_joiners.contains(w) || lex.party_possessives.contains(w) {
            return None;
        }
    }
    None
}

/// A list of members from token `start` that the speaker is in: "my partner, my parents, and I",
/// "me and my brother", "with my kids and my wife".
fn members_from(scan: &Scan<'_>, start: usize) -> Option<Party> {
    let lex = lexicon();
    let Scan { toks, lower, .. } = scan;
    let word = |k: usize| lower.get(k).map(String::as_str).unwrap_or("");
    let speaker_at = |k: usize| lex.party_speakers.contains(word(k));
    let mut i = start;
    // "me and my brother", "me, my wife and …"
    let mut speaker = speaker_at(i);
    if speaker {
        if toks[i].punct == Some(',') {
            i += usize::from(lex.party_joiners.contains(word(i + 1))) + 1;
        } else if toks[i].punct.is_none() && lex.party_joiners.contains(word(i + 1)) {
            i += 2;
        } else {
            return None;
        }
    }
    if !lex.party_possessives.contains(word(i)) {
        return None;
    }
    // "with my wife": the speaker goes along.
    speaker |= i > 0 && lex.party_companions.contains(word(i - 1));
    let mut members = Vec::new();
    let mut last;
    loop {
        if lex.party_possessives.contains(word(i)) {
            i += 1;
        }
        let m = member(scan, i)?;
        last = m.end;
        let end = m.end;
        members.push(m);
        let comma = toks[end].punct == Some(',');
        if toks[end].punct.is_some() && !comma {
            break;
        }
        let mut j = end + 1;
        let joined = lex.party_joiners.contains(word(j));
        if joined {
            j += 1;
        }
        if !(joined || comma) {
            break;
        }
        if speaker_at(j) {
            speaker = true;
            last = j;
            break;
        }
        // The next member, with its possessive or without ("my wife and two kids").
        let next = if lex.party_possessives.contains(word(j)) { j + 1 } else { j };
        if member(scan, next).is_none() {
            break;
        }
        i = j;
    }
    if !speaker {
        return None;
    }
    let adults: Option<f64> = members.iter().filter(|m| !m.child).map(|m| m.count).sum();
    let children = members.iter().any(|m| m.child);
    let unit = lex.party_units.get(usize::from(children))?;
    Some(Party { first: start, last, value: adults? + 1.0, word: unit.to_string(), size_at: None })
}

/// A group's size said after it: "our group of five", "a party of 6" (not "a group of 5 people",
/// counted as it is written).
fn group_at(scan: &Scan<'_>, i: usize) -> Option<Party> {
    let lex = lexicon();
    let Scan { toks, lower, .. } = scan;
    if !lex.party_groups.contains(lower.get(i)?) || !lex.party_of.contains(lower.get(i + 1)?) {
        return None;
    }
    if toks[i].punct.is_some() || toks[i + 1].punct.is_some() {
        return None;
    }
    let n = number(lower.get(i + 2)?)?;
    let counted_after = toks[i + 2].punct.is_none() && lower.get(i + 3).is_some_and(|w| lex.person_words.contains(w));
    let word = lex.party_units.get(0).unwrap_or_default().to_string();
    // Read where the size is said, as a count written there would be.
    (!counted_after).then_some(Party { first: i + 2, last: i + 2, value: n, word, size_at: Some(i + 2) })
}

#[cfg(test)]
mod tests {
    use crate::read::values::RequestValues;
    use chrono::NaiveDate;

    fn read(text: &str) -> Vec<(f64, String)> {
        let v = RequestValues::extract(text, NaiveDate::from_ymd_opt(2025, 3, 1).unwrap());
        v.numbers.iter().map(|c| (c.value, c.word.clone())).collect()
    }

    fn party(text: &str) -> Option<(f64, String)> {
        let units = &crate::read::lexicon().party_units;
        read(text).into_iter().find(|(_, w)| units.contains(w))
    }

    /// A restaurant booking: the table is for everyone the request names with the speaker.
    #[test]
    fn a_table_is_counted_from_the_people_named_with_the_speaker() {
        let people = |n: f64| Some((n, "people".to_string()));
        assert_eq!(party("My two colleagues and I would like a table at Nopa on Friday."), people(3.0));
        assert_eq!(party("Book dinner for my husband, my parents, and me at 7 pm."), people(4.0));
        assert_eq!(party("Me and my best friend want the tasting menu."), people(2.0));
        assert_eq!(party("Find a quiet place where I can eat with my sister."), people(2.0));
        assert_eq!(party("My four teammates and I are celebrating a win."), people(5.0));
        assert_eq!(party("Our book club of seven needs a private room."), None, "a club is not a group word");
        assert_eq!(party("Our study group of six needs a long table."), people(6.0));
        assert!(!read("Our study group of six needs a long table.").contains(&(6.0, "needs".to_string())));
        assert_eq!(party("A table for me, my partner and my parents, please."), people(4.0));
        // What is written as a count stays as written.
        assert!(read("My two colleagues and I would like a table.").contains(&(2.0, "colleagues".to_string())));
    }

    /// Children are counted apart: the party's number is its adults.
    #[test]
    fn a_party_with_children_counts_its_adults() {
        let adults = |n: f64| Some((n, "adults".to_string()));
        assert_eq!(
            party("We go to the zoo: a ticket for me with my 6-year-old and 9-year-old daughters and my husband."),
            adults(2.0)
        );
        assert_eq!(party("I will see the museum with my kids and my mother on Sunday."), adults(2.0));
        assert_eq!(party("My son and I want two seats at the concert."), adults(1.0));
    }

    /// A zoo's family ticket takes the children's ages, said with a hyphen or listed after "aged".
    #[test]
    fn the_childrens_ages_are_read_in_order() {
        let ages = |text: &str| RequestValues::extract(text, NaiveDate::from_ymd_opt(2025, 3, 1).unwrap()).child_ages;
        assert_eq!(ages("Tickets for me with my 6-year-old and 9-year-old daughters."), [6.0, 9.0]);
        assert_eq!(ages("Two adults and two children aged 4 and 11 visit the aquarium."), [4.0, 11.0]);
        assert_eq!(ages("We are two adults and three kids, aged five, seven and twelve."), [5.0, 7.0, 12.0]);
        assert_eq!(ages("There will be two adults and an eight-year-old child."), [8.0]);
        assert!(ages("Two adults aged 34 and 36 want a quiet table.").is_empty(), "no child named");
        assert!(ages("My 40-year-old brother and I want the tasting menu.").is_empty(), "an adult");
        assert!(ages("The kids want the menu aged 21 days, steak only.").is_empty(), "not under 18");
    }

    /// No party where the speaker is not in it, or a member's number is not said.
    #[test]
    fn no_party_without_the_speaker_or_with_an_unknown_number() {
        assert_eq!(party("I want to surprise my wife with flowers."), None);
        assert_eq!(party("Buy a gift for my parents."), None);
        assert_eq!(party("My friends and I want a table."), None, "how many friends is not said");
        assert_eq!(party("Compare it with my budget and my plan."), None);
    }
}
