-- Nexmark q9: winning bids. For each auction, the auction and its winning bid: the highest
-- bid between the auction's date_time and expires (both inclusive), earliest first among
-- equal prices. A regular join and a Top-1 per auction (an updating result).
-- Deviation from Flink: a last tiebreak `B.bidder ASC` is added so the result is
-- deterministic even when two bids of one auction have the same price and date_time.
SELECT
    id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra,
    auction, bidder, price, bid_date_time, bid_extra
FROM (
   SELECT A.*, B.auction, B.bidder, B.price, B.date_time AS bid_date_time, B.extra AS bid_extra,
     ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC, B.bidder ASC) AS rownum
   FROM auction A, bid B
   WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
)
WHERE rownum <= 1
