//! schedlab's result model, statistics and units.
//!
//! Everything here is pure data and arithmetic: no clocks, files, or kernel
//! calls. Live benchmarks and the simulator both produce the types defined here,
//! the store persists them and the report crate renders them, so one schema
//! serves every run.

#![forbid(unsafe_code)]

pub mod condition;
pub mod environment;
pub mod histogram;
pub mod model;
pub mod param;
pub mod replicate;
pub mod stats;
pub mod timeline;
pub mod units;

pub use condition::{Condition, ConditionError, SchedCondition, SchedPolicy, SimSetup};
pub use environment::Environment;
pub use histogram::LatencyHistogram;
pub use model::{
    BenchResult, BenchStatus, Direction, Level, Metric, MetricData, Run, RunKind, RunStatus, TimeSeries, ToolInfo,
    KERNEL_METRIC_PREFIX, KERNEL_NOTE_PREFIX, SCHEMA_VERSION,
};
pub use timeline::Timeline;
pub use units::Unit;
