-- Nexmark q0: pass-through. Every bid, projected to the columns of Flink's q0 sink.
-- Same as Flink's query (snake_case date_time).
SELECT auction, bidder, price, date_time, extra FROM bid
