//! Deployments that share one real `redis-server` (one database) keep
//! apart: a tier with another secret or another namespace neither reads
//! nor overwrites the entries of the others; it misses on them (never an
//! authentication failure) and builds its own.

#![cfg(not(miri))] // sockets, a server process

mod support;

use jit_store::{
    ArtifactStore, Fetched, RedisStore, RemoteOptions, RemoteTier, RemoteTimeouts, Secret,
};
use support::{fetch_built_by, key};
use test_support::redis::RedisServer;

/// A store with no folder, over a tier at `url` with `secret` and
/// `namespace`.
fn deployment(url: &str, secret: [u8; 32], namespace: &str) -> ArtifactStore {
    let backend = RedisStore::new(url, RemoteTimeouts::default()).unwrap();
    let mut options = RemoteOptions::default();
    options.namespace = namespace.parse().unwrap();
    let tier = RemoteTier::new(Box::new(backend), Secret::from_bytes(secret), options).unwrap();
    ArtifactStore::disabled().with_remote(tier)
}

#[test]
fn deployments_with_other_secrets_or_namespaces_share_no_entries() {
    let server = RedisServer::start();
    let url = server.url();
    let deployments = [
        ("prod", [1; 32], "prod"),
        ("other secret", [2; 32], "prod"),
        ("staging", [1; 32], "staging"),
    ];
    for (who, secret, namespace) in deployments {
        let store = deployment(&url, secret, namespace);
        assert_eq!(
            fetch_built_by(&store, "f", who),
            (format!("built by {who}"), Fetched::Built),
            "{who} found another deployment's entry"
        );
        // Dropping the store waits for its publish.
    }
    let keys = server.connection().keys("sheaf-jit:v1:*");
    assert_eq!(keys.len(), 3, "one entry per deployment: {keys:?}");

    for (who, secret, namespace) in deployments {
        let store = deployment(&url, secret, namespace);
        assert_eq!(
            fetch_built_by(&store, "f", "nobody"),
            (format!("built by {who}"), Fetched::Remote),
            "{who} lost its entry"
        );
        let stats = store.remote_stats().unwrap();
        assert_eq!(
            (stats.hits, stats.rejected, stats.errors),
            (1, 0, 0),
            "{who}"
        );
    }

    // A fourth deployment misses on all three: misses, not rejections.
    let store = deployment(&url, [3; 32], "prod");
    assert_eq!(fetch_built_by(&store, "f", "fourth").1, Fetched::Built);
    let stats = store.remote_stats().unwrap();
    assert_eq!((stats.misses, stats.rejected), (1, 0), "{stats}");
}

#[test]
fn the_key_layout_is_prefix_namespace_secret_id_and_artifact_key() {
    let server = RedisServer::start();
    let store = deployment(&server.url(), [4; 32], "team-a");
    drop(fetch_built_by(&store, "g", "team a"));
    drop(store);
    let keys = server.connection().keys("*");
    let [name] = &keys[..] else {
        panic!("one entry: {keys:?}")
    };
    let parts: Vec<&str> = name.split(':').collect();
    assert_eq!(parts[..3], ["sheaf-jit", "v1", "team-a"], "{name}");
    assert_eq!(parts[3].len(), 16, "the secret's id: {name}");
    assert_eq!(parts[4], key("g").hex(), "{name}");
    assert!(
        !name.contains("0404"),
        "nothing of the secret shows: {name}"
    );
}
