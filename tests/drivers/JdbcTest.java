// pgjdbc against Weir: connect (prepareThreshold=1: server-side prepared statements from the
// first use), DDL, a batch of parameterised inserts, a view, DatabaseMetaData.getTables and
// getColumns (what DBeaver, Metabase and Grafana read), a transaction with rollback and commit.
// Run by tests/drivers.rs: java -cp postgresql.jar JdbcTest.java URL.
import java.sql.*;
import java.util.*;

public class JdbcTest {
    static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], "weir", "")) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE jd_items (id BIGINT, name STRING, qty INT, PRIMARY KEY (id) NOT ENFORCED)");
                s.execute("CREATE MATERIALIZED VIEW jd_stock AS SELECT name, SUM(qty) AS qty FROM jd_items GROUP BY name");
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO jd_items VALUES (?, ?, ?)")) {
                Object[][] rows = {{1L, "bolt", 10}, {2L, "nut", 3}, {3L, "bolt", 4}};
                for (Object[] r : rows) {
                    p.setLong(1, (Long) r[0]);
                    p.setString(2, (String) r[1]);
                    p.setInt(3, (Integer) r[2]);
                    p.addBatch();
                }
                p.executeBatch();
            }
            try (PreparedStatement p = c.prepareStatement("SELECT qty FROM jd_stock WHERE name = ?")) {
                for (int i = 0; i < 3; i++) {  // the server-side statement is reused
                    p.setString(1, "bolt");
                    try (ResultSet rs = p.executeQuery()) {
                        check(rs.next() && rs.getLong(1) == 14, "bolt: 10 + 4");
                    }
                }
            }
            DatabaseMetaData md = c.getMetaData();
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, null, "jd_%", new String[] {"TABLE"})) {
                while (rs.next()) tables.add(rs.getString("TABLE_NAME"));
            }
            check(tables.equals(List.of("jd_items")), "getTables: " + tables);
            List<String> views = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, null, "jd_%", new String[] {"MATERIALIZED VIEW"})) {
                while (rs.next()) views.add(rs.getString("TABLE_NAME"));
            }
            check(views.equals(List.of("jd_stock")), "materialized views: " + views);
            List<String> cols = new ArrayList<>();
            try (ResultSet rs = md.getColumns(null, "public", "jd_items", null)) {
                while (rs.next()) cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME"));
            }
            check(cols.equals(List.of("id:int8", "name:text", "qty:int4")), "getColumns: " + cols);
            try (ResultSet rs = md.getPrimaryKeys(null, "public", "jd_items")) {
                check(rs.next() && rs.getString("COLUMN_NAME").equals("id"), "getPrimaryKeys");
            }

            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) {
                s.executeUpdate("INSERT INTO jd_items VALUES (4, 'gone', 1)");
                c.rollback();
                s.executeUpdate("INSERT INTO jd_items VALUES (5, 'washer', 7)");
                c.commit();
            }
            c.setAutoCommit(true);
            try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT name FROM jd_items ORDER BY id")) {
                List<String> names = new ArrayList<>();
                while (rs.next()) names.add(rs.getString(1));
                check(names.equals(List.of("bolt", "nut", "bolt", "washer")), "after rollback and commit: " + names);
            }
            try (Statement s = c.createStatement()) {
                s.execute("DROP MATERIALIZED VIEW jd_stock");
                s.execute("DROP TABLE jd_items");
            }
        }
        System.out.println("pgjdbc: ok");
    }
}
