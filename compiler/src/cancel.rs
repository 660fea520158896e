//! Cooperative cancellation. A host that returns to its user before the work is done (the
//! Python package: Ctrl-C raises `KeyboardInterrupt` at once) gives the worker thread a flag
//! with [`watch`] and sets it; the compiler's long loops (lowering node by node, emitting layer
//! by layer) and verification's loop over inputs check [`cancelled`] and stop with an error,
//! so an interrupted call does not go on using the machine (helper c13: four interrupted
//! `universal(64, 64, 64)` calls left running made the fifth 7x slower and doubled its memory).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

thread_local! {
    static FLAG: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Work on this thread stops once `flag` is set.
pub fn watch(flag: Arc<AtomicBool>) {
    FLAG.with(|f| *f.borrow_mut() = Some(flag));
}

/// Whether the work on this thread was cancelled (never, unless a host called [`watch`]).
pub fn cancelled() -> bool {
    FLAG.with(|f| f.borrow().as_ref().is_some_and(|a| a.load(Ordering::Relaxed)))
}

/// The message of work stopped by [`cancelled`].
pub const INTERRUPTED: &str = "interrupted";
