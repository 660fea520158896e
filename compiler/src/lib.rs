//! raspc-compiler: program graph -> transformer weights.
//!
//! Stages present so far: [`infer`] (value sets). Lowering, scheduling and emission are not
//! written yet; see docs/architecture.md.

pub mod infer;
