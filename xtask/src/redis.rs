//! `redis-server` for the remote-cache tests (`crates/sheaf-integration/
//! tests/remote_cache.rs`), installed from Debian's package when it is not
//! on the `PATH` (and `SHEAF_JIT_TEST_REDIS_SERVER` does not name one).

use anyhow::Result;

use crate::debian;

/// The tests' override of the server binary.
const SERVER_ENV: &str = "SHEAF_JIT_TEST_REDIS_SERVER";

/// Makes sure the tests find a `redis-server`.
pub(crate) fn ensure() -> Result<()> {
    let named = std::env::var_os(SERVER_ENV).is_some_and(|path| !path.is_empty());
    debian::ensure(
        &["redis-server"],
        || named || on_path(),
        &format!(
            "the remote-cache tests need a real redis-server: install it as root \
             (`apt-get install redis-server`) or set {SERVER_ENV} to a redis-server binary"
        ),
    )
}

fn on_path() -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("redis-server").is_file())
    })
}
