//! Event ids, types and the skew model (NEXMARK.md §1.3, §1.5).
//!
//! Event ids start at 0 (event number = event id, as Feldera does; Flink's first event is id 2).
//! Every block of 50 ids (an *epoch*) holds 1 person (offset 0), 3 auctions (offsets 1..=3)
//! and 46 bids (offsets 4..=49): person n is event 50n, auctions 3n..3n+2 are events 50n+1..=3.

use super::rng::Rng;

/// Ids per epoch: person + auction + bid proportions 1 + 3 + 46.
pub(super) const EPOCH_LEN: u64 = 50;
pub(super) const FIRST_PERSON_ID: i64 = 1000;
pub(super) const FIRST_AUCTION_ID: i64 = 1000;
const NUM_ACTIVE_PEOPLE: i64 = 1000;
const NUM_IN_FLIGHT_AUCTIONS: i64 = 100;
const PERSON_ID_LEAD: i64 = 10;
const AUCTION_ID_LEAD: i64 = 10;
/// Hot seller, auction and bidder "batch" size (HOT_*_RATIO in Flink's constants).
const HOT_BATCH: i64 = 100;
/// Events ahead of an auction within which about 100 more auctions are created:
/// `numInFlightAuctions · 50 / 3` (integer) = 1666.
pub(super) const AUCTION_HORIZON_EVENTS: u64 = 100 * EPOCH_LEN / 3;

/// `lastBase0PersonId`: the last person created at or before `event_id`.
#[inline]
pub(super) fn last_person(event_id: u64) -> i64 {
    (event_id / EPOCH_LEN) as i64
}

/// `lastBase0AuctionId`: the last auction created at or before `event_id` (-1 before the first).
#[inline]
pub(super) fn last_auction(event_id: u64) -> i64 {
    let epoch = (event_id / EPOCH_LEN) as i64;
    match event_id % EPOCH_LEN {
        0 => (epoch - 1) * 3 + 2,
        off @ 1..=3 => epoch * 3 + (off as i64 - 1),
        _ => epoch * 3 + 2,
    }
}

/// `nextBase0PersonId`: one of the last ≤ 1000 people, or up to 9 ids ahead.
#[inline]
pub(super) fn next_person(event_id: u64, rng: &mut Rng) -> i64 {
    let num_people = last_person(event_id) + 1;
    let active = num_people.min(NUM_ACTIVE_PEOPLE);
    num_people - active + rng.below_i64(active + PERSON_ID_LEAD)
}

/// `nextBase0AuctionId`: one of the last ~100 auctions, or up to 10 ahead.
#[inline]
pub(super) fn next_auction(event_id: u64, rng: &mut Rng) -> i64 {
    let max = last_auction(event_id);
    let min = (max - NUM_IN_FLIGHT_AUCTIONS).max(0);
    min + rng.below_i64(max - min + 1 + AUCTION_ID_LEAD)
}

/// The seller of the auction at `event_id`: the hot seller with probability 3/4.
#[inline]
pub(super) fn seller(event_id: u64, rng: &mut Rng) -> i64 {
    let base0 =
        if rng.below(4) > 0 { last_person(event_id) / HOT_BATCH * HOT_BATCH } else { next_person(event_id, rng) };
    base0 + FIRST_PERSON_ID
}

/// The auction of the bid at `event_id`: the hot auction with probability 1/2.
#[inline]
pub(super) fn bid_auction(event_id: u64, rng: &mut Rng) -> i64 {
    let base0 =
        if rng.below(2) > 0 { last_auction(event_id) / HOT_BATCH * HOT_BATCH } else { next_auction(event_id, rng) };
    base0 + FIRST_AUCTION_ID
}

/// The bidder of the bid at `event_id`: the hot bidder with probability 3/4. The person
/// offset is added once (NEXMARK.md "Our choices"; Flink adds it twice).
#[inline]
pub(super) fn bidder(event_id: u64, rng: &mut Rng) -> i64 {
    let base0 =
        if rng.below(4) > 0 { last_person(event_id) / HOT_BATCH * HOT_BATCH + 1 } else { next_person(event_id, rng) };
    base0 + FIRST_PERSON_ID
}
