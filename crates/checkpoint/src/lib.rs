//! raspc-checkpoint: the contract between compiler and runtime (tensor names, model config,
//! metadata keys, validation). Empty until the compiler issue lands; see docs/architecture.md.
