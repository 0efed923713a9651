-- Nexmark q22: get URL directories. The first three directories of each bid's url
-- (SPLIT_INDEX is 0-based: 'https:', '', host, dir1, dir2, dir3, ...).
-- Same as Flink's query.
SELECT
    auction, bidder, price, channel,
    SPLIT_INDEX(url, '/', 3) AS dir1,
    SPLIT_INDEX(url, '/', 4) AS dir2,
    SPLIT_INDEX(url, '/', 5) AS dir3
FROM bid
