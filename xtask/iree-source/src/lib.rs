//! Empty: this package only pins the IREE source package.
