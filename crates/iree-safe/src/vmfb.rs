//! [`TrustedVmfb`]: `.vmfb` bytes that may be loaded, because loading them
//! runs their code.

/// `.vmfb` bytes that are trusted like code.
///
/// A `.vmfb` is a program: its bytecode runs in IREE's VM, and the native
/// executables embedded in it (ELF shared objects on the CPU) run as machine
/// code in this process, with its privileges. IREE's loader checks an
/// archive's structure, not its intent, and malformed archives can crash
/// the process inside IREE's verifier, its ELF loader or the embedded code.
/// So loading bytes is like `dlopen`: sound only for bytes from a trusted
/// source. This type marks that trust: it comes from IREE's compiler
/// ([`compiler::Artifact::vmfb`](crate::compiler::Artifact::vmfb)), or from
/// the `unsafe` [`TrustedVmfb::new_unchecked`], whose caller vouches for the
/// bytes (e.g. an entry authenticated by the caller's own key).
#[derive(Debug, Clone, Copy)]
pub struct TrustedVmfb<'a> {
    bytes: &'a [u8],
}

impl<'a> TrustedVmfb<'a> {
    /// Marks `bytes` as trusted.
    ///
    /// # Safety
    ///
    /// `bytes` must be a `.vmfb` produced by an IREE compiler from a program
    /// the caller trusts, unmodified since (for example, read back from a
    /// store that authenticated it with a secret only the caller holds).
    /// Loading other bytes may run arbitrary code or crash the process.
    pub unsafe fn new_unchecked(bytes: &'a [u8]) -> Self {
        TrustedVmfb { bytes }
    }

    /// Bytes the crate's compiler produced.
    pub(crate) fn compiled(bytes: &'a [u8]) -> Self {
        TrustedVmfb { bytes }
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}
