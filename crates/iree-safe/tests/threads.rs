//! Eight threads share one runtime, each calling its own modules.

use iree_safe::{Runtime, Tensor};
use test_support::iree::{load_function, program, LeakCheck, DRIVER};

const THREADS: usize = 8;
const CALLS: usize = if cfg!(miri) { 10 } else { 1_000 };

#[test]
fn eight_threads_share_one_runtime() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let bytes = program("add");
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (runtime, bytes) = (runtime.clone(), &bytes);
            scope.spawn(move || {
                // Two modules per thread, alternated, each with its own context.
                let functions: Vec<_> = (0..2)
                    .map(|_| runtime.load(bytes.vmfb()).unwrap().function("add").unwrap())
                    .collect();
                for call in 0..CALLS {
                    let base = (thread * CALLS + call) as f32;
                    let a = Tensor::from_slice(
                        runtime.device(),
                        &[4],
                        &[base, base + 1.0, base + 2.0, base + 3.0],
                    )
                    .unwrap();
                    let b = Tensor::from_slice(runtime.device(), &[4], &[1.0f32; 4]).unwrap();
                    let out = functions[call % 2].call(&[a.into(), b.into()]).unwrap();
                    let y = out[0].as_tensor().unwrap().to_vec::<f32>().unwrap();
                    assert_eq!(
                        y,
                        vec![base + 1.0, base + 2.0, base + 3.0, base + 4.0],
                        "thread {thread} call {call}"
                    );
                }
            });
        }
    });
}

#[test]
fn one_module_is_callable_from_several_threads() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let add = load_function(&runtime, "add");
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let (runtime, add) = (&runtime, &add);
            scope.spawn(move || {
                for _ in 0..CALLS / 10 {
                    let x = thread as f32;
                    let a = Tensor::from_slice(runtime.device(), &[4], &[x; 4]).unwrap();
                    let out = add.call(&[a.clone().into(), a.into()]).unwrap();
                    assert_eq!(
                        out[0].as_tensor().unwrap().to_vec::<f32>().unwrap(),
                        vec![2.0 * x; 4]
                    );
                }
            });
        }
    });
}
