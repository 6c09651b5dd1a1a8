//! Concurrent in-process compilation from the very first use of the
//! library in a process, which is when IREE registers its LLVM targets
//! (this file holds one test so that nothing compiles before it).

#![cfg(not(iree_mock))]

mod compiler_support;

use std::sync::Barrier;

use compiler_support::*;
use iree_safe::compiler::Compiler;

/// Before the driver serialized session creation, eight first compilations
/// started together crashed or hung in 3 processes out of 12 (LLVM's target
/// registry is not thread-safe).
#[test]
fn four_threads_compile_different_programs_in_process_at_once() {
    let compiler = in_process();
    let programs = programs();
    assert_eq!(programs.len(), 4);
    let start = Barrier::new(programs.len());
    let artifacts: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = programs
            .iter()
            .map(|program| {
                let (compiler, start) = (&compiler, &start);
                scope.spawn(move || {
                    let mlir = program.source();
                    start.wait();
                    compiler.compile(&mlir, &program.options)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("no panic"))
            .collect()
    });
    for (program, artifact) in programs.iter().zip(artifacts) {
        let artifact = artifact.unwrap_or_else(|e| panic!("{}: {e}", program.name));
        check(program, &artifact);
    }
}
