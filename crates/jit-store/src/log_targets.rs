//! The `tracing` targets of this crate's events, in the scheme the JIT's
//! crates share (`sheaf_jit::*`; `jit_cache::log_targets` names the
//! others), so that `sheaf_jit=debug` shows every event and
//! `sheaf_jit::remote=debug` the remote tier's alone.
//!
//! | target | what it shows |
//! | --- | --- |
//! | `sheaf_jit::cache` | the disk cache: `debug` per lookup that missed, with its reason (absent, damaged, unauthenticated, unsafe to read, refused by the runtime), per entry that could not be written; `warn` per entry refused; the learned-policy files |
//! | `sheaf_jit::remote` | the remote cache: `debug` per fetch with its outcome (served, absent, over the size bound, request failed, skipped by the open breaker) and per publish; `warn` per entry refused and when the breaker opens |

/// The disk cache (artifacts and learned policies).
pub const CACHE: &str = "sheaf_jit::cache";
/// The remote cache shared by a cluster.
pub const REMOTE: &str = "sheaf_jit::remote";
