-- Nexmark q19: auction Top-10 price. The 10 highest bids of each auction, with their rank.
-- Deviation from Flink: ORDER BY price DESC alone leaves ties between equal prices
-- undetermined, so the ranking adds tiebreaks: price DESC, bidder DESC, date_time DESC.
SELECT * FROM
(SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, bidder DESC, date_time DESC) AS rank_number
 FROM bid)
WHERE rank_number <= 10
