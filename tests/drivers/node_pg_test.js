// node-postgres (pg) against Weir: connect, DDL, parameterised inserts and reads (extended
// protocol), a view, a transaction with ROLLBACK and COMMIT, introspection through
// information_schema, SUBSCRIBE through a cursor. Run by tests/drivers.rs with WEIR_DSN set.
const { Client } = require('pg');
const assert = require('assert');

async function main() {
  const client = new Client({ connectionString: process.env.WEIR_DSN });
  await client.connect();
  await client.query('CREATE TABLE np_items (id BIGINT, name STRING, price DOUBLE, PRIMARY KEY (id) NOT ENFORCED)');
  await client.query('CREATE MATERIALIZED VIEW np_sum AS SELECT COUNT(*) AS n, SUM(price) AS total FROM np_items');
  for (const [id, name, price] of [[1, 'a', 1.5], [2, 'b', 2.5]]) {
    await client.query('INSERT INTO np_items VALUES ($1, $2, $3)', [id, name, price]);
  }
  let res = await client.query('SELECT id, name, price FROM np_items WHERE id = $1', [2]);
  // bigint comes back as a string in node-postgres.
  assert.deepStrictEqual(res.rows, [{ id: '2', name: 'b', price: 2.5 }]);

  await client.query('BEGIN');
  await client.query('INSERT INTO np_items VALUES ($1, $2, $3)', [3, 'c', 100]);
  await client.query('ROLLBACK');
  await client.query('BEGIN');
  await client.query('INSERT INTO np_items VALUES ($1, $2, $3)', [4, 'd', 4]);
  await client.query('COMMIT');
  // 1.5 + 2.5 + 4
  res = await client.query('SELECT n, total FROM np_sum');
  assert.deepStrictEqual(res.rows, [{ n: '3', total: 8 }]);

  res = await client.query(
    "SELECT table_name, table_type FROM information_schema.tables WHERE table_name LIKE 'np_%' ORDER BY 1");
  assert.deepStrictEqual(res.rows, [{ table_name: 'np_items', table_type: 'BASE TABLE' }]);

  const writer = new Client({ connectionString: process.env.WEIR_DSN });
  await writer.connect();
  await client.query('BEGIN');
  await client.query('DECLARE np_sub CURSOR FOR SUBSCRIBE np_sum WITH (SNAPSHOT = false)');
  await writer.query('INSERT INTO np_items VALUES (5, $1, 2)', ['e']);
  const changes = [];
  while (changes.length < 2) {
    const got = await client.query("FETCH ALL np_sub WITH (timeout = '10s')");
    assert.ok(got.rows.length > 0, 'no change within 10 s');
    changes.push(...got.rows);
  }
  await client.query('COMMIT');
  const seen = changes.map((r) => [r.weir_diff, r.n, r.total]).sort();
  // n 3 -> 4, total 8 -> 10
  assert.deepStrictEqual(seen, [['-1', '3', 8], ['1', '4', 10]]);
  await writer.end();

  await client.query('DROP MATERIALIZED VIEW np_sum');
  await client.query('DROP TABLE np_items');
  await client.end();
  console.log('node-postgres: ok');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
