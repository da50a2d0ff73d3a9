//! What is remembered and how it is recalled and transferred: the long-term memory (`store`), its
//! recall and replay by analogy in a run (`recall`; which of a remembered chain's calls a request
//! wants: `kinds`), a remembered literal's counterpart in a new
//! request (`analogy`, `align`, `moments`, `lists`, `spans`), a choice by a field's extreme
//! (`extremes`), a list of legs laid along the request's route (`legs`), a choice among an output's options made again (`rechosen`), and the fragments of other memories a replay is composed with (`compose`), joined to the
//! calls made (`join`).

pub(crate) mod align;
pub(crate) mod analogy;
mod compose;
pub(crate) mod extremes;
mod join;
mod kinds;
pub(crate) mod legs;
pub(crate) mod lists;
pub(crate) mod moments;
mod recall;
mod rechosen;
pub(crate) mod spans;
pub(crate) mod store;

pub use store::{recorded_steps, Memory, RecordedCall};
