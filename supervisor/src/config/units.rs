//! How a setting's text reads: durations (`500ms`, `2m`), sizes (`256KiB`), counts and rates,
//! and how each is written back.

use std::time::Duration;

/// The leading digits of `raw` as a number and the unit after them (lower case, spaces around
/// it removed).
fn number_and_unit(raw: &str) -> Option<(u64, String)> {
    let raw = raw.trim();
    let end = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let number = raw[..end].parse().ok()?;
    Some((number, raw[end..].trim().to_ascii_lowercase()))
}

/// Whole seconds (`60`), or a number and a unit: `500ms`, `30s`, `10m`, `1h`; at least `min`.
pub fn duration(raw: &str, min: Duration) -> Result<Duration, String> {
    const FORMS: &str = "give whole seconds (60) or a number and a unit (500ms, 30s, 10m, 1h)";
    let (n, unit) = number_and_unit(raw).ok_or_else(|| format!("is not a duration: {FORMS}"))?;
    let millis: u64 = match unit.as_str() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("has an unknown unit `{unit}`: {FORMS}")),
    };
    let total = n
        .checked_mul(millis)
        .ok_or_else(|| "is too long to be a duration".to_string())?;
    let d = Duration::from_millis(total);
    if d < min {
        return Err(format!("is too short: the least is {}", show_duration(min)));
    }
    Ok(d)
}

/// A duration as text [`duration`] reads back: seconds when whole, else milliseconds.
pub fn show_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Bytes (`262144`), or a number and a binary unit: `256KiB`, `64MiB`, `2GiB` (`K`, `M`, `G`
/// too); at least `min`.
pub fn bytes(raw: &str, min: u64) -> Result<u64, String> {
    const FORMS: &str = "give bytes (262144) or a number and a unit (256KiB, 64MiB, 2GiB)";
    let (n, unit) = number_and_unit(raw).ok_or_else(|| format!("is not a size: {FORMS}"))?;
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => return Err(format!("has an unknown unit `{unit}`: {FORMS}")),
    };
    let total = n
        .checked_mul(scale)
        .ok_or_else(|| "is too large".to_string())?;
    if total < min {
        return Err(format!("is too small: the least is {}", show_bytes(min)));
    }
    Ok(total)
}

/// A size as text [`bytes`] reads back: in the largest binary unit that divides it.
pub fn show_bytes(n: u64) -> String {
    for (unit, scale) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= scale && n.is_multiple_of(scale) {
            return format!("{}{unit}", n / scale);
        }
    }
    n.to_string()
}

/// A whole number, at least `min`.
pub fn count(raw: &str, min: u64) -> Result<u64, String> {
    let n: u64 = raw
        .trim()
        .parse()
        .map_err(|_| "is not a whole number".to_string())?;
    if n < min {
        return Err(format!("is too small: the least is {min}"));
    }
    Ok(n)
}

/// A fraction above 0 and at most 1.
pub(super) fn rate(raw: &str) -> Result<f64, String> {
    let r: f64 = raw
        .trim()
        .parse()
        .map_err(|_| "is not a number: give a fraction such as 0.5".to_string())?;
    if !(r > 0.0 && r <= 1.0) {
        return Err("is out of range: give a fraction above 0 and at most 1, such as 0.5".into());
    }
    Ok(r)
}

pub(super) fn to_usize(n: u64) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| "is too large".to_string())
}

pub(super) fn to_u32(n: u64) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| format!("is too large: the most is {}", u32::MAX))
}
