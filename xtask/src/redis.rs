//! `redis-server` for the remote-cache tests (`crates/sheaf-integration/
//! tests/remote_cache.rs`), installed from Debian's package when it is not
//! on the `PATH` (and `SHEAF_JIT_TEST_REDIS_SERVER` does not name one).

use std::process::Command;

use crate::process;

/// The tests' override of the server binary.
const SERVER_ENV: &str = "SHEAF_JIT_TEST_REDIS_SERVER";

/// Makes sure the tests find a `redis-server`; installs Debian's package
/// (`apt-get update` first only if the install fails) when none is found.
pub(crate) fn ensure() -> Result<(), String> {
    if std::env::var_os(SERVER_ENV).is_some_and(|path| !path.is_empty()) || on_path() {
        return Ok(());
    }
    let install = || {
        process::run(
            Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends", "redis-server"])
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
    };
    install()
        .or_else(|_| {
            process::run(Command::new("apt-get").arg("update"))?;
            install()
        })
        .map_err(|error| {
            format!(
                "the remote-cache tests need a real redis-server, which is not installed, and \
                 installing Debian's package failed ({error}); install it as root (`apt-get \
                 install redis-server`) or set {SERVER_ENV} to a redis-server binary"
            )
        })?;
    if on_path() {
        Ok(())
    } else {
        Err("apt-get installed redis-server, but it is not on the PATH".to_owned())
    }
}

fn on_path() -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("redis-server").is_file())
    })
}
