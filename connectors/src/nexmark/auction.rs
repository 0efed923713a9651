//! The `auction` table: one row per auction event (event id ≡ 1, 2, 3 mod 50), NEXMARK.md §1.6.
//!
//! Columns: `id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT,
//! reserve BIGINT, date_time TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT,
//! category BIGINT, extra VARCHAR`.

use std::sync::Arc;

use arrow::array::{ArrayBuilder, ArrayRef, Int64Builder, StringBuilder, TimestampMillisecondBuilder};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use super::config::NexmarkConfig;
use super::generator::TableColumns;
use super::ids::{last_auction, seller, AUCTION_HORIZON_EVENTS, FIRST_AUCTION_ID};
use super::rng::Rng;
use super::strings::{ascii, next_price, next_string, Tables};

const FIRST_CATEGORY_ID: i64 = 10;
const NUM_CATEGORIES: u32 = 5;
const AVG_AUCTION_BYTE_SIZE: i64 = 500;

/// The `auction` schema; every column nullable, as the DDL declares no `NOT NULL`.
pub(super) fn schema() -> Schema {
    let ts = DataType::Timestamp(TimeUnit::Millisecond, None);
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("item_name", DataType::Utf8, true),
        Field::new("description", DataType::Utf8, true),
        Field::new("initial_bid", DataType::Int64, true),
        Field::new("reserve", DataType::Int64, true),
        Field::new("date_time", ts.clone(), true),
        Field::new("expires", ts, true),
        Field::new("seller", DataType::Int64, true),
        Field::new("category", DataType::Int64, true),
        Field::new("extra", DataType::Utf8, true),
    ])
}

/// Column builders of one `auction` batch, plus a scratch buffer reused across rows.
pub(super) struct AuctionColumns {
    id: Int64Builder,
    item_name: StringBuilder,
    description: StringBuilder,
    initial_bid: Int64Builder,
    reserve: Int64Builder,
    date_time: TimestampMillisecondBuilder,
    expires: TimestampMillisecondBuilder,
    seller: Int64Builder,
    category: Int64Builder,
    extra: StringBuilder,
    scratch: Vec<u8>,
}

impl AuctionColumns {
    pub(super) fn with_capacity(rows: usize) -> Self {
        AuctionColumns {
            id: Int64Builder::with_capacity(rows),
            item_name: StringBuilder::with_capacity(rows, rows * 11),
            description: StringBuilder::with_capacity(rows, rows * 51),
            initial_bid: Int64Builder::with_capacity(rows),
            reserve: Int64Builder::with_capacity(rows),
            date_time: TimestampMillisecondBuilder::with_capacity(rows),
            expires: TimestampMillisecondBuilder::with_capacity(rows),
            seller: Int64Builder::with_capacity(rows),
            category: Int64Builder::with_capacity(rows),
            extra: StringBuilder::with_capacity(rows, rows * 440),
            scratch: Vec::with_capacity(128),
        }
    }
}

impl TableColumns for AuctionColumns {
    fn append(&mut self, config: &NexmarkConfig, event_id: u64, ts_ms: i64, rng: &mut Rng, tables: &Tables) {
        // 1. seller, 2. category, 3. initial bid
        self.seller.append_value(seller(event_id, rng));
        self.category.append_value(FIRST_CATEGORY_ID + i64::from(rng.below(NUM_CATEGORIES)));
        let initial_bid = next_price(rng);
        // 4. expires: lifetime uniform in [1, 2·horizon], horizon = time to ~100 more auctions
        let horizon_ms = config.timestamp_ms(event_id + AUCTION_HORIZON_EVENTS) - ts_ms;
        self.expires.append_value(ts_ms + 1 + rng.below_i64((2 * horizon_ms).max(1)));
        // 5. item name, 6. description
        let s = &mut self.scratch;
        s.clear();
        next_string(rng, 20, b' ', s);
        let name_len = s.len();
        self.item_name.append_value(ascii(s));
        s.clear();
        next_string(rng, 100, b' ', s);
        let desc_len = s.len();
        self.description.append_value(ascii(s));
        // 7. reserve, 8. extra
        self.initial_bid.append_value(initial_bid);
        self.reserve.append_value(initial_bid + next_price(rng));
        let current = 8 + (name_len + desc_len) as i64 + 40;
        self.extra.append_value(tables.next_extra(rng, current, AVG_AUCTION_BYTE_SIZE));
        self.id.append_value(last_auction(event_id) + FIRST_AUCTION_ID);
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
            Arc::new(done.item_name.finish()),
            Arc::new(done.description.finish()),
            Arc::new(done.initial_bid.finish()),
            Arc::new(done.reserve.finish()),
            Arc::new(done.date_time.finish()),
            Arc::new(done.expires.finish()),
            Arc::new(done.seller.finish()),
            Arc::new(done.category.finish()),
            Arc::new(done.extra.finish()),
        ]
    }
}
