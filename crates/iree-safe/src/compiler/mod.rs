//! The IREE compiler driver.
