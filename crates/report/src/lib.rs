//! Rendering of results: terminal tables, JSON/CSV/Markdown exports.
//!
//! Every view is built from [`rows::MetricRow`]s, so the terminal table, the
//! CSV and the Markdown always show the same numbers.

pub mod compare;
pub mod export;
pub mod history;
pub mod html;
pub mod import;
pub mod plot;
pub mod rows;
pub mod table;

pub use export::{export, ExportFormat};
pub use rows::MetricRow;
pub use table::{environment_block, run_header, run_table};
