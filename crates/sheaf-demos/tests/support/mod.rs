//! Test helpers of the demos' tests.

pub(crate) mod runner;
