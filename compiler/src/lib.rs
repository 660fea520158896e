//! raspc-compiler: program graph -> transformer weights. Empty until the compiler issue lands;
//! see docs/architecture.md.
