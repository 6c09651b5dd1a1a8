//! Benchmark (not a test) behind `CPU_FLAGS`: an `f32[512,512]` matmul and
//! a tiny sigmoid compiled for this CPU with IREE's defaults and with each
//! candidate set of flags (microkernels, data tiling, optimization level),
//! then timed on local-sync and local-task. The candidates are measured in
//! turns (round robin), so that the machine's load falls on all of them
//! alike.
//!
//! ```sh
//! cargo bench -p sheaf-integration --bench cpu_flags
//! ```

use std::time::{Duration, Instant};

use iree_safe::compiler::{choose_compiler, CompileOptions, CompilerPreference};
use iree_safe::{Function, Runtime, Tensor, VmValue};
use sheaf_integration::CPU_FLAGS;

const MATMUL: &str = "module @matmul {
  func.func @matmul(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>) -> tensor<512x512xf32> {
    %c = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
    return %c : tensor<512x512xf32>
  }
}";

const SIGMOID: &str = "module @sigmoid {
  func.func @sigmoid(%x: tensor<1x5xf32>) -> tensor<1x5xf32> {
    %y = stablehlo.logistic %x : tensor<1x5xf32>
    return %y : tensor<1x5xf32>
  }
}";

const ROUNDS: usize = 12;
const MATMUL_CALLS: usize = 5;
const SIGMOID_CALLS: usize = 300;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn timed(f: &Function, args: &[VmValue], calls: usize, into: &mut Vec<Duration>) {
    for _ in 0..calls {
        let start = Instant::now();
        std::hint::black_box(f.call(args).unwrap());
        into.push(start.elapsed());
    }
}

fn main() {
    let compiler = choose_compiler(CompilerPreference::Auto)
        .expect("a compiler")
        .compiler;
    let with = |flags: &[&str]| CompileOptions {
        extra_flags: flags.iter().map(|f| (*f).to_owned()).collect(),
        ..CompileOptions::stablehlo()
    };
    let candidates = [
        ("IREE defaults", with(&[])),
        ("data tiling", with(&["--iree-opt-data-tiling"])),
        (
            "tiling + ukernels",
            with(&[
                "--iree-opt-data-tiling",
                "--iree-llvmcpu-enable-ukernels=all",
            ]),
        ),
        ("O3", with(&["--iree-opt-level=O3"])),
    ];
    println!("CPU_FLAGS = {CPU_FLAGS:?}");
    let mut compiled = Vec::new();
    for (label, options) in &candidates {
        let time = |mlir: &str| {
            let start = Instant::now();
            let artifact = compiler.compile(mlir, options).expect("compiles");
            (artifact, start.elapsed())
        };
        let (matmul, matmul_compile) = time(MATMUL);
        let (sigmoid, sigmoid_compile) = time(SIGMOID);
        compiled.push((label, matmul, sigmoid, matmul_compile, sigmoid_compile));
    }
    let a: Vec<f32> = (0..512 * 512)
        .map(|i| ((i % 17) as f32 - 8.0) / 8.0)
        .collect();
    let x = [0.5f32, -1.0, 0.0, 2.0, -3.0];
    for driver in ["local-sync", "local-task"] {
        let runtime = Runtime::new(driver).expect("the driver");
        let device = runtime.device();
        let matmul_args: [VmValue; 2] = [
            Tensor::from_slice(device, &[512, 512], &a).unwrap().into(),
            Tensor::from_slice(device, &[512, 512], &a).unwrap().into(),
        ];
        let sigmoid_args: [VmValue; 1] = [Tensor::from_slice(device, &[1, 5], &x).unwrap().into()];
        let loaded: Vec<(Function, Function)> = compiled
            .iter()
            .map(|(_, matmul, sigmoid, ..)| {
                let m = runtime
                    .load(matmul.vmfb())
                    .unwrap()
                    .function("matmul")
                    .unwrap();
                let s = runtime
                    .load(sigmoid.vmfb())
                    .unwrap()
                    .function("sigmoid")
                    .unwrap();
                m.call(&matmul_args).unwrap();
                (m, s)
            })
            .collect();
        let mut samples = vec![(Vec::new(), Vec::new()); loaded.len()];
        for _ in 0..ROUNDS {
            for ((matmul, sigmoid), (m, s)) in loaded.iter().zip(samples.iter_mut()) {
                timed(matmul, &matmul_args, MATMUL_CALLS, m);
                timed(sigmoid, &sigmoid_args, SIGMOID_CALLS, s);
            }
        }
        for ((label, _, _, matmul_compile, sigmoid_compile), (m, s)) in compiled.iter().zip(samples)
        {
            println!(
                "{label:<18} {driver:<10} matmul f32[512,512] {:>6.2} ms/call (compile {:>4.0} ms) | \
                 sigmoid f32[1,5] {:>6.2} us/call (compile {:>4.0} ms)",
                median(m).as_secs_f64() * 1e3,
                matmul_compile.as_secs_f64() * 1e3,
                median(s).as_secs_f64() * 1e6,
                sigmoid_compile.as_secs_f64() * 1e3,
            );
        }
    }
}
