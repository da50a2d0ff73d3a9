//! What a request requires of a run, one [`Requirement`] at a time, and whether a path covers it;
//! [`super::coverage`] reads them from the request and the calls.

use serde::{Deserialize, Serialize};

/// What kind of requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A date the request says.
    Date,
    /// A time the request says.
    Time,
    /// A name or quoted text the request says.
    Name,
    /// A count the request says ("2 adults").
    Count,
    /// A call per compared option, or per item of a list the request asks about.
    Each,
    /// As many calls of an API as the options the request counts ("the two highest-rated
    /// galleries … describe them"), one per option.
    Options,
    /// The asked-for quantity (price, duration, …) in some response.
    Quantity,
    /// The chain ends where observed chains end.
    Completion,
    /// A subtask of the request (a sentence that asks for something) served by one of the APIs
    /// retrieval finds for it.
    Subtask,
    /// A part an LLM judge named as not served.
    Judged,
    /// An API the request's words ask for (`value`: its name and the word), served by a call of
    /// it.
    Api,
}

/// One requirement of the request and the call that covers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Requirement {
    /// What kind of thing is asked.
    pub kind: Kind,
    /// What is required, as the user would read it (`2024-10-14`, `San Diego`, `price`).
    pub value: String,
    /// The label of the call that covers it (`var2`), `None` when nothing does.
    pub covered_by: Option<String>,
}

impl Requirement {
    /// Whether a call serves it.
    pub fn covered(&self) -> bool {
        self.covered_by.is_some()
    }

    /// How the answer names it when it is missing.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Date => format!("the date {}", self.value),
            Kind::Time => format!("the time {}", self.value),
            Kind::Name => format!("\"{}\"", self.value),
            Kind::Count => format!("the count {}", self.value),
            Kind::Each | Kind::Options => self.value.clone(),
            Kind::Quantity => format!("the {} asked for", self.value),
            Kind::Subtask => format!("\"{}\"", self.value),
            Kind::Api => format!("a call of {}", self.value),
            Kind::Completion | Kind::Judged => self.value.clone(),
        }
    }
}

/// Whether every requirement is covered.
pub(crate) fn complete(items: &[Requirement]) -> bool {
    items.iter().all(Requirement::covered)
}

/// The requirements not covered, described for the answer ("the date 2024-10-15, the price asked for").
pub fn missing_text(items: &[Requirement]) -> String {
    items.iter().filter(|r| !r.covered()).map(Requirement::describe).collect::<Vec<_>>().join(", ")
}
