-- Nexmark q3: local item suggestion. Who sells in OR, ID or CA in category 10, and which
-- auctions. A regular (unbounded) join of auction and person, then a filter.
-- Same as Flink's query (upper-case states, as our generator emits them).
SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE
    A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')
