//! A route the request says: the places it goes through in order and the day each leg sets off.
//! "From Guangzhou to Chicago with a layover in Amsterdam" is Guangzhou → Amsterdam → Chicago;
//! "leaving New Orleans, stops in Nashville and Pittsburgh, then continuing to Philadelphia" four
//! places; "go to Dallas and Houston, then return to Miami" starts and ends in Miami. A place is
//! on the route by the words right before it (the lexicon's `route_*_leads`), or by "and" / a
//! comma after a place that is. Legs' days: a date said beside a place's departure, arrival or
//! return; else the leg before's plus the stay said at the place ("staying a week in each city",
//! "after staying in Tokyo for three days"); the first leg, else the first date the request says.

use super::lexicon::lexicon;
use super::reading::tokens;
use super::scan::{small_number, RequestValues};
use chrono::NaiveDate;

/// The places in order (as the request names them, [`RequestValues::names`]) and, per leg
/// (`stops.len() - 1`), the day it sets off where one is known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Route {
    pub stops: Vec<String>,
    pub dates: Vec<Option<NaiveDate>>,
    /// Per leg: its day is only the leg before's (no date or stay said for it).
    pub guessed: Vec<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    Origin,
    Via,
    Dest,
    Return,
}

/// The role the words right before token `at` give a place (the longest phrase first, within
/// its sentence).
fn lead_role(lower: &[String], starts: &[bool], at: usize) -> Option<Role> {
    let lex = lexicon();
    for n in (1..=3usize).rev() {
        if n > at || (at + 1 - n..at).any(|k| starts[k]) {
            continue;
        }
        let phrase = lower[at - n..at].join(" ");
        for (list, role) in [
            (&lex.route_return_leads, Role::Return),
            (&lex.route_via_leads, Role::Via),
            (&lex.route_origin_leads, Role::Origin),
            (&lex.route_dest_leads, Role::Dest),
        ] {
            if list.contains(&phrase) {
                return Some(role);
            }
        }
    }
    None
}

/// A stay said in the words from `from` on, within the sentence: its days ("6 days", "a week",
/// "three nights").
fn stay_days(lower: &[String], ends: &[bool], from: usize) -> Option<(i64, usize)> {
    let lex = lexicon();
    let mut k = from;
    while k + 1 < lower.len() && k < from + 9 {
        let n = lower[k].parse::<i64>().ok().or_else(|| small_number(&lower[k]).map(|x| x as i64));
        let unit = &lower[k + 1];
        if let Some(n) = n.filter(|n| (1..=365).contains(n)) {
            if lex.day_words.contains(unit) || lex.night_words.contains(unit) {
                return Some((n, k + 1));
            }
            if lex.week_words.contains(unit) {
                return Some((7 * n, k + 1));
            }
        }
        if ends[k] {
            break;
        }
        k += 1;
    }
    None
}

/// Where each name of `names` is said (a name is listed once; a route may pass a place twice):
/// (name index, first token), in the order said.
fn occurrences(toks: &[super::reading::Token<'_>], names: &[String]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    // Longer names first: a shorter one inside a longer one said there is not said apart.
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(tokens(&names[i]).len()));
    for i in order {
        let name = &names[i];
        let name_toks = tokens(name);
        let words: Vec<&str> = name_toks.iter().map(|t| t.text).collect();
        if words.is_empty() {
            continue;
        }
        for at in 0..toks.len().saturating_sub(words.len() - 1) {
            let here = words
                .iter()
                .enumerate()
                .all(|(j, w)| toks[at + j].text.trim_end_matches('.') == w.trim_end_matches('.'));
            // Not inside a longer name said there ("Paris" in "Paris Orly").
            if here && !out.iter().any(|&(o, oat): &(usize, usize)| oat <= at && at < oat + tokens(&names[o]).len()) {
                out.push((i, at));
            }
        }
    }
    out.sort_by_key(|m| m.1);
    out
}

/// The days a route stays at each of its places: at one named in the stay's words ("staying in
/// Tokyo for three days") or at each ("a week in each city").
fn stays(
    lower: &[String],
    ends: &[bool],
    mentions: &[(usize, usize)],
    names: &[String],
    stops: &[(String, Role)],
) -> Vec<Option<i64>> {
    let lex = lexicon();
    let mut stay: Vec<Option<i64>> = vec![None; stops.len()];
    for (k, w) in lower.iter().enumerate() {
        if !lex.stay_words.contains(w) {
            continue;
        }
        let Some((days, end)) = stay_days(lower, ends, k + 1) else { continue };
        // The place named in the stay's words, one the route passes (not its start).
        let place = mentions
            .iter()
            .filter(|(_, at)| (k + 1..=end).contains(at))
            .find_map(|(i, _)| (1..stops.len()).find(|&s| stops[s].0.eq_ignore_ascii_case(&names[*i])));
        // "in each", "in each of those cities": just after the stay's length or before it.
        let each = (k + 1..(end + 4).min(lower.len())).any(|j| lex.each_words.contains(&lower[j]));
        match place {
            Some(p) => stay[p] = Some(days),
            None if each => {
                for s in stay.iter_mut().take(stops.len() - 1).skip(1) {
                    s.get_or_insert(days);
                }
            }
            None => {}
        }
    }
    // "three days in Bergen", "spending a week at Graz": a length right before the place it is
    // spent at.
    for &(i, at) in mentions {
        if at < 3 || !lex.stay_places.contains(&lower[at - 1]) {
            continue;
        }
        let Some((days, _)) = stay_days(lower, ends, at - 3).filter(|d| d.1 == at - 2) else { continue };
        if let Some(s) = (1..stops.len()).find(|&s| stops[s].0.eq_ignore_ascii_case(&names[i])) {
            stay[s].get_or_insert(days);
        }
    }
    stay
}

/// A route no word set off from, back to a place at its end: it starts there (`stop_of` moved
/// on). Home named before any place on the route ("Houston on May 10, through Vienna …, back to
/// Houston") is where the route starts: a date said beside it is the first leg's.
fn start_at_home(
    stops: &mut Vec<(String, Role)>,
    stop_of: &mut Vec<(usize, usize)>,
    said: &mut Vec<(usize, usize, Role)>,
    mentions: &[(usize, usize)],
    names: &[String],
) {
    let Some(home) = stops.last().filter(|s| stops.len() >= 2 && s.1 == Role::Return).map(|s| s.0.clone()) else {
        return;
    };
    stops.insert(0, (home.clone(), Role::Origin));
    for s in stop_of.iter_mut() {
        s.1 += 1;
    }
    let first = said.iter().map(|s| s.1).min();
    let home_said =
        mentions.iter().find(|(i, at)| first.is_some_and(|f| *at < f) && names[*i].eq_ignore_ascii_case(&home));
    if let Some(&(i, at)) = home_said {
        said.push((i, at, Role::Origin));
        stop_of.push((said.len() - 1, 0));
    }
}

/// The route `text` says (its values read as `v`), where it names at least two places on it.
pub(crate) fn route(text: &str, v: &RequestValues) -> Option<Route> {
    let toks = tokens(text);
    let lower: Vec<String> = toks.iter().map(|t| t.text.to_ascii_lowercase()).collect();
    let ends: Vec<bool> = toks.iter().map(|t| t.ends_sentence()).collect();
    // `starts[k]`: token k opens a sentence.
    let starts: Vec<bool> = (0..toks.len()).map(|k| k == 0 || ends[k - 1]).collect();
    let sentence: Vec<usize> = starts
        .iter()
        .scan(0usize, |s, &st| {
            *s += usize::from(st);
            Some(*s)
        })
        .collect();
    let mentions = occurrences(&toks, &v.names);
    // The places on the route, in the order said: (name index, where, role).
    let mut said: Vec<(usize, usize, Role)> = Vec::new();
    for &(i, at) in &mentions {
        let role = lead_role(&lower, &starts, at).or_else(|| {
            // "… to Dallas and Houston", "stops in Winnipeg, Calgary": the role of the place before.
            let (&(j, jat, r), k) = (said.last()?, at.checked_sub(1)?);
            let prev_end = jat + tokens(&v.names[j]).len().max(1) - 1;
            let joined = (lower[k] == "and" && prev_end + 1 == k) || (prev_end == k && toks[k].punct == Some(','));
            (joined && matches!(r, Role::Dest | Role::Via)).then_some(r)
        });
        // A place said right before "to" and the next place ("Guangzhou to Chicago", "Oslo →
        // Bergen") sets off there.
        let len = tokens(&v.names[i]).len().max(1);
        let sets_off = || {
            let next = mentions.iter().find(|m| m.1 > at)?.1;
            (next == at + len + 1 && !starts[next] && lexicon().route_dest_leads.contains(&lower[at + len]))
                .then_some(Role::Origin)
        };
        if let Some(r) = role.or_else(sets_off) {
            said.push((i, at, r));
        }
    }
    let origin = said.iter().position(|s| s.2 == Role::Origin);
    let mut stops: Vec<(String, Role)> = Vec::new();
    // Which stop each said place stands for.
    let mut stop_of: Vec<(usize, usize)> = Vec::new();
    let order = origin.into_iter().chain((0..said.len()).filter(|k| Some(*k) != origin));
    for k in order {
        let (i, _, role) = said[k];
        let name = v.names[i].clone();
        if stops.last().is_some_and(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            stop_of.push((k, stops.len() - 1));
            continue;
        }
        // Setting off again from elsewhere is another route (an alternative said after: "else a
        // direct flight from Chicago to Sydney"): this one ends.
        if role == Role::Origin && !stops.is_empty() {
            break;
        }
        stop_of.push((k, stops.len()));
        stops.push((name, role));
        // Back home: the route is closed.
        if role == Role::Return {
            break;
        }
    }
    // "From A to B with a layover in C": the place passed on the way goes before the end.
    let n = stops.len();
    let last = if stops.last().is_some_and(|s| s.1 == Role::Return) { n.checked_sub(1)? } else { n };
    if last >= 2 && stops[last - 1].1 == Role::Via && stops[last - 2].1 == Role::Dest {
        stops.swap(last - 1, last - 2);
        for s in &mut stop_of {
            if s.1 == last - 1 {
                s.1 = last - 2;
            } else if s.1 == last - 2 {
                s.1 = last - 1;
            }
        }
    }
    if origin.is_none() {
        start_at_home(&mut stops, &mut stop_of, &mut said, &mentions, &v.names);
    }
    if stops.len() < 2 {
        return None;
    }
    let legs = stops.len() - 1;
    let mut dates: Vec<Option<NaiveDate>> = vec![None; legs];
    // A date said in a sentence goes with the nearest place on the route said in it.
    for (d, &dat) in v.date_at.iter().enumerate() {
        let Some(date) = v.dates.get(d).copied() else { continue };
        let near = stop_of
            .iter()
            .filter(|(k, _)| sentence.get(said[*k].1) == sentence.get(dat))
            .min_by_key(|(k, _)| said[*k].1.abs_diff(dat));
        let Some(&(k, s)) = near else { continue };
        let leg = match said[k].2 {
            Role::Origin | Role::Via => s,
            Role::Dest => s.saturating_sub(1),
            Role::Return => legs - 1,
        };
        if leg < legs && dates[leg].is_none() {
            dates[leg] = Some(date);
        }
    }
    let stay = stays(&lower, &ends, &mentions, &v.names, &stops);
    if dates[0].is_none() {
        dates[0] = v.dates.first().copied();
    }
    let mut guessed = vec![false; legs];
    for leg in 1..legs {
        if dates[leg].is_none() {
            guessed[leg] = stay[leg].is_none();
            dates[leg] = dates[leg - 1].map(|d| d + chrono::Duration::days(stay[leg].unwrap_or(0)));
        }
    }
    Some(Route { stops: stops.into_iter().map(|s| s.0).collect(), dates, guessed })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Route {
        let day = NaiveDate::from_ymd_opt(2025, 1, 1).unwrap();
        route(text, &RequestValues::extract(text, day)).expect("a route")
    }

    fn d(m: u32, day: u32) -> Option<NaiveDate> {
        NaiveDate::from_ymd_opt(2025, m, day)
    }

    #[test]
    fn a_shipment_passing_a_hub_goes_through_it_before_its_end() {
        let r = read("Ship the pallets from Rotterdam to Hamburg on March 3, 2025, with a stop in Bremen.");
        assert_eq!(r.stops, ["Rotterdam", "Bremen", "Hamburg"]);
        // One day said, beside the end: the last leg's, and the first leaves on it too.
        assert_eq!(r.dates, [d(3, 3), d(3, 3)]);
        assert_eq!(r.guessed, [false, false]);
        // Nothing said for the second leg: its day is a guess (the leg before's).
        let r = read("We leave Lisbon on May 3, 2025 with the van, drive to Porto and then to Vigo.");
        assert_eq!(r.stops, ["Lisbon", "Porto", "Vigo"]);
        assert_eq!((r.dates, r.guessed), (vec![d(5, 3), d(5, 3)], vec![false, true]));
    }

    #[test]
    fn a_tour_staying_at_each_venue_leaves_each_after_the_stay_and_comes_back() {
        let r = read(
            "Our band leaves Glasgow on April 2, 2025, playing to Leeds and Bristol, then returning to Glasgow. \
             We stay in each city for three days.",
        );
        assert_eq!(r.stops, ["Glasgow", "Leeds", "Bristol", "Glasgow"]);
        assert_eq!(r.dates, [d(4, 2), d(4, 5), d(4, 8)]);
    }

    #[test]
    fn a_stay_at_one_stop_and_a_return_date_said() {
        let r = read(
            "The delegation will leave Oslo on May 10th, 2025, and travel to Nairobi. After staying in \
             Nairobi for four days, it goes to Accra, then back to Oslo on May 20th, 2025.",
        );
        assert_eq!(r.stops, ["Oslo", "Nairobi", "Accra", "Oslo"]);
        assert_eq!(r.dates, [d(5, 10), d(5, 14), d(5, 20)]);
    }

    #[test]
    fn a_route_that_only_says_where_it_comes_back_to_starts_there() {
        let r = read("The courier starts on June 3, 2025: visit Lyon and Dijon, spending 2 days in each, and then return to Paris.");
        assert_eq!(r.stops, ["Paris", "Lyon", "Dijon", "Paris"]);
        assert_eq!(r.dates, [d(6, 3), d(6, 5), d(6, 7)]);
    }

    #[test]
    fn a_route_said_with_arrows_or_bare_to_sets_off_from_its_first_place() {
        let r = read("From June 2, 2025 our tour goes Oslo → Bergen → Trondheim, spending two days in each.");
        assert_eq!(r.stops, ["Oslo", "Bergen", "Trondheim"]);
        assert_eq!(r.dates, [d(6, 2), d(6, 4)]);
        let r = read("Send the freight Lagos to Accra on July 1, 2025, via Lome.");
        assert_eq!(r.stops, ["Lagos", "Lome", "Accra"]);
    }

    #[test]
    fn a_route_listed_from_home_with_then_and_back_home() {
        let r = read(
            "Delivery plan: Leeds on March 3rd, 2025, through York on March 4th, on to Durham, then back to Leeds on March 9th, 2025.",
        );
        assert_eq!(r.stops, ["Leeds", "York", "Durham", "Leeds"]);
        assert_eq!(r.dates, [d(3, 3), d(3, 4), d(3, 9)]);
        let r = read(
            "Our choir tours Oslo → Bergen on June 2nd, 2025, three days in Bergen, then Stavanger, back to Oslo on June 12th, 2025.",
        );
        assert_eq!(r.stops, ["Oslo", "Bergen", "Stavanger", "Oslo"]);
        assert_eq!(r.dates, [d(6, 2), d(6, 5), d(6, 12)]);
    }

    #[test]
    fn places_said_without_route_words_are_not_on_it() {
        let day = NaiveDate::from_ymd_opt(2025, 1, 1).unwrap();
        let text = "Book a table at Nobu for Friday and send the menu to Alice.";
        let r = route(text, &RequestValues::extract(text, day));
        // "to Alice" is one place: no route.
        assert_eq!(r, None);
    }
}
