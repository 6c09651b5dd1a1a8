//! What the remote-tier tests share: a backend by URL (a shared folder or a
//! Redis server) and the key of a program.

use std::time::Duration;

use jit_store::{
    ArtifactKey, KeyParts, RedisStore, RemoteStore, RemoteTimeouts, SharedFolderStore,
};

/// The backend at `url`: a shared folder (`file://`) or a Redis server,
/// with timeouts far over a loopback round trip.
pub(crate) fn backend(url: &str) -> Box<dyn RemoteStore> {
    if url.starts_with(SharedFolderStore::SCHEME) {
        Box::new(SharedFolderStore::from_url(url).unwrap())
    } else {
        let mut timeouts = RemoteTimeouts::default();
        timeouts.connect = Duration::from_secs(2);
        timeouts.request = Duration::from_secs(2);
        Box::new(RedisStore::new(url, timeouts).unwrap())
    }
}

/// The artifact key of `program` (compiler, runtime and target `test`).
pub(crate) fn key_of(program: &str) -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program,
        compiler: "test",
        runtime: "test",
        target: "test",
    })
}
