"""psycopg2 + SQLAlchemy 2 + pandas against Weir: engine connect (the dialect's start-up
queries), DDL and parameterised inserts through Core, the ORM (which inserts with RETURNING),
inspect() of tables, columns, views and materialized views, pandas.read_sql, and a rollback.
Run by tests/drivers.rs with WEIR_DSN set (a libpq URL)."""

import os
from decimal import Decimal

import pandas as pd
from sqlalchemy import BigInteger, String, create_engine, inspect, select, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

URL = os.environ["WEIR_DSN"].replace("postgresql://", "postgresql+psycopg2://", 1)


class Base(DeclarativeBase):
    pass


class Item(Base):
    __tablename__ = "sa_items"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String)
    qty: Mapped[int] = mapped_column(BigInteger)


def main():
    engine = create_engine(URL)
    # Weir runs DDL outside transaction blocks (25001 inside one): autocommit for it.
    ddl = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    ddl.execute(text("CREATE TABLE sa_items (id BIGINT, name STRING, qty BIGINT, PRIMARY KEY (id) NOT ENFORCED)"))
    ddl.execute(text("CREATE MATERIALIZED VIEW sa_stock AS SELECT name, SUM(qty) AS qty FROM sa_items GROUP BY name"))
    ddl.execute(text("CREATE VIEW sa_big AS SELECT id, name FROM sa_items WHERE qty > 5"))
    # DDL in a block is refused, not silently committed.
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE sa_other (x BIGINT)"))
        raise AssertionError("DDL ran in a transaction block")
    except Exception as e:  # sqlalchemy.exc.InternalError wrapping psycopg2's ActiveSqlTransaction
        assert getattr(getattr(e, "orig", None), "pgcode", None) == "25001", e
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO sa_items (id, name, qty) VALUES (:id, :name, :qty)"),
            [{"id": 1, "name": "bolt", "qty": 10}, {"id": 2, "name": "nut", "qty": 3}],
        )

    # The ORM: add, flush, commit; a rolled-back session leaves nothing.
    with Session(engine) as session:
        session.add_all([Item(id=3, name="bolt", qty=4), Item(id=4, name="washer", qty=7)])
        session.commit()
    with Session(engine) as session:
        session.add(Item(id=5, name="gone", qty=1))
        session.flush()
        session.rollback()
    with Session(engine) as session:
        names = session.scalars(select(Item.name).order_by(Item.id)).all()
        assert names == ["bolt", "nut", "bolt", "washer"], names
        bolt = session.get(Item, 1)
        bolt.qty = 11
        session.commit()

    # bolt: 11 + 4
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT name, qty FROM sa_stock ORDER BY name")).all()
        assert [tuple(r) for r in rows] == [("bolt", 15), ("nut", 3), ("washer", 7)], rows

    insp = inspect(engine)
    assert "sa_items" in insp.get_table_names(), insp.get_table_names()
    assert "sa_stock" not in insp.get_table_names()
    cols = [(c["name"], str(c["type"])) for c in insp.get_columns("sa_items")]
    assert cols == [("id", "BIGINT"), ("name", "TEXT"), ("qty", "BIGINT")], cols
    assert insp.get_pk_constraint("sa_items")["constrained_columns"] == ["id"], insp.get_pk_constraint("sa_items")
    assert "sa_big" in insp.get_view_names(), insp.get_view_names()
    assert "sa_stock" in insp.get_materialized_view_names(), insp.get_materialized_view_names()

    frame = pd.read_sql("SELECT name, qty FROM sa_stock ORDER BY name", engine)
    assert list(frame["name"]) == ["bolt", "nut", "washer"] and list(frame["qty"]) == [15, 3, 7], frame
    frame = pd.read_sql(text("SELECT id FROM sa_big ORDER BY id"), engine)
    assert list(frame["id"]) == [1, 4], frame

    ddl.execute(text("DROP VIEW sa_big"))
    ddl.execute(text("DROP MATERIALIZED VIEW sa_stock"))
    ddl.execute(text("DROP TABLE sa_items"))
    ddl.close()
    print("sqlalchemy: ok")


if __name__ == "__main__":
    main()
