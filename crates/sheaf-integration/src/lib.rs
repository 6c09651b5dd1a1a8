//! The JIT runtime that Sheaf calls.
