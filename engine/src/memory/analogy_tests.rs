//! Tests of [`super`]: replay by analogy.
use super::*;
use crate::read::reading::{delexicalize, meaning_text};
use serde_json::json;

fn day() -> NaiveDate {
    NaiveDate::from_ymd_opt(2024, 6, 1).unwrap()
}

const OLD: &str = "I'm planning to rent a car at Los Angeles International Airport at 8 AM on November 30, 2024, and return it at 2 PM on December 7 in Downtown Los Angeles. I need to rest for one night in a hotel near by after returning the car until December 8.";
const NEW: &str = "I'm planning to rent a car at Melbourne Airport at 10 AM on November 5, 2024, and return it at 4 PM on November 12 in Sydney City Centre. I need to rest for one night in a hotel near by after returning the car until November 13.";

#[test]
fn the_meaning_masks_every_place_date_and_number() {
    assert_eq!(meaning_text(OLD), meaning_text(NEW));
    assert_eq!(meaning_text("Rent a car at San Diego Marriott La Jolla at 8 AM."), "rent a car at X at N am");
    assert_eq!(
        delexicalize("Rent a car at San Diego Marriott La Jolla at 8 AM.")[..5],
        ["rent", "a", "car", "at", "<name>"]
    );
}

#[test]
fn mentions_take_their_counterparts_derived_dates_keep_their_offset_and_constants_stay() {
    let new = RequestValues::extract(NEW, day());
    let a = Analogy::new(OLD, NEW, &new, day());
    assert_eq!(a.transfer(&json!("2024-11-30"), None), Transfer::Mapped(json!("2024-11-05")));
    assert_eq!(a.transfer(&json!("2024-12-07"), None), Transfer::Mapped(json!("2024-11-12")));
    assert_eq!(a.transfer(&json!("14:00"), None), Transfer::Mapped(json!("16:00")));
    assert_eq!(
        a.transfer(&json!("Los Angeles International Airport"), None),
        Transfer::Mapped(json!("Melbourne Airport"))
    );
    assert_eq!(
        a.transfer(&json!("Downtown Los Angeles"), Some(&[Kind::Name])),
        Transfer::Mapped(json!("Sydney City Centre"))
    );
    // A date two days after the last one said: two days after its counterpart.
    assert_eq!(a.transfer(&json!("2024-12-10"), None), Transfer::Mapped(json!("2024-11-15")));
    // The day before the first one said ("arrive the day before"): the day before its counterpart.
    assert_eq!(a.transfer(&json!("2024-11-29"), None), Transfer::Mapped(json!("2024-11-04")));
    assert_eq!(a.transfer(&json!("distance"), None), Transfer::Unsaid);
    assert_eq!(a.transfer(&json!(50), None), Transfer::Unsaid);
    // Every mention here has a counterpart; one the old request lacks has none.
    assert_eq!(a.has_counterpart(Kind::Name, "Sydney City Centre"), Some(true));
    assert_eq!(a.has_counterpart(Kind::Time, "10:00"), Some(true));
    assert_eq!(a.has_counterpart(Kind::Name, "Perth"), None);
    let fewer = Analogy::new("Rent a car at Melbourne Airport at 10 AM on November 5, 2024.", NEW, &new, day());
    assert_eq!(fewer.has_counterpart(Kind::Time, "10:00"), Some(true));
    assert_eq!(fewer.has_counterpart(Kind::Time, "16:00"), Some(false));
    // Inside the legs of a multi-stop search: dates mapped, references kept.
    let legs =
        json!([{"fromId": "$var1.data.0.id$", "date": "2024-11-30"}, {"fromId": "$var2.id$", "date": "2024-12-07"}]);
    assert_eq!(
        a.transfer_deep(&legs, None),
        Ok(
            json!([{"fromId": "$var1.data.0.id$", "date": "2024-11-05"}, {"fromId": "$var2.id$", "date": "2024-11-12"}])
        )
    );
    // Known not to take dates: left alone.
    assert_eq!(a.transfer(&json!("2024-11-30"), Some(&[Kind::Name])), Transfer::Unsaid);
}

#[test]
fn places_dates_and_times_said_in_the_other_order_keep_their_roles() {
    // The drop-off told first: each value still goes where its role says, not where it stands.
    let text = "Return the car in Sydney City Centre at 4 PM on November 12, 2024, having picked it up at Melbourne Airport at 10 AM on November 5, 2024.";
    let a = Analogy::new(OLD, text, &RequestValues::extract(text, day()), day());
    assert_eq!(
        a.transfer(&json!("Los Angeles International Airport"), Some(&[Kind::Name])),
        Transfer::Mapped(json!("Melbourne Airport"))
    );
    assert_eq!(
        a.transfer(&json!("Downtown Los Angeles"), Some(&[Kind::Name])),
        Transfer::Mapped(json!("Sydney City Centre"))
    );
    assert_eq!(a.transfer(&json!("2024-11-30"), None), Transfer::Mapped(json!("2024-11-05")));
    assert_eq!(a.transfer(&json!("2024-12-07"), None), Transfer::Mapped(json!("2024-11-12")));
    // Each time goes with its date: the pick-up's 8 AM became 10 AM, the drop-off's 2 PM 4 PM.
    assert_eq!(a.transfer(&json!("08:00"), None), Transfer::Mapped(json!("10:00")));
    assert_eq!(a.transfer(&json!("14:00"), None), Transfer::Mapped(json!("16:00")));
    assert_eq!(a.unserved(), 0);
    // A part of a recorded value the remembered request never said is not carried over.
    let old = "Find two accessible hotels in New York for November 2024.";
    let text = "Two accessible hotels in Sydney, all of November 2024, please.";
    let a = Analogy::new(old, text, &RequestValues::extract(text, day()), day());
    assert_eq!(a.transfer(&json!("New York, US"), Some(&[Kind::Name])), Transfer::Mapped(json!("Sydney")));
}

#[test]
fn a_name_inside_a_longer_value_is_replaced_where_it_stands() {
    let old = "We will visit the CN Tower in Toronto on December 5th, 2024.";
    let text = "We will visit the Brandenburg Gate in Berlin on November 25th, 2024.";
    let a = Analogy::new(old, text, &RequestValues::extract(text, day()), day());
    assert_eq!(a.transfer(&json!("CN Tower, Toronto"), None), Transfer::Mapped(json!("Brandenburg Gate, Berlin")));
    // "today" anchors dates no mention gave.
    let old = "Today is October 13th, 2024. Rent a car at the San Diego Marriott La Jolla for a 24-hour rental.";
    let text = "Today is November 2nd, 2024. Rent a car at the Hilton Chicago for a 24-hour rental.";
    let a = Analogy::new(old, text, &RequestValues::extract(text, day()), day());
    assert_eq!(a.transfer(&json!("2024-10-14"), None), Transfer::Mapped(json!("2024-11-03")));
    assert_eq!(a.transfer(&json!("San Diego Marriott La Jolla"), None), Transfer::Mapped(json!("Hilton Chicago")));
}

#[test]
fn an_enumeration_word_takes_the_known_value_the_new_request_says() {
    let vocabulary: Vec<String> = ["ECONOMY", "PREMIUM_ECONOMY", "BUSINESS", "FIRST"].map(String::from).to_vec();
    let old = "Find the cheapest business class flights from Houston to Rome.";
    let new = "Find the cheapest premium economy class flights from Boston to Madrid.";
    let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
    assert_eq!(a.transfer_word("BUSINESS", &vocabulary).as_deref(), Some("PREMIUM_ECONOMY"));
    // Not said in the old request: a constant, not a word to transfer.
    assert_eq!(a.transfer_word("FIRST", &vocabulary), None);
    let same = Analogy::new(old, old, &RequestValues::extract(old, day()), day());
    assert_eq!(same.transfer_word("BUSINESS", &vocabulary).as_deref(), Some("BUSINESS"));
}

/// A place the old request named in one phrase of two names ("… Orlando at Walt Disney World
/// Resort") maps to the new request's counterpart of the head alone where the new request
/// has no counterpart for the other part.
#[test]
fn a_place_named_in_one_phrase_of_several_names_takes_the_heads_counterpart() {
    let old = "It's 9 o'clock in the morning on December 25, 2024. I just had breakfast at the Four Seasons Resort Orlando at Walt Disney World Resort. All local flights in Orlando have been canceled.";
    let new = "Heavy rain has canceled all local flights in Dallas. It's 8 o'clock in the morning on December 15, 2024 and I've just finished breakfast at the Hyatt Regency Dallas. I need a taxi.";
    let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
    let recorded = json!("Four Seasons Resort Orlando at Walt Disney World Resort");
    assert_eq!(a.transfer(&recorded, None), Transfer::Mapped(json!("Hyatt Regency Dallas")));
    let old = "I'm planning to stay at the Days Inn by Wyndham Saint John from November 5, 2024 to November 10, 2024.";
    let new = "Hotels near the Sydney Opera House, December 5, 2024, to December 15, 2024, please.";
    let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
    assert_eq!(
        a.transfer(&json!("Days Inn by Wyndham Saint John"), None),
        Transfer::Mapped(json!("Sydney Opera House"))
    );
    // Where every part has its counterpart, each takes its place in the phrase.
    let same = "I'm planning to stay at the Hilton by Lake Garda from November 5, 2024 to November 10, 2024.";
    let a = Analogy::new(old, same, &RequestValues::extract(same, day()), day());
    assert_eq!(
        a.transfer(&json!("Days Inn by Wyndham Saint John"), None),
        Transfer::Mapped(json!("Hilton by Lake Garda"))
    );
}

/// A recorded value that is an old mention with a typing slip maps like the mention.
#[test]
fn a_mistyped_recorded_name_maps_like_the_name_it_misspells() {
    let old = "Fly from Manchester to Milan on November 20th, 2024.";
    let new = "Fly from Edinburgh to Lisbon on November 20th, 2024.";
    let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
    assert_eq!(a.transfer(&json!("Machester"), None), Transfer::Mapped(json!("Edinburgh")));
    assert_eq!(a.transfer(&json!("Milano"), None), Transfer::Mapped(json!("Lisbon")));
    assert_eq!(a.transfer(&json!("Munich"), None), Transfer::Unsaid, "two letters off a short name is another name");
    assert!(mistyped("san francisc", "san francisco") && !mistyped("san diego", "san francisco"));
}

/// A recorded value that is an old mention shortened (the call took the name's head and some
/// of its words) maps like the mention, to the new request's name as it says it.
#[test]
fn a_shortened_recorded_name_maps_like_the_name_it_shortens() {
    let old = "Which physics courses does Stanford University teach, and which books by Ursula Kroeber Le Guin are read in them?";
    let new = "Which chemistry courses does Harvard University teach, and which books by Octavia Estelle Butler are read in them?";
    let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
    assert_eq!(a.transfer(&json!("Stanford"), None), Transfer::Mapped(json!("Harvard University")));
    assert_eq!(a.transfer(&json!("Ursula Le Guin"), None), Transfer::Mapped(json!("Octavia Estelle Butler")));
    assert_eq!(a.transfer(&json!("Le Guin"), None), Transfer::Unsaid, "a name's tail alone is not the name");
    assert_eq!(a.transfer(&json!("University"), None), Transfer::Unsaid);
    assert!(!shortened("stanford university", "stanford university") && !shortened("st", "st louis"));
    assert!(!shortened("ursula", "ursula's"), "a possessive is the name itself");
}

#[test]
fn mentions_nothing_tells_apart_are_unsure_and_a_planners_answer_realigns_them() {
    // Two places each, said with nothing that tells their parts apart: unsure.
    let old = "Compare hotels in Paris and Lyon for two nights.";
    let new_text = "Hotels: Madrid, Seville — compare them for two nights.";
    let new = RequestValues::extract(new_text, day());
    let mut a = Analogy::new(old, new_text, &new, day());
    let (kind, unsure) = a.unsure().expect("two places, no cue: unsure");
    assert_eq!(kind, Kind::Name);
    assert_eq!(unsure.kind, "name");
    assert_eq!(unsure.old, vec!["Paris".to_string(), "Lyon".to_string()]);
    assert_eq!(unsure.new, vec!["Madrid".to_string(), "Seville".to_string()]);
    assert_eq!(unsure.guess, vec![0, 1]);
    // The rules align in order; an answer that is not one-to-one changes nothing.
    assert_eq!(a.transfer(&json!("Paris"), None), Transfer::Mapped(json!("Madrid")));
    assert!(!a.realign(Kind::Name, &[1, 1]));
    assert!(!a.realign(Kind::Name, &[0]));
    assert_eq!(a.transfer(&json!("Paris"), None), Transfer::Mapped(json!("Madrid")));
    // A one-to-one answer realigns them, and the kind is settled.
    assert!(a.realign(Kind::Name, &[1, 0]));
    assert_eq!(a.transfer(&json!("Paris"), None), Transfer::Mapped(json!("Seville")));
    assert_eq!(a.transfer(&json!("Lyon"), None), Transfer::Mapped(json!("Madrid")));
    assert!(a.unsure().is_none());
    // Said with the words that tell their parts apart, in the other order: sure, by role.
    let old = "Find a flight from Paris to Lyon for two nights.";
    let new_text = "A flight to Seville, leaving from Madrid, for two nights.";
    let new = RequestValues::extract(new_text, day());
    let a = Analogy::new(old, new_text, &new, day());
    assert!(a.unsure().is_none(), "{:?}", a.unsure());
    assert_eq!(a.transfer(&json!("Paris"), None), Transfer::Mapped(json!("Madrid")));
    assert_eq!(a.transfer(&json!("Lyon"), None), Transfer::Mapped(json!("Seville")));
}

#[test]
fn a_word_said_around_a_name_takes_the_word_the_new_request_says_in_its_place() {
    let old = "I am in Spain and interested in beach activities. Check for beach activities in Barcelona.";
    let new_text = "Fishing fan here. Look for fishing activities in Hawaii.";
    let new = RequestValues::extract(new_text, day());
    let a = Analogy::new(old, new_text, &new, day());
    assert_eq!(a.transfer(&json!("Beach, Barcelona"), None), Transfer::Mapped(json!("Fishing, Hawaii")));
    // Said in the new request too: it stays.
    let same = "Look for beach activities in Hawaii.";
    let a = Analogy::new(old, same, &RequestValues::extract(same, day()), day());
    assert_eq!(a.transfer(&json!("Beach, Barcelona"), None), Transfer::Mapped(json!("Beach, Hawaii")));
    // Two words in the same frame: no single counterpart, it stays.
    let two = "Look for fishing activities or surfing activities in Hawaii.";
    let a = Analogy::new(old, two, &RequestValues::extract(two, day()), day());
    assert_eq!(a.transfer(&json!("Beach, Barcelona"), None), Transfer::Mapped(json!("Beach, Hawaii")));
}

/// What a remembered call takes that a new request says: a mention with its counterpart, a date
/// derived from one, a span said again; not a constant, an output, or a mention the new request
/// has no counterpart for (a garden center's deliveries).
#[test]
fn a_value_is_said_here_where_its_mention_or_span_has_a_counterpart() {
    let old = "Deliver 3 olive trees to Rosewood Nursery on May 4, 2025, and plant them two hours after they arrive.";
    let new = "Deliver 5 lemon trees to Oakfield Gardens on June 9, 2025, and plant them two hours after they arrive.";
    let values = RequestValues::extract(new, day());
    let a = Analogy::new(old, new, &values, day());
    assert!(a.says_any(&json!("Rosewood Nursery"), Some(&[Kind::Name])));
    assert!(a.says_any(&json!({"when": {"date": "2025-05-05"}}), None), "the day after a date said");
    assert!(a.says_any(&json!("$var2.arrival@time+120$"), None), "two hours after: said again");
    assert!(!a.says_any(&json!("$var2.arrival@time+30$"), None), "a span neither said");
    assert!(!a.says_any(&json!("$var1.items.0.id$"), None));
    assert!(!a.says_any(&json!("express"), None));
    let fewer = "Deliver 5 lemon trees to Oakfield Gardens.";
    let b = Analogy::new(old, fewer, &RequestValues::extract(fewer, day()), day());
    assert!(!b.says_any(&json!("$var2.arrival@time+120$"), None), "this request says no span");
    assert!(!b.says_any(&json!("2025-05-04"), Some(&[Kind::Date])), "nor a date");
}

/// What a new request says itself: the date it says, and a date a span it says away from it; a
/// date the remembered run derived by a span only the remembered request said (a week of
/// storage) is that run's doing, not this request's.
#[test]
fn a_date_derived_by_a_span_only_the_old_request_said_is_not_said_here() {
    let old = "Deliver 3 olive trees to Rosewood Nursery on May 4, 2025, and store them for 7 days.";
    let new = "Deliver 5 lemon trees to Oakfield Gardens on June 9, 2025.";
    let a = Analogy::new(old, new, &RequestValues::extract(new, day()), day());
    assert!(a.says_own(&json!("2025-05-04"), Some(&[Kind::Date])), "the day said");
    assert!(a.says_any(&json!("2025-05-11"), Some(&[Kind::Date])), "derived, it transfers");
    assert!(!a.says_own(&json!("2025-05-11"), Some(&[Kind::Date])), "but no span here says it");
    let longer = "Deliver 5 lemon trees to Oakfield Gardens on June 9, 2025, and store them for 10 days.";
    let b = Analogy::new(old, longer, &RequestValues::extract(longer, day()), day());
    assert!(b.says_own(&json!("2025-05-11"), Some(&[Kind::Date])), "a span said here too");
}
