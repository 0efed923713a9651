-- Nexmark q16: channel statistics per channel and day: the last minute seen, bids, distinct
-- bidders and distinct auctions, in total and per price range. Unbounded aggregation.
-- Same as Flink's query (snake_case date_time).
SELECT
    channel,
    DATE_FORMAT(date_time, 'yyyy-MM-dd') AS "day",
    max(DATE_FORMAT(date_time, 'HH:mm')) AS "minute",
    count(*) AS total_bids,
    count(*) FILTER (WHERE price < 10000) AS rank1_bids,
    count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
    count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
    count(DISTINCT bidder) AS total_bidders,
    count(DISTINCT bidder) FILTER (WHERE price < 10000) AS rank1_bidders,
    count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bidders,
    count(DISTINCT bidder) FILTER (WHERE price >= 1000000) AS rank3_bidders,
    count(DISTINCT auction) AS total_auctions,
    count(DISTINCT auction) FILTER (WHERE price < 10000) AS rank1_auctions,
    count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_auctions,
    count(DISTINCT auction) FILTER (WHERE price >= 1000000) AS rank3_auctions
FROM bid
GROUP BY channel, DATE_FORMAT(date_time, 'yyyy-MM-dd')
