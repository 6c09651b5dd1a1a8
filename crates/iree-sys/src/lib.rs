//! Raw IREE bindings.
