"""pgcli's start-up: the catalog queries pgcli (through pgspecial and its PGExecute) runs for
its completions when it connects: schemas, tables, views, columns, functions, data types,
search path, and a \\d of a table. Run by tests/drivers.rs with WEIR_DSN set."""

import os

import psycopg
from pgcli.pgexecute import PGExecute
from pgspecial.main import PGSpecial

DSN = os.environ["WEIR_DSN"]


def main():
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("CREATE TABLE pc_items (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)")
        conn.execute("CREATE MATERIALIZED VIEW pc_names AS SELECT name, COUNT(*) AS n FROM pc_items GROUP BY name")
    ex = PGExecute(dsn=DSN)
    assert "public" in list(ex.schemata()), list(ex.schemata())
    assert ("public", "pc_items") in list(ex.tables()), list(ex.tables())
    # views() lists views and materialized views.
    assert ("public", "pc_names") in list(ex.views()), list(ex.views())
    cols = [c[:3] for c in ex.table_columns() if c[1] == "pc_items"]
    assert [c[2] for c in cols] == ["id", "name"], cols
    list(ex.functions())
    list(ex.datatypes())
    assert ex.search_path() == ["pg_catalog", "public"] or "public" in ex.search_path(), ex.search_path()
    # \d pc_items, as pgcli runs it (pgspecial).
    out = list(ex.run("\\d pc_items", pgspecial=PGSpecial()))
    assert out and out[0][1], out
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("DROP MATERIALIZED VIEW pc_names")
        conn.execute("DROP TABLE pc_items")
    print("pgcli: ok")


if __name__ == "__main__":
    main()
