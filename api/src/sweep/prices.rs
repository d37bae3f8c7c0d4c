//! Prices per chip-hour: tpusim's assumed defaults, the user's overrides (`--price CHIP=PRICE`), each
//! with its currency and source so every output says where a cost came from.

use serde::{Deserialize, Serialize};

pub use reports::sweep::PriceSource;

/// The currency of every price (ISO 4217).
pub const CURRENCY: &str = "USD";

/// Assumed on-demand price per chip-hour in [`CURRENCY`], for ranking configurations only (not a
/// quote: set real prices with `--price`).
pub const DEFAULT_PRICES: &[(&str, f64)] = &[
    ("v4", 3.22),
    ("v5e", 1.20),
    ("v5p", 4.20),
    ("v6e", 2.70),
    ("tpu7x", 6.00),
];

/// The price of one chip for an hour.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Chip preset (canonical name).
    pub chip: String,
    /// Price per chip-hour, in `currency`.
    pub per_chip_hour: f64,
    /// ISO 4217 currency.
    pub currency: String,
    /// Assumed (tpusim's default) or given.
    pub source: PriceSource,
}

/// The valid `--price` keys, for messages.
fn valid_keys() -> String {
    DEFAULT_PRICES.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ")
}

/// The default prices with `overrides` (`CHIP=PRICE`) applied, in the defaults' order. A chip that is
/// not one of the priced presets, a price that is not a finite number >= 0, or text without `=` is
/// refused, naming the key and what would be valid.
pub fn prices(overrides: &[String]) -> anyhow::Result<Vec<Price>> {
    let mut out: Vec<Price> = DEFAULT_PRICES
        .iter()
        .map(|(c, p)| Price {
            chip: c.to_string(),
            per_chip_hour: *p,
            currency: CURRENCY.into(),
            source: PriceSource::Assumed,
        })
        .collect();
    for text in overrides {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--price {text}: expected CHIP=PRICE, CHIP one of {}", valid_keys()))?;
        let key = key.trim();
        let chip = sim_tpu::chips::preset_name(key).ok();
        let Some(slot) = chip.and_then(|c| out.iter_mut().find(|p| p.chip == c)) else {
            anyhow::bail!("--price {text}: unknown chip '{key}'; valid keys: {}", valid_keys());
        };
        let v: f64 = value.trim().parse().map_err(|_| {
            anyhow::anyhow!(
                "--price {text}: '{}' is not a number (a price per chip-hour in {CURRENCY}, >= 0)",
                value.trim()
            )
        })?;
        if !v.is_finite() || v < 0.0 {
            anyhow::bail!(
                "--price {text}: {v} is not a price: it must be a finite number >= 0 ({CURRENCY} per chip-hour)"
            );
        }
        slot.per_chip_hour = v;
        slot.source = PriceSource::Given;
    }
    Ok(out)
}

/// The price of `chip` (any preset spelling) among `prices`.
pub fn price_of<'a>(prices: &'a [Price], chip: &str) -> Option<&'a Price> {
    let name = sim_tpu::chips::preset_name(chip).ok()?;
    prices.iter().find(|p| p.chip == name)
}

/// Checks a `--target` samples/s: a finite number above 0.
pub fn check_target(target: Option<f64>) -> anyhow::Result<()> {
    match target {
        Some(t) if !t.is_finite() || t <= 0.0 => {
            anyhow::bail!("--target {t}: expected a finite number of samples/s above 0, e.g. 1e8")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_the_assumed_price_and_say_so() {
        let p = prices(&["v5p=1.5".into(), "tpu7x=0".into()]).unwrap();
        let v5p = price_of(&p, "v5p").unwrap();
        assert_eq!((v5p.per_chip_hour, v5p.source), (1.5, PriceSource::Given));
        assert_eq!(price_of(&p, "tpu7x").unwrap().per_chip_hour, 0.0);
        let v6e = price_of(&p, "v6e").unwrap();
        assert_eq!(
            (v6e.per_chip_hour, v6e.source, v6e.currency.as_str()),
            (2.7, PriceSource::Assumed, "USD")
        );
    }

    #[test]
    fn unknown_keys_negative_and_non_finite_prices_are_refused() {
        let e = prices(&["v5x=1".into()]).unwrap_err().to_string();
        assert!(e.contains("'v5x'") && e.contains("v4, v5e, v5p, v6e, tpu7x"), "{e}");
        for bad in ["v5p=-1", "v5p=NaN", "v5p=inf", "v5p=cheap", "v5p"] {
            let e = prices(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains(&format!("--price {bad}")), "{bad}: {e}");
        }
        for t in [f64::NAN, f64::INFINITY, -1.0, 0.0] {
            assert!(check_target(Some(t)).is_err(), "{t}");
        }
        assert!(check_target(Some(1e8)).is_ok() && check_target(None).is_ok());
    }
}
