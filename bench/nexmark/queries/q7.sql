-- Nexmark q7: highest bid. The bids whose price equals the maximum price of a 10 s TUMBLE
-- window, with date_time between that window's end - 10 s and its end (both inclusive, as
-- Flink's BETWEEN; so a bid exactly at window_end can also match the window before).
-- Same as Flink's query: a regular join of bid with the window aggregate (window_end is no
-- time attribute after the aggregation, so this is not an interval join).
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end AS date_time
  FROM TABLE(
          TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time
