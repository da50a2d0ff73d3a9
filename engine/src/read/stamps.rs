//! The one typed date and time of argument values: a date is written `YYYY-MM-DD`, a time of day
//! `HH:MM`, wherever the engine reads or writes one in an argument, a memory or a reference (the
//! reader's own forms — "October 13th", "8 AM" — are `dates.rs`'s).

use chrono::{NaiveDate, NaiveDateTime, NaiveTime};

const DATE: &str = "%Y-%m-%d";
const TIME: &str = "%H:%M";

/// The date `YYYY-MM-DD` says.
pub(crate) fn date(s: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(s, DATE).ok()
}

/// The time of day `HH:MM` says.
pub(crate) fn time(s: &str) -> Option<NaiveTime> {
    NaiveTime::parse_from_str(s, TIME).ok()
}

/// The moment a date (`YYYY-MM-DD`) and a time (`HH:MM`) say together.
pub(crate) fn moment(date_text: &str, time_text: &str) -> Option<NaiveDateTime> {
    Some(date(date_text)?.and_time(time(time_text)?))
}

/// The moment a date-time's first minutes say (`2024-10-14T08:30…`: seconds and zone left aside).
pub(crate) fn moment_of(date_time: &str) -> Option<NaiveDateTime> {
    NaiveDateTime::parse_from_str(date_time.get(..16)?, "%Y-%m-%dT%H:%M").ok()
}

/// `d` as arguments write a date.
pub(crate) fn date_text(d: NaiveDate) -> String {
    d.format(DATE).to_string()
}

/// `t` as arguments write a time of day.
pub(crate) fn time_text(t: NaiveTime) -> String {
    t.format(TIME).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_read_back_what_they_write() {
        let d = date("2027-02-28").unwrap();
        assert_eq!(date_text(d), "2027-02-28");
        assert_eq!(date("2027-02-30"), None);
        assert_eq!(date("28/02/2027"), None);
        let t = time("07:05").unwrap();
        assert_eq!(time_text(t), "07:05");
        assert_eq!(time("7 am"), None);
        assert_eq!(moment("2027-02-28", "23:30").unwrap().to_string(), "2027-02-28 23:30:00");
        assert_eq!(moment_of("2027-02-28T23:30:59+01:00"), moment("2027-02-28", "23:30"));
        assert_eq!(moment_of("2027-02-28"), None);
    }
}
