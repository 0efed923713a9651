#!/usr/bin/env python3
"""Expected results of the Nexmark queries (bench/nexmark/queries/qN.sql), computed without Weir.

Usage:
    python3 compute.py INPUT_DIR [OUT_DIR] [--check] [--only=q5,q7,...]

INPUT_DIR holds person.json, auction.json and bid.json (JSON lines, as written by
`weir bench nexmark-gen --out INPUT_DIR`). OUT_DIR defaults to the directory of this script.
For every query it writes OUT_DIR/qN.tsv: the FINAL result of the query over the
whole bounded input (at the end of input the watermark goes to +infinity, so every window
fires; updating results are taken after all retractions), as a multiset of rows.

Format of qN.tsv: first line the output column names, tab-separated; then one line per row,
tab-separated; the row lines sorted with Python's sorted() on the line strings. NULL is \\N;
integers in decimal; DECIMAL values with exactly their scale (q1/q14 price: 3 decimals);
strings raw; timestamps YYYY-MM-DDTHH:MM:SS plus .mmm only when the milliseconds are non-zero;
booleans true/false.

It also writes OUT_DIR/manifest.tsv: query, row count, bytes and sha256 of each qN.tsv.

--check also recomputes q4, q5, q6, q7, q8, q9, q11, q12, q15-q19 a second, differently written
way (brute force or incremental) and asserts both agree.

Standard library only; Flink SQL semantics throughout (see README.md).
"""

import collections
import hashlib
import json
import os
import re
import sys
from decimal import Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
QUERIES_DIR = os.path.join(os.path.dirname(HERE), "queries")

SECOND = 1000  # timestamps are epoch milliseconds (UTC, no zone) throughout


# --------------------------------------------------------------------------------------------
# Timestamps: TIMESTAMP(3) values are kept as int epoch milliseconds.
# --------------------------------------------------------------------------------------------

def days_from_civil(y, m, d):
    """Days since 1970-01-01 of the proleptic Gregorian date y-m-d (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(z):
    z += 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


_TS_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?$")


def parse_ts(s):
    if s is None:
        return None
    m = _TS_RE.match(s)
    assert m, "unexpected timestamp %r" % (s,)
    y, mo, d, hh, mi, ss = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7) or "0"
    ms = int(frac.ljust(3, "0"))
    return ((days_from_civil(y, mo, d) * 24 + hh) * 60 + mi) * 60000 + ss * 1000 + ms


def ts_fields(t):
    days, rem = divmod(t, 86400000)
    y, mo, d = civil_from_days(days)
    hh, rem = divmod(rem, 3600000)
    mi, rem = divmod(rem, 60000)
    ss, ms = divmod(rem, 1000)
    return y, mo, d, hh, mi, ss, ms


def fmt_ts(t):
    y, mo, d, hh, mi, ss, ms = ts_fields(t)
    s = "%04d-%02d-%02dT%02d:%02d:%02d" % (y, mo, d, hh, mi, ss)
    if ms:
        s += ".%03d" % ms
    return s


def date_format(t, pattern):
    """Flink DATE_FORMAT(ts, pattern) for the two patterns the queries use."""
    if t is None:
        return None
    y, mo, d, hh, mi, ss, ms = ts_fields(t)
    if pattern == "yyyy-MM-dd":
        return "%04d-%02d-%02d" % (y, mo, d)
    if pattern == "HH:mm":
        return "%02d:%02d" % (hh, mi)
    raise ValueError(pattern)


def hour(t):
    return ts_fields(t)[3]


# --------------------------------------------------------------------------------------------
# Values and output
# --------------------------------------------------------------------------------------------

class Ts(int):
    """A TIMESTAMP(3) value (epoch ms), so the writer knows to format it."""


class Dec:
    """An exact DECIMAL value: unscaled integer and scale."""
    __slots__ = ("unscaled", "scale")

    def __init__(self, unscaled, scale):
        self.unscaled = unscaled
        self.scale = scale

    def __str__(self):
        u = self.unscaled
        sign = "-" if u < 0 else ""
        u = abs(u)
        if self.scale == 0:
            return sign + str(u)
        q, r = divmod(u, 10 ** self.scale)
        return "%s%d.%0*d" % (sign, q, self.scale, r)


def fmt_value(v):
    if v is None:
        return "\\N"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Ts):
        return fmt_ts(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Dec):
        return str(v)
    if isinstance(v, str):
        assert "\t" not in v and "\n" not in v and "\r" not in v, "string with tab/newline: %r" % v
        assert "\\" not in v, "string with a backslash (ambiguous with \\N): %r" % v
        return v
    raise TypeError("unexpected value %r" % (v,))


def format_rows(rows):
    return sorted("\t".join(fmt_value(v) for v in row) for row in rows)


def write_tsv(path, columns, rows):
    lines = format_rows(rows)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\t".join(columns) + "\n")
        for line in lines:
            f.write(line + "\n")
    return len(lines)


# --------------------------------------------------------------------------------------------
# SQL scalar semantics (Flink)
# --------------------------------------------------------------------------------------------

def sql_mod(a, b):
    """Integer MOD as in SQL / Java %: the sign follows the dividend."""
    if a is None or b is None:
        return None
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def java_div(a, b):
    """Java long division: truncation toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def avg_bigint(values):
    """Flink AVG over BIGINT: a BIGINT, sum / count in long division."""
    return java_div(sum(values), len(values))


def euro(price):
    """0.908 * price: DECIMAL(3,3) * BIGINT = DECIMAL(23, 3), exact."""
    return Dec(908 * price, 3)


_CHANNEL_ID_RE = re.compile(r"(&|^)channel_id=([^&]*)")


def regexp_extract(s, pattern_re, group):
    """Flink REGEXP_EXTRACT: group of the first match (Java Matcher.find), NULL if none."""
    if s is None:
        return None
    m = pattern_re.search(s)
    if m is None:
        return None
    return m.group(group)


def split_index(s, sep, i):
    """Flink SPLIT_INDEX: StringUtils.splitByWholeSeparatorPreserveAllTokens, 0-based, NULL
    when out of range."""
    if s is None or i < 0:
        return None
    parts = s.split(sep) if s != "" else []
    return parts[i] if i < len(parts) else None


def count_char(s, c):
    return len(s) - len(s.replace(c, ""))


# --------------------------------------------------------------------------------------------
# Windows (Flink window TVFs, offset 0, epoch aligned). Bounds [start, end).
# --------------------------------------------------------------------------------------------

def tumble_start(t, size):
    return t - (t % size)  # Python % is non-negative for size > 0: floor alignment


def hop_starts(t, slide, size):
    """Starts of every HOP window containing t: start <= t < start + size."""
    last = t - (t % slide)
    starts = []
    s = last
    while s > t - size:
        starts.append(s)
        s -= slide
    return starts


def sessions(times, gap):
    """Flink session windows over one partition's row times. Each row opens [t, t + gap);
    windows that intersect (TimeWindow.intersects: a.start <= b.end && a.end >= b.start, so
    touching windows merge too) are merged. Returns [(start, end, n_rows)]."""
    out = []
    for t in sorted(times):
        if out and t <= out[-1][1]:  # [t, t+gap) touches or overlaps [start, end)
            s, e, n = out[-1]
            out[-1] = (s, max(e, t + gap), n + 1)
        else:
            out.append((t, t + gap, 1))
    return out


# --------------------------------------------------------------------------------------------
# Input
# --------------------------------------------------------------------------------------------

PERSON_COLS = ["id", "name", "email_address", "credit_card", "city", "state", "date_time", "extra"]
AUCTION_COLS = ["id", "item_name", "description", "initial_bid", "reserve", "date_time", "expires",
                "seller", "category", "extra"]
BID_COLS = ["auction", "bidder", "price", "channel", "url", "date_time", "extra"]
TS_COLS = {"date_time", "expires"}


class Row(tuple):
    """A row as a tuple with attribute access by column name."""
    __slots__ = ()
    _index = {}

    def __getattr__(self, name):
        return self[self._index[name]]


def make_row_class(name, cols):
    cls = type(name, (Row,), {"__slots__": (), "_index": {c: i for i, c in enumerate(cols)}})
    return cls


Person = make_row_class("Person", PERSON_COLS)
Auction = make_row_class("Auction", AUCTION_COLS)
Bid = make_row_class("Bid", BID_COLS)


def read_table(path, cols, cls):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            vals = []
            for c in cols:
                v = obj.get(c)
                if c in TS_COLS and v is not None:
                    v = Ts(parse_ts(v))
                vals.append(v)
            rows.append(cls(vals))
    return rows


def read_side_input():
    """side_input rows from queries/q13.setup.sql (the INSERT ... VALUES tuples)."""
    path = os.path.join(QUERIES_DIR, "q13.setup.sql")
    text = "\n".join(l for l in open(path, encoding="utf-8").read().splitlines()
                     if not l.lstrip().startswith("--"))
    body = text[text.upper().index("VALUES"):]
    rows = [(int(k), v) for k, v in re.findall(r"\(\s*(-?\d+)\s*,\s*'([^']*)'\s*\)", body)]
    assert rows, "no VALUES found in " + path
    # PRIMARY KEY (key): an INSERT of an existing key is an upsert, the last one wins.
    return dict(rows)


# --------------------------------------------------------------------------------------------
# Queries. Each returns (columns, rows).
# --------------------------------------------------------------------------------------------

RANK1 = lambda p: p < 10000
RANK2 = lambda p: 10000 <= p < 1000000
RANK3 = lambda p: p >= 1000000


def q0(P, A, B):
    return (["auction", "bidder", "price", "date_time", "extra"],
            [(b.auction, b.bidder, b.price, b.date_time, b.extra) for b in B])


def q1(P, A, B):
    return (["auction", "bidder", "price", "date_time", "extra"],
            [(b.auction, b.bidder, euro(b.price), b.date_time, b.extra) for b in B])


def q2(P, A, B):
    return (["auction", "price"],
            [(b.auction, b.price) for b in B if sql_mod(b.auction, 123) == 0])


def q3(P, A, B):
    persons = collections.defaultdict(list)
    for p in P:
        if p.state in ("OR", "ID", "CA"):
            persons[p.id].append(p)
    rows = []
    for a in A:
        if a.category == 10:
            for p in persons.get(a.seller, ()):
                rows.append((p.name, p.city, p.state, a.id))
    return ["name", "city", "state", "id"], rows


def winning_join(A, B):
    """auction JOIN bid ON id = auction AND bid.date_time BETWEEN a.date_time AND a.expires:
    yields (auction, bid) pairs."""
    bids_by_auction = collections.defaultdict(list)
    for b in B:
        bids_by_auction[b.auction].append(b)
    for a in A:
        for b in bids_by_auction.get(a.id, ()):
            if a.date_time <= b.date_time <= a.expires:
                yield a, b


def q4(P, A, B):
    final = {}  # (a.id, a.category) -> MAX(price)
    for a, b in winning_join(A, B):
        k = (a.id, a.category)
        if k not in final or b.price > final[k]:
            final[k] = b.price
    per_cat = collections.defaultdict(list)
    for (aid, cat), f in final.items():
        per_cat[cat].append(f)
    return ["category", "avg_final"], [(c, avg_bigint(v)) for c, v in per_cat.items()]


def q5(P, A, B):
    counts = collections.Counter()  # (window_start, window_end, auction) -> num
    for b in B:
        for s in hop_starts(b.date_time, 2 * SECOND, 10 * SECOND):
            counts[(s, s + 10 * SECOND, b.auction)] += 1
    maxn = {}
    for (s, e, auc), n in counts.items():
        if n > maxn.get((s, e), 0):
            maxn[(s, e)] = n
    rows = [(auc, n) for (s, e, auc), n in counts.items() if n >= maxn[(s, e)]]
    return ["auction", "num"], rows


def q6(P, A, B):
    # Q: per (auction id, seller) the winning bid: ORDER BY price DESC, date_time ASC, bidder ASC
    # (q6.sql's tiebreak), rownum <= 1. Then per seller, in the winning bids' date_time order,
    # AVG(price) over the row and the 10 rows before it (ROWS 10 PRECEDING: up to 11 rows).
    best = {}
    for a, b in winning_join(A, B):
        k = (a.id, a.seller)
        key = (-b.price, b.date_time, b.bidder)
        if k not in best or key < best[k][0]:
            best[k] = (key, b)
    per_seller = collections.defaultdict(list)
    for (aid, seller), (_, b) in best.items():
        per_seller[seller].append((b.date_time, b.price))
    rows = []
    for seller, wins in per_seller.items():
        wins.sort()
        times = [t for t, _ in wins]
        assert len(set(times)) == len(times), "q6: two winning bids of seller %d at one time" % seller
        for i in range(len(wins)):
            frame = [p for _, p in wins[max(0, i - 10):i + 1]]
            rows.append((seller, avg_bigint(frame)))
    return ["seller", "avg_price"], rows


def q7(P, A, B):
    maxprice = {}  # tumble start -> MAX(price)
    for b in B:
        s = tumble_start(b.date_time, 10 * SECOND)
        if s not in maxprice or b.price > maxprice[s]:
            maxprice[s] = b.price
    # B1: (maxprice, date_time = window_end). Join ON B.price = maxprice
    #     WHERE B.date_time BETWEEN window_end - 10 s AND window_end (inclusive).
    by_price = collections.defaultdict(list)
    for b in B:
        by_price[b.price].append(b)
    rows = []
    for s, m in maxprice.items():
        end = s + 10 * SECOND
        for b in by_price[m]:
            if end - 10 * SECOND <= b.date_time <= end:
                rows.append((b.auction, b.price, b.bidder, b.date_time, b.extra))
    return ["auction", "price", "bidder", "date_time", "extra"], rows


def q8(P, A, B):
    pw = set()  # GROUP BY id, name, window_start, window_end
    for p in P:
        s = tumble_start(p.date_time, 10 * SECOND)
        pw.add((p.id, p.name, s, s + 10 * SECOND))
    aw = set()  # GROUP BY seller, window_start, window_end
    for a in A:
        s = tumble_start(a.date_time, 10 * SECOND)
        aw.add((a.seller, s, s + 10 * SECOND))
    rows = [(pid, name, Ts(s)) for (pid, name, s, e) in pw if (pid, s, e) in aw]
    return ["id", "name", "starttime"], rows


def q9(P, A, B):
    best = {}  # a.id -> (a, b): ORDER BY price DESC, date_time ASC, bidder ASC; rownum <= 1
    for a, b in winning_join(A, B):
        key = (-b.price, b.date_time, b.bidder)
        cur = best.get(a.id)
        if cur is None:
            best[a.id] = (a, b)
        else:
            ck = (-cur[1].price, cur[1].date_time, cur[1].bidder)
            assert key != ck, "q9: full tie in the ranking of auction %d" % a.id
            if key < ck:
                best[a.id] = (a, b)
    rows = []
    for a, b in best.values():
        rows.append(tuple(a) + (b.auction, b.bidder, b.price, b.date_time, b.extra))
    cols = AUCTION_COLS + ["auction", "bidder", "price", "bid_date_time", "bid_extra"]
    return cols, rows


def q10(P, A, B):
    return (["auction", "bidder", "price", "date_time", "extra", "dt", "hm"],
            [(b.auction, b.bidder, b.price, b.date_time, b.extra,
              date_format(b.date_time, "yyyy-MM-dd"), date_format(b.date_time, "HH:mm"))
             for b in B])


def q11(P, A, B):
    times = collections.defaultdict(list)
    for b in B:
        times[b.bidder].append(b.date_time)
    rows = []
    for bidder, ts in times.items():
        for s, e, n in sessions(ts, 10 * SECOND):
            rows.append((bidder, n, Ts(s), Ts(e)))
    return ["bidder", "bid_count", "starttime", "endtime"], rows


def q12(P, A, B):
    counts = collections.Counter()
    for b in B:
        s = tumble_start(b.date_time, 10 * SECOND)
        counts[(b.bidder, s)] += 1
    rows = [(bidder, n, Ts(s), Ts(s + 10 * SECOND)) for (bidder, s), n in counts.items()]
    return ["bidder", "bid_count", "starttime", "endtime"], rows


def q13(P, A, B):
    side = read_side_input()
    rows = []
    for b in B:
        k = sql_mod(b.auction, 10000)
        if k in side:
            rows.append((b.auction, b.bidder, b.price, b.date_time, side[k]))
    return ["auction", "bidder", "price", "date_time", "value"], rows


def q14(P, A, B):
    rows = []
    for b in B:
        e = 908 * b.price  # 0.908 * price, unscaled at scale 3
        if not (1000000 * 1000 < e < 50000000 * 1000):
            continue
        h = hour(b.date_time)
        if 8 <= h <= 18:
            kind = "dayTime"
        elif h <= 6 or h >= 20:
            kind = "nightTime"
        else:
            kind = "otherTime"
        rows.append((b.auction, b.bidder, Dec(e, 3), kind, b.date_time, b.extra,
                     count_char(b.extra, "c")))
    return ["auction", "bidder", "price", "bid_time_type", "date_time", "extra", "c_counts"], rows


STAT_COLS = ["total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
             "total_bidders", "rank1_bidders", "rank2_bidders", "rank3_bidders",
             "total_auctions", "rank1_auctions", "rank2_auctions", "rank3_auctions"]


def bid_stats(bids):
    """count(*), count(*) FILTER, count(DISTINCT bidder / auction) [FILTER] over a group."""
    preds = [lambda p: True, RANK1, RANK2, RANK3]
    counts = [sum(1 for b in bids if f(b.price)) for f in preds]
    bidders = [len({b.bidder for b in bids if f(b.price)}) for f in preds]
    auctions = [len({b.auction for b in bids if f(b.price)}) for f in preds]
    return counts + bidders + auctions


def q15(P, A, B):
    groups = collections.defaultdict(list)
    for b in B:
        groups[date_format(b.date_time, "yyyy-MM-dd")].append(b)
    rows = [tuple([day] + bid_stats(bs)) for day, bs in groups.items()]
    return ["day"] + STAT_COLS, rows


def q16(P, A, B):
    groups = collections.defaultdict(list)
    for b in B:
        groups[(b.channel, date_format(b.date_time, "yyyy-MM-dd"))].append(b)
    rows = []
    for (channel, day), bs in groups.items():
        minute = max(date_format(b.date_time, "HH:mm") for b in bs)
        rows.append(tuple([channel, day, minute] + bid_stats(bs)))
    return ["channel", "day", "minute"] + STAT_COLS, rows


def q17(P, A, B):
    groups = collections.defaultdict(list)
    for b in B:
        groups[(b.auction, date_format(b.date_time, "yyyy-MM-dd"))].append(b.price)
    rows = []
    for (auction, day), ps in groups.items():
        rows.append((auction, day, len(ps),
                     sum(1 for p in ps if RANK1(p)), sum(1 for p in ps if RANK2(p)),
                     sum(1 for p in ps if RANK3(p)),
                     min(ps), max(ps), avg_bigint(ps), sum(ps)))
    return ["auction", "day", "total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
            "min_price", "max_price", "avg_price", "sum_price"], rows


def q18(P, A, B):
    last = {}
    for b in B:  # arrival order: a later row with an equal date_time replaces (keep-last)
        k = (b.bidder, b.auction)
        cur = last.get(k)
        if cur is None or b.date_time >= cur.date_time:
            last[k] = b
    return BID_COLS, [tuple(b) for b in last.values()]


def q19(P, A, B):
    per_auction = collections.defaultdict(list)
    for b in B:
        per_auction[b.auction].append(b)
    rows = []
    for auc, bs in per_auction.items():
        # ORDER BY price DESC, bidder DESC, date_time DESC
        bs = sorted(bs, key=lambda b: (-b.price, -b.bidder, -b.date_time))
        for i, b in enumerate(bs[:10]):
            if i + 1 < len(bs):
                nb = bs[i + 1]
                assert (b.price, b.bidder, b.date_time) != (nb.price, nb.bidder, nb.date_time), \
                    "q19: full tie in the ranking of auction %d" % auc
            rows.append(tuple(b) + (i + 1,))
    return BID_COLS + ["rank_number"], rows


def q20(P, A, B):
    auctions = collections.defaultdict(list)
    for a in A:
        if a.category == 10:
            auctions[a.id].append(a)
    rows = []
    for b in B:
        for a in auctions.get(b.auction, ()):
            rows.append((b.auction, b.bidder, b.price, b.channel, b.url, b.date_time, b.extra,
                         a.item_name, a.description, a.initial_bid, a.reserve, a.date_time,
                         a.expires, a.seller, a.category, a.extra))
    return ["auction", "bidder", "price", "channel", "url", "bid_date_time", "bid_extra",
            "item_name", "description", "initial_bid", "reserve", "auction_date_time", "expires",
            "seller", "category", "auction_extra"], rows


def q21(P, A, B):
    hot = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
    rows = []
    for b in B:
        lc = b.channel.lower() if b.channel is not None else None
        ext = regexp_extract(b.url, _CHANNEL_ID_RE, 2)
        if not (ext is not None or lc in hot):
            continue
        channel_id = hot[lc] if lc in hot else ext
        rows.append((b.auction, b.bidder, b.price, b.channel, channel_id))
    return ["auction", "bidder", "price", "channel", "channel_id"], rows


def q22(P, A, B):
    return (["auction", "bidder", "price", "channel", "dir1", "dir2", "dir3"],
            [(b.auction, b.bidder, b.price, b.channel,
              split_index(b.url, "/", 3), split_index(b.url, "/", 4), split_index(b.url, "/", 5))
             for b in B])


QUERIES = {"q%d" % i: globals()["q%d" % i] for i in range(23)}


# --------------------------------------------------------------------------------------------
# --check: second, independently written computations of the trickier queries.
# --------------------------------------------------------------------------------------------

def alt_q4(P, A, B):
    # Sort bids by auction, then for each auction scan its range of bids once.
    bs = sorted(B, key=lambda b: (b.auction, b.date_time))
    import bisect
    keys = [b.auction for b in bs]
    finals = collections.defaultdict(list)
    for a in A:
        lo, hi = bisect.bisect_left(keys, a.id), bisect.bisect_right(keys, a.id)
        prices = [b.price for b in bs[lo:hi] if b.date_time >= a.date_time and b.date_time <= a.expires]
        if prices:
            finals[a.category].append(max(prices))
    return ["category", "avg_final"], [(c, int(Decimal(sum(f)) / Decimal(len(f)))) for c, f in finals.items()]


def alt_q5(P, A, B):
    # Count per 2 s slice, a window = 5 consecutive slices; brute-force window list.
    slices = collections.Counter()
    for b in B:
        slices[(b.date_time // 2000, b.auction)] += 1
    lo = min(b.date_time for b in B) // 2000 - 4
    hi = max(b.date_time for b in B) // 2000
    by_slice = collections.defaultdict(dict)
    for (sl, auc), n in slices.items():
        by_slice[sl][auc] = n
    rows = []
    for first in range(lo, hi + 1):  # window [first*2s, first*2s + 10s)
        cnt = collections.Counter()
        for sl in range(first, first + 5):
            for auc, n in by_slice.get(sl, {}).items():
                cnt[auc] += n
        if not cnt:
            continue
        m = max(cnt.values())
        rows += [(auc, n) for auc, n in cnt.items() if n == m]
    return ["auction", "num"], rows


def alt_q6(P, A, B):
    # The winning bids found as the stream would: bids in time order against their auction;
    # then each seller's averages from prefix sums of the prices in time order.
    amap = {a.id: a for a in A}
    win = {}
    for b in sorted(B, key=lambda b: (b.date_time, b.bidder)):
        a = amap.get(b.auction)
        if a is None or not (a.date_time <= b.date_time <= a.expires):
            continue
        cur = win.get(a.id)
        if cur is None or b.price > cur.price:
            win[a.id] = b
    by_seller = collections.defaultdict(list)
    for aid, b in win.items():
        by_seller[amap[aid].seller].append(b)
    rows = []
    for seller, bids in by_seller.items():
        bids.sort(key=lambda b: b.date_time)
        prefix = [0]
        for b in bids:
            prefix.append(prefix[-1] + b.price)
        for i in range(1, len(bids) + 1):
            lo = max(0, i - 11)
            rows.append((seller, java_div(prefix[i] - prefix[lo], i - lo)))
    return ["seller", "avg_price"], rows


def alt_q7(P, A, B):
    # Brute force: per window, scan all bids.
    wins = collections.defaultdict(list)
    for b in B:
        wins[b.date_time // 10000 * 10000].append(b.price)
    rows = []
    for s, ps in wins.items():
        m, end = max(ps), s + 10000
        for b in B:
            if b.price == m and s <= b.date_time <= end:
                rows.append((b.auction, b.price, b.bidder, b.date_time, b.extra))
    return ["auction", "price", "bidder", "date_time", "extra"], rows


def alt_q8(P, A, B):
    sellers = collections.defaultdict(set)
    for a in A:
        sellers[a.date_time // 10000].add(a.seller)
    rows = set()
    for p in P:
        w = p.date_time // 10000
        if p.id in sellers[w]:
            rows.add((p.id, p.name, Ts(w * 10000)))
    return ["id", "name", "starttime"], list(rows)


def alt_q9(P, A, B):
    # Incremental Top-1 as the stream would run it: bids and auctions interleaved in time order.
    amap = {a.id: a for a in A}
    rows = {}
    for b in B:
        a = amap.get(b.auction)
        if a is None or not (a.date_time <= b.date_time <= a.expires):
            continue
        cur = rows.get(a.id)
        if cur is None or (b.price > cur.price) or (b.price == cur.price and (b.date_time, b.bidder) < (cur.date_time, cur.bidder)):
            rows[a.id] = b
    out = [tuple(amap[aid]) + (b.auction, b.bidder, b.price, b.date_time, b.extra) for aid, b in rows.items()]
    return AUCTION_COLS + ["auction", "bidder", "price", "bid_date_time", "bid_extra"], out


def alt_q11(P, A, B):
    # Flink's merging window assigner, row by row in arrival order: each row opens
    # [t, t + gap); merge every existing window it intersects (start <= other.end and
    # end >= other.start).
    wins = collections.defaultdict(list)  # bidder -> list of [start, end, n]
    for b in B:
        new = [b.date_time, b.date_time + 10000, 1]
        keep = []
        for w in wins[b.bidder]:
            if new[0] <= w[1] and new[1] >= w[0]:
                new = [min(new[0], w[0]), max(new[1], w[1]), new[2] + w[2]]
            else:
                keep.append(w)
        keep.append(new)
        wins[b.bidder] = keep
    rows = [(bidder, n, Ts(s), Ts(e)) for bidder, ws in wins.items() for s, e, n in ws]
    return ["bidder", "bid_count", "starttime", "endtime"], rows


def alt_q12(P, A, B):
    c = collections.Counter((b.bidder, b.date_time // 10000) for b in B)
    return (["bidder", "bid_count", "starttime", "endtime"],
            [(k, n, Ts(w * 10000), Ts(w * 10000 + 10000)) for (k, w), n in c.items()])


def alt_stats(rows_iter):
    tot = [0, 0, 0, 0]
    sets_b = [set(), set(), set(), set()]
    sets_a = [set(), set(), set(), set()]
    for b in rows_iter:
        r = 1 if b.price < 10000 else (2 if b.price < 1000000 else 3)
        for i in (0, r):
            tot[i] += 1
            sets_b[i].add(b.bidder)
            sets_a[i].add(b.auction)
    return tot + [len(s) for s in sets_b] + [len(s) for s in sets_a]


def alt_q15(P, A, B):
    days = sorted({fmt_ts(b.date_time)[:10] for b in B})
    return ["day"] + STAT_COLS, [tuple([d] + alt_stats(b for b in B if fmt_ts(b.date_time)[:10] == d)) for d in days]


def alt_q16(P, A, B):
    g = collections.defaultdict(list)
    for b in B:
        g[(b.channel, fmt_ts(b.date_time)[:10])].append(b)
    rows = []
    for (ch, d), bs in g.items():
        last = max(bs, key=lambda b: b.date_time)
        rows.append(tuple([ch, d, fmt_ts(last.date_time)[11:16]] + alt_stats(bs)))
    return ["channel", "day", "minute"] + STAT_COLS, rows


def alt_q17(P, A, B):
    g = {}
    for b in B:
        k = (b.auction, fmt_ts(b.date_time)[:10])
        s = g.setdefault(k, [0, 0, 0, 0, None, None, 0])
        s[0] += 1
        s[1 if b.price < 10000 else (2 if b.price < 1000000 else 3)] += 1
        s[4] = b.price if s[4] is None else min(s[4], b.price)
        s[5] = b.price if s[5] is None else max(s[5], b.price)
        s[6] += b.price
    rows = [(k[0], k[1], s[0], s[1], s[2], s[3], s[4], s[5], int(Decimal(s[6]) / Decimal(s[0])), s[6])
            for k, s in g.items()]
    return ["auction", "day", "total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
            "min_price", "max_price", "avg_price", "sum_price"], rows


def alt_q18(P, A, B):
    g = collections.defaultdict(list)
    for i, b in enumerate(B):
        g[(b.bidder, b.auction)].append((b.date_time, i, b))
    return BID_COLS, [tuple(max(v)[2]) for v in g.values()]


def alt_q19(P, A, B):
    # Incremental Top-10 with a sorted list per auction, as the stream would run it.
    import bisect
    top = collections.defaultdict(list)
    for b in B:
        lst = top[b.auction]
        key = (-b.price, -b.bidder, -b.date_time)
        bisect.insort(lst, (key, tuple(b)))
        if len(lst) > 10:
            lst.pop()
    rows = [row + (i + 1,) for lst in top.values() for i, (_, row) in enumerate(lst)]
    return BID_COLS + ["rank_number"], rows


ALTS = {"q4": alt_q4, "q5": alt_q5, "q6": alt_q6, "q7": alt_q7, "q8": alt_q8, "q9": alt_q9, "q11": alt_q11,
        "q12": alt_q12, "q15": alt_q15, "q16": alt_q16, "q17": alt_q17, "q18": alt_q18,
        "q19": alt_q19}


# --------------------------------------------------------------------------------------------

def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    check = "--check" in argv
    only = None
    for a in argv:
        if a.startswith("--only="):
            only = set(a[len("--only="):].split(","))
    if not args:
        print(__doc__)
        return 2
    in_dir = args[0]
    out_dir = args[1] if len(args) > 1 else HERE
    P = read_table(os.path.join(in_dir, "person.json"), PERSON_COLS, Person)
    A = read_table(os.path.join(in_dir, "auction.json"), AUCTION_COLS, Auction)
    B = read_table(os.path.join(in_dir, "bid.json"), BID_COLS, Bid)
    print("read %d persons, %d auctions, %d bids" % (len(P), len(A), len(B)))
    os.makedirs(out_dir, exist_ok=True)
    for name, fn in QUERIES.items():
        if only and name not in only:
            continue
        cols, rows = fn(P, A, B)
        n = write_tsv(os.path.join(out_dir, name + ".tsv"), cols, rows)
        msg = "%s: %d rows" % (name, n)
        if check and name in ALTS:
            cols2, rows2 = ALTS[name](P, A, B)
            assert cols2 == cols, (name, cols, cols2)
            assert format_rows(rows2) == format_rows(rows), name + ": the second computation differs"
            msg += " (checked)"
        print(msg)
    write_manifest(out_dir)
    return 0


def write_manifest(out_dir):
    lines = []
    for name in QUERIES:
        path = os.path.join(out_dir, name + ".tsv")
        if not os.path.exists(path):
            continue
        data = open(path, "rb").read()
        rows = data.count(b"\n") - 1
        lines.append("%s\t%d\t%d\t%s" % (name, rows, len(data), hashlib.sha256(data).hexdigest()))
    with open(os.path.join(out_dir, "manifest.tsv"), "w", encoding="utf-8", newline="\n") as f:
        f.write("query\trows\tbytes\tsha256\n")
        for l in lines:
            f.write(l + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
