-- Nexmark q21: add channel id. Each bid of a known channel (a hot channel, or a url with a
-- channel_id parameter), with the channel's id (CASE + REGEXP_EXTRACT).
-- Same as Flink's query.
SELECT
    auction, bidder, price, channel,
    CASE
        WHEN lower(channel) = 'apple' THEN '0'
        WHEN lower(channel) = 'google' THEN '1'
        WHEN lower(channel) = 'facebook' THEN '2'
        WHEN lower(channel) = 'baidu' THEN '3'
        ELSE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)
        END
    AS channel_id FROM bid
    WHERE REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) IS NOT NULL OR
          lower(channel) IN ('apple', 'google', 'facebook', 'baidu')
