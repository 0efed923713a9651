-- Nexmark q14: calculation. Bids with a euro price in (1 000 000, 50 000 000), with a time
-- of day class and the number of 'c' characters in extra.
-- Deviation from Flink: the UDF count_char(extra, 'c') is written as
-- CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')); bidTimeType is bid_time_type.
SELECT
    auction,
    bidder,
    0.908 * price AS price,
    CASE
        WHEN HOUR(date_time) >= 8 AND HOUR(date_time) <= 18 THEN 'dayTime'
        WHEN HOUR(date_time) <= 6 OR HOUR(date_time) >= 20 THEN 'nightTime'
        ELSE 'otherTime'
    END AS bid_time_type,
    date_time,
    extra,
    CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
