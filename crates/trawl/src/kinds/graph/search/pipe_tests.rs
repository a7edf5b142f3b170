//! Tests of PipeSearch's parameters and pipeline width ([`super::pipe`]).

use super::pipe::*;
use crate::search::SearchError;

fn dynamic() -> PipeParams {
    PipeParams::default()
}

#[test]
fn dynamic_width_waits_for_the_explored_position_then_widens_on_in_pool_polls() {
    let mut w = WidthController::new(&dynamic());
    assert_eq!(w.width(), 4);
    // Approach phase: every read lands in the pool, but the explored position stays < 5.
    for pos in [0, 0, 1, 0, 2, 4] {
        w.on_explored(pos);
        w.on_landed(1, 1);
    }
    assert_eq!(w.width(), 4, "no widening before position 5");
    assert!(!w.adapting());
    w.on_explored(5);
    assert!(w.adapting());
    // 9 of 10 in the pool: 0.9 ≥ 0.9 widens; 8 of 10 does not.
    w.on_landed(10, 9);
    assert_eq!(w.width(), 5);
    w.on_landed(10, 8);
    assert_eq!(w.width(), 5);
    // A poll that landed nothing changes nothing.
    w.on_landed(0, 0);
    assert_eq!(w.width(), 5);
    // Once adapting, a later drop of the explored position does not stop it (latched).
    w.on_explored(0);
    w.on_landed(2, 2);
    assert_eq!(w.width(), 6);
    // Capped at the maximum.
    for _ in 0..100 {
        w.on_landed(1, 1);
    }
    assert_eq!(w.width(), 32);
}

#[test]
fn dynamic_width_respects_custom_bounds() {
    let p = PipeParams {
        start_width: 2,
        max_width: 6,
        adapt_after: 0,
        in_pool_threshold: 0.5,
        ..PipeParams::default()
    };
    let mut w = WidthController::new(&p);
    assert_eq!(w.width(), 2);
    w.on_explored(0);
    w.on_landed(4, 1); // 0.25 < 0.5
    assert_eq!(w.width(), 2);
    w.on_landed(4, 2); // 0.5 ≥ 0.5
    assert_eq!(w.width(), 3);
    let seq = [(1, 1), (3, 2), (2, 0), (5, 5), (1, 1), (1, 1)];
    let widths: Vec<usize> = seq
        .iter()
        .map(|&(l, i)| {
            w.on_landed(l, i);
            w.width()
        })
        .collect();
    assert_eq!(widths, vec![4, 5, 5, 6, 6, 6]);
}

#[test]
fn static_width_follows_the_table_and_the_cap() {
    let p = PipeParams {
        policy: WidthPolicy::Static,
        ..PipeParams::default()
    };
    let mut w = WidthController::new(&p);
    let widths: Vec<usize> = [0, 9, 10, 25, 30, 41, 12]
        .iter()
        .map(|&pos| {
            w.on_explored(pos);
            w.on_landed(1, 1);
            w.width()
        })
        .collect();
    assert_eq!(widths, vec![4, 4, 8, 16, 24, 32, 8]);
    let capped = PipeParams {
        policy: WidthPolicy::Static,
        max_width: 10,
        ..PipeParams::default()
    };
    let mut w = WidthController::new(&capped);
    w.on_explored(35);
    assert_eq!(w.width(), 10);
}

#[test]
fn fixed_width_never_moves() {
    let p = PipeParams {
        policy: WidthPolicy::Fixed,
        max_width: 8,
        ..PipeParams::default()
    };
    let mut w = WidthController::new(&p);
    for pos in 0..50 {
        w.on_explored(pos);
        w.on_landed(3, 3);
        assert_eq!(w.width(), 8);
    }
}

#[test]
fn parameters_are_validated() {
    assert!(PipeParams::default().validate(32).is_ok());
    assert!(PipeParams::default().validate(31).is_err());
    let bad = [
        PipeParams {
            max_width: 0,
            ..PipeParams::default()
        },
        PipeParams {
            start_width: 0,
            ..PipeParams::default()
        },
        PipeParams {
            start_width: 40,
            ..PipeParams::default()
        },
        PipeParams {
            in_pool_threshold: 0.0,
            ..PipeParams::default()
        },
        PipeParams {
            in_pool_threshold: f32::NAN,
            ..PipeParams::default()
        },
    ];
    for p in bad {
        assert!(
            matches!(p.validate(64), Err(SearchError::InvalidPipe(_))),
            "{p:?}"
        );
    }
    assert_eq!("dynamic".parse::<WidthPolicy>(), Ok(WidthPolicy::Dynamic));
    assert!("wide".parse::<WidthPolicy>().is_err());
}
