-- Nexmark q6: average selling price per seller over their last 10 closed auctions
-- (winning bid = the highest bid between the auction's date_time and expires).
-- Flink does not run it (its own q6.sql carries a TODO): the OVER aggregate consumes the
-- retractions of the Top-1 below, which Weir runs as window functions over an updating input
-- (each seller's rows in the winning bids' time order; every auction counts at the end of the
-- input, as a batch query over it would). Deviations from Flink's text: it refers to A.id /
-- A.seller and B.price inside a derived table where those aliases are not in scope, so the
-- derived table's own column names are used; and a last tiebreak `date_time ASC, bidder ASC`
-- is added to the Top-1 (as in q9) so the winning bid, and so the order, is deterministic.
SELECT
    Q.seller,
    AVG(Q.price) OVER
        (PARTITION BY Q.seller ORDER BY Q.date_time ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
        AS avg_price
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY id, seller ORDER BY price DESC, date_time ASC, bidder ASC) AS rownum
    FROM (SELECT A.id, A.seller, B.price, B.date_time, B.bidder
        FROM auction AS A,
            bid AS B
        WHERE A.id = B.auction
            AND B.date_time BETWEEN A.date_time AND A.expires)
) AS Q
WHERE Q.rownum <= 1
