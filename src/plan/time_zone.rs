//! Time zones: the session time zone, and zone names as Java reads them.
//!
//! The session time zone is one setting under Flink's name, `table.local-time-zone`, and
//! Postgres's, `TimeZone` (`SET TIME ZONE`). A TIMESTAMP_LTZ is an instant; the session time
//! zone is where it is seen as a wall-clock time (Flink docs, "Time Zone"):
//!
//! - a TIMESTAMP_LTZ returned to the client is written in it, as Postgres writes a
//!   `timestamptz` (`2024-01-01 18:00:00+08`), and `CAST(ltz AS STRING)` writes its wall-clock
//!   time there without an offset (Flink);
//! - `CAST(ltz AS TIMESTAMP)` is that wall-clock time, `CAST(ts AS TIMESTAMP_LTZ)` (and a
//!   string or DATE cast to TIMESTAMP_LTZ) the instant at which it is `ts` there;
//! - the functions that read a TIMESTAMP_LTZ's fields (`HOUR`, `EXTRACT`, `DATE_FORMAT`,
//!   `FLOOR(.. TO DAY)`, `to_char`, ..) read them there, and those that read or write a time
//!   as text or as a wall-clock time (`TO_TIMESTAMP_LTZ(string)`, `UNIX_TIMESTAMP(string)`,
//!   `FROM_UNIXTIME`, `LOCALTIMESTAMP`, `CURRENT_DATE`, `CURRENT_TIME`) too.
//!
//! A view or job keeps the session time zone it was created in (Flink compiles it into the
//! job). [`Zone::session`] reads a zone as Flink's `TableConfig` accepts one: a Time Zone
//! Database name (`America/Los_Angeles`; in any case, as Postgres reads it), `UTC`, or a fixed
//! offset `GMT+08:00` (also `GMT+8`, `GMT-0330`), and Postgres's number of hours east of UTC
//! (`SET TIME ZONE -7`). Postgres's POSIX forms (`UTC+3`, which is three hours west) are
//! refused rather than read with the other sign.
//!
//! When a wall-clock time names no instant or two (the clocks move at a daylight-saving
//! change), a cast reads it as `java.time` does (Flink's `CAST`, and `TO_TIMESTAMP_LTZ`): in a
//! gap, with the offset before the gap (02:30 becomes 03:30 daylight time); in an overlap, the
//! earlier instant. `UNIX_TIMESTAMP(string)` follows Java's `SimpleDateFormat`, as Flink's: the
//! later instant of an overlap ([`Overlap::Later`]).
//!
//! [`Zone::named`] reads a zone as Java's `TimeZone.getTimeZone` does, which `CONVERT_TZ` takes:
//! leniently, a name it does not know being GMT.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef, TimeUnit};
use chrono::{DateTime, FixedOffset, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::OffsetName;

/// A time zone: a region of the Time Zone Database, with its history of offsets, or a fixed
/// offset from UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Zone {
    Region(chrono_tz::Tz),
    Fixed(FixedOffset),
}

/// Which instant a wall-clock time that the clocks show twice (a fall-back hour) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// The earlier one, in daylight time (`java.time`, Flink's casts).
    Earlier,
    /// The later one, in standard time (Java's `GregorianCalendar`, Flink's pattern reading).
    Later,
}

/// Flink's message for a zone it does not accept (`TableConfigOptions`).
const INVALID: &str = "The value should be a Time Zone Database (TZDB) ID such as 'America/Los_Angeles' to include daylight saving time. Fixed offsets are supported using 'GMT-03:00' or 'GMT+03:00'. Or use 'UTC' without time zone and daylight saving time.";

impl Default for Zone {
    fn default() -> Self {
        Self::utc()
    }
}

/// The key of the session time zone among a session's settings and a job's catalog options
/// (Flink's `table.local-time-zone`).
pub const SETTING: &str = "table.local-time-zone";

impl Zone {
    /// The zone of a session's settings or a job's catalog options ([`SETTING`]; a job keeps
    /// the one it was created in): UTC unless one is set.
    pub fn of_settings(settings: &std::collections::BTreeMap<String, String>) -> Self {
        settings.get(SETTING).and_then(|z| Zone::session(z).ok()).unwrap_or_default()
    }

    /// UTC.
    pub fn utc() -> Self {
        Zone::Fixed(FixedOffset::east_opt(0).expect("zero is a valid offset"))
    }

    /// Whether this is UTC (a fixed offset of zero).
    pub fn is_utc(&self) -> bool {
        matches!(self, Zone::Fixed(o) if o.local_minus_utc() == 0)
    }

    /// The zone a session sets (`SET 'table.local-time-zone' = ..`, `SET TIME ZONE ..`); see
    /// the module docs for the forms.
    ///
    /// # Errors
    /// Flink's message, for a name that is none of them.
    pub fn session(text: &str) -> Result<Self, String> {
        let name = text.trim();
        let lower = name.to_ascii_lowercase();
        if ["utc", "etc/utc", "gmt", "etc/gmt", "z", "+00:00", "local", "default"].contains(&lower.as_str()) {
            return Ok(Self::utc());
        }
        if let Some(custom) = lower.strip_prefix("gmt").filter(|c| !c.is_empty()) {
            return custom_offset(custom).map(Zone::Fixed).ok_or_else(|| invalid(text));
        }
        if let Ok(hours) = name.parse::<f64>() {
            let seconds = (hours * 3600.0).round();
            return match FixedOffset::east_opt(seconds as i32) {
                Some(o) if seconds.abs() < 24.0 * 3600.0 => Ok(Zone::Fixed(o)),
                _ => Err(invalid(text)),
            };
        }
        name.parse::<chrono_tz::Tz>()
            .ok()
            .or_else(|| chrono_tz::TZ_VARIANTS.iter().find(|tz| tz.name().eq_ignore_ascii_case(name)).copied())
            .map(Zone::Region)
            .ok_or_else(|| invalid(text))
    }

    /// The zone Java's `TimeZone.getTimeZone` names `name`; GMT for a name it does not know.
    pub fn named(name: &str) -> Self {
        let fixed = |hours: i32| Zone::Fixed(FixedOffset::east_opt(hours * 3600).expect("a valid offset"));
        match name {
            "EST" => return fixed(-5),
            "MST" => return fixed(-7),
            "HST" => return fixed(-10),
            _ => {}
        }
        if let Some((_, region)) = SHORT_IDS.iter().find(|(id, _)| *id == name) {
            if let Ok(tz) = region.parse::<chrono_tz::Tz>() {
                return Zone::Region(tz);
            }
        }
        if let Some(custom) = name.strip_prefix("GMT").filter(|c| !c.is_empty()) {
            return custom_offset(custom).map_or(Self::utc(), Zone::Fixed);
        }
        name.parse::<chrono_tz::Tz>().map_or(Self::utc(), Zone::Region)
    }

    /// The name `SHOW TIME ZONE` shows: the region's, `UTC`, or `GMT+08:00`.
    pub fn name(&self) -> String {
        match self {
            Zone::Region(tz) => tz.name().to_string(),
            Zone::Fixed(_) if self.is_utc() => "UTC".to_string(),
            Zone::Fixed(o) => {
                let s = o.local_minus_utc();
                let sign = if s < 0 { '-' } else { '+' };
                format!("GMT{sign}{:02}:{:02}", s.abs() / 3600, s.abs() % 3600 / 60)
            }
        }
    }

    /// The offset from UTC, in seconds east, at `instant`.
    pub fn offset_at(&self, instant: DateTime<Utc>) -> i32 {
        match self {
            Zone::Fixed(o) => o.local_minus_utc(),
            Zone::Region(tz) => tz.offset_from_utc_datetime(&instant.naive_utc()).fix().local_minus_utc(),
        }
    }

    /// The offset from UTC, in seconds east, at `seconds` since 1970 (UTC); 0 out of chrono's
    /// range.
    pub fn offset_at_seconds(&self, seconds: i64) -> i32 {
        DateTime::from_timestamp(seconds, 0).map_or(0, |t| self.offset_at(t))
    }

    /// The zone's abbreviation at `instant`, as Postgres's `TZ` shows it (`CST`, `PDT`); a
    /// fixed offset's is `+08` (`UTC` for UTC), as is a region's that has none.
    pub fn abbreviation_at(&self, instant: DateTime<Utc>) -> String {
        if let Zone::Region(tz) = self {
            if let Some(a) = tz.offset_from_utc_datetime(&instant.naive_utc()).abbreviation() {
                if a.starts_with(|c: char| c.is_ascii_alphabetic()) {
                    return a.to_string();
                }
            }
        }
        if self.is_utc() {
            return "UTC".to_string();
        }
        offset_text(self.offset_at(instant))
    }

    /// Wall-clock time of `instant` in this zone.
    pub fn local(&self, instant: DateTime<Utc>) -> NaiveDateTime {
        instant.naive_utc() + chrono::Duration::seconds(i64::from(self.offset_at(instant)))
    }

    /// The instant of wall-clock time `local` in this zone; see the module docs for the
    /// times the clocks skip or repeat.
    pub fn instant(&self, local: NaiveDateTime, overlap: Overlap) -> Option<DateTime<Utc>> {
        match self {
            Zone::Fixed(offset) => offset.from_local_datetime(&local).single().map(|t| t.to_utc()),
            Zone::Region(tz) => match tz.from_local_datetime(&local) {
                LocalResult::Single(t) => Some(t.to_utc()),
                LocalResult::Ambiguous(earlier, later) => match overlap {
                    Overlap::Earlier => Some(earlier.to_utc()),
                    Overlap::Later => Some(later.to_utc()),
                },
                LocalResult::None => {
                    // In a gap: the offset in force before it (three hours before is before any gap).
                    let before = tz.from_local_datetime(&(local - chrono::Duration::hours(3))).earliest()?.offset().fix();
                    before.from_local_datetime(&local).single().map(|t| t.to_utc())
                }
            },
        }
    }

    /// Whether periods of `period_ms` aligned to the epoch in UTC are aligned in this zone's
    /// wall-clock time too: whether every offset the zone has had since 1970, and has until
    /// 2100, is a whole number of periods (read once a week; a window of an hour in
    /// Asia/Shanghai, not one of a day).
    pub fn aligns_with(&self, period_ms: i64) -> bool {
        let aligned = |offset: i32| period_ms > 0 && (i64::from(offset) * 1000) % period_ms == 0;
        match self {
            Zone::Fixed(o) => aligned(o.local_minus_utc()),
            Zone::Region(_) => self.weekly_offsets(0).all(aligned),
        }
    }

    /// The one offset from UTC, in seconds east, the zone has had since 2000 and has until 2100
    /// (read once a week): Asia/Shanghai's, Asia/Kolkata's, a fixed offset's; `None` for a
    /// zone with daylight saving time.
    pub fn steady_offset(&self) -> Option<i32> {
        let first = self.offset_at_seconds(946_684_800); // 2000-01-01
        self.weekly_offsets(946_684_800).all(|o| o == first).then_some(first)
    }

    /// The zone's offsets from UTC, seconds east, once a week from `from` (seconds since 1970)
    /// until 2100.
    fn weekly_offsets(&self, from: i64) -> impl Iterator<Item = i32> + '_ {
        const WEEK: i64 = 7 * 86_400;
        (from..=4_102_444_800).step_by(WEEK as usize).map(|at| self.offset_at_seconds(at))
    }

    /// The offset, in seconds east, that turns wall-clock time `local` (seconds since 1970 as
    /// if UTC) into its instant: `instant = local - offset`. 0 out of chrono's range.
    pub fn offset_of_local_seconds(&self, local: i64, overlap: Overlap) -> i32 {
        let Some(t) = DateTime::from_timestamp(local, 0) else { return 0 };
        self.instant(t.naive_utc(), overlap).map_or(0, |i| (local - i.timestamp()) as i32)
    }
}

/// A TIMESTAMP_LTZ column (`Timestamp(unit, Some(_))`, instants) as the TIMESTAMP column
/// (`Timestamp(unit, None)`) of its wall-clock times in `zone`; any other column unchanged.
/// `CAST(ltz AS TIMESTAMP)`, and what the functions that read a TIMESTAMP_LTZ's fields read.
///
/// # Errors
/// Arrow's, for a column that is not what its type says.
pub fn wall_clock(array: &ArrayRef, zone: Zone) -> arrow::error::Result<ArrayRef> {
    let DataType::Timestamp(unit, Some(_)) = array.data_type() else { return Ok(Arc::clone(array)) };
    shifted(array, *unit, None, |seconds| zone.offset_at_seconds(seconds))
}

/// A TIMESTAMP column's wall-clock times in `zone` as the TIMESTAMP_LTZ column (tagged `UTC`)
/// of their instants, the times the clocks skip or repeat read as `overlap` says (module
/// docs); any other column unchanged. `CAST(ts AS TIMESTAMP_LTZ)`.
///
/// # Errors
/// Arrow's, for a column that is not what its type says.
pub fn instants(array: &ArrayRef, zone: Zone, overlap: Overlap) -> arrow::error::Result<ArrayRef> {
    let DataType::Timestamp(unit, None) = array.data_type() else { return Ok(Arc::clone(array)) };
    shifted(array, *unit, Some("UTC".into()), |seconds| -zone.offset_of_local_seconds(seconds, overlap))
}

/// Timestamps `array` (of `unit`) each moved by `offset(its whole seconds)` seconds, typed
/// `Timestamp(unit, tz)`.
fn shifted(array: &ArrayRef, unit: TimeUnit, tz: Option<Arc<str>>, offset: impl Fn(i64) -> i32) -> arrow::error::Result<ArrayRef> {
    let per_second = per_second(unit);
    let as_i64 = arrow::compute::cast(array, &DataType::Int64)?;
    let moved: Int64Array = as_i64.as_primitive::<Int64Type>().unary(|v| v + i64::from(offset(v.div_euclid(per_second))) * per_second);
    arrow::compute::cast(&moved, &DataType::Timestamp(unit, tz))
}

/// `schema` with the type of each TIMESTAMP_LTZ column naming `zone` (its name), the zone the
/// client is shown its values in; the values, instants, are the same.
pub fn schema_shown_in(schema: &SchemaRef, zone: Zone) -> SchemaRef {
    if zone.is_utc() || !schema.fields().iter().any(|f| is_ltz(f.data_type())) {
        return Arc::clone(schema);
    }
    let name: Arc<str> = zone.name().into();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Timestamp(unit, Some(_)) => f.as_ref().clone().with_data_type(DataType::Timestamp(*unit, Some(Arc::clone(&name)))),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `batch` with its TIMESTAMP_LTZ columns shown in `zone`, as [`schema_shown_in`].
///
/// # Errors
/// Arrow's, for a batch that is not what its schema says.
pub fn batch_shown_in(batch: &RecordBatch, zone: Zone) -> arrow::error::Result<RecordBatch> {
    let schema = schema_shown_in(batch.schema_ref(), zone);
    if Arc::ptr_eq(&schema, batch.schema_ref()) {
        return Ok(batch.clone());
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| match is_ltz(c.data_type()) {
            true => c.to_data().into_builder().data_type(f.data_type().clone()).build().map(arrow::array::make_array),
            false => Ok(Arc::clone(c)),
        })
        .collect::<arrow::error::Result<Vec<_>>>()?;
    RecordBatch::try_new_with_options(schema, columns, &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())))
}

fn is_ltz(t: &DataType) -> bool {
    matches!(t, DataType::Timestamp(_, Some(_)))
}

fn per_second(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    }
}

/// `+08`, `+05:30`, `-03:30`, `+00:19:32`: an offset as Postgres writes one.
pub fn offset_text(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let s = seconds.unsigned_abs();
    let mut out = format!("{sign}{:02}", s / 3600);
    if s % 3600 != 0 {
        out.push_str(&format!(":{:02}", s % 3600 / 60));
        if s % 60 != 0 {
            out.push_str(&format!(":{:02}", s % 60));
        }
    }
    out
}

fn invalid(text: &str) -> String {
    format!("Invalid time zone '{text}'. {INVALID}")
}

/// Java's three-letter zone IDs (`ZoneId.SHORT_IDS`, which `TimeZone` shares), but for `EST`,
/// `MST` and `HST`, which are fixed offsets in Java and in the zone database alike.
const SHORT_IDS: [(&str, &str); 25] = [
    ("ACT", "Australia/Darwin"),
    ("AET", "Australia/Sydney"),
    ("AGT", "America/Argentina/Buenos_Aires"),
    ("ART", "Africa/Cairo"),
    ("AST", "America/Anchorage"),
    ("BET", "America/Sao_Paulo"),
    ("BST", "Asia/Dhaka"),
    ("CAT", "Africa/Harare"),
    ("CNT", "America/St_Johns"),
    ("CST", "America/Chicago"),
    ("CTT", "Asia/Shanghai"),
    ("EAT", "Africa/Addis_Ababa"),
    ("ECT", "Europe/Paris"),
    ("IET", "America/Indiana/Indianapolis"),
    ("IST", "Asia/Kolkata"),
    ("JST", "Asia/Tokyo"),
    ("MIT", "Pacific/Apia"),
    ("NET", "Asia/Yerevan"),
    ("NST", "Pacific/Auckland"),
    ("PLT", "Asia/Karachi"),
    ("PNT", "America/Phoenix"),
    ("PRT", "America/Puerto_Rico"),
    ("PST", "America/Los_Angeles"),
    ("SST", "Pacific/Guadalcanal"),
    ("VST", "Asia/Ho_Chi_Minh"),
];

/// Java's custom zone ID after `GMT`: `+h`, `+hh`, `+hh:mm`, `+hhmm` (hours up to 23).
fn custom_offset(s: &str) -> Option<FixedOffset> {
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = &s[1..];
    let (hours, minutes) = match digits.split_once(':') {
        Some((h, m)) if (1..=2).contains(&h.len()) && m.len() == 2 => (h, m),
        Some(_) => return None,
        None if (1..=2).contains(&digits.len()) => (digits, "0"),
        None if digits.len() == 4 => (&digits[..2], &digits[2..]),
        None => return None,
    };
    if !hours.chars().chain(minutes.chars()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i32, i32) = (hours.parse().ok()?, minutes.parse().ok()?);
    if h > 23 || m > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    #[test]
    fn session_zones_as_flink_and_postgres_accept_them() {
        assert_eq!(Zone::session("Asia/Shanghai").unwrap().name(), "Asia/Shanghai");
        assert_eq!(Zone::session("america/new_york").unwrap().name(), "America/New_York");
        assert_eq!(Zone::session("GMT+8").unwrap().name(), "GMT+08:00");
        assert_eq!(Zone::session("GMT-0330").unwrap().name(), "GMT-03:30");
        assert_eq!(Zone::session("-7").unwrap().name(), "GMT-07:00");
        assert_eq!(Zone::session("5.5").unwrap().name(), "GMT+05:30");
        for utc in ["UTC", "utc", "Etc/UTC", "GMT", "Z", "+00:00", "LOCAL"] {
            assert!(Zone::session(utc).unwrap().is_utc(), "{utc}");
        }
        for bad in ["UTC+3", "+08:00", "GMT+24", "Mars/Olympus", "", "30"] {
            assert!(Zone::session(bad).unwrap_err().contains("Invalid time zone"), "{bad}");
        }
        assert_eq!(custom_offset("+24"), None);
    }

    #[test]
    fn instants_and_wall_clock_times() {
        let la = Zone::session("America/Los_Angeles").unwrap();
        // January: 8 hours behind UTC; July: 7.
        assert_eq!(la.local(at("2024-01-01 12:00:00").and_utc()), at("2024-01-01 04:00:00"));
        assert_eq!(la.local(at("2024-07-01 12:00:00").and_utc()), at("2024-07-01 05:00:00"));
        // 02:30 on 2024-03-10 is in the gap: read at -08:00, 10:30 UTC.
        assert_eq!(la.instant(at("2024-03-10 02:30:00"), Overlap::Earlier).unwrap().naive_utc(), at("2024-03-10 10:30:00"));
        // 01:30 on 2024-11-03 happens twice: 08:30 UTC in daylight time, 09:30 in standard.
        assert_eq!(la.instant(at("2024-11-03 01:30:00"), Overlap::Earlier).unwrap().naive_utc(), at("2024-11-03 08:30:00"));
        assert_eq!(la.instant(at("2024-11-03 01:30:00"), Overlap::Later).unwrap().naive_utc(), at("2024-11-03 09:30:00"));
        assert_eq!(la.abbreviation_at(at("2024-07-01 12:00:00").and_utc()), "PDT");
        let india = Zone::session("Asia/Kolkata").unwrap();
        assert_eq!(india.offset_at(at("2024-07-01 12:00:00").and_utc()), 19_800);
        assert_eq!(offset_text(19_800), "+05:30");
        assert_eq!(offset_text(-3 * 3600), "-03");
        assert_eq!(offset_text(8 * 3600 + 5 * 60 + 43), "+08:05:43");
        assert_eq!(Zone::session("GMT+8").unwrap().abbreviation_at(at("2024-07-01 12:00:00").and_utc()), "+08");
        // Shanghai has kept +08:00 since 1991 but had daylight time before: hours align, days not.
        let shanghai = Zone::session("Asia/Shanghai").unwrap();
        assert!(shanghai.aligns_with(3_600_000) && shanghai.aligns_with(60_000));
        assert!(!shanghai.aligns_with(86_400_000));
        assert!(!india.aligns_with(3_600_000) && india.aligns_with(30 * 60_000));
        assert_eq!((shanghai.steady_offset(), india.steady_offset()), (Some(8 * 3600), Some(19_800)));
        assert_eq!(la.steady_offset(), None);
    }
}
