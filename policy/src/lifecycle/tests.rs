//! Unit tests of the lifecycle: promotion, automatic quarantine, what a `ToolError` counts as,
//! and the moves a user can make.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use CallKind::{Failure as F, Ok as O, ToolError as E};

fn next(state: State, calls: &[CallKind]) -> Option<State> {
    let t = Thresholds::default();
    after_call(state, &Health::of(calls, t.window), &t).map(|t| t.to)
}

#[test]
fn probation_becomes_active_after_five_successes_in_a_row() {
    assert_eq!(next(State::Probation, &[O, O, O, O]), None);
    assert_eq!(
        next(State::Probation, &[O, O, O, O, O]),
        Some(State::Active)
    );
    // ToolErrors neither break the run nor count toward it.
    assert_eq!(
        next(State::Probation, &[O, O, E, O, E, O, O]),
        Some(State::Active)
    );
    assert_eq!(next(State::Probation, &[E, E, E, E, E, E]), None);
    // A failure restarts the run.
    assert_eq!(next(State::Probation, &[O, O, O, O, F, O]), None);
    // Active stays active.
    assert_eq!(next(State::Active, &[O, O, O, O, O, O]), None);
}

#[test]
fn three_failures_in_a_row_quarantine() {
    for state in [State::Probation, State::Active] {
        assert_eq!(next(state, &[O, F, F]), None);
        assert_eq!(next(state, &[O, F, F, F]), Some(State::Quarantined));
        // ToolErrors between failures do not reset the run…
        assert_eq!(next(state, &[F, E, F, E, F]), Some(State::Quarantined));
        // …and ToolErrors alone never quarantine.
        assert_eq!(next(state, &[E; 20]), None);
    }
}

#[test]
fn a_high_failure_rate_over_the_window_quarantines() {
    // Half of 20 failed, never three in a row.
    let mixed: Vec<CallKind> = (0..20).map(|i| if i % 2 == 0 { F } else { O }).collect();
    assert_eq!(next(State::Active, &mixed), Some(State::Quarantined));
    // Under the window size, the rate alone does not decide.
    assert_eq!(next(State::Active, &mixed[..19]), None);
    // 9 of 20 is under the limit.
    let mut fewer = mixed.clone();
    fewer[18] = O;
    assert_eq!(next(State::Active, &fewer), None);
    // Only the last 20 calls count.
    let mut old_failures = vec![F, F, O, F, F, O];
    old_failures.extend(std::iter::repeat_n(O, 20));
    assert_eq!(next(State::Active, &old_failures), None);
}

#[test]
fn states_off_the_list_do_not_move_by_themselves() {
    for state in [State::Draft, State::Quarantined, State::Retired] {
        assert_eq!(next(state, &[F, F, F, F]), None);
        assert_eq!(next(state, &[O; 10]), None);
        assert!(!state.listed());
    }
    assert!(State::Probation.listed() && State::Active.listed());
}

#[test]
fn reasons_say_what_happened() {
    let t = Thresholds::default();
    let q = after_call(State::Active, &Health::of(&[F, F, F], 20), &t).unwrap();
    assert!(q.reason.contains("3 failures in a row"), "{}", q.reason);
    let p = after_call(State::Probation, &Health::of(&[O; 5], 20), &t).unwrap();
    assert_eq!(p.reason, "5 successful calls in a row");
}

#[test]
fn rehab_and_retire() {
    assert_eq!(
        manual(State::Quarantined, Manual::Rehab),
        Ok(State::Probation)
    );
    assert_eq!(manual(State::Retired, Manual::Rehab), Ok(State::Probation));
    assert!(manual(State::Active, Manual::Rehab).is_err());
    assert!(manual(State::Probation, Manual::Rehab).is_err());
    for s in [
        State::Draft,
        State::Probation,
        State::Active,
        State::Quarantined,
    ] {
        assert_eq!(manual(s, Manual::Retire), Ok(State::Retired));
    }
    assert!(manual(State::Retired, Manual::Retire).is_err());
}

#[test]
fn health_counts_the_window() {
    let h = Health::of(&[F, O, E, F, F], 20);
    assert_eq!(
        h,
        Health {
            calls: 5,
            failures: 3,
            tool_errors: 1,
            failing_run: 2,
            success_run: 0
        }
    );
    assert!((h.failure_rate() - 0.6).abs() < 1e-9);
    assert_eq!(Health::of(&[], 20).failure_rate(), 0.0);
    assert_eq!(Health::of(&[O, O, F, O], 2).calls, 2);
}

#[test]
fn who_may_be_called() {
    use State::*;
    let table = [
        (Probation, [true, true]),
        (Active, [true, true]),
        (Quarantined, [false, true]),
        (Retired, [false, true]),
        (Draft, [false, false]),
    ];
    for (state, [plain, forced]) in table {
        assert_eq!(state.may_call(false), plain, "{state}");
        assert_eq!(state.may_call(true), forced, "{state} with force");
    }
}

#[test]
fn a_batch_is_decided_call_by_call_up_to_the_first_change() {
    let t = Thresholds::default();
    let limit = 10;
    // Three failures in a row, then a success, recorded together: quarantined after the third
    // failure, as one by one would have been; the success after it does not undo that.
    let recent = [O, F, F, F, O];
    let change = after_calls(State::Active, &recent, 4, limit, &t).expect("a change");
    assert_eq!(change.to, State::Quarantined, "{}", change.reason);
    // Only the success is new: the failures were decided on before (the control).
    assert_eq!(after_calls(State::Active, &recent, 1, limit, &t), None);
    // A single call: exactly after_call on the last `limit`.
    let failures = [O, F, F, F];
    assert_eq!(
        after_calls(State::Active, &failures, 1, limit, &t),
        after_call(State::Active, &Health::of(&failures, t.window), &t)
    );
    // Each view sees at most `limit` calls: a run longer than the limit counts as the limit.
    let many = [O, O, O, O, O, O];
    let promoted = after_calls(State::Probation, &many, 1, 5, &t).expect("promoted");
    assert_eq!(promoted.reason, "5 successful calls in a row");
    // More new calls than there are outcomes: only what there is.
    assert_eq!(after_calls(State::Active, &[O], 3, limit, &t), None);
}
