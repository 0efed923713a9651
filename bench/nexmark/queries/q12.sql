-- Nexmark q12: bids per bidder per 10 s TUMBLE window.
-- Deviation from Flink: event time (date_time) instead of PROCTIME(), so the result is
-- deterministic (Feldera made the same choice).
SELECT
    bidder,
    count(*) AS bid_count,
    window_start AS starttime,
    window_end AS endtime
FROM TABLE(
        TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end
