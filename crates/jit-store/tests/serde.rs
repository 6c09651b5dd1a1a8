//! The statistics serialize (cargo feature `serde`): the disk store's and
//! the remote tier's, as JSON a program can read back.

use jit_store::{ArtifactKey, ArtifactStore, KeyParts, RemoteStats, StoreConfig, VerifiedArtifact};
use serde_json::json;

#[test]
#[cfg_attr(miri, ignore)] // touches the file system
fn store_and_remote_stats_serialize_every_counter() {
    let dir = tempfile::tempdir().unwrap();
    let store = ArtifactStore::open(StoreConfig::at(dir.path())).unwrap();
    let key = ArtifactKey::new(&KeyParts {
        program: "p",
        compiler: "c",
        runtime: "r",
        target: "t",
    });
    let load = |artifact: VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().len());
    store
        .fetch_or_build(Some(&key), load, || Ok::<_, String>(vec![7; 100]))
        .unwrap();
    store
        .fetch_or_build(Some(&key), load, || Ok::<_, String>(vec![7; 100]))
        .unwrap();
    let json = serde_json::to_value(store.stats()).unwrap();
    assert_eq!(
        (json["hits"].clone(), json["misses"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(json["bytes_read"], 100);
    assert_eq!(json["bytes_on_disk"], 188);

    let remote = serde_json::to_value(RemoteStats::default()).unwrap();
    assert_eq!(remote["breaker"], "Closed");
    assert_eq!(remote["fetch_time"], json!({"secs": 0, "nanos": 0}));
    assert_eq!(remote["publishes"], 0);
}
