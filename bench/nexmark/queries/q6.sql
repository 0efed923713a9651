-- Nexmark q6: average selling price per seller over their last 10 closed auctions
-- (winning bid = the highest bid between the auction's date_time and expires).
-- NOT SUPPORTED, in Flink either: the OVER aggregate would have to consume the retractions
-- of the Top-1 below (Flink's own q6.sql carries a TODO saying so). Kept in Flink's form for
-- completeness; it has no expected output. Deviation: Flink's text refers to A.id / A.seller
-- and B.price inside a derived table where those aliases are not in scope; here the derived
-- table's own column names are used.
SELECT
    Q.seller,
    AVG(Q.price) OVER
        (PARTITION BY Q.seller ORDER BY Q.date_time ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
        AS avg_price
FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY id, seller ORDER BY price DESC) AS rownum
    FROM (SELECT A.id, A.seller, B.price, B.date_time
        FROM auction AS A,
            bid AS B
        WHERE A.id = B.auction
            AND B.date_time BETWEEN A.date_time AND A.expires)
) AS Q
WHERE Q.rownum <= 1
