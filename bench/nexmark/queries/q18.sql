-- Nexmark q18: find last bid. The last bid (largest date_time) of each bidder on each auction:
-- deduplication, keep-last on event time (an updating result).
-- Same as Flink's query (snake_case date_time). Kept as Flink's keep-last deduplication
-- (ORDER BY the time attribute only): a second sort key would make it a Top-N instead. Two bids
-- of one (bidder, auction) in the same millisecond tie; in the 1 000 events/s check data every
-- event has its own millisecond, so there are no ties there; at higher event rates the kept
-- row among equal date_times is the one that arrived last (Flink's rule).
SELECT auction, bidder, price, channel, url, date_time, extra
 FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) AS rank_number
       FROM bid)
 WHERE rank_number <= 1
