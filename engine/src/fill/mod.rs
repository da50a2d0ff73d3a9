//! Arguments: the argument model learned from recorded runs (`learned`, trained by `args`), the
//! filler every planner shares (`fill`: earlier outputs' fields, typed request values, earlier
//! turns, defaults; `outputs` and `fields` for what earlier outputs offer), and Reverse Chain for an
//! argument no source fills (`reverse`, with the APIs that provide it: `providers`).

pub(crate) mod args;
pub(crate) mod fields;
pub(crate) mod filler;
pub(crate) mod learned;
pub(crate) mod options;
pub(crate) mod outputs;
pub(crate) mod providers;
mod reverse;
pub(crate) mod vocabulary;

pub use crate::read::slots::{mentions, Kind as MentionKind};
pub use args::{stored_model, ArgTrainer};
pub use learned::ArgModel;
