-- Nexmark q1: currency conversion. Each bid's price converted from dollars to euros.
-- 0.908 is DECIMAL(3, 3), so price is DECIMAL(23, 3) (printed with 3 decimals).
-- Same as Flink's query (snake_case date_time).
SELECT
    auction,
    bidder,
    0.908 * price AS price,
    date_time,
    extra
FROM bid
