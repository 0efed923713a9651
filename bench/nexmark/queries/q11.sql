-- Nexmark q11: user sessions. The number of bids of each bidder per session, a session
-- ending 10 s after the bidder's last bid in it.
-- Deviation from Flink: Flink's q11 uses the legacy group window
-- GROUP BY bidder, SESSION(dateTime, INTERVAL '10' SECOND) with SESSION_START / SESSION_END;
-- here the SESSION window TVF partitioned by bidder, which has the same result.
SELECT
    B.bidder,
    count(*) AS bid_count,
    B.window_start AS starttime,
    B.window_end AS endtime
FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) B
GROUP BY B.bidder, B.window_start, B.window_end
