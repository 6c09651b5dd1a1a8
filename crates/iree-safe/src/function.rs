//! Exported functions and invoking them.

use std::iter::Enumerate;
use std::slice;

use crate::calling_convention::{CallingConvention, SlotKind};
use crate::device::Device;
use crate::error::{check, Context, Error, Result};
use crate::list::{List, ListPool};
use crate::module::Module;
use crate::tensor::Tensor;
use crate::value::{Argument, VmValue};
use crate::{strings, sys};

impl Module {
    /// Looks up an exported function once; keep the [`Function`] and call it
    /// as often as needed (lookups by name are linear in the export count).
    ///
    /// # Errors
    ///
    /// [`Error::Iree`] with code `NotFound` when the module exports no `name`
    /// (the message lists its exports).
    #[doc(alias = "iree_vm_module_lookup_function_by_name")]
    pub fn function(&self, name: &str) -> Result<Function> {
        let mut raw = sys::iree_vm_function_t::default();
        // SAFETY: the module is live; `name` outlives the call; `raw` is a
        // valid out-pointer; the status is freed by `check`.
        unsafe {
            check(sys::iree_vm_module_lookup_function_by_name(
                self.as_ptr(),
                sys::IREE_VM_FUNCTION_LINKAGE_EXPORT,
                strings::view(name),
                &mut raw,
            ))
        }
        .context(|| {
            format!(
                "module `{}` has no exported function `{name}` (exports: {})",
                self.name(),
                self.function_names().join(", ")
            )
        })?;
        Ok(Function::new(self.clone(), raw))
    }
}

/// An exported function, looked up once. It keeps its [`Module`] loaded, so
/// a function can never outlive the code it calls.
///
/// Corresponds to `iree_vm_function_t`, `iree_vm_function_signature` and
/// `iree_vm_invoke`.
#[doc(alias = "iree_vm_function_t")]
#[derive(Debug, Clone)]
pub struct Function {
    raw: sys::iree_vm_function_t,
    name: String,
    calling_convention: CallingConvention,
    module: Module,
}

// SAFETY: `raw` is plain data naming a function of `module`, which is Send +
// Sync and kept alive by the `module` field.
unsafe impl Send for Function {}
// SAFETY: as above; `call` serializes on the module's context.
unsafe impl Sync for Function {}

impl Function {
    fn new(module: Module, raw: sys::iree_vm_function_t) -> Function {
        // SAFETY: `raw` was just looked up on the live `module`; the views
        // point into the module and are copied at once.
        let (name, convention) = unsafe {
            (
                strings::to_string(sys::iree_vm_function_name(&raw)),
                strings::to_string(sys::iree_vm_function_signature(&raw).calling_convention),
            )
        };
        Function {
            raw,
            name,
            calling_convention: CallingConvention::parse(&convention),
            module,
        }
    }

    /// The function's name within its module.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The signature IREE reflects (calling convention, argument and
    /// result kinds).
    pub fn calling_convention(&self) -> &CallingConvention {
        &self.calling_convention
    }

    /// A reflection attribute of the function, e.g. `iree.abi.declaration`.
    #[doc(alias = "iree_vm_function_lookup_attr_by_name")]
    pub fn reflection_attr(&self, key: &str) -> Option<String> {
        // SAFETY: the function belongs to the live module; `key` outlives the
        // call; the returned view points into the module and is copied.
        let value = unsafe {
            strings::to_string(sys::iree_vm_function_lookup_attr_by_name(
                &self.raw,
                strings::view(key),
            ))
        };
        (!value.is_empty()).then_some(value)
    }

    /// The module the function belongs to.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Invokes the function. Argument count and kinds are checked against
    /// the signature, and tensors must live on this module's device (or
    /// one [opened beside it](crate::Device::open_beside)); shape
    /// and element-type mismatches are reported by IREE as
    /// [`Error::Iree`] with code `InvalidArgument`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] when the arguments do not match the
    /// signature or a tensor lives on another device (nothing was called),
    /// [`Error::Iree`] when IREE refuses an argument or the function fails, and
    /// [`Error::Unsupported`] for a result this crate cannot represent.
    #[doc(alias = "iree_vm_invoke")]
    pub fn call(&self, arguments: &[VmValue]) -> Result<Vec<VmValue>> {
        self.invoke(arguments.iter().map(Argument::from))?.collect()
    }

    /// [`call`](Self::call) on tensors it borrows (a [`VmValue`] owns its
    /// tensor, so a caller holding `&Tensor`s would clone each), with the
    /// results read one at a time as the [`Results`] are iterated: a caller
    /// that wraps them collects them once.
    ///
    /// ```no_run
    /// # fn f(module: &iree_safe::Module, x: &iree_safe::Tensor) -> iree_safe::Result<()> {
    /// let sigmoid = module.function("main")?;
    /// let tensors = sigmoid
    ///     .call_borrowed(&[x])?
    ///     .map(|result| result.map(|value| value.into_tensor()))
    ///     .collect::<iree_safe::Result<Vec<_>>>()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`call`](Self::call); a result this crate cannot represent is
    /// the error of its item.
    #[doc(alias = "iree_vm_invoke")]
    pub fn call_borrowed(&self, arguments: &[&Tensor]) -> Result<Results<'_>> {
        self.invoke(arguments.iter().map(|&tensor| Argument::Tensor(tensor)))
    }

    /// Checks `arguments`, pushes them to an input list, invokes the
    /// function and hands back its result list. Both lists come from the
    /// module's [`ListPool`] and go back to it: the arguments' list,
    /// emptied, as soon as the function returns (it holds no tensor past
    /// the call), the results' list when the [`Results`] are dropped.
    fn invoke<'a>(
        &self,
        arguments: impl ExactSizeIterator<Item = Argument<'a>> + Clone,
    ) -> Result<Results<'_>> {
        self.check_arguments(arguments.clone())?;
        let kinds = self.calling_convention.results().ok_or_else(|| {
            Error::Unsupported(format!(
                "`{}` returns a variadic list ({})",
                self.name,
                self.calling_convention.as_str()
            ))
        })?;
        let pool = self.module.lists();
        let mut inputs = pool.take(arguments.len())?;
        for argument in arguments {
            inputs.push(argument)?;
        }
        let outputs = pool.take(kinds.len())?;
        let status = {
            let context = self.module.lock_context();
            // SAFETY: the context is locked for this thread; the function
            // belongs to a module of that context; both lists are live, this
            // thread's alone and distinct (`iree_vm_invoke` resizes the
            // output list to the results, `iree/vm/invocation.c`).
            unsafe {
                check(sys::iree_vm_invoke(
                    context.as_ptr(),
                    self.raw,
                    sys::IREE_VM_INVOCATION_FLAG_NONE,
                    std::ptr::null(),
                    inputs.as_ptr(),
                    outputs.as_ptr(),
                    sys::iree_allocator_system(),
                ))
            }
        };
        pool.give_back(inputs);
        let results = Results {
            outputs: Some(outputs),
            pool,
            kinds: kinds.iter().enumerate(),
            device: self.module.runtime().device(),
        };
        status.context(|| format!("calling `{}.{}`", self.module.name(), self.name))?;
        if results.returned() != kinds.len() {
            return Err(Error::Unsupported(format!(
                "`{}` returned {} results, its signature says {}",
                self.name,
                results.returned(),
                kinds.len()
            )));
        }
        Ok(results)
    }

    fn check_arguments<'a>(
        &self,
        arguments: impl ExactSizeIterator<Item = Argument<'a>> + Clone,
    ) -> Result<()> {
        let device = self.module.runtime().device();
        for (index, argument) in arguments.clone().enumerate() {
            if let Argument::Tensor(tensor) = argument {
                if !tensor.device().shares_memory_with(device) {
                    return Err(Error::InvalidArgument(format!(
                        "argument {index} of `{}` lives on another device ({}) than the module ({}); copy it to the host and back",
                        self.name,
                        tensor.device().uri(),
                        device.uri()
                    )));
                }
            }
        }
        let Some(expected) = self.calling_convention.arguments() else {
            return Ok(());
        };
        if expected.len() != arguments.len() {
            return Err(Error::InvalidArgument(format!(
                "`{}` takes {} arguments ({}), got {}",
                self.name,
                expected.len(),
                self.calling_convention.as_str(),
                arguments.len()
            )));
        }
        for (index, (kind, argument)) in expected.iter().zip(arguments).enumerate() {
            let matches = matches!(
                (kind, argument),
                (SlotKind::Ref, Argument::Tensor(_))
                    | (SlotKind::I32, Argument::Scalar(VmValue::I32(_)))
                    | (SlotKind::I64, Argument::Scalar(VmValue::I64(_)))
                    | (SlotKind::F32, Argument::Scalar(VmValue::F32(_)))
                    | (SlotKind::F64, Argument::Scalar(VmValue::F64(_)))
            );
            if !matches {
                return Err(Error::InvalidArgument(format!(
                    "argument {index} of `{}` must be a {kind}, got {}",
                    self.name,
                    argument.describe()
                )));
            }
        }
        Ok(())
    }
}

/// The results of a [`Function::call_borrowed`], each read from IREE's
/// result list as it is iterated (a tensor takes its own reference to the
/// buffer view). Dropping them empties the list (releasing the results not
/// read) and gives it back to the module for its next call.
#[derive(Debug)]
pub struct Results<'a> {
    /// `Some` until dropped.
    outputs: Option<List>,
    pool: &'a ListPool,
    kinds: Enumerate<slice::Iter<'a, SlotKind>>,
    device: &'a Device,
}

impl Results<'_> {
    /// The number of results IREE returned.
    fn returned(&self) -> usize {
        self.outputs.as_ref().map_or(0, List::len)
    }
}

impl Iterator for Results<'_> {
    type Item = Result<VmValue>;

    fn next(&mut self) -> Option<Result<VmValue>> {
        let outputs = self.outputs.as_ref()?;
        let (index, kind) = self.kinds.next()?;
        Some(match kind {
            SlotKind::Ref => outputs.get_tensor(index, self.device).map(VmValue::Tensor),
            _ => outputs.get_scalar(index),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.kinds.size_hint()
    }
}

impl ExactSizeIterator for Results<'_> {}

impl Drop for Results<'_> {
    fn drop(&mut self) {
        if let Some(outputs) = self.outputs.take() {
            self.pool.give_back(outputs);
        }
    }
}
