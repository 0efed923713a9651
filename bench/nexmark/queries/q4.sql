-- Nexmark q4: average price per category. The winning bid of an auction is its highest bid
-- between the auction's date_time and expires (both inclusive); the result is the average
-- winning price per category. A regular join (expires is no time attribute) and two levels of
-- unbounded aggregation. AVG over BIGINT is BIGINT (truncated), as in Flink.
-- Deviation from Flink: the output columns are named (category, avg_final); Flink leaves the
-- AVG unnamed and its sink calls the columns (id, final).
SELECT
    Q.category,
    AVG(Q.final) AS avg_final
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category
