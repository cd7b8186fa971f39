// A Kafka Streams application (Apache Kafka's kafka-streams from Maven Central) with three
// topologies, run against Sluice and Apache Kafka by tests/support/streams_app.py and shown in
// docs/streams.md.
//
//   java -cp '.cache/java/streams/*' tools/java/StreamsApp.java <topology> --bootstrap H:P
//        --application-id A --input T --output O [--table T] [--state-dir D]
//        [--log-level warn|info|debug] [--config key=value]...
//
// Topologies (keys and values are UTF-8 strings, on input and output):
//   wordcount  input lines -> words (lower case, split on non-word characters) -> re-keyed by
//              word through the repartition topic <A>-words-repartition -> count() in the state
//              store "counts" (changelog <A>-counts-changelog) -> output: word -> count, one record
//              per update (the record cache is off, so a word seen N times gives 1, 2, ..., N).
//   windowed   input key -> an integer value; tumbling windows of 10 s on the records' own
//              timestamps (grace 1 h, so no record of a test is late) summed per key in the window
//              store "sums" -> output: "<key>@<window start ms>" -> sum, one record per update.
//   join       input (a stream of orders, key = customer id, value = item) left-joined with the
//              table --table (key = customer id, value = name, store "customers") -> output:
//              customer id -> "<item>/<name>" ("<item>/null" when the customer is unknown).
//              Input and table must have the same partition count (co-partitioned).
//
// Settings: processing.guarantee=exactly_once_v2, commit.interval.ms=100,
// statestore.cache.max.bytes=0, num.stream.threads=1, default serdes String; every --config
// key=value is given to Streams as it is and overrides these (e.g. replication.factor=3,
// session.timeout.ms=6000, repartition.purge.interval.ms=1000).
//
// Output: JSON, one object per line, on stdout:
//   {"state":"RUNNING","active":["0_0","1_2"],"standby":[],"threads":["<A>-<process id>-StreamThread-1"]}
//       on every state change (tasks and thread names listed when RUNNING; with
//       exactly_once_v2 thread i's transactional.id is "<A>-<process id>-<i>")
//   {"error":"<ExceptionClass>","message":"..."}                an uncaught exception (the app
//                                                             then shuts down and exits 1)
//   {"closed":true}                                             after SIGTERM: Streams closed
// It runs until SIGTERM (closes cleanly: the open transaction is committed or aborted) or until
// Streams fails (exit 1). Exit 2 for bad usage. The log (slf4j-simple) goes to stderr.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.*;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

public class StreamsApp {
    static final Map<String, String> opts = new HashMap<>();
    static final List<String> positional = new ArrayList<>();
    static final Properties overrides = new Properties();
    static final Duration WINDOW = Duration.ofSeconds(10);
    static final Duration GRACE = Duration.ofHours(1);

    public static void main(String[] argv) throws InterruptedException {
        Properties props;
        Topology topology;
        try {
            parse(argv);
            // slf4j-simple reads these once, at its first logger: set before Streams starts.
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                    opts.getOrDefault("log-level", "warn"));
            System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
            System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
            if (positional.size() != 1) throw new UsageError("give one topology: wordcount, windowed or join");
            props = settings();
            topology = switch (positional.get(0)) {
                case "wordcount" -> wordCount();
                case "windowed" -> windowed();
                case "join" -> join();
                default -> throw new UsageError("unknown topology " + positional.get(0));
            };
        } catch (UsageError e) {
            System.err.println("usage error: " + e.getMessage() + " (see the top of StreamsApp.java)");
            System.exit(2);
            return;
        }
        run(topology, props);
    }

    static Properties settings() {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, need("bootstrap"));
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, need("application-id"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        p.put("processing.exception.handler.global.enabled", "true");  // 5.0 default; no warning
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        if (opts.containsKey("state-dir")) p.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        p.putAll(overrides);
        return p;
    }

    // ---------------------------------------------------------------- topologies

    static Topology wordCount() {
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(need("input"))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.as("words"))
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts"))
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(need("output"));
        return b.build();
    }

    static Topology windowed() {
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(need("input"))
                .groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW, GRACE))
                .aggregate(
                        () -> 0L,
                        (key, value, sum) -> sum + Long.parseLong(value.trim()),
                        Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("sums")
                                .withValueSerde(Serdes.Long()))
                .toStream((windowed, sum) -> windowed.key() + "@" + windowed.window().start())
                .mapValues(sum -> Long.toString(sum))
                .to(need("output"));
        return b.build();
    }

    static Topology join() {
        StreamsBuilder b = new StreamsBuilder();
        KTable<String, String> customers = b.table(need("table"),
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("customers"));
        b.<String, String>stream(need("input"))
                .leftJoin(customers, (item, name) -> item + "/" + name)
                .to(need("output"));
        return b.build();
    }

    // ---------------------------------------------------------------- running

    static void run(Topology topology, Properties props) throws InterruptedException {
        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch finished = new CountDownLatch(1);
        AtomicBoolean failed = new AtomicBoolean(false);
        AtomicBoolean stopping = new AtomicBoolean(false);
        streams.setUncaughtExceptionHandler(e -> {
            Throwable c = e.getCause() != null && e.getClass().getSimpleName().equals("StreamsException")
                    ? e.getCause() : e;
            emit(map("error", c.getClass().getSimpleName(), "message", String.valueOf(c.getMessage())));
            failed.set(true);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            Map<String, Object> line = map("state", now.name());
            if (now == KafkaStreams.State.RUNNING) {
                List<String> active = new ArrayList<>();
                List<String> standby = new ArrayList<>();
                List<String> threads = new ArrayList<>();
                for (var thread : streams.metadataForLocalThreads()) {
                    thread.activeTasks().forEach(t -> active.add(t.taskId().toString()));
                    thread.standbyTasks().forEach(t -> standby.add(t.taskId().toString()));
                    threads.add(thread.threadName());
                }
                Collections.sort(active);
                Collections.sort(standby);
                line.put("active", active);
                line.put("standby", standby);
                line.put("threads", threads);
            }
            emit(line);
            if (now == KafkaStreams.State.ERROR) failed.set(true);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                finished.countDown();
            }
        });
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            streams.close(Duration.ofSeconds(30));
            emit(map("closed", true));
            try {
                main.join(5000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        streams.start();
        finished.await();
        if (stopping.get()) return;  // SIGTERM: the shutdown hook closes Streams and exits
        streams.close(Duration.ofSeconds(30));
        System.out.flush();
        System.exit(failed.get() ? 1 : 0);
    }

    // ---------------------------------------------------------------- arguments

    static class UsageError extends RuntimeException {
        UsageError(String m) { super(m); }
    }

    static void parse(String[] argv) {
        for (int i = 0; i < argv.length; i++) {
            String s = argv[i];
            if (!s.startsWith("--")) { positional.add(s); continue; }
            if (i + 1 >= argv.length) throw new UsageError(s + " needs a value");
            String k = s.substring(2);
            String v = argv[++i];
            if (k.equals("config")) {
                String[] kv = v.split("=", 2);
                if (kv.length != 2) throw new UsageError("--config needs key=value");
                overrides.put(kv[0], kv[1]);
            } else {
                opts.put(k, v);
            }
        }
    }

    static String need(String k) {
        String v = opts.get(k);
        if (v == null) throw new UsageError("--" + k + " is required");
        return v;
    }

    // ---------------------------------------------------------------- JSON output

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static synchronized void emit(Object o) {
        StringBuilder sb = new StringBuilder();
        json(sb, o);
        System.out.println(sb);
        System.out.flush();
    }

    static void json(StringBuilder sb, Object o) {
        if (o == null) {
            sb.append("null");
        } else if (o instanceof Number || o instanceof Boolean) {
            sb.append(o);
        } else if (o instanceof Map<?, ?> m) {
            sb.append('{');
            String sep = "";
            for (var e : m.entrySet()) {
                sb.append(sep);
                json(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
                sep = ",";
            }
            sb.append('}');
        } else if (o instanceof Collection<?> c) {
            sb.append('[');
            String sep = "";
            for (Object x : c) {
                sb.append(sep);
                json(sb, x);
                sep = ",";
            }
            sb.append(']');
        } else {
            String s = o.toString();
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char ch = s.charAt(i);
                switch (ch) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
                        else sb.append(ch);
                    }
                }
            }
            sb.append('"');
        }
    }
}
