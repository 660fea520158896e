//! raspc-runtime: loads raspc checkpoints and runs them on candle. Empty until the compiler
//! issue lands; see docs/architecture.md.
