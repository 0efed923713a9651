-- Nexmark q13: bounded side input join. Each bid enriched with the value of side_input row
-- MOD(auction, 10000) (side_input is created and filled by q13.setup.sql).
-- Deviation from Flink: Flink uses a processing-time lookup join
-- (JOIN side_input FOR SYSTEM_TIME AS OF B.p_time) against a 10 000-row file; here a REGULAR
-- join against a small plain table (100 keys: 0, 100, ..., 9900), so only the bids whose
-- MOD(auction, 10000) is one of those keys appear.
SELECT
    B.auction,
    B.bidder,
    B.price,
    B.date_time,
    S.value
FROM bid B
JOIN side_input S
ON MOD(B.auction, 10000) = S.key
