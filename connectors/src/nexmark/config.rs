//! The `nexmark` connector's options (`'nexmark.*'` in a table's `WITH`), validated.
//!
//! | option | values | default |
//! |---|---|---|
//! | `nexmark.table` | `person`, `auction`, `bid` | required |
//! | `nexmark.events` | events over all three tables and all partitions; `0` = unbounded | `0` |
//! | `nexmark.event-rate` | events per second of event time, all partitions together (> 0) | `100000` (Flink V2) |
//! | `nexmark.base-time` | event time of event 0: `'YYYY-MM-DD[ HH:MM:SS[.fff]]'` (UTC) or ms since the epoch | `'2015-07-15 00:00:00'` |
//! | `nexmark.seed` | an unsigned 64-bit integer; with the event id it seeds each event's RNG | `7954896728001506081` |
//! | `nexmark.partitions` | source partitions (blocks of 50 event ids dealt round-robin) | `1` |
//! | `nexmark.rate-limited` | `true`: no faster than `nexmark.event-rate` events per second of wall time, so event time keeps pace with the clock (Nexmark's rate-limited generator); `false`: as fast as the job reads | `false` |
//!
//! Source: ../shared/NEXMARK.md §1.2 (defaults), "Our choices" (rate and base time as options).

use std::collections::BTreeMap;
use std::fmt;

use crate::ConnectorError;

/// Option naming the table a `nexmark` source produces.
pub const OPT_TABLE: &str = "nexmark.table";
/// Option bounding the run: total events over the three tables; `0` = unbounded.
pub const OPT_EVENTS: &str = "nexmark.events";
/// Option giving the event-time rate, events per second of event time.
pub const OPT_EVENT_RATE: &str = "nexmark.event-rate";
/// Option giving the event time of event 0.
pub const OPT_BASE_TIME: &str = "nexmark.base-time";
/// Option giving the RNG seed.
pub const OPT_SEED: &str = "nexmark.seed";
/// Option giving the number of source partitions (read by the source runtime, not the config).
pub const OPT_PARTITIONS: &str = "nexmark.partitions";
/// Option limiting the generator to `nexmark.event-rate` events per second of wall time.
pub const OPT_RATE_LIMITED: &str = "nexmark.rate-limited";
/// Every `nexmark.*` option.
pub(crate) const OPTIONS: &[&str] =
    &[OPT_TABLE, OPT_EVENTS, OPT_EVENT_RATE, OPT_BASE_TIME, OPT_SEED, OPT_PARTITIONS, OPT_RATE_LIMITED];

/// 2015-07-15 00:00:00.000 UTC in ms since the epoch (nexmark-bench's base time).
pub const DEFAULT_BASE_TIME_MS: i64 = 1_436_918_400_000;
/// Events per second of event time, Flink's V2 setting.
pub const DEFAULT_EVENT_RATE: f64 = 100_000.0;
/// ASCII "nexmark!"; the same default as the shared nexmark-gen file generator.
pub const DEFAULT_SEED: u64 = 0x6E65_786D_6172_6B21;

/// The three Nexmark tables (NEXMARK.md §1.1, the views `person`, `auction`, `bid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NexmarkTable {
    Person,
    Auction,
    Bid,
}

impl NexmarkTable {
    /// All tables, in event-type order (0 person, 1 auction, 2 bid).
    pub const ALL: [NexmarkTable; 3] = [NexmarkTable::Person, NexmarkTable::Auction, NexmarkTable::Bid];

    /// The option value and table name: `person`, `auction`, `bid`.
    pub fn name(self) -> &'static str {
        match self {
            NexmarkTable::Person => "person",
            NexmarkTable::Auction => "auction",
            NexmarkTable::Bid => "bid",
        }
    }
}

impl fmt::Display for NexmarkTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one `nexmark` table generates. All partitions of a table share one config.
#[derive(Debug, Clone, PartialEq)]
pub struct NexmarkConfig {
    /// The table this source produces.
    pub table: NexmarkTable,
    /// Events over all three tables (event ids `0..n`), or `None` for an unbounded run.
    pub num_events: Option<u64>,
    /// Events per second of event time over all tables and partitions (Flink `tps`).
    pub event_rate: f64,
    /// Event time of event 0, ms since the epoch (a `TIMESTAMP(3)` without time zone).
    pub base_time_ms: i64,
    /// Global seed; event `e` draws from an RNG seeded by `(seed, e)`.
    pub seed: u64,
    /// Whether the reader emits no more than `event_rate` events per second of wall time
    /// (counted over all tables, as event ids), instead of as fast as it is read.
    pub rate_limited: bool,
}

impl NexmarkConfig {
    /// The defaults of NEXMARK.md for `table`: unbounded, 100 000 events/s, base time
    /// 2015-07-15 00:00:00, the default seed.
    pub fn new(table: NexmarkTable) -> Self {
        NexmarkConfig {
            table,
            num_events: None,
            event_rate: DEFAULT_EVENT_RATE,
            base_time_ms: DEFAULT_BASE_TIME_MS,
            seed: DEFAULT_SEED,
            rate_limited: false,
        }
    }

    /// The config of a table's `WITH` options; options not starting with `nexmark.` are left
    /// to the caller (`connector`, ...).
    ///
    /// # Errors
    /// - [`ConnectorError::MissingOption`] without `nexmark.table`;
    /// - [`ConnectorError::UnknownOption`] for a `nexmark.*` key not in the table above;
    /// - [`ConnectorError::InvalidValue`] naming the option and its valid values otherwise.
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<Self, ConnectorError> {
        if let Some(key) = options.keys().find(|k| k.starts_with("nexmark.") && !OPTIONS.contains(&k.as_str())) {
            return Err(ConnectorError::UnknownOption {
                connector: "nexmark".into(),
                option: key.clone(),
                valid: OPTIONS.join(", "),
            });
        }
        let table_name = options
            .get(OPT_TABLE)
            .ok_or_else(|| ConnectorError::MissingOption { connector: "nexmark".into(), option: OPT_TABLE.into() })?;
        let table = NexmarkTable::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(table_name.trim()))
            .ok_or_else(|| invalid(OPT_TABLE, table_name, "person, auction, bid"))?;
        let mut config = NexmarkConfig::new(table);
        if let Some(v) = options.get(OPT_EVENTS) {
            let n: u64 = v
                .trim()
                .replace('_', "")
                .parse()
                .map_err(|_| invalid(OPT_EVENTS, v, "a non-negative integer number of events (0 = unbounded)"))?;
            config.num_events = (n > 0).then_some(n);
        }
        if let Some(v) = options.get(OPT_EVENT_RATE) {
            config.event_rate =
                v.trim().replace('_', "").parse::<f64>().ok().filter(|r| r.is_finite() && *r > 0.0).ok_or_else(
                    || invalid(OPT_EVENT_RATE, v, "a positive number of events per second of event time, e.g. 100000"),
                )?;
        }
        if let Some(v) = options.get(OPT_BASE_TIME) {
            config.base_time_ms = parse_base_time(v).ok_or_else(|| {
                invalid(OPT_BASE_TIME, v, "'YYYY-MM-DD[ HH:MM:SS[.fff]]' (UTC) or milliseconds since 1970-01-01")
            })?;
        }
        if let Some(v) = options.get(OPT_SEED) {
            config.seed =
                v.trim().parse().map_err(|_| invalid(OPT_SEED, v, "an integer in 0..=18446744073709551615"))?;
        }
        if let Some(v) = options.get(OPT_RATE_LIMITED) {
            config.rate_limited = crate::parse_bool(OPT_RATE_LIMITED, v.trim())?;
        }
        Ok(config)
    }

    /// Event-time spacing of consecutive event ids, µs (Flink `interEventDelayUs` with one
    /// logical generator: the partitions share one timeline).
    pub fn inter_event_delay_us(&self) -> f64 {
        1_000_000.0 / self.event_rate
    }

    /// Event time of event `event_id`, ms: `base + (long)(id × delay_us) / 1000` (§1.4).
    #[inline]
    pub fn timestamp_ms(&self, event_id: u64) -> i64 {
        self.base_time_ms + ((event_id as f64 * self.inter_event_delay_us()) as i64) / 1000
    }
}

fn invalid(option: &str, value: &str, valid: &str) -> ConnectorError {
    ConnectorError::InvalidValue { option: option.into(), value: value.into(), valid: valid.into() }
}

/// `'YYYY-MM-DD[( |T)HH:MM:SS[.fff]]'` (UTC) or an integer of ms since the epoch.
fn parse_base_time(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(ms) = s.parse::<i64>() {
        return Some(ms);
    }
    let (date, time) = s.split_once([' ', 'T']).unwrap_or((s, "00:00:00"));
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=days_in_month(y, m)).contains(&day) {
        return None;
    }
    let (hms, frac) = time.trim().split_once('.').unwrap_or((time.trim(), ""));
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, mi, sec) = (t.next()??, t.next()??, t.next()??);
    if t.next().is_some() || !(0..24).contains(&h) || !(0..60).contains(&mi) || !(0..60).contains(&sec) {
        return None;
    }
    let ms = match frac.len() {
        0 => 0,
        1..=3 if frac.bytes().all(|b| b.is_ascii_digit()) => {
            frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32)
        }
        _ => return None,
    };
    Some((days_from_civil(y, m, day) * 86_400 + h * 3600 + mi * 60 + sec) * 1000 + ms)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant, "chrono-Compatible
/// Low-Level Date Algorithms").
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_options() -> Result<(), ConnectorError> {
        let c = NexmarkConfig::from_options(&opts(&[("connector", "nexmark"), ("nexmark.table", "bid")]))?;
        assert_eq!(c, NexmarkConfig::new(NexmarkTable::Bid));
        let c = NexmarkConfig::from_options(&opts(&[
            ("nexmark.table", "Person"),
            ("nexmark.events", "10_000_000"),
            ("nexmark.event-rate", "1e4"),
            ("nexmark.base-time", "2020-02-29 12:34:56.7"),
            ("nexmark.seed", "42"),
        ]))?;
        assert_eq!(c.table, NexmarkTable::Person);
        assert_eq!(c.num_events, Some(10_000_000));
        assert_eq!(c.event_rate, 10_000.0);
        // 2020-01-01 is 50 · 365 + 12 leap days = 18 262 days after 1970-01-01; + 31 (January) + 28
        // = 18 321 for 2020-02-29.
        assert_eq!(c.base_time_ms, ((18_321 * 86_400 + 12 * 3600 + 34 * 60 + 56) * 1000) + 700);
        assert_eq!(c.seed, 42);
        assert_eq!(parse_base_time("2015-07-15 00:00:00"), Some(DEFAULT_BASE_TIME_MS));
        assert_eq!(parse_base_time("2015-07-15"), Some(DEFAULT_BASE_TIME_MS));
        assert_eq!(parse_base_time("0"), Some(0));
        let c = NexmarkConfig::from_options(&opts(&[("nexmark.table", "auction"), ("nexmark.events", "0")]))?;
        assert_eq!(c.num_events, None);
        Ok(())
    }

    #[test]
    fn errors_name_the_option_and_valid_values() {
        let err = |pairs: &[(&str, &str)]| match NexmarkConfig::from_options(&opts(pairs)) {
            Err(e) => e.to_string(),
            Ok(c) => format!("accepted: {c:?}"),
        };
        assert_eq!(err(&[]), "connector 'nexmark' needs the option 'nexmark.table'");
        assert_eq!(
            err(&[("nexmark.table", "bids")]),
            "option 'nexmark.table' = 'bids' is not valid; valid values: person, auction, bid"
        );
        assert!(err(&[("nexmark.table", "bid"), ("nexmark.events", "-1")]).contains("'nexmark.events' = '-1'"));
        assert!(err(&[("nexmark.table", "bid"), ("nexmark.event-rate", "0")]).contains("positive number"));
        assert!(err(&[("nexmark.table", "bid"), ("nexmark.base-time", "2015-13-01")]).contains("YYYY-MM-DD"));
        assert!(err(&[("nexmark.table", "bid"), ("nexmark.base-time", "2015-02-29")]).contains("YYYY-MM-DD"));
        assert!(err(&[("nexmark.table", "bid"), ("nexmark.seed", "x")]).contains("'nexmark.seed' = 'x'"));
        assert_eq!(
            err(&[("nexmark.table", "bid"), ("nexmark.rate", "1")]),
            "connector 'nexmark' has no option 'nexmark.rate'; valid options: nexmark.table, nexmark.events, \
             nexmark.event-rate, nexmark.base-time, nexmark.seed, nexmark.partitions, nexmark.rate-limited"
        );
    }
}
