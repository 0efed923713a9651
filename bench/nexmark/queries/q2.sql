-- Nexmark q2: selection. Bids on every 123rd auction, with their price.
-- Same as Flink's query (MOD(auction, 123) = 0, not the original five literal ids).
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
