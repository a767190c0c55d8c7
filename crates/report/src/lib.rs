//! Rendering of results: terminal tables, JSON/CSV/Markdown exports, plots
//! and the self-contained HTML report.
//!
//! Every view is built from [`rows::MetricRow`]s, so the terminal table, the
//! CSV and the Markdown always show the same numbers.

#![forbid(unsafe_code)]

pub mod compare;
pub mod export;
pub mod history;
pub mod html;
pub mod import;
pub mod plot;
pub mod rows;
pub mod table;
pub mod text;

pub use export::{export, ExportFormat};
pub use rows::MetricRow;
pub use table::{environment_block, run_header, run_table, run_view};
