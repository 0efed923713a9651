//! The `bid` table: one row per bid event (event id mod 50 in 4..=49), NEXMARK.md §1.6.
//!
//! Columns: `auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
//! date_time TIMESTAMP(3), extra VARCHAR`.

use std::sync::Arc;

use arrow::array::{ArrayBuilder, ArrayRef, Int64Builder, StringBuilder, TimestampMillisecondBuilder};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

use super::config::NexmarkConfig;
use super::generator::TableColumns;
use super::ids::{bid_auction, bidder};
use super::rng::Rng;
use super::strings::{next_price, Tables, CHANNELS_NUMBER, HOT_CHANNELS};

const AVG_BID_BYTE_SIZE: i64 = 100;

/// The `bid` schema; every column nullable, as the DDL declares no `NOT NULL`.
pub(super) fn schema() -> Schema {
    Schema::new(vec![
        Field::new("auction", DataType::Int64, true),
        Field::new("bidder", DataType::Int64, true),
        Field::new("price", DataType::Int64, true),
        Field::new("channel", DataType::Utf8, true),
        Field::new("url", DataType::Utf8, true),
        Field::new("date_time", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("extra", DataType::Utf8, true),
    ])
}

/// Column builders of one `bid` batch.
pub(super) struct BidColumns {
    auction: Int64Builder,
    bidder: Int64Builder,
    price: Int64Builder,
    channel: StringBuilder,
    url: StringBuilder,
    date_time: TimestampMillisecondBuilder,
    extra: StringBuilder,
}

impl BidColumns {
    pub(super) fn with_capacity(rows: usize) -> Self {
        BidColumns {
            auction: Int64Builder::with_capacity(rows),
            bidder: Int64Builder::with_capacity(rows),
            price: Int64Builder::with_capacity(rows),
            channel: StringBuilder::with_capacity(rows, rows * 10),
            url: StringBuilder::with_capacity(rows, rows * 80),
            date_time: TimestampMillisecondBuilder::with_capacity(rows),
            extra: StringBuilder::with_capacity(rows, rows * 82),
        }
    }
}

impl TableColumns for BidColumns {
    fn append(&mut self, _config: &NexmarkConfig, event_id: u64, ts_ms: i64, rng: &mut Rng, tables: &Tables) {
        // 1. auction, 2. bidder, 3. price
        self.auction.append_value(bid_auction(event_id, rng));
        self.bidder.append_value(bidder(event_id, rng));
        self.price.append_value(next_price(rng));
        // 4. channel and url: a hot channel half the time, else one of 10 000 cached ones
        if rng.below(2) > 0 {
            let i = rng.below(HOT_CHANNELS.len() as u32) as usize;
            self.channel.append_value(HOT_CHANNELS[i]);
            self.url.append_value(&tables.hot_urls[i]);
        } else {
            let n = rng.below(CHANNELS_NUMBER) as usize;
            self.channel.append_value(&tables.channel_names[n]);
            self.url.append_value(&tables.channel_urls[n]);
        }
        // 5. extra
        self.extra.append_value(tables.next_extra(rng, 32, AVG_BID_BYTE_SIZE));
        self.date_time.append_value(ts_ms);
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        // `finish` leaves a builder with no capacity: size fresh ones for a batch like this one.
        let rows = self.auction.len();
        let mut done = std::mem::replace(self, Self::with_capacity(rows));
        vec![
            Arc::new(done.auction.finish()),
            Arc::new(done.bidder.finish()),
            Arc::new(done.price.finish()),
            Arc::new(done.channel.finish()),
            Arc::new(done.url.finish()),
            Arc::new(done.date_time.finish()),
            Arc::new(done.extra.finish()),
        ]
    }
}
