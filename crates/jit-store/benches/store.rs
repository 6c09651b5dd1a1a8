//! Cost of a disk-store hit: key hashing, one file read, the header and
//! checksum checks, and the touch that keeps the LRU order, for an artifact
//! the size of a small IREE module (10.6 KB) and a large one (1 MiB).
//!
//! Run: `cargo bench -p jit-cache --bench store`. A benchmark reports
//! figures; it asserts nothing.

use std::time::{Duration, Instant};

use jit_store::{ArtifactKey, ArtifactStore, Fetched, KeyParts, StoreConfig};

const HITS: usize = 200;

fn key(program: &str) -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program,
        compiler: "3.13.0 @ bench",
        runtime: "bench-runtime",
        target: "--iree-hal-target-device=local\nhost=bench",
    })
}

fn hit(store: &ArtifactStore, program: &str) -> Duration {
    let start = Instant::now();
    let (bytes, fetched) = store
        .fetch_or_build(
            Some(&key(program)),
            |artifact| Ok::<_, String>(artifact.bytes().len()),
            || Err::<Vec<u8>, _>("a hit never builds"),
        )
        .expect("the entry was stored up front");
    let elapsed = start.elapsed();
    assert_eq!(fetched, Fetched::Disk);
    std::hint::black_box(bytes);
    elapsed
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    println!("disk-store hit (key + read + header + HMAC-SHA256 + touch), median of {HITS}:");
    for (label, size) in [("10.6 KB (tiny module)", 10_576), ("1 MiB", 1 << 20)] {
        let program = format!("module @bench_{size} {{}}");
        let fill = ArtifactStore::open(StoreConfig::at(dir.path())).expect("a private folder");
        fill.fetch_or_build(
            Some(&key(&program)),
            |artifact| Ok::<_, String>(artifact.bytes().len()),
            || Ok::<_, String>(vec![7u8; size]),
        )
        .expect("stores");
        let fresh = ArtifactStore::open(StoreConfig::at(dir.path())).expect("a private folder");
        let first = hit(&fresh, &program);
        let mut hits: Vec<Duration> = (0..HITS).map(|_| hit(&fresh, &program)).collect();
        hits.sort();
        println!(
            "  {label:<22} first hit in a fresh store {:.3} ms, median {:.3} ms",
            ms(first),
            ms(hits[HITS / 2])
        );
    }
}
