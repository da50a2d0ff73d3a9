// Runs the real Neo4j 5 database engine (the community jars Maven fetched, see pom.xml) with its
// Bolt connector on 127.0.0.1 only and authentication on, for development and CI.
//
//   java -cp 'LIB/*:CLASSES' Launcher HOME PORT
//
// The password of the `neo4j` user comes from TOOLGRAPH_NEO4J_PASSWORD or the file named by
// TOOLGRAPH_NEO4J_PASSWORD_FILE, never from the command line (which `ps` shows). When Bolt answers
// and the password is set, HOME/ready holds the port. SIGTERM (or the end of the process whose id is
// in TOOLGRAPH_NEO4J_PARENT_PID, when given) shuts the database down cleanly.

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.io.ByteUnit;

public final class Launcher {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Launcher HOME PORT");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int port = Integer.parseInt(args[1]);
        String password = password();
        Path ready = home.resolve("ready");
        Files.deleteIfExists(ready);

        long pageCacheMib = Long.parseLong(env("TOOLGRAPH_NEO4J_PAGECACHE_MB", "256"));
        long txTimeoutS = Long.parseLong(env("TOOLGRAPH_NEO4J_TX_TIMEOUT_S", "600"));
        long txMemoryMib = Long.parseLong(env("TOOLGRAPH_NEO4J_TX_MEMORY_MB", "512"));
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
                .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .setConfig(GraphDatabaseSettings.auth_enabled, true)
                .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(pageCacheMib))
                // A server-side ceiling for every transaction; clients ask for shorter ones.
                .setConfig(GraphDatabaseSettings.transaction_timeout, Duration.ofSeconds(txTimeoutS))
                // A memory ceiling for every transaction (db.memory.transaction.max): a query that
                // builds a huge value (collect over millions of rows) fails fast instead of filling
                // the heap, and the daemon never receives it.
                .setConfig(GraphDatabaseSettings.memory_transaction_max_size, ByteUnit.mebiBytes(txMemoryMib))
                .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                .setConfig(GraphDatabaseSettings.keep_logical_logs, "2 files")
                .build();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                Files.deleteIfExists(ready);
            } catch (Exception ignored) {
                // shutting down anyway
            }
            dbms.shutdown();
        }, "neo4j-shutdown"));

        setPassword(dbms, password);
        watchParent();
        Files.writeString(ready, Integer.toString(port), StandardCharsets.UTF_8);
        System.out.println("neo4j " + org.neo4j.kernel.internal.Version.getNeo4jVersion()
                + " listening on bolt://127.0.0.1:" + port + " (home " + home + ")");
        Thread.currentThread().join();
    }

    /** The `neo4j` user gets the configured password, with no change required at first login. */
    private static void setPassword(DatabaseManagementService dbms, String password) {
        try {
            dbms.database("system").executeTransactionally(
                    "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED", Map.of("password", password));
        } catch (RuntimeException e) {
            // A restart over the same data: the password is already the configured one.
            if (!String.valueOf(e.getMessage()).contains("cannot be the same")) {
                throw e;
            }
        }
    }

    private static String password() throws Exception {
        String p = System.getenv("TOOLGRAPH_NEO4J_PASSWORD");
        if (p == null) {
            String file = System.getenv("TOOLGRAPH_NEO4J_PASSWORD_FILE");
            if (file == null) {
                System.err.println("set TOOLGRAPH_NEO4J_PASSWORD or TOOLGRAPH_NEO4J_PASSWORD_FILE");
                System.exit(2);
            }
            p = Files.readString(Path.of(file), StandardCharsets.UTF_8).strip();
        }
        if (p.length() < 8) {
            System.err.println("the Neo4j password must have at least 8 characters");
            System.exit(2);
        }
        return p;
    }

    /** Exit (cleanly, through the shutdown hook) when the process that started us is gone. */
    private static void watchParent() {
        String pid = System.getenv("TOOLGRAPH_NEO4J_PARENT_PID");
        if (pid == null || pid.isEmpty()) {
            return;
        }
        Thread t = new Thread(() -> {
            var parent = ProcessHandle.of(Long.parseLong(pid));
            while (parent.map(ProcessHandle::isAlive).orElse(false)) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
            }
            System.exit(0);
        }, "parent-watch");
        t.setDaemon(true);
        t.start();
    }

    private static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? fallback : v;
    }
}
