-- Nexmark q10: log to file system. Every bid with its day and minute as strings.
-- Deviation from Flink: only the projection; Flink writes it into a filesystem sink
-- partitioned by (dt, hm), here it is a view.
SELECT auction, bidder, price, date_time, extra,
    DATE_FORMAT(date_time, 'yyyy-MM-dd') AS dt,
    DATE_FORMAT(date_time, 'HH:mm') AS hm
FROM bid
