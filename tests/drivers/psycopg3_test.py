"""psycopg 3 against Weir: connect, create, insert with parameters (text and binary), read a
view, transactions (implicit and with conn.transaction(), savepoints), COPY, a server-side
cursor, SUBSCRIBE through a cursor, introspection. Run by tests/drivers.rs with WEIR_DSN set.
Values are worked out by hand in the comments."""

import datetime
import os
from decimal import Decimal

import psycopg
from psycopg.pq import TransactionStatus

DSN = os.environ["WEIR_DSN"]


def main():
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE p3_items (id BIGINT, name STRING, price DECIMAL(10, 2), at TIMESTAMP(3),"
            " PRIMARY KEY (id) NOT ENFORCED)"
        )
        conn.execute(
            "CREATE MATERIALIZED VIEW p3_by_name AS"
            " SELECT name, COUNT(*) AS n, SUM(price) AS total FROM p3_items GROUP BY name"
        )
        at = datetime.datetime(2026, 12, 1, 10, 0, 0)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO p3_items VALUES (%s, %s, %s, %s)",
                [(1, "apple", Decimal("1.50"), at), (2, "apple", Decimal("2.25"), at), (3, "pear", Decimal("0.75"), at)],
            )
        # Binary parameters and results too.
        with conn.cursor(binary=True) as cur:
            cur.execute("INSERT INTO p3_items VALUES (%s, %s, %s, %s)", (4, "fig", Decimal("9.99"), at))
            cur.execute("SELECT id, name, price, at FROM p3_items WHERE id = %s", (4,))
            assert cur.fetchone() == (4, "fig", Decimal("9.99"), at), "binary round trip"
        rows = conn.execute("SELECT name, n, total FROM p3_by_name ORDER BY name").fetchall()
        # apple: 1.50 + 2.25
        assert rows == [("apple", 2, Decimal("3.75")), ("fig", 1, Decimal("9.99")), ("pear", 1, Decimal("0.75"))], rows

        # INSERT ... RETURNING and ON CONFLICT.
        got = conn.execute("INSERT INTO p3_items VALUES (%s, %s, %s, %s) RETURNING id, name", (5, "kiwi", Decimal("1"), at)).fetchall()
        assert got == [(5, "kiwi")], got
        cur = conn.execute("INSERT INTO p3_items VALUES (5, 'lime', 2, NULL) ON CONFLICT (id) DO NOTHING")
        assert cur.rowcount == 0, cur.rowcount

        # COPY FROM STDIN, row by row.
        with conn.cursor() as cur:
            with cur.copy("COPY p3_items (id, name, price) FROM STDIN") as copy:
                copy.write_row((10, "plum", Decimal("0.10")))
                copy.write_row((11, "plum", Decimal("0.20")))
        assert conn.execute("SELECT n, total FROM p3_by_name WHERE name = 'plum'").fetchone() == (2, Decimal("0.30"))

    # Transactions: psycopg opens one at the first statement (not autocommit).
    with psycopg.connect(DSN) as conn:
        conn.execute("INSERT INTO p3_items VALUES (20, 'temp', 1, NULL)")
        assert conn.info.transaction_status == TransactionStatus.INTRANS, conn.info.transaction_status
        # The block sees its own row.
        assert conn.execute("SELECT count(*) FROM p3_items WHERE id = 20").fetchone() == (1,)
        conn.rollback()
        assert conn.info.transaction_status == TransactionStatus.IDLE
        assert conn.execute("SELECT count(*) FROM p3_items WHERE id = 20").fetchone() == (0,)
        conn.rollback()

        # A failed statement aborts the block (INERROR) until rollback.
        try:
            conn.execute("INSERT INTO p3_items VALUES (NULL, 'bad', 1, NULL)")
            raise AssertionError("a NULL key was accepted")
        except psycopg.errors.NotNullViolation:
            pass
        except psycopg.Error as e:  # Weir's SQLSTATE for it
            assert e.sqlstate is not None, e
        assert conn.info.transaction_status == TransactionStatus.INERROR, conn.info.transaction_status
        try:
            conn.execute("SELECT 1")
            raise AssertionError("a statement ran in an aborted block")
        except psycopg.errors.InFailedSqlTransaction:
            pass
        conn.rollback()

        # conn.transaction(): committed on exit, rolled back on an exception; nested ones are
        # savepoints.
        conn.autocommit = True
        with conn.transaction():
            conn.execute("INSERT INTO p3_items VALUES (21, 'txn', 1, NULL)")
            try:
                with conn.transaction():
                    conn.execute("INSERT INTO p3_items VALUES (22, 'inner', 1, NULL)")
                    raise RuntimeError("roll the savepoint back")
            except RuntimeError:
                pass
            assert conn.info.transaction_status == TransactionStatus.INTRANS
        try:
            with conn.transaction():
                conn.execute("INSERT INTO p3_items VALUES (23, 'gone', 1, NULL)")
                raise RuntimeError("roll everything back")
        except RuntimeError:
            pass
        ids = [r[0] for r in conn.execute("SELECT id FROM p3_items WHERE id >= 20 ORDER BY id")]
        assert ids == [21], ids

    # A server-side cursor (DECLARE / FETCH in a block).
    with psycopg.connect(DSN) as conn:
        with conn.cursor(name="p3_cur") as cur:
            cur.itersize = 2
            cur.execute("SELECT id FROM p3_items WHERE id < 10 ORDER BY id")
            assert [r[0] for r in cur] == [1, 2, 3, 4, 5]
        conn.commit()

    # SUBSCRIBE through a cursor: the snapshot, then a change made by another connection.
    with psycopg.connect(DSN) as conn, psycopg.connect(DSN, autocommit=True) as writer:
        conn.execute("DECLARE p3_sub CURSOR FOR SUBSCRIBE p3_by_name WITH (SNAPSHOT = false)")
        writer.execute("INSERT INTO p3_items VALUES (30, 'pear', 1.25, NULL)")
        # pear: n 1 -> 2, total 0.75 -> 2.00: the old row leaves, the new one enters.
        changes = []
        while len(changes) < 2:
            rows = conn.execute("FETCH ALL p3_sub WITH (timeout = '10s')").fetchall()
            assert rows, "no change within 10 s"
            changes.extend(rows)
        epochs = {r[0] for r in changes}
        assert len(epochs) == 1, changes
        assert sorted((r[1], r[2], r[3], r[4]) for r in changes) == [(-1, "pear", 1, Decimal("0.75")), (1, "pear", 2, Decimal("2.00"))], changes
        conn.rollback()

    # Introspection the way tools do it.
    with psycopg.connect(DSN, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname LIKE 'p3_%' ORDER BY 1")]
        assert tables == ["p3_items"], tables
        cols = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'p3_items' ORDER BY ordinal_position"
        ).fetchall()
        assert cols == [("id", "bigint"), ("name", "text"), ("price", "numeric"), ("at", "timestamp without time zone")], cols
        conn.execute("DROP MATERIALIZED VIEW p3_by_name")
        conn.execute("DROP TABLE p3_items")
    print("psycopg3: ok")


if __name__ == "__main__":
    main()
