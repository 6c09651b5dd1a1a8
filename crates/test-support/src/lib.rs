//! Fixtures shared by the workspace's tests, benchmarks and examples, so
//! that none of them includes another's file by `#[path]`: starting the
//! test binary again in a child process (through qemu-user when
//! `SHEAF_JIT_TEST_RUNNER` says so), capturing `tracing` logs, a real
//! `redis-server`, this process's memory figures, (feature `iree-safe`)
//! iree-safe's test programs and mock leak check, and (feature `jit-cache`)
//! a mock backend for jit-cache's policy.
//!
//! Not published: the library crates use it as a path-only
//! dev-dependency, which `cargo package` leaves out. It imports no C
//! function itself, so it builds under miri; the `iree-safe` fixtures use
//! iree-safe's mock there.
//!
//! Fixtures that one crate's tests alone use stay in that crate's
//! `tests/common/mod.rs` (or `tests/support/`).

pub mod child;
#[cfg(feature = "iree-safe")]
pub mod iree;
pub mod logs;
#[cfg(feature = "jit-cache")]
pub mod mock_cache;
pub mod proc_status;
pub mod redis;
