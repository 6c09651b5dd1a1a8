//! [`CachePolicy::LruCoolDown`](crate::CachePolicy::LruCoolDown)'s thrash
//! detection: fall back to the interpreter when a function keeps
//! recompiling, probe again after a cool-down, double the cool-down on
//! relapse.
//!
//! Positions are per-function call numbers (1 for the first call), so the
//! state needs no update on ordinary calls.

use std::collections::VecDeque;
use std::fmt;

use crate::explain::MissReason;
use crate::function_id::FunctionId;

/// How a function treats new signatures, as shown in stats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum FunctionMode {
    /// Misses compile (at capacity, as admission decides).
    Normal,
    /// [`CachePolicy::Adaptive`](crate::CachePolicy::Adaptive): recent
    /// admissions did not pay off, so at capacity only hot signatures
    /// compile, until an admitted entry pays off.
    Restricted {
        /// Admitted entries evicted before they paid off, in all.
        wasted_compiles: u64,
        /// The recent call count that compiles anyway.
        hot_threshold: u32,
    },
    /// [`CachePolicy::LruCoolDown`](crate::CachePolicy::LruCoolDown): the
    /// function recompiled too often: cached signatures still run
    /// compiled, new ones run in the interpreter without compiling.
    Fallback {
        /// Calls left before compiling is probed again.
        remaining_cool_down: u64,
        /// The current cool-down length (doubles on each relapse).
        cool_down: u64,
    },
    /// [`CachePolicy::LruCoolDown`](crate::CachePolicy::LruCoolDown):
    /// compiling again after a cool-down; another trip doubles the cool-down.
    Probing {
        /// Calls left before the function counts as recovered.
        remaining_probe: u64,
    },
}

impl fmt::Display for FunctionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FunctionMode::Normal => f.write_str("normal"),
            FunctionMode::Restricted {
                wasted_compiles,
                hot_threshold,
            } => write!(
                f,
                "restricted ({wasted_compiles} wasted compiles; hot at {hot_threshold} calls)"
            ),
            FunctionMode::Fallback {
                remaining_cool_down,
                ..
            } => write!(f, "fallback ({remaining_cool_down} left)"),
            FunctionMode::Probing { remaining_probe } => {
                write!(f, "probing ({remaining_probe} left)")
            }
        }
    }
}

/// The thrash settings that apply to one function.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThrashSettings {
    pub window: u64,
    /// Already raised to at least the function's capacity.
    pub threshold: usize,
    pub cool_down: u64,
    pub cool_down_cap: u64,
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Normal,
    /// Compiling resumes (probing) at call `probe_at`.
    Fallback {
        probe_at: u64,
    },
    /// Recovered at call `recover_at` unless the threshold trips first.
    Probing {
        recover_at: u64,
    },
}

/// A change of [`FunctionMode`], logged once at warn level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    Engaged {
        compiles: usize,
        window: u64,
        cool_down: u64,
    },
    ProbeStarted {
        probe_calls: u64,
    },
    Relapsed {
        cool_down: u64,
        cap: u64,
    },
    Recovered,
}

/// Whether a miss may compile.
#[derive(Debug)]
pub(crate) enum Verdict {
    Compile,
    Interpret {
        remaining_cool_down: u64,
        transition: Option<Transition>,
    },
}

/// Per-function thrash state.
#[derive(Debug)]
pub(crate) struct ThrashGuard {
    settings: ThrashSettings,
    /// Call numbers of the compiles still inside the window (at most
    /// `threshold` of them).
    compiles: VecDeque<u64>,
    mode: Mode,
    cool_down: u64,
}

impl ThrashGuard {
    pub(crate) fn new(settings: ThrashSettings) -> Self {
        ThrashGuard {
            settings,
            compiles: VecDeque::new(),
            mode: Mode::Normal,
            cool_down: settings.cool_down,
        }
    }

    /// Advances the cool-down or the probe at the start of call `call`.
    #[inline]
    pub(crate) fn on_call(&mut self, call: u64) -> Option<Transition> {
        match self.mode {
            Mode::Normal => None,
            Mode::Fallback { probe_at } if call >= probe_at => {
                self.mode = Mode::Probing {
                    recover_at: call.saturating_add(self.settings.window),
                };
                self.compiles.clear();
                Some(Transition::ProbeStarted {
                    probe_calls: self.settings.window,
                })
            }
            Mode::Probing { recover_at } if call >= recover_at => {
                self.mode = Mode::Normal;
                self.cool_down = self.settings.cool_down;
                Some(Transition::Recovered)
            }
            Mode::Fallback { .. } | Mode::Probing { .. } => None,
        }
    }

    /// Decides whether the miss at call `call` compiles; records the compile
    /// when it does.
    pub(crate) fn on_miss(&mut self, call: u64) -> Verdict {
        if let Mode::Fallback { probe_at } = self.mode {
            return Verdict::Interpret {
                remaining_cool_down: probe_at - call - 1,
                transition: None,
            };
        }
        while self
            .compiles
            .front()
            .is_some_and(|&c| c.saturating_add(self.settings.window) <= call)
        {
            self.compiles.pop_front();
        }
        if self.compiles.len() < self.settings.threshold {
            self.compiles.push_back(call);
            return Verdict::Compile;
        }
        let transition = if let Mode::Probing { .. } = self.mode {
            self.cool_down = (self.cool_down.saturating_mul(2)).min(self.settings.cool_down_cap);
            Transition::Relapsed {
                cool_down: self.cool_down,
                cap: self.settings.cool_down_cap,
            }
        } else {
            Transition::Engaged {
                compiles: self.compiles.len(),
                window: self.settings.window,
                cool_down: self.cool_down,
            }
        };
        self.mode = Mode::Fallback {
            probe_at: call.saturating_add(self.cool_down),
        };
        Verdict::Interpret {
            remaining_cool_down: self.cool_down - 1,
            transition: Some(transition),
        }
    }

    /// The mode after `calls` calls.
    pub(crate) fn mode(&self, calls: u64) -> FunctionMode {
        match self.mode {
            Mode::Normal => FunctionMode::Normal,
            Mode::Fallback { probe_at } => FunctionMode::Fallback {
                remaining_cool_down: probe_at.saturating_sub(calls + 1),
                cool_down: self.cool_down,
            },
            Mode::Probing { recover_at } => FunctionMode::Probing {
                remaining_probe: recover_at.saturating_sub(calls + 1),
            },
        }
    }
}

impl Transition {
    /// Logs this transition (once, at warn level) with the setting to change.
    pub(crate) fn log(self, func: &FunctionId, last_miss: Option<&MissReason>) {
        let last_miss = last_miss.map_or_else(|| "none".to_owned(), ToString::to_string);
        match self {
            Transition::Engaged {
                compiles,
                window,
                cool_down,
            } => tracing::warn!(
                target: crate::log_targets::POLICY,
                function = %func,
                last_miss = %last_miss,
                setting = "CacheConfig::thrash_threshold",
                "{func}: {compiles} compiles in the last {window} calls reached the thrash threshold; \
                 new signatures run in the interpreter for the next {cool_down} calls (cached ones \
                 stay compiled). Last miss: {last_miss}. If these signatures are all needed, raise \
                 CacheConfig::function_capacity (or function_capacity_overrides[\"{func}\"]) and \
                 CacheConfig::thrash_threshold"
            ),
            Transition::ProbeStarted { probe_calls } => tracing::warn!(
                target: crate::log_targets::POLICY,
                function = %func,
                last_miss = %last_miss,
                setting = "CacheConfig::thrash_cool_down",
                "{func}: fallback cool-down over; compiling new signatures again, probing for \
                 {probe_calls} calls. Last miss: {last_miss}. CacheConfig::thrash_cool_down sets \
                 the cool-down"
            ),
            Transition::Relapsed { cool_down, cap } => tracing::warn!(
                target: crate::log_targets::POLICY,
                function = %func,
                last_miss = %last_miss,
                setting = "CacheConfig::thrash_cool_down_cap",
                "{func}: still thrashing after the cool-down; new signatures run in the \
                 interpreter for the next {cool_down} calls (doubled, capped by \
                 CacheConfig::thrash_cool_down_cap = {cap}). Last miss: {last_miss}. If these \
                 signatures are all needed, raise CacheConfig::function_capacity"
            ),
            Transition::Recovered => tracing::warn!(
                target: crate::log_targets::POLICY,
                function = %func,
                last_miss = %last_miss,
                setting = "CacheConfig::thrash_window",
                "{func}: no thrashing during the probe; back to normal compiling. Last miss: \
                 {last_miss}. CacheConfig::thrash_window sets the probe length"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> ThrashGuard {
        ThrashGuard::new(ThrashSettings {
            window: 10,
            threshold: 3,
            cool_down: 5,
            cool_down_cap: 12,
        })
    }

    /// Calls `call`, missing; returns whether it compiled.
    fn miss(g: &mut ThrashGuard, call: u64) -> bool {
        g.on_call(call);
        matches!(g.on_miss(call), Verdict::Compile)
    }

    #[test]
    fn compiles_outside_the_window_do_not_count() {
        let mut g = guard();
        for call in [1, 5, 9, 11, 15, 19, 21] {
            assert!(miss(&mut g, call), "call {call}");
        }
        assert_eq!(g.mode(21), FunctionMode::Normal);
    }

    #[test]
    fn engage_probe_relapse_cap_and_recover() {
        let mut g = guard();
        assert!(miss(&mut g, 1) && miss(&mut g, 2) && miss(&mut g, 3));
        // The fourth compile within 10 calls trips: fallback for 5 calls (4..8).
        g.on_call(4);
        assert!(matches!(
            g.on_miss(4),
            Verdict::Interpret {
                remaining_cool_down: 4,
                transition: Some(Transition::Engaged {
                    compiles: 3,
                    window: 10,
                    cool_down: 5
                })
            }
        ));
        for call in 5..9 {
            assert_eq!(g.on_call(call), None);
            assert!(!miss(&mut g, call));
        }
        assert_eq!(
            g.mode(8),
            FunctionMode::Fallback {
                remaining_cool_down: 0,
                cool_down: 5
            }
        );
        // Call 9 probes; three compiles pass, the fourth relapses: cool-down 10.
        assert_eq!(
            g.on_call(9),
            Some(Transition::ProbeStarted { probe_calls: 10 })
        );
        assert!(miss(&mut g, 9) && miss(&mut g, 10) && miss(&mut g, 11));
        g.on_call(12);
        assert!(matches!(
            g.on_miss(12),
            Verdict::Interpret {
                transition: Some(Transition::Relapsed {
                    cool_down: 10,
                    cap: 12
                }),
                ..
            }
        ));
        // Next relapse is capped at 12.
        assert_eq!(
            g.on_call(22),
            Some(Transition::ProbeStarted { probe_calls: 10 })
        );
        assert!(miss(&mut g, 22) && miss(&mut g, 23) && miss(&mut g, 24));
        g.on_call(25);
        assert!(matches!(
            g.on_miss(25),
            Verdict::Interpret {
                transition: Some(Transition::Relapsed {
                    cool_down: 12,
                    cap: 12
                }),
                ..
            }
        ));
        // A quiet probe recovers and resets the cool-down.
        assert!(matches!(
            g.on_call(37),
            Some(Transition::ProbeStarted { .. })
        ));
        assert_eq!(g.mode(37), FunctionMode::Probing { remaining_probe: 9 });
        assert_eq!(g.on_call(47), Some(Transition::Recovered));
        assert_eq!(g.mode(47), FunctionMode::Normal);
        assert!(miss(&mut g, 48) && miss(&mut g, 49) && miss(&mut g, 50));
        g.on_call(51);
        assert!(matches!(
            g.on_miss(51),
            Verdict::Interpret {
                transition: Some(Transition::Engaged { cool_down: 5, .. }),
                ..
            }
        ));
    }
}
