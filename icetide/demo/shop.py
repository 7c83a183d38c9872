"""A live shop database for the demo and the capture tests: tables, seed rows, workload.

:class:`ShopWorkload` writes to a real MySQL/MariaDB server the way an application does
— single-row statements, multi-row transactions, rollbacks, a primary-key update, and a
10,000-row transaction — from a background thread, until stopped. It is the only writer,
so it knows which keys exist and its changes are deterministic for a seed.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pymysql

from icetide.schema.model import SinkSettings, TableSchema
from icetide.schema.types import Column, parse_type

DDL = (
    """CREATE TABLE customers (
        id INT PRIMARY KEY,
        name VARCHAR(100) NOT NULL,
        email VARCHAR(200),
        balance DECIMAL(12,2),
        vip TINYINT(1),
        updated_at DATETIME(6)
    )""",
    """CREATE TABLE orders (
        id BIGINT PRIMARY KEY,
        customer_id INT,
        amount DECIMAL(10,2),
        status ENUM('new','paid','shipped','cancelled'),
        placed_at TIMESTAMP(6) NULL,
        note TEXT
    )""",
)
BIG_TRANSACTION_ROWS = 10_000


def _schema(
    table: str, columns: list[tuple[str, str, str | None]], required: tuple[str, ...] = ()
) -> TableSchema:
    # The first column is the key; ``required`` are the others the DDL declares NOT NULL,
    # so the schema says what the catalog says and detection finds no change in them.
    built = tuple(
        Column(id=i, name=name, type=parse_type(kind), nullable=i > 1 and name not in required)
        for i, (name, kind, _) in enumerate(columns, start=1)
    )
    hints = {i: logical for i, (_, _, logical) in enumerate(columns, start=1) if logical}
    return TableSchema(table, built, (columns[0][0],), sink=SinkSettings(hints))


def shop_schemas() -> list[TableSchema]:
    """The icetide schemas of the shop tables: what ``infer_table_schema`` would write,
    except ``vip``, declared ``boolean`` (a ``TINYINT(1)`` may be, see
    :func:`icetide.schema.convert.mysql.accepts`)."""
    return [
        _schema(
            "customers",
            [
                ("id", "int", None),
                ("name", "string", None),
                ("email", "string", None),
                ("balance", "decimal(12,2)", None),
                ("vip", "boolean", None),
                ("updated_at", "timestamp", "io.debezium.time.MicroTimestamp"),
            ],
            required=("name",),
        ),
        _schema(
            "orders",
            [
                ("id", "long", None),
                ("customer_id", "int", None),
                ("amount", "decimal(10,2)", None),
                ("status", "string", None),
                ("placed_at", "timestamptz", "io.debezium.time.ZonedTimestamp"),
                ("note", "string", None),
            ],
        ),
    ]


@dataclass
class ShopCounts:
    """What the workload did, for progress lines and assertions."""

    statements: int = 0
    transactions: int = 0
    rollbacks: int = 0
    key_updates: int = 0
    big_transactions: int = 0


@dataclass
class ShopWorkload:
    """Seed the shop and change it from a background thread until :meth:`stop`."""

    connect: Callable[[], Any]
    """A new autocommit pymysql connection to the shop database."""
    seed: int = 7
    customers: int = 2_000
    orders: int = 12_000
    pause: float = 0.002
    """Seconds between statements, so the workload leaves CPU to Spark."""
    counts: ShopCounts = field(default_factory=ShopCounts)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def __post_init__(self) -> None:
        self._rng = random.Random(f"icetide-shop-{self.seed}")
        self._customer_ids: list[int] = []
        self._order_ids: list[int] = []
        self._next_customer = 1
        self._next_order = 1

    # --- seeding -------------------------------------------------------------------------

    def create(self) -> None:
        """Create the tables and insert the seed rows."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                for ddl in DDL:
                    cur.execute(ddl)
                for start in range(0, self.customers, 1000):
                    rows = [self._customer() for _ in range(min(1000, self.customers - start))]
                    cur.executemany("INSERT INTO customers VALUES (%s, %s, %s, %s, %s, %s)", rows)
                for start in range(0, self.orders, 1000):
                    rows = [self._order() for _ in range(min(1000, self.orders - start))]
                    cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s, %s)", rows)
        finally:
            conn.close()

    def _customer(self) -> tuple[Any, ...]:
        cid = self._next_customer
        self._next_customer += 1
        self._customer_ids.append(cid)
        rng = self._rng
        return (
            cid,
            f"customer {cid} {rng.choice(['Ana', 'Bo', 'Chloé', 'Dmitri', 'Eun-ji'])}",
            None if rng.random() < 0.1 else f"c{cid}@example.com",
            Decimal(rng.randint(-50_000, 5_000_000)) / 100,
            rng.random() < 0.2,
            f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 12:3{rng.randint(0, 9)}:00."
            f"{rng.randint(0, 999_999):06d}",
        )

    def _order(self) -> tuple[Any, ...]:
        oid = self._next_order
        self._next_order += 1
        self._order_ids.append(oid)
        rng = self._rng
        return (
            oid,
            rng.choice(self._customer_ids) if self._customer_ids else None,
            Decimal(rng.randint(1, 100_000)) / 100,
            rng.choice(["new", "paid", "shipped"]),
            f"2025-0{rng.randint(1, 9)}-2{rng.randint(0, 8)} 0{rng.randint(0, 9)}:15:00."
            f"{rng.randint(0, 999_999):06d}",
            None if rng.random() < 0.5 else "ring twice ✓",
        )

    # --- the live workload ---------------------------------------------------------------

    def start(self) -> None:
        """Begin changing the shop in a background thread."""
        self._thread = threading.Thread(target=self._run, name="shop-workload", daemon=True)
        self._thread.start()

    def stop(self) -> ShopCounts:
        """Stop the workload; re-raise whatever error stopped it early."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self.counts

    def _run(self) -> None:
        conn = self.connect()
        try:
            step = 0
            while not self._stop.is_set():
                step += 1
                self._step(conn, step)
                time.sleep(self.pause)
        except BaseException as exc:  # surfaced by stop()
            self._error = exc
        finally:
            conn.close()

    def _step(self, conn: Any, step: int) -> None:
        rng = self._rng
        with conn.cursor() as cur:
            if step == 50:
                self._big_transaction(conn, cur)
            elif step % 97 == 0:
                self._key_update(cur)
            elif rng.random() < 0.15:
                self._transaction(conn, cur, commit=rng.random() > 0.1)
            else:
                self._statement(cur)

    def _statement(self, cur: Any) -> None:
        rng, choice = self._rng, self._rng.random()
        if choice < 0.25:
            cur.execute("INSERT INTO customers VALUES (%s, %s, %s, %s, %s, %s)", self._customer())
        elif choice < 0.45:
            cur.execute("INSERT INTO orders VALUES (%s, %s, %s, %s, %s, %s)", self._order())
        elif choice < 0.65 and self._customer_ids:
            cur.execute(
                "UPDATE customers SET balance = balance + %s, email = %s, "
                "updated_at = NOW(6) WHERE id = %s",
                (
                    Decimal(rng.randint(-1000, 1000)) / 100,
                    rng.choice([None, "new@example.com"]),
                    rng.choice(self._customer_ids),
                ),
            )
        elif choice < 0.85 and self._order_ids:
            cur.execute(
                "UPDATE orders SET status = %s, placed_at = NOW(6) WHERE id = %s",
                (rng.choice(["paid", "shipped", "cancelled"]), rng.choice(self._order_ids)),
            )
        elif choice < 0.93 and len(self._order_ids) > 100:
            oid = self._order_ids.pop(rng.randrange(len(self._order_ids)))
            cur.execute("DELETE FROM orders WHERE id = %s", (oid,))
        elif len(self._customer_ids) > 100:
            cid = self._customer_ids.pop(rng.randrange(len(self._customer_ids)))
            cur.execute("DELETE FROM customers WHERE id = %s", (cid,))
        self.counts.statements += 1

    def _transaction(self, conn: Any, cur: Any, *, commit: bool) -> None:
        saved = (
            list(self._customer_ids),
            list(self._order_ids),
            self._next_customer,
            self._next_order,
        )
        conn.begin()
        for _ in range(self._rng.randint(2, 8)):
            self._statement(cur)
        if commit:
            conn.commit()
            self.counts.transactions += 1
        else:
            conn.rollback()
            self._customer_ids, self._order_ids, self._next_customer, self._next_order = saved
            self.counts.rollbacks += 1

    def _key_update(self, cur: Any) -> None:
        if not self._customer_ids:
            return
        old = self._customer_ids.pop(self._rng.randrange(len(self._customer_ids)))
        new = self._next_customer
        self._next_customer += 1
        cur.execute("UPDATE customers SET id = %s WHERE id = %s", (new, old))
        self._customer_ids.append(new)
        self.counts.key_updates += 1

    def _big_transaction(self, conn: Any, cur: Any) -> None:
        conn.begin()
        cur.execute(
            "UPDATE orders SET amount = amount + 1, note = 'bulk repricing' WHERE id <= %s",
            (BIG_TRANSACTION_ROWS,),
        )
        conn.commit()
        self.counts.big_transactions += 1


def shop_connector(settings: dict[str, Any], database: str = "shop") -> Callable[[], Any]:
    """A factory of autocommit pymysql connections to the shop's ``database``."""

    def connect() -> Any:
        return pymysql.connect(**settings, database=database, charset="utf8mb4", autocommit=True)

    return connect
