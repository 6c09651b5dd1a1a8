//! The stores' event counters, defined once: [`counters!`] writes a
//! public statistics struct and, from the same field list, the atomic
//! counters behind it and their snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// Adds `by` to one of the stores' event counters (statistics only: no
/// ordering with other memory is needed).
pub(super) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Reads one of the stores' event counters.
pub(super) fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Defines the public statistics struct `$stats`, whose counted fields
/// (`u64`, listed first) each have an [`AtomicU64`] of the same name in
/// the private `$counters` (bumped with [`bump`]), and whose other fields
/// (under `other`) are filled in by the caller; `$counters::snapshot`
/// reads the counts into a `$stats` whose other fields are their
/// defaults.
macro_rules! counters {
    (
        $(#[$meta:meta])*
        pub struct $stats:ident counted in $counters:ident {
            $( $(#[$field_meta:meta])* pub $field:ident: u64, )*
            other {
                $( $(#[$other_meta:meta])* pub $other:ident: $other_ty:ty, )*
            }
        }
    ) => {
        $(#[$meta])*
        pub struct $stats {
            $( $(#[$field_meta])* pub $field: u64, )*
            $( $(#[$other_meta])* pub $other: $other_ty, )*
        }

        #[derive(Debug, Default)]
        pub(in crate) struct $counters {
            $( pub(in crate) $field: std::sync::atomic::AtomicU64, )*
        }

        impl $counters {
            /// The counts now (the other fields: their defaults).
            pub(in crate) fn snapshot(&self) -> $stats {
                $stats {
                    $( $field: $crate::counters::load(&self.$field), )*
                    ..Default::default()
                }
            }
        }
    };
}
