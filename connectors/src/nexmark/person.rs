//! The `person` table: one row per person event (event id ≡ 0 mod 50), NEXMARK.md §1.6.
//!
//! Columns: `id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR,
//! state VARCHAR, date_time TIMESTAMP(3), extra VARCHAR`.

use std::sync::Arc;

use arrow::array::{ArrayBuilder, ArrayRef, Int64Builder, StringBuilder, TimestampMillisecondBuilder};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use super::config::NexmarkConfig;
use super::generator::TableColumns;
use super::ids::{last_person, FIRST_PERSON_ID};
use super::rng::Rng;
use super::strings::{ascii, next_string, Tables};

const FIRST_NAMES: [&str; 11] =
    ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"];
const LAST_NAMES: [&str; 9] = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"];
const US_CITIES: [&str; 10] =
    ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"];
/// Upper case (NEXMARK.md "Our choices").
const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const AVG_PERSON_BYTE_SIZE: i64 = 200;

/// The `person` schema; every column nullable, as the DDL declares no `NOT NULL`.
pub(super) fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("email_address", DataType::Utf8, true),
        Field::new("credit_card", DataType::Utf8, true),
        Field::new("city", DataType::Utf8, true),
        Field::new("state", DataType::Utf8, true),
        Field::new("date_time", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("extra", DataType::Utf8, true),
    ])
}

/// Column builders of one `person` batch, plus scratch buffers reused across rows.
pub(super) struct PersonColumns {
    id: Int64Builder,
    name: StringBuilder,
    email_address: StringBuilder,
    credit_card: StringBuilder,
    city: StringBuilder,
    state: StringBuilder,
    date_time: TimestampMillisecondBuilder,
    extra: StringBuilder,
    scratch: Vec<u8>,
}

impl PersonColumns {
    pub(super) fn with_capacity(rows: usize) -> Self {
        PersonColumns {
            id: Int64Builder::with_capacity(rows),
            name: StringBuilder::with_capacity(rows, rows * 12),
            email_address: StringBuilder::with_capacity(rows, rows * 12),
            credit_card: StringBuilder::with_capacity(rows, rows * 19),
            city: StringBuilder::with_capacity(rows, rows * 8),
            state: StringBuilder::with_capacity(rows, rows * 2),
            date_time: TimestampMillisecondBuilder::with_capacity(rows),
            extra: StringBuilder::with_capacity(rows, rows * 170),
            scratch: Vec::with_capacity(64),
        }
    }
}

impl TableColumns for PersonColumns {
    fn append(&mut self, _config: &NexmarkConfig, event_id: u64, ts_ms: i64, rng: &mut Rng, tables: &Tables) {
        let s = &mut self.scratch;
        // 1. name
        let first = FIRST_NAMES[rng.below(FIRST_NAMES.len() as u32) as usize];
        let last = LAST_NAMES[rng.below(LAST_NAMES.len() as u32) as usize];
        s.clear();
        s.extend_from_slice(first.as_bytes());
        s.push(b' ');
        s.extend_from_slice(last.as_bytes());
        let name_len = s.len();
        self.name.append_value(ascii(s));
        // 2. email
        s.clear();
        next_string(rng, 7, b' ', s);
        s.push(b'@');
        next_string(rng, 5, b' ', s);
        s.extend_from_slice(b".com");
        let email_len = s.len();
        self.email_address.append_value(ascii(s));
        // 3. credit card: four "%04d" groups
        s.clear();
        for group in 0..4 {
            if group > 0 {
                s.push(b' ');
            }
            let v = rng.below(10_000);
            s.extend_from_slice(&[
                b'0' + (v / 1000) as u8,
                b'0' + (v / 100 % 10) as u8,
                b'0' + (v / 10 % 10) as u8,
                b'0' + (v % 10) as u8,
            ]);
        }
        let cc_len = s.len();
        self.credit_card.append_value(ascii(s));
        // 4, 5. city, state
        let city = US_CITIES[rng.below(US_CITIES.len() as u32) as usize];
        let state = US_STATES[rng.below(US_STATES.len() as u32) as usize];
        self.city.append_value(city);
        self.state.append_value(state);
        // 6. extra
        let current = 8 + (name_len + email_len + cc_len + city.len() + state.len()) as i64;
        self.extra.append_value(tables.next_extra(rng, current, AVG_PERSON_BYTE_SIZE));
        self.id.append_value(last_person(event_id) + FIRST_PERSON_ID);
        self.date_time.append_value(ts_ms);
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        // `finish` leaves a builder with no capacity: size fresh ones for a batch like this one.
        let rows = self.id.len();
        let scratch = std::mem::take(&mut self.scratch);
        let mut done = std::mem::replace(self, Self::with_capacity(rows));
        self.scratch = scratch;
        vec![
            Arc::new(done.id.finish()),
            Arc::new(done.name.finish()),
            Arc::new(done.email_address.finish()),
            Arc::new(done.credit_card.finish()),
            Arc::new(done.city.finish()),
            Arc::new(done.state.finish()),
            Arc::new(done.date_time.finish()),
            Arc::new(done.extra.finish()),
        ]
    }
}
