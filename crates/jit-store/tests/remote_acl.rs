//! `docs/cluster.md`'s ACL line for a worker is a tested artifact: this test
//! reads it from the page, creates exactly that user on a real
//! `redis-server`, and runs a fleet of workers with leases through it
//! (every command the client sends, the lease scripts' own included, must
//! be allowed: one build for the fleet, no error, every worker served).

#![cfg(not(miri))] // processes, sockets

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use jit_store::{
    ArtifactKey, ArtifactStore, Fetched, KeyParts, Namespace, RedisStore, RemoteOptions,
    RemoteTier, RemoteTimeouts, Secret,
};
use test_support::redis::{documented_acl, RedisServer, Reply};

/// The page, and how its ACL line starts.
const PAGE: &str = include_str!("../../../docs/cluster.md");
const ACL_LINE: &str = "user jit-prod ";

/// How many workers miss the key at once.
const WORKERS: usize = 4;

fn key() -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program: "module @acl {}",
        compiler: "test",
        runtime: "test",
        target: "test",
    })
}

#[test]
fn the_documented_acl_user_runs_a_fleet_with_leases() {
    let server = RedisServer::start();
    let (user, rules) = documented_acl(PAGE, ACL_LINE);
    let mut setuser: Vec<&[u8]> = vec![b"ACL", b"SETUSER", user.as_bytes()];
    setuser.extend(rules.iter().map(|rule| rule.as_bytes()));
    let answer = server.connection().command(&setuser).unwrap();
    assert!(matches!(answer, Reply::Status(_)), "{answer:?}");
    let password = rules
        .iter()
        .find_map(|rule| rule.strip_prefix('>'))
        .expect("the line names a password");
    let namespace = rules
        .iter()
        .find_map(|rule| rule.strip_prefix("~sheaf-jit:v1:"))
        .and_then(|pattern| pattern.strip_suffix(":*"))
        .expect("the line confines the user to a namespace");
    let url = format!("redis://{user}:{password}@127.0.0.1:{}/0", server.port());

    let start = Arc::new(Barrier::new(WORKERS));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (url, start) = (url.clone(), Arc::clone(&start));
            let namespace = Namespace::new(namespace).unwrap();
            thread::spawn(move || {
                let mut timeouts = RemoteTimeouts::default();
                timeouts.connect = Duration::from_secs(2);
                timeouts.request = Duration::from_secs(2);
                let backend = RedisStore::new(&url, timeouts).unwrap();
                let mut options = RemoteOptions::default();
                options.namespace = namespace;
                options.compile_estimate = Duration::from_secs(10);
                let secret = Secret::from_bytes([7; Secret::LEN]);
                let tier = RemoteTier::new(Box::new(backend), secret, options).unwrap();
                let store = ArtifactStore::disabled().with_remote(tier);
                start.wait();
                let load = |artifact: jit_store::VerifiedArtifact<'_>| {
                    Ok::<_, String>(artifact.bytes().to_vec())
                };
                let build = || {
                    // Longer than the lease's renewal (every 0.67 s).
                    thread::sleep(Duration::from_millis(1500));
                    Ok::<_, String>(b"native code of @acl".to_vec())
                };
                let (bytes, fetched) = store.fetch_or_build(Some(&key()), load, build).unwrap();
                assert_eq!(bytes, b"native code of @acl");
                let stats = store.remote_stats().unwrap();
                drop(store); // publishes, releases
                (fetched, stats)
            })
        })
        .collect();
    let results: Vec<(Fetched, _)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    for (_, stats) in &results {
        assert_eq!(
            (stats.errors, stats.leases_lost),
            (0, 0),
            "every command allowed: {stats}"
        );
    }
    let built = results
        .iter()
        .filter(|(fetched, _)| *fetched == Fetched::Built)
        .count();
    assert_eq!(built, 1, "one build for the fleet: {results:?}");
    // And the user is confined to its namespace.
    let mut client = server.connection();
    let auth: [&[u8]; 3] = [b"AUTH", user.as_bytes(), password.as_bytes()];
    client.command(&auth).unwrap();
    let other = client
        .command(&[b"STRLEN", b"sheaf-jit:v1:other:0"])
        .unwrap();
    assert!(
        matches!(&other, Reply::Error(error) if error.starts_with("NOPERM")),
        "{other:?}"
    );
}
