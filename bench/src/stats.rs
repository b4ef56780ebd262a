//! Summaries of a sample of wall-clock times: min, median, max, and comparisons of medians.

use std::time::Duration;

/// Minimum, median and maximum of one variant's runs, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub min_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
    pub runs: usize,
}

impl Summary {
    /// Summarise a sample; `None` when it is empty.
    pub fn of(sample: &[Duration]) -> Option<Summary> {
        let mut ms: Vec<f64> = sample.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let (first, last) = (ms.first()?, ms.last()?);
        let median = if n % 2 == 1 {
            ms[n / 2]
        } else {
            (ms[n / 2 - 1] + ms[n / 2]) / 2.0
        };
        Some(Summary {
            min_ms: *first,
            median_ms: median,
            max_ms: *last,
            runs: n,
        })
    }

    /// Median of `self` divided by the median of `base`.
    pub fn ratio_to(&self, base: &Summary) -> f64 {
        self.median_ms / base.median_ms
    }

    /// Median of `self` minus the median of `base`, in milliseconds.
    pub fn added_over(&self, base: &Summary) -> f64 {
        self.median_ms - base.median_ms
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn odd_sample_takes_the_middle_value() {
        let s = Summary::of(&ms(&[30, 10, 20])).unwrap();
        assert_eq!(
            s,
            Summary {
                min_ms: 10.0,
                median_ms: 20.0,
                max_ms: 30.0,
                runs: 3
            }
        );
    }

    #[test]
    fn even_sample_averages_the_two_middle_values() {
        let s = Summary::of(&ms(&[40, 10, 20, 30])).unwrap();
        assert_eq!(s.median_ms, 25.0);
    }

    #[test]
    fn empty_sample_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn comparisons_use_medians() {
        let bare = Summary::of(&ms(&[10, 10, 10])).unwrap();
        let other = Summary::of(&ms(&[12, 15, 100])).unwrap();
        assert_eq!(other.added_over(&bare), 5.0);
        assert_eq!(other.ratio_to(&bare), 1.5);
    }
}
