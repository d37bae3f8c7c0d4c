//! Numbers as a person reads them: bytes in binary units, durations in ns/µs/ms/s, rates with SI
//! prefixes, fractions as percentages with sensible digits. Every human output of tpusim goes through
//! these; JSON keeps the raw numbers.

/// Bytes in binary units with three significant digits: `512 B`, `1.50 KiB`, `78.0 MiB`, `95.0 GiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", sig3(v), UNITS[unit])
}

/// `need of cap` in binary units, e.g. `78.0 MiB of 95.0 GiB`.
pub fn bytes_of(need: u64, cap: u64) -> String {
    format!("{} of {}", bytes(need), bytes(cap))
}

/// A duration given in microseconds, in the unit that keeps it between 1 and 1000 where possible:
/// `850 ns`, `434.2 µs`, `1.496 ms`, `2.310 s` (four significant digits from ms up, so step
/// times stay comparable).
pub fn duration_us(us: f64) -> String {
    if !us.is_finite() {
        return format!("{us} µs");
    }
    let a = us.abs();
    if a == 0.0 {
        "0 µs".into()
    } else if a < 1.0 {
        format!("{} ns", sig3(us * 1e3))
    } else if a < 1e3 {
        format!("{us:.1} µs")
    } else if a < 1e6 {
        format!("{} ms", sig4(us / 1e3))
    } else {
        format!("{} s", sig4(us / 1e6))
    }
}

/// A rate with an SI prefix and its unit: `rate(27988187.0, "samples/s")` is `28.0 M samples/s`.
pub fn rate(x: f64, unit: &str) -> String {
    let (v, p) = si(x);
    if p.is_empty() {
        format!("{} {unit}", sig3(v))
    } else {
        format!("{} {p} {unit}", sig3(v))
    }
}

/// Bandwidth in decimal units, as datasheets give it: `2765e9` is `2.77 TB/s`.
pub fn bytes_per_s(x: f64) -> String {
    let (v, p) = si(x);
    format!("{} {p}B/s", sig3(v))
}

/// `x` scaled to [1, 1000) where it can be, with its SI prefix.
fn si(x: f64) -> (f64, &'static str) {
    let a = x.abs();
    if !x.is_finite() || a < 1e3 {
        (x, "")
    } else if a < 1e6 {
        (x / 1e3, "k")
    } else if a < 1e9 {
        (x / 1e6, "M")
    } else if a < 1e12 {
        (x / 1e9, "G")
    } else if a < 1e15 {
        (x / 1e12, "T")
    } else {
        (x / 1e15, "P")
    }
}

/// A fraction (0.25) as a percentage with sensible digits: `25%`, `2.0%`, `0.12%`, `0%`.
pub fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    let a = p.abs();
    if !p.is_finite() {
        format!("{p}%")
    } else if a == 0.0 {
        "0%".into()
    } else if a >= 10.0 {
        format!("{p:.0}%")
    } else if a >= 1.0 {
        format!("{p:.1}%")
    } else if a >= 0.01 {
        format!("{p:.2}%")
    } else {
        "<0.01%".into()
    }
}

/// A plain number with at most `digits` decimals and no float noise: `0.6000000000000001` -> `0.6`.
pub fn number(x: f64, digits: usize) -> String {
    let s = format!("{x:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Four significant digits, no exponent: 1.496, 12.80, 128.0.
fn sig4(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Three significant digits, no exponent: 1.50, 15.0, 150.
fn sig3(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(81_752_454), "78.0 MiB");
        assert_eq!(bytes(102_005_473_280), "95.0 GiB");
        assert_eq!(bytes(u64::MAX), "16.0 EiB");
        assert_eq!(bytes_of(16_512, 524_088), "16.1 KiB of 512 KiB");
    }

    #[test]
    fn durations_pick_their_unit() {
        assert_eq!(duration_us(0.0), "0 µs");
        assert_eq!(duration_us(0.85), "850 ns");
        assert_eq!(duration_us(434.2), "434.2 µs");
        assert_eq!(duration_us(1495.5), "1.496 ms");
        assert_eq!(duration_us(128_000.0), "128.0 ms");
        assert_eq!(duration_us(2.31e6), "2.310 s");
    }

    #[test]
    fn rates_and_percentages() {
        assert_eq!(rate(27_988_187.0, "samples/s"), "28.0 M samples/s");
        assert_eq!(rate(5_477_631.0, "samples/s"), "5.48 M samples/s");
        assert_eq!(rate(950.0, "samples/s"), "950 samples/s");
        assert_eq!(rate(4e7, "samples/s"), "40.0 M samples/s");
        assert_eq!(rate(459e12, "FLOP/s"), "459 T FLOP/s");
        assert_eq!(bytes_per_s(2765e9), "2.77 TB/s");
        assert_eq!(bytes_per_s(90e9), "90.0 GB/s");
        assert_eq!(percent(0.25), "25%");
        assert_eq!(percent(0.02), "2.0%");
        assert_eq!(percent(0.0012), "0.12%");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(1e-7), "<0.01%");
        assert_eq!(number(0.6000000000000001, 4), "0.6");
        assert_eq!(number(3.0, 2), "3");
    }
}
