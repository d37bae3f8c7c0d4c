//! The calibration metric of `tpusim hlo` (programs README): error = max(pred/est, est/pred) - 1, a missing or
//! non-positive prediction counting 1000%; temp bytes with both sides floored at 4 KiB.

/// Error of one prediction against the compiler's number.
pub fn ratio_error(pred: f64, est: f64) -> f64 {
    if !(pred > 0.0 && est > 0.0 && pred.is_finite()) {
        return 10.0;
    }
    (pred / est).max(est / pred) - 1.0
}

/// Error of a temp-bytes prediction (both floored at 4 KiB).
pub fn temp_error(pred: u64, est: u64) -> f64 {
    ratio_error(pred.max(4096) as f64, est.max(4096) as f64)
}

/// The `q` quantile (0..=1, nearest rank on the sorted values); 0 for no values.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let idx = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[idx]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric() {
        assert!((ratio_error(150.0, 100.0) - 0.5).abs() < 1e-12);
        assert!((ratio_error(50.0, 100.0) - 1.0).abs() < 1e-12);
        assert_eq!(ratio_error(0.0, 100.0), 10.0);
        assert_eq!(temp_error(0, 100), 0.0);
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), 2.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0], 0.9), 9.0);
    }
}
