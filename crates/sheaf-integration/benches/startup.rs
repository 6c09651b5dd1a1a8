//! Benchmark (not a test): the memory of a process whose program is served
//! entirely from the disk cache, which never loads the compiler, against
//! the same process with the compiler loaded (what every start cost before
//! the compiler was loaded lazily). Each runs in its own child process.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench startup
//! ```

use std::process::Command;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    stats::Origin,
    Dispatched, JitConfig, JitRuntime, Provenance, Value,
};

fn compiler_mapped() -> bool {
    std::fs::read_to_string("/proc/self/maps").is_ok_and(|maps| maps.contains("libIREECompiler"))
}

/// One child: start a runtime on the cache at `dir`, optionally load the
/// compiler, call sigmoid once, and print what it cost.
fn child(dir: &str, mode: &str) {
    let jit = JitRuntime::new(
        JitConfig::builder()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.into()))
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .build()
            .unwrap(),
    )
    .unwrap();
    if mode == "eager" {
        iree_safe::compiler::choose_compiler(Default::default()).unwrap();
    }
    let started = test_support::proc_status::rss_mib();
    let x = Value::host(ArrayD::<f32>::zeros(IxDyn(&[1, 5])));
    let Dispatched::Compiled(result) = jit.dispatch(&reference::sigmoid(), &[x], &[]).unwrap()
    else {
        panic!("interpreted");
    };
    assert!(matches!(
        result.provenance,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let stats = jit.disk_cache_stats();
    println!(
        "  {mode:<7} RSS after start {started:>6.1} MiB, after the first call {:>6.1} MiB | compiler \
         mapped: {:<5} | disk hits {}, compiles {}",
        test_support::proc_status::rss_mib(),
        compiler_mapped(),
        stats.hits,
        stats.misses
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, dir, mode] = &args[..] {
        if flag == "--child" {
            return child(dir, mode);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |mode: &str| {
        let status = Command::new(&args[0])
            .args(["--child", dir.path().to_str().unwrap(), mode])
            .status()
            .unwrap();
        assert!(status.success());
    };
    println!("a program served from the disk cache (sigmoid f32[1,5], local-sync):");
    run("fill");
    println!("  (fill: the first process compiled; the next two find everything on disk)");
    run("lazy");
    run("eager");
}
