//! Safe RAII wrappers over one shared IREE runtime.
