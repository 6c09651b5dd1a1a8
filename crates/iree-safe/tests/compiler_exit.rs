//! A process that exits while other threads compile in process: `exit`
//! waits for the compiles in flight instead of running the compiler
//! library's static destructors under them (the process died of SIGSEGV in
//! LLVM's pass registry before). Each check runs in a child process of this
//! test binary, which exits in the middle of its compiles.

#![cfg(not(iree_mock))]

mod compiler_support;

use std::time::Duration;

use compiler_support::*;
use iree_safe::compiler::{CompileError, Compiler};

/// Set in the child process: it compiles on two threads and exits.
const CHILD: &str = "IREE_SAFE_TEST_EXIT_WHILE_COMPILING";

#[test]
fn exit_waits_for_the_compiles_in_flight() {
    if std::env::var_os(CHILD).is_some() {
        compile_and_exit();
    }
    for run in 0..4 {
        let output = test_support::child::rerun("exit_waits_for_the_compiles_in_flight")
            .env(CHILD, "1")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "run {run}: the child exited with {:?}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The child: two threads compile one program after another, and the main
/// thread exits while they do; compiles asked for once `exit` has begun are
/// refused with [`CompileError::Exiting`].
fn compile_and_exit() -> ! {
    let compiler = in_process();
    let program = sigmoid();
    compiler
        .compile(&program.source(), &program.options)
        .expect("the first compile");
    for _ in 0..2 {
        let (compiler, program) = (compiler.clone(), program.clone());
        std::thread::spawn(move || loop {
            match compiler.compile(&program.source(), &program.options) {
                Ok(_) => {}
                Err(CompileError::Exiting) => return,
                Err(other) => panic!("{other}"),
            }
        });
    }
    std::thread::sleep(Duration::from_millis(700));
    std::process::exit(0)
}
