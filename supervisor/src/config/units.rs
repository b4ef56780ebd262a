//! How a setting's text reads: durations (`500ms`, `2m`), sizes (`256KiB`), counts and rates,
//! and how each is written back; and why a text is not a value of its setting ([`ValueError`]).

use std::time::Duration;

/// The forms a duration may take, named when one does not read.
const DURATION_FORMS: &str = "give whole seconds (60) or a number and a unit (500ms, 30s, 10m, 1h)";
/// The forms a size may take, named when one does not read.
const SIZE_FORMS: &str = "give bytes (262144) or a number and a unit (256KiB, 64MiB, 2GiB)";

/// Why a setting's text is not a value of it. Its message follows the setting and its text
/// (`call_timeout = "soon" (flag, --call-timeout) is not a duration: …`), so it starts with a
/// verb and ends with what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("is not a duration: {DURATION_FORMS}")]
    NotDuration,
    #[error("is not a size: {SIZE_FORMS}")]
    NotSize,
    #[error("has an unknown unit `{unit}`: {forms}")]
    UnknownUnit { unit: String, forms: &'static str },
    #[error("is too long to be a duration")]
    DurationTooLong,
    #[error("is too short: the least is {least}")]
    TooShort { least: String },
    #[error("is too small: the least is {least}")]
    TooSmall { least: String },
    #[error("is too large")]
    TooLarge,
    #[error("is too large: the most is {most}")]
    AboveMost { most: u64 },
    #[error("is not a whole number")]
    NotWholeNumber,
    #[error("is not a number: give a fraction such as 0.5")]
    NotFraction,
    #[error("is out of range: give a fraction above 0 and at most 1, such as 0.5")]
    FractionOutOfRange,
    #[error("is not on or off")]
    NotOnOff,
    #[error(
        "is not a reach preset: give \"ask\" (every declared host and directory not allowed \
         for every tool is asked) or \"trusted\" (declared hosts are granted without asking; \
         directories are still asked)"
    )]
    NotReachPreset,
    #[error("is not an absolute path: give the launcher's full path, or \"auto\"")]
    LauncherNotAbsolute,
    #[error("is not a usable path: {why}")]
    NotUsablePath { why: String },
    #[error(
        "is not a log filter ({why}): give a level (error, warn, info, debug, trace) or \
         directives such as autotool=debug,rmcp=warn"
    )]
    NotLogFilter { why: String },
    #[error("is not a credential store: give `keychain` or `file`")]
    NotCredentialStore,
    #[error(
        "is not a sandbox mode: give \"strict\" (confine every tool) or \"off\" (run tools \
         unconfined)"
    )]
    NotSandboxMode,
    #[error(
        "is not a consent mode: give \"ask\" (the user is asked before a tool gets a key) or \
         \"{allow_all}\""
    )]
    NotConsentMode { allow_all: &'static str },
    /// In the file, a value of a TOML type no setting takes.
    #[error("is {kind}: give a number or a string")]
    NotScalar { kind: &'static str },
}

/// The leading digits of `raw` as a number and the unit after them (lower case, spaces around
/// it removed).
fn number_and_unit(raw: &str) -> Option<(u64, String)> {
    let raw = raw.trim();
    let end = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let number = raw[..end].parse().ok()?;
    Some((number, raw[end..].trim().to_ascii_lowercase()))
}

/// Whole seconds (`60`), or a number and a unit: `500ms`, `30s`, `10m`, `1h`; at least `min`.
pub fn duration(raw: &str, min: Duration) -> Result<Duration, ValueError> {
    let (n, unit) = number_and_unit(raw).ok_or(ValueError::NotDuration)?;
    let millis: u64 = match unit.as_str() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(ValueError::UnknownUnit {
                unit,
                forms: DURATION_FORMS,
            });
        }
    };
    let total = n.checked_mul(millis).ok_or(ValueError::DurationTooLong)?;
    let d = Duration::from_millis(total);
    if d < min {
        return Err(ValueError::TooShort {
            least: show_duration(min),
        });
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
pub fn bytes(raw: &str, min: u64) -> Result<u64, ValueError> {
    let (n, unit) = number_and_unit(raw).ok_or(ValueError::NotSize)?;
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => {
            return Err(ValueError::UnknownUnit {
                unit,
                forms: SIZE_FORMS,
            });
        }
    };
    let total = n.checked_mul(scale).ok_or(ValueError::TooLarge)?;
    if total < min {
        return Err(ValueError::TooSmall {
            least: show_bytes(min),
        });
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
pub fn count(raw: &str, min: u64) -> Result<u64, ValueError> {
    let n: u64 = raw.trim().parse().map_err(|_| ValueError::NotWholeNumber)?;
    if n < min {
        return Err(ValueError::TooSmall {
            least: min.to_string(),
        });
    }
    Ok(n)
}

/// A fraction above 0 and at most 1.
pub(super) fn rate(raw: &str) -> Result<f64, ValueError> {
    let r: f64 = raw.trim().parse().map_err(|_| ValueError::NotFraction)?;
    if !(r > 0.0 && r <= 1.0) {
        return Err(ValueError::FractionOutOfRange);
    }
    Ok(r)
}

pub(super) fn to_usize(n: u64) -> Result<usize, ValueError> {
    usize::try_from(n).map_err(|_| ValueError::TooLarge)
}

pub(super) fn to_u32(n: u64) -> Result<u32, ValueError> {
    u32::try_from(n).map_err(|_| ValueError::AboveMost {
        most: u64::from(u32::MAX),
    })
}
