//! Benchmark (not a test): what the remote artifact cache costs and saves,
//! against a real `redis-server` (`cargo xtask test` installs it).
//!
//! 1. Time to the first result of a signature in a fresh runtime with an
//!    empty disk cache: compiled (the remote cache misses) vs served from
//!    the remote cache, and from the local disk for reference.
//! 2. A server that cannot be reached — a closed port, and a socket that
//!    accepts connections and never answers: each remote lookup of a miss
//!    costs at most the configured timeouts, the circuit breaker then stops
//!    asking, and cache hits never touch the network.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench remote
//! ```

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use test_support::redis;

use jit_store::{
    ArtifactKey, ArtifactStore, KeyParts, RedisStore, RemoteOptions, RemoteTier, RemoteTimeouts,
    Secret,
};
use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder, RemoteCacheUrl, RemoteSecret},
    JitConfig, JitConfigBuilder, JitRuntime, Value,
};

const ROUNDS: usize = 5;
const SECRET: [u8; 32] = [0x5a; 32];

/// Blocking, every shape its own artifact (no dynamic dims), disk cache in
/// `disk`.
fn settings(disk: &Path) -> JitConfigBuilder {
    JitConfig::builder()
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .cache(|cache| cache.dynamic_dims = false)
        .disk(|disk_cache| disk_cache.folder = DiskCacheFolder::Dir(disk.into()))
}

fn with_remote(disk: &Path, url: &str) -> JitConfigBuilder {
    settings(disk).remote(|remote| {
        remote.url = Some(RemoteCacheUrl::new(url));
        remote.secret = Some(RemoteSecret::Key(Secret::from_bytes(SECRET)));
    })
}

fn runtime(settings: JitConfigBuilder) -> JitRuntime {
    JitRuntime::new(settings.build().unwrap()).unwrap()
}

/// Times one sigmoid call on a `[rows, 5]` array; checks how it ran.
fn first_call(jit: &JitRuntime, rows: usize, hit: bool) -> Duration {
    let x = [Value::host(ArrayD::<f32>::zeros(IxDyn(&[rows, 5])))];
    let start = Instant::now();
    let result = jit
        .call(&reference::sigmoid(), &x, &[], |args, _, _| {
            reference::interpret_sigmoid(args)
        })
        .unwrap();
    let elapsed = start.elapsed();
    assert!(result.provenance.is_compiled(), "{:?}", result.provenance);
    assert_eq!(result.provenance.is_hit(), hit, "{:?}", result.provenance);
    elapsed
}

fn summary(times: &mut [Duration]) -> String {
    times.sort();
    format!(
        "median {:>9.3?}  min {:>9.3?}  max {:>9.3?}",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    )
}

fn time_to_first_result(server: &redis::RedisServer) {
    println!("time to the first result of a signature (fresh runtime, fresh disk cache; {ROUNDS} signatures):");
    let (mut compiled, mut remote, mut disk) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let rows = 10 + round;
        let publisher_disk = tempfile::tempdir().unwrap();
        let jit = runtime(with_remote(publisher_disk.path(), &server.url()));
        compiled.push(first_call(&jit, rows, false));
        drop(jit); // publishes

        let fresh = tempfile::tempdir().unwrap();
        let jit = runtime(with_remote(fresh.path(), &server.url()));
        remote.push(first_call(&jit, rows, false));
        let stats = jit.remote_cache_stats().unwrap();
        assert_eq!((stats.hits, jit.disk_cache_stats().misses), (1, 0));
        drop(jit);

        // The remote hit was copied to disk: the next fresh runtime reads it there.
        let jit = runtime(with_remote(fresh.path(), &server.url()));
        disk.push(first_call(&jit, rows, false));
        assert_eq!(jit.disk_cache_stats().hits, 1);
    }
    println!("  compiled (remote miss)  {}", summary(&mut compiled));
    println!("  remote hit              {}", summary(&mut remote));
    println!("  disk hit                {}", summary(&mut disk));
}

/// Ten lookups of distinct keys through a remote tier at `url`, each
/// missing and building a one-byte artifact (over a zero bound, so nothing
/// is published and only lookups reach the server): the time each took.
fn unreachable_lookups(url: &str, timeouts: RemoteTimeouts) {
    let backend = RedisStore::new(url, timeouts).unwrap();
    let mut options = RemoteOptions::default();
    options.max_entry_bytes = 0;
    let tier = RemoteTier::new(Box::new(backend), Secret::from_bytes(SECRET), options).unwrap();
    let store = ArtifactStore::disabled().with_remote(tier);
    let mut times = Vec::new();
    for i in 0..10 {
        let program = format!("program {i}");
        let key = ArtifactKey::new(&KeyParts {
            program: &program,
            compiler: "bench",
            runtime: "bench",
            target: "bench",
        });
        let start = Instant::now();
        store
            .fetch_or_build(
                Some(&key),
                |_| Ok::<_, String>(()),
                || Ok::<_, String>(vec![0]),
            )
            .unwrap();
        times.push(start.elapsed());
    }
    let stats = store.remote_stats().unwrap();
    let shown: Vec<String> = times.iter().map(|t| format!("{t:.1?}")).collect();
    println!("    per lookup: {}", shown.join(", "));
    println!(
        "    {} lookups sent ({} failed), {} skipped by the breaker ({}); longest {:.1?}",
        stats.fetches, stats.errors, stats.skipped, stats.breaker, stats.max_fetch_time
    );
}

/// The mean time of a cache hit with the remote cache at `url` (down) and
/// without one.
fn hits(url: &str) {
    let mean = |settings: JitConfigBuilder| {
        let disk = tempfile::tempdir().unwrap();
        let jit = runtime(
            settings
                .disk(|disk_cache| disk_cache.folder = DiskCacheFolder::Dir(disk.path().into())),
        );
        first_call(&jit, 3, false);
        let calls = 2000;
        let start = Instant::now();
        for _ in 0..calls {
            first_call(&jit, 3, true);
        }
        let stats = jit.remote_cache_stats();
        (start.elapsed() / calls, stats.map_or(0, |s| s.fetches))
    };
    let unused = tempfile::tempdir().unwrap();
    let (down, fetches) = mean(with_remote(unused.path(), url));
    let (none, _) = mean(settings(unused.path()));
    println!(
        "  cache hit, remote unreachable: {down:.2?} per call ({fetches} remote request, all by \
         the first call's miss); without a remote cache: {none:.2?}"
    );
}

fn main() {
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    let timeouts = RemoteTimeouts::default();
    println!(
        "unreachable server (connect timeout {:?}, request timeout {:?}, breaker after {} \
         failures):",
        timeouts.connect,
        timeouts.request,
        RemoteOptions::DEFAULT_FAILURE_THRESHOLD
    );
    let closed = redis::url_of(redis::free_port());
    println!("  closed port ({closed}):");
    unreachable_lookups(&closed, timeouts);
    // Accepts connections (the kernel completes them) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = redis::url_of(silent.local_addr().unwrap().port());
    println!("  silent listener ({silent_url}):");
    unreachable_lookups(&silent_url, timeouts);
    hits(&silent_url);

    println!();
    let server = redis::RedisServer::start();
    time_to_first_result(&server);
}
