//! Which process of a tool's pool a call goes to, decided from the calls each process has in
//! flight: a pure function, tested on its own.

/// What a call does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Go to this process: an idle one, else (the pool at its bound, or a start under way)
    /// the one with the fewest calls in flight, which runs it beside them.
    Use(usize),
    /// No process runs and none is starting: start one and wait for it.
    StartFirst,
    /// No process runs yet and one is starting: wait for it.
    Wait,
    /// Every process is busy and the pool is under its bound: start another and take it or
    /// the first process to free, whichever comes first.
    StartExtra,
}

/// Decide for a call, given the calls in flight on each live process (in the order they were
/// started), the starts under way, the most processes the tool may run, and whether a recent
/// failed start holds further ones back.
///
/// Idle processes are taken oldest first, so a pool that grew under a burst goes back to its
/// first process when the burst ends, and the others fall idle and are stopped.
pub fn choose(in_flight: &[usize], starting: usize, bound: usize, held_back: bool) -> Choice {
    if let Some(i) = in_flight.iter().position(|&n| n == 0) {
        return Choice::Use(i);
    }
    if in_flight.is_empty() {
        return if starting == 0 {
            Choice::StartFirst
        } else {
            Choice::Wait
        };
    }
    if in_flight.len() + starting < bound && !held_back {
        return Choice::StartExtra;
    }
    let least = in_flight
        .iter()
        .enumerate()
        .min_by_key(|&(_, n)| *n)
        .map_or(0, |(i, _)| i);
    Choice::Use(least)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_process_is_taken_oldest_first() {
        assert_eq!(choose(&[0], 0, 4, false), Choice::Use(0));
        assert_eq!(choose(&[2, 0, 0], 0, 4, false), Choice::Use(1));
        assert_eq!(choose(&[1, 0], 1, 4, true), Choice::Use(1));
    }

    #[test]
    fn the_first_process_is_started_once_and_waited_for() {
        assert_eq!(choose(&[], 0, 4, false), Choice::StartFirst);
        assert_eq!(choose(&[], 1, 4, false), Choice::Wait);
        // Held back concerns extra processes only: a tool with none must get one.
        assert_eq!(choose(&[], 0, 1, true), Choice::StartFirst);
    }

    #[test]
    fn a_waiting_call_starts_another_process_while_under_the_bound() {
        assert_eq!(choose(&[1], 0, 2, false), Choice::StartExtra);
        assert_eq!(choose(&[3, 1], 0, 4, false), Choice::StartExtra);
        assert_eq!(choose(&[1, 1], 1, 4, false), Choice::StartExtra);
    }

    #[test]
    fn at_the_bound_the_least_busy_process_takes_the_call() {
        assert_eq!(choose(&[1], 0, 1, false), Choice::Use(0));
        assert_eq!(choose(&[3, 1, 2], 0, 3, false), Choice::Use(1));
        // A start under way counts towards the bound.
        assert_eq!(choose(&[2, 1], 1, 3, false), Choice::Use(1));
        // As does a recent failed start.
        assert_eq!(choose(&[2, 5], 0, 4, true), Choice::Use(0));
    }
}
