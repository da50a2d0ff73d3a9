//! The typed reading of a request: its tokens (`reading`, the only tokenizer of the reader and the
//! memory), its mentions read in phases over one scan (`scan`, `values`, `dates`, `names`), the
//! kinds of mention (`slots`), what it asks for (`coverage`, `requirement`) and which of its words
//! ask for which API (`asks`, learned at ingest; `named`, by an API's name). The words it knows are one table (`lexicon`).

pub(crate) mod asks;
pub(crate) mod coverage;
pub(crate) mod dates;
pub mod lexicon;
pub(crate) mod named;
pub(crate) mod names;
pub(crate) mod party;
pub(crate) mod reading;
pub(crate) mod requirement;
pub(crate) mod route;
pub(crate) mod scan;
pub(crate) mod slots;
pub(crate) mod spelling;
pub(crate) mod stamps;
pub(crate) mod values;

pub use asks::Asks;
pub use lexicon::{lexicon, Lexicon};
pub use reading::{meaning_text, ordering_words};
pub use requirement::{missing_text, Kind as RequirementKind, Requirement};
pub use scan::RequestValues;
pub use values::is_end_param;
