//! Bounded multi-signature JIT cache policy.
#![forbid(unsafe_code)]
