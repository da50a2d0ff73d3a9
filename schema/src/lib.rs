//! toolgraph's shared vocabulary: tool / API / trajectory / graph types, configuration structs and
//! the naming rules that give every API a stable id. No I/O lives here.

pub mod fields;
pub mod graph;
pub mod ids;
pub mod secrets;
pub mod settings;
pub mod tool;
pub mod trajectory;

pub use fields::{hidden_char, output_fields, schema_type};
pub use graph::*;
pub use ids::*;
pub use settings::*;
pub use tool::*;
pub use trajectory::*;
