-- Nexmark q20: expand bid with auction. Each bid on an auction of category 10, with the
-- auction's columns. A regular join, filtered.
-- Same as Flink's query; the clashing names are aliased as in Flink's sink (bid_date_time,
-- bid_extra, auction_date_time, auction_extra), snake_case.
SELECT
    auction, bidder, price, channel, url, B.date_time AS bid_date_time, B.extra AS bid_extra,
    item_name, description, initial_bid, reserve, A.date_time AS auction_date_time, expires,
    seller, category, A.extra AS auction_extra
FROM
    bid AS B INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10
