//! The one clock the engine reads: the system's, or the day `run.today` fixes (tests and
//! reproducible evaluations). Every "today" of the reader, the memory and the argument model comes
//! from here.

use chrono::NaiveDate;
use toolgraph_schema::RunSettings;

/// Today, as the engine takes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    fixed: Option<NaiveDate>,
}

impl Clock {
    /// The system clock's day (UTC).
    pub fn system() -> Clock {
        Clock { fixed: None }
    }

    /// Always `day`.
    pub fn fixed(day: NaiveDate) -> Clock {
        Clock { fixed: Some(day) }
    }

    /// `run.today` when set (a day that is not `YYYY-MM-DD` is refused), else the system's.
    pub fn of(settings: &RunSettings) -> crate::Result<Clock> {
        match settings.today.trim() {
            "" => Ok(Clock::system()),
            day => NaiveDate::parse_from_str(day, "%Y-%m-%d")
                .map(Clock::fixed)
                .map_err(|e| crate::EngineError::Config(format!("run.today `{day}` is not a YYYY-MM-DD day: {e}"))),
        }
    }

    /// The day taken as today.
    pub fn today(&self) -> NaiveDate {
        self.fixed.unwrap_or_else(|| chrono::Utc::now().date_naive())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_today_fixes_the_day_and_a_bad_one_is_refused() {
        let mut s = RunSettings::default();
        assert_eq!(Clock::of(&s).unwrap(), Clock::system());
        s.today = "2026-03-10".into();
        assert_eq!(Clock::of(&s).unwrap().today(), NaiveDate::from_ymd_opt(2026, 3, 10).unwrap());
        s.today = "10/03/2026".into();
        assert!(Clock::of(&s).unwrap_err().to_string().contains("run.today"));
    }
}
