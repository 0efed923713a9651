"""asyncpg against Weir: its start-up introspection (pg_type, current_setting), DDL,
executemany with parameters (binary), arrays, a transaction and its rollback, a cursor (portals
fetched in pieces), a prepared statement, SUBSCRIBE through a cursor. Run by tests/drivers.rs
with WEIR_DSN set."""

import asyncio
import os

import asyncpg

DSN = os.environ["WEIR_DSN"]


async def main():
    conn = await asyncpg.connect(DSN)
    await conn.execute("CREATE TABLE ap_items (id BIGINT, name STRING, qty INT, PRIMARY KEY (id) NOT ENFORCED)")
    await conn.execute("CREATE MATERIALIZED VIEW ap_total AS SELECT COUNT(*) AS n, SUM(qty) AS qty FROM ap_items")
    await conn.executemany("INSERT INTO ap_items VALUES ($1, $2, $3)", [(1, "a", 10), (2, "b", 20), (3, "c", 30)])
    # 10 + 20 + 30
    row = await conn.fetchrow("SELECT n, qty FROM ap_total")
    assert (row["n"], row["qty"]) == (3, 60), row

    # Arrays, as parameters and results.
    rows = await conn.fetch("SELECT id FROM ap_items WHERE id = ANY($1) ORDER BY id", [1, 3])
    assert [r["id"] for r in rows] == [1, 3], rows
    names = await conn.fetchval("SELECT array_agg(name ORDER BY name) FROM ap_items")
    assert names == ["a", "b", "c"], names

    # A transaction that fails is rolled back whole.
    try:
        async with conn.transaction():
            await conn.execute("INSERT INTO ap_items VALUES (4, 'd', 40)")
            await conn.execute("INSERT INTO ap_items VALUES (NULL, 'e', 50)")
    except asyncpg.exceptions.NotNullViolationError:
        pass
    assert await conn.fetchval("SELECT count(*) FROM ap_items") == 3
    async with conn.transaction():
        await conn.execute("UPDATE ap_items SET qty = qty + 1 WHERE id = $1", 1)
    assert await conn.fetchval("SELECT qty FROM ap_total") == 61

    # A cursor: asyncpg binds a portal and fetches it in pieces (Execute with a row limit).
    async with conn.transaction():
        ids = [r["id"] async for r in conn.cursor("SELECT id FROM ap_items ORDER BY id", prefetch=1)]
    assert ids == [1, 2, 3], ids

    stmt = await conn.prepare("SELECT name FROM ap_items WHERE qty > $1 ORDER BY name")
    assert [r["name"] for r in await stmt.fetch(15)] == ["b", "c"]

    # SUBSCRIBE through a cursor.
    writer = await asyncpg.connect(DSN)
    async with conn.transaction():
        await conn.execute("DECLARE ap_sub CURSOR FOR SUBSCRIBE ap_total WITH (SNAPSHOT = false)")
        await writer.execute("INSERT INTO ap_items VALUES (5, 'e', 5)")
        changes = []
        while len(changes) < 2:
            got = await conn.fetch("FETCH ALL ap_sub WITH (timeout = '10s')")
            assert got, "no change within 10 s"
            changes.extend(got)
    # n 3 -> 4, qty 61 -> 66
    assert sorted((r["weir_diff"], r["n"], r["qty"]) for r in changes) == [(-1, 3, 61), (1, 4, 66)], changes
    await writer.close()

    await conn.execute("DROP MATERIALIZED VIEW ap_total")
    await conn.execute("DROP TABLE ap_items")
    await conn.close()
    print("asyncpg: ok")


asyncio.run(main())
