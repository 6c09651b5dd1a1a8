//! A small load → call → drop program for leak checkers:
//!
//! ```sh
//! cargo run -p iree-safe --example load_call_drop -- --emit target/sigmoid-x86-64-v2.vmfb
//! echo 2 > /proc/sys/kernel/io_uring_disabled   # as root; see below
//! valgrind --leak-check=full target/debug/examples/load_call_drop target/sigmoid-x86-64-v2.vmfb
//! echo 0 > /proc/sys/kernel/io_uring_disabled
//! ```
//!
//! valgrind 3.19 runs `io_uring_enter` as a blocking call under its global
//! lock, so IREE's io_uring proactor thread deadlocks every other thread;
//! with io_uring disabled IREE falls back to its POSIX proactor.
//!
//! With `--emit FILE` it only compiles `tests/data/sigmoid.mlir` (with the
//! installed `iree-compile`, for a baseline x86-64-v2 CPU: valgrind cannot
//! decode the AVX-512 code `host` may produce) and writes the artifact. With
//! a `.vmfb` path it loads that; with no argument it compiles first. Then, on
//! local-sync and local-task, it loads the module, calls it, checks the
//! result, and drops everything, 20 times over.

use iree_safe::compiler::Artifact;
use iree_safe::{Runtime, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let vmfb = match args.as_slice() {
        [] => test_support::iree::program_for_cpu("sigmoid", "x86-64-v2"),
        [flag, path] if flag == "--emit" => {
            std::fs::write(
                path,
                test_support::iree::program_for_cpu("sigmoid", "x86-64-v2").as_bytes(),
            )?;
            println!("wrote {path}");
            return Ok(());
        }
        // SAFETY: the user names the file to load, as they would a program
        // to run (the --emit output of this example, typically).
        [path] => unsafe { Artifact::from_trusted_bytes(std::fs::read(path)?) },
        _ => return Err("usage: load_call_drop [--emit FILE | FILE.vmfb]".into()),
    };
    for driver in ["local-sync", "local-task"] {
        let runtime = Runtime::new(driver)?;
        for round in 0..20 {
            let module = runtime.load(vmfb.vmfb())?;
            let sigmoid = module.function("sigmoid")?;
            let x = round as f32 / 10.0;
            let input = Tensor::from_slice(runtime.device(), &[4], &[x, -x, 0.0, 1.0])?;
            let output = sigmoid.call(&[input.into()])?;
            let y = output[0].as_tensor().expect("a tensor").to_vec::<f32>()?;
            assert!((y[0] - 1.0 / (1.0 + (-x).exp())).abs() < 1e-6);
        }
        println!("{driver}: 20 load/call/drop rounds ok");
    }
    Ok(())
}
