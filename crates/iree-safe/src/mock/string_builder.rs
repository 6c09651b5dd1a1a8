//! IREE's string builder (`iree_string_builder_t`, iree/base/string_builder.c):
//! the fields are IREE's struct, the storage comes from the mock's host
//! blocks ([`super::allocator`]), grown as IREE grows it.

use super::allocator;
use super::api::*;
use super::status::{Failure, MockResult};

/// IREE rounds a builder's capacity up to this many bytes.
const ALIGNMENT: usize = 128;

/// `iree_string_builder_initialize`: an empty builder that grows with
/// `allocator`.
///
/// # Safety
/// `out_builder` is valid for writes.
pub(crate) unsafe fn iree_string_builder_initialize(
    allocator: iree_allocator_t,
    out_builder: *mut iree_string_builder_t,
) {
    // SAFETY: the caller passes a valid out-pointer.
    unsafe {
        out_builder.write(iree_string_builder_t {
            allocator,
            ..iree_string_builder_t::default()
        })
    };
}

/// `iree_string_builder_deinitialize`: frees the storage with the builder's
/// allocator and zeroes the builder.
///
/// # Safety
/// `builder` is an initialized builder.
pub(crate) unsafe fn iree_string_builder_deinitialize(builder: *mut iree_string_builder_t) {
    // SAFETY: the caller passes an initialized builder, whose storage, if
    // any, is a block of its allocator.
    unsafe {
        let builder = &mut *builder;
        allocator::iree_allocator_free(builder.allocator, builder.buffer.cast());
        *builder = iree_string_builder_t::default();
    }
}

/// `iree_string_builder_view`: the text appended so far.
///
/// # Safety
/// `builder` is an initialized builder.
pub(crate) unsafe fn iree_string_builder_view(
    builder: *const iree_string_builder_t,
) -> iree_string_view_t {
    // SAFETY: the caller passes an initialized builder.
    let builder = unsafe { &*builder };
    iree_make_string_view(builder.buffer, builder.size)
}

/// `iree_string_builder_append_string`, for the mock's drivers: grows the
/// storage to at least twice its capacity (or the needed size rounded up to
/// 128 bytes), keeps it NUL-terminated. RESOURCE_EXHAUSTED for a builder
/// that cannot grow (no allocator), as IREE.
///
/// # Safety
/// `builder` is an initialized builder.
pub(crate) unsafe fn append(builder: *mut iree_string_builder_t, text: &str) -> MockResult {
    // SAFETY: the caller passes an initialized builder.
    let builder = unsafe { &mut *builder };
    let needed = builder.size + text.len() + 1;
    if builder.capacity < needed {
        if builder.allocator.ctl.is_none() {
            return Err(Failure::new(
                IREE_STATUS_RESOURCE_EXHAUSTED,
                format!(
                    "non-growable builder capacity exceeded (capacity={}; requested>={needed})",
                    builder.capacity
                ),
            ));
        }
        let capacity = (builder.capacity * 2).max(needed.next_multiple_of(ALIGNMENT));
        // SAFETY: the storage is null or a block of the builder's
        // allocator, replaced by the one returned.
        builder.buffer =
            unsafe { allocator::realloc(builder.allocator, builder.buffer.cast(), capacity) }
                .cast();
        builder.capacity = capacity;
    }
    // SAFETY: the storage has room for `needed` bytes; the text is a
    // separate allocation.
    unsafe {
        let end = builder.buffer.add(builder.size).cast::<u8>();
        end.copy_from_nonoverlapping(text.as_ptr(), text.len());
        end.add(text.len()).write(0);
    }
    builder.size += text.len();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_grow_the_storage_and_deinitialize_frees_it() {
        let _serial = crate::mock::serial();
        let before = allocator::live_blocks();
        let mut builder = iree_string_builder_t::default();
        let long = "x".repeat(200);
        // SAFETY: `builder` is initialized before use and deinitialized once.
        let text = unsafe {
            iree_string_builder_initialize(iree_allocator_system(), &mut builder);
            assert_eq!(
                super::super::string_view::view_str(iree_string_builder_view(&builder)),
                ""
            );
            append(&mut builder, "type: ").unwrap();
            append(&mut builder, "cpu\n").unwrap();
            assert_eq!(builder.capacity, ALIGNMENT);
            append(&mut builder, &long).unwrap();
            assert_eq!(builder.capacity, 256);
            let text = super::super::string_view::view_str(iree_string_builder_view(&builder));
            assert_eq!(allocator::live_blocks(), before + 1);
            iree_string_builder_deinitialize(&mut builder);
            text
        };
        assert_eq!(text, format!("type: cpu\n{long}"));
        assert_eq!(allocator::live_blocks(), before);
        assert!(builder.buffer.is_null());
    }

    #[test]
    fn a_builder_without_an_allocator_cannot_grow() {
        let mut builder = iree_string_builder_t::default();
        // SAFETY: `builder` is initialized; it never has storage.
        let failure = unsafe {
            iree_string_builder_initialize(iree_allocator_null(), &mut builder);
            let failure = append(&mut builder, "name: x\n").unwrap_err();
            iree_string_builder_deinitialize(&mut builder);
            failure
        };
        assert_eq!(failure.code, IREE_STATUS_RESOURCE_EXHAUSTED);
    }
}
