//! Admission decided call by call: counts, the doorkeeper, the moved
//! working set, the budget.

use super::*;

const NOTHING_USED: fn(u64) -> Vec<u64> = |_| Vec::new();
/// Four cached signatures (hashes 100..104), all in use.
const ALL_USED: fn(u64) -> Vec<u64> = |_| (100..104).collect();

#[test]
fn counts_halve_once_per_epoch() {
    let mut f = Frequency::default();
    for _ in 0..8 {
        f.record(3);
    }
    assert_eq!((f.at(3), f.at(4), f.at(6), f.at(100)), (8, 4, 1, 0));
    assert_eq!(f.record(4), 4);
    assert_eq!(f.at(4), 5);
}

#[test]
fn epochs_pay_off_and_hot_threshold_follow_the_capacity() {
    let a = Admission::new(4); // 64 rounds up to the minimum, 256
    assert_eq!((a.epoch(255), a.epoch(256), a.pay_off_calls()), (0, 1, 64));
    // Once every 5 calls over the 256 calls remembered at an epoch's
    // start, over 511 at its end.
    assert_eq!((a.hot(256), a.hot(511)), (51, 102));
    let a = Admission::new(24); // 384 rounds up to 512
    assert_eq!((a.epoch(511), a.epoch(512), a.pay_off_calls()), (0, 1, 21));
    assert_eq!(a.hot(0), 20);
    let a = Admission::new(usize::MAX);
    assert_eq!(a.epoch(u64::MAX), u64::MAX >> (usize::BITS - 1));
    assert_eq!((a.pay_off_calls(), a.hot(u64::MAX)), (2, 2));
}

#[test]
fn one_off_and_less_frequent_signatures_are_refused() {
    let a = Admission::new(4);
    assert_eq!(a.decide(1, 9, 0, 2, ALL_USED), Err(Refusal::FirstSeen));
    assert_eq!(
        a.decide(1, 9, 4, 2, ALL_USED),
        Err(Refusal::LessFrequent {
            candidate: 4,
            victim: 2
        }),
        "within the margin: 1.5 × 2 + 1"
    );
    assert_eq!(
        a.decide(1, 9, 5, 2, ALL_USED),
        Ok(Admit::Frequency {
            candidate: 5,
            victim: 2
        })
    );
    assert_eq!(
        a.decide(1, 9, 2, 0, ALL_USED)
            .map(Admit::evicts_least_recent),
        Ok(false)
    );
}

#[test]
fn wasted_admissions_spend_the_budget_and_paid_off_ones_restore_it() {
    let mut a = Admission::new(4);
    assert_eq!(a.settle(Settled::Wasted), None);
    assert_eq!(a.settle(Settled::Wasted), None);
    assert_eq!(
        a.settle(Settled::Wasted),
        Some(BudgetChange::Spent {
            wasted: 3,
            every: 5
        })
    );
    assert!(a.spent());
    assert_eq!(a.settle(Settled::Wasted), None, "warned once");
    // Only hot signatures that beat the victim compile now.
    assert_eq!(
        a.decide(1, 256, 49, 3, ALL_USED),
        Err(Refusal::BudgetSpent {
            candidate: 49,
            hot: 51
        })
    );
    assert_eq!(
        a.decide(1, 256, 50, 3, ALL_USED),
        Ok(Admit::Hot {
            candidate: 50,
            hot: 51
        })
    );
    assert!(matches!(
        a.decide(1, 256, 50, 40, ALL_USED),
        Err(Refusal::LessFrequent { .. })
    ));
    assert_eq!(a.settle(Settled::Paid), Some(BudgetChange::Restored));
    assert_eq!(a.settle(Settled::Paid), None);
    assert!(matches!(
        a.decide(1, 256, 6, 3, ALL_USED),
        Ok(Admit::Frequency { .. })
    ));
    assert_eq!(a.wasted(), 4);
    for _ in 0..10 {
        a.settle(Settled::Paid);
    }
    assert_eq!(a.budget, 4, "the budget never exceeds the capacity");
}

#[test]
fn an_admitted_entry_pays_off_by_serving_enough_calls_in_time() {
    let a = Admission::new(4); // an epoch of 256 calls, 64 calls to pay
    let mut on_time = a.due(100);
    assert_eq!(on_time, PayOff::Due { by: 356 });
    assert_eq!(on_time.on_hit(63, 300, 64), None);
    assert_eq!(on_time.on_hit(64, 301, 64), Some(Settled::Paid));
    assert_eq!(on_time, PayOff::Nothing);
    assert_eq!(on_time.on_hit(65, 302, 64), None, "settled once");
    assert_eq!(on_time.on_leave(), None);
    let mut late = a.due(100);
    assert_eq!(
        late.on_hit(64, 357, 64),
        Some(Settled::Wasted),
        "one call late"
    );
    let evicted = a.due(100);
    assert_eq!(evicted.on_leave(), Some(Settled::Wasted));
    assert_eq!(PayOff::Nothing.on_hit(64, 1, 64), None);
}

#[test]
fn recurring_misses_that_fit_mean_the_working_set_moved() {
    let mut a = Admission::new(4);
    // Eight misses on two signatures, nothing cached in use: moved.
    for call in 1..=8 {
        a.record_miss(20 + call % 2, call);
    }
    assert_eq!(
        a.decide(21, 8, 1, 9, NOTHING_USED),
        Ok(Admit::WorkingSetMoved { signatures: 2 })
    );
    assert!(Admit::WorkingSetMoved { signatures: 2 }.evicts_least_recent());
    // Cached signatures among the misses are not counted twice.
    let used = |_| vec![20, 21, 100];
    assert_eq!(
        a.decide(21, 8, 1, 9, used),
        Ok(Admit::WorkingSetMoved { signatures: 3 })
    );
    // Recurring, but the cached signatures in use leave no room.
    let three_used = |since| {
        if since <= 1 {
            vec![100, 101, 102]
        } else {
            vec![]
        }
    };
    assert!(a.decide(21, 8, 1, 9, three_used).is_err());
    // A signature that does not recur in the window is not part of it.
    a.record_miss(22, 9);
    assert!(a.decide(22, 9, 1, 9, NOTHING_USED).is_err());
}

#[test]
fn a_cyclic_scan_one_over_capacity_never_moves_the_working_set() {
    let mut a = Admission::new(4);
    // Signatures 0..=4 in a cycle with 0..4 cached: 4 misses every
    // round, and every cached signature is called between two misses.
    for round in 0..32u64 {
        let call = 5 * round + 5;
        a.record_miss(4, call);
        assert!(
            a.working_set_moved(4, |_| vec![0, 1, 2, 3]).is_none(),
            "round {round}"
        );
    }
}

#[test]
fn spread_misses_do_not_move_the_working_set() {
    let mut a = Admission::new(4);
    for call in 0..16u64 {
        a.record_miss(10 + call % 5, call);
    }
    assert_eq!(a.working_set_moved(10, NOTHING_USED), None, "5 > 16 / 4");
}

#[test]
fn a_recalled_signature_is_no_first_sight_and_keeps_its_count() {
    let mut a = Admission::new(4); // an epoch of 256 calls
    a.recall(7, 40);
    a.recall(8, u32::MAX);
    assert_eq!(a.record_miss(7, 1), 40);
    assert_eq!(a.take(8).at(0), 256, "at most an epoch's worth");
    assert_eq!(a.decide(9, 2, 0, 0, ALL_USED), Err(Refusal::FirstSeen));
    assert!(a.decide(7, 2, 41, 3, ALL_USED).is_ok());
    for hash in 100..200 {
        a.recall(hash, 1);
    }
    assert!(a.others.len() <= 4 * OTHERS_PER_SLOT, "bounded");
}

#[test]
fn the_map_of_other_signatures_is_bounded_and_keeps_newcomers() {
    let mut a = Admission::new(2);
    for hash in 0..1000u64 {
        a.record_miss(hash, hash);
    }
    assert!(a.others.len() <= 2 * OTHERS_PER_SLOT);
    assert!(a.recent_misses.len() <= MIN_WINDOW);
    // A full map of equal counts forgets the least recently called, so
    // that two alternating newcomers build up a count.
    assert_eq!(a.record_miss(2000, 1000), 0);
    assert_eq!(a.record_miss(2001, 1001), 0);
    assert_eq!(a.record_miss(2000, 1002), 1);
    assert_eq!(a.record_miss(2001, 1003), 1);
    let f = a.take(999);
    assert_eq!(f.at(a.epoch(999)), 1);
    a.keep(999, f, 999);
    assert!(a.others.contains_key(&999));
    a.keep(5, Frequency::default(), 999);
    assert!(!a.others.contains_key(&5), "zero counts are not kept");
}
