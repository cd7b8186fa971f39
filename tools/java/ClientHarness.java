// Apache Kafka's reference Java client, driven from the Sluice tests (tests/support/java_client.py).
//
//   java -cp '.cache/java/clients/*' tools/java/ClientHarness.java <command> --bootstrap H:P ...
//
// Output: JSON, one object per line, on stdout. Exit 0 on success; on failure a last line
// {"error": "<ExceptionClass>", "message": "..."} on stdout, the same message on stderr, exit 1
// (exit 2 for bad usage). Lines printed before a failure (records already consumed) stay valid.
//
//   produce --topic T --count N [--acks all|1|0] [--compression none|gzip|snappy|lz4|zstd]
//           [--key-prefix k] [--headers]
//       Default (idempotent) producer. Record i has key <prefix><i>, value v<i> and, with --headers,
//       header h=<i>. Waits for every ack, then prints ONE LINE PER RECORD in send order:
//       {"index":i,"partition":p,"offset":o,"key":"k0","timestamp":ms}
//   consume --topic T --group G --count N [--timeout-ms M (30000)]
//       Subscribes (auto.offset.reset=earliest, no auto commit), polls until N records or timeout,
//       commits synchronously, prints one line per record:
//       {"partition":p,"offset":o,"key":"k0","value":"v0","timestamp":ms,"headers":[["h","0"]]}
//       Fewer than N records by the timeout is a failure (the records read are still printed).
//   txn commit|abort --topic T --transactional-id X --count N
//       A transactional producer: initTransactions, one transaction of N records (values
//       <X>-<i>, partition i % partitions), then commit or abort -> {"outcome":"commit"}
//   txn zombie --topic T --transactional-id X
//       Producer A opens a transaction and sends a record; producer B of the same id starts
//       (fencing A), commits one record; A then sends and commits
//       -> {"successor":"committed","zombie_error":"<ExceptionClass>"}
//   txn timeout --topic T --transactional-id X --timeout-ms M --wait-ms W
//       A transaction with transaction.timeout.ms=M, idle W ms after its send, then commit
//       -> {"commit_error":"<ExceptionClass>" or null}
//   txn offsets --topic T --transactional-id X --group G --offset O [--abort]
//       One transaction with one record and sendOffsetsToTransaction({T-0: O}, G), committed
//       (aborted with --abort) -> {"outcome":"commit"}
//   txn perf --topic T --transactional-id X --count N --size S --per-txn K
//       N records of S bytes (partition 0) in transactions of K records, each committed;
//       sends are asynchronous inside a transaction. Timed from the first send to the last
//       commit (after initTransactions) -> {"records":N,"seconds":s,"transactions":t}
//   admin create-topic T --partitions P --replication-factor R   -> {"created":T}
//   admin describe-topic T      -> {"topic":T,"topic_id":..,"partitions":[{"partition":0,"leader":1,
//                                   "replicas":[1],"isr":[1]}]}
//   admin list-topics           -> {"topics":[...]}  (sorted, internal topics excluded)
//   admin delete-topic T        -> {"deleted":T}
//   admin alter-config T k=v    -> {"altered":T,"config":{"k":"v"}}  (incremental SET)
//   admin describe-config T     -> {"topic":T,"configs":{k:v},"sources":{k:source}}
//
// Every command also takes --bootstrap H:P (required) and any number of --config key=value, passed
// to the Java client verbatim (e.g. --config group.protocol=consumer).
// Strings are decoded as UTF-8; a null key, value or header value is JSON null.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.*;

public class ClientHarness {
    static final Map<String, String> opts = new HashMap<>();
    static final List<String> positional = new ArrayList<>();
    static final Properties props = new Properties();

    public static void main(String[] argv) {
        // slf4j-simple: the client's own logging to stderr, warnings only. Must precede any logger.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        int code;
        try {
            parse(argv);
            if (positional.isEmpty()) throw new UsageError("missing command");
            props.put("bootstrap.servers", need("bootstrap"));
            String cmd = positional.get(0);
            switch (cmd) {
                case "produce" -> produce();
                case "consume" -> consume();
                case "admin" -> admin();
                case "txn" -> txn();
                default -> throw new UsageError("unknown command " + cmd);
            }
            code = 0;
        } catch (UsageError e) {
            System.err.println("usage error: " + e.getMessage() + " (see the top of ClientHarness.java)");
            code = 2;
        } catch (Throwable t) {
            Throwable c = (t instanceof ExecutionException && t.getCause() != null) ? t.getCause() : t;
            String name = c.getClass().getSimpleName();
            emit(map("error", name, "message", String.valueOf(c.getMessage())));
            System.err.println("error: " + name + ": " + c.getMessage());
            code = 1;
        }
        System.out.flush();
        System.exit(code);
    }

    // ---------------------------------------------------------------- produce

    static void produce() throws Exception {
        String topic = need("topic");
        int count = Integer.parseInt(need("count"));
        String prefix = opts.getOrDefault("key-prefix", "k");
        boolean headers = opts.containsKey("headers");
        if (opts.containsKey("acks")) props.put("acks", opts.get("acks"));
        props.put("compression.type", opts.getOrDefault("compression", "none"));
        props.putIfAbsent("delivery.timeout.ms", "30000");
        props.putIfAbsent("request.timeout.ms", "10000");
        props.putIfAbsent("max.block.ms", "30000");
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (var p = new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                var r = new ProducerRecord<String, String>(topic, prefix + i, "v" + i);
                if (headers) r.headers().add("h", String.valueOf(i).getBytes(StandardCharsets.UTF_8));
                acks.add(p.send(r));
            }
            p.flush();
            for (int i = 0; i < count; i++) {
                RecordMetadata md = acks.get(i).get();
                emit(map("index", i, "partition", md.partition(), "offset", md.offset(),
                        "key", prefix + i, "timestamp", md.timestamp()));
            }
        }
    }

    // ---------------------------------------------------------------- consume

    static void consume() {
        String topic = need("topic");
        int count = Integer.parseInt(need("count"));
        long timeoutMs = Long.parseLong(opts.getOrDefault("timeout-ms", "30000"));
        props.put("group.id", need("group"));
        props.putIfAbsent("auto.offset.reset", "earliest");
        props.putIfAbsent("enable.auto.commit", "false");
        int got = 0;
        try (var c = new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (got < count && System.currentTimeMillis() < deadline) {
                long left = Math.max(1, deadline - System.currentTimeMillis());
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(Math.min(left, 500)))) {
                    List<Object> hs = new ArrayList<>();
                    for (Header h : r.headers())
                        hs.add(Arrays.asList(h.key(), h.value() == null ? null
                                : new String(h.value(), StandardCharsets.UTF_8)));
                    emit(map("partition", r.partition(), "offset", r.offset(), "key", r.key(),
                            "value", r.value(), "timestamp", r.timestamp(), "headers", hs));
                    got++;
                }
            }
            c.commitSync(Duration.ofMillis(Math.max(timeoutMs, 10000)));
        }
        if (got < count)
            throw new IllegalStateException("consumed " + got + " of " + count + " records in " + timeoutMs + " ms");
    }

    // ---------------------------------------------------------------- transactions

    static KafkaProducer<String, String> txnProducer(String id) {
        Properties p = new Properties();
        p.putAll(props);
        p.put("transactional.id", id);
        p.putIfAbsent("max.block.ms", "30000");
        p.putIfAbsent("delivery.timeout.ms", "30000");
        p.putIfAbsent("request.timeout.ms", "10000");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static void txn() throws Exception {
        String mode = arg(1);
        String topic = need("topic");
        String id = need("transactional-id");
        switch (mode) {
            case "commit", "abort" -> {
                int count = Integer.parseInt(need("count"));
                try (var p = txnProducer(id)) {
                    p.initTransactions();
                    int partitions = p.partitionsFor(topic).size();
                    p.beginTransaction();
                    for (int i = 0; i < count; i++)
                        p.send(new ProducerRecord<>(topic, i % partitions, null, id + "-" + i));
                    p.flush();
                    if (mode.equals("commit")) p.commitTransaction(); else p.abortTransaction();
                }
                emit(map("outcome", mode));
            }
            case "zombie" -> {
                String zombieError = null;
                try (var a = txnProducer(id)) {
                    a.initTransactions();
                    a.beginTransaction();
                    a.send(new ProducerRecord<>(topic, 0, null, "zombie-open")).get();
                    try (var b = txnProducer(id)) {
                        b.initTransactions();
                        b.beginTransaction();
                        b.send(new ProducerRecord<>(topic, 0, null, "successor"));
                        b.commitTransaction();
                    }
                    try {
                        a.send(new ProducerRecord<>(topic, 0, null, "zombie-late")).get();
                        a.commitTransaction();
                    } catch (Exception e) {
                        Throwable c = (e instanceof ExecutionException && e.getCause() != null) ? e.getCause() : e;
                        zombieError = c.getClass().getSimpleName();
                    }
                }
                emit(map("successor", "committed", "zombie_error", zombieError));
            }
            case "timeout" -> {
                props.put("transaction.timeout.ms", need("timeout-ms"));
                long waitMs = Long.parseLong(need("wait-ms"));
                String commitError = null;
                try (var p = txnProducer(id)) {
                    p.initTransactions();
                    p.beginTransaction();
                    p.send(new ProducerRecord<>(topic, 0, null, "too-slow")).get();
                    Thread.sleep(waitMs);
                    try {
                        p.commitTransaction();
                    } catch (Exception e) {
                        commitError = e.getClass().getSimpleName();
                    }
                }
                emit(map("commit_error", commitError));
            }
            case "offsets" -> {
                String group = need("group");
                long offset = Long.parseLong(need("offset"));
                boolean abort = opts.containsKey("abort");
                try (var p = txnProducer(id)) {
                    p.initTransactions();
                    p.beginTransaction();
                    p.send(new ProducerRecord<>(topic, 0, null, "with-offsets"));
                    p.sendOffsetsToTransaction(
                            Map.of(new org.apache.kafka.common.TopicPartition(topic, 0),
                                    new OffsetAndMetadata(offset)),
                            new ConsumerGroupMetadata(group));
                    if (abort) p.abortTransaction(); else p.commitTransaction();
                }
                emit(map("outcome", abort ? "abort" : "commit"));
            }
            case "perf" -> {
                int count = Integer.parseInt(need("count"));
                int size = Integer.parseInt(need("size"));
                int perTxn = Integer.parseInt(need("per-txn"));
                props.putIfAbsent("linger.ms", "10");
                props.putIfAbsent("batch.size", "1000000");
                props.putIfAbsent("buffer.memory", "268435456");
                byte[] value = new byte[size];
                Arrays.fill(value, (byte) 'x');
                Properties p = new Properties();
                p.putAll(props);
                p.put("transactional.id", id);
                int transactions = 0;
                double seconds;
                try (var producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
                    producer.initTransactions();
                    long started = System.nanoTime();
                    for (int sent = 0; sent < count; ) {
                        producer.beginTransaction();
                        int end = Math.min(count, sent + perTxn);
                        for (; sent < end; sent++)
                            producer.send(new ProducerRecord<>(topic, 0, null, value));
                        producer.commitTransaction();
                        transactions++;
                    }
                    seconds = (System.nanoTime() - started) / 1e9;
                }
                emit(map("records", count, "seconds", seconds, "transactions", transactions));
            }
            default -> throw new UsageError("unknown txn mode " + mode);
        }
    }

    // ---------------------------------------------------------------- admin

    static void admin() throws Exception {
        if (positional.size() < 2) throw new UsageError("admin needs a subcommand");
        String sub = positional.get(1);
        props.putIfAbsent("default.api.timeout.ms", "30000");
        props.putIfAbsent("request.timeout.ms", "15000");
        try (Admin a = Admin.create(props)) {
            switch (sub) {
                case "list-topics" -> {
                    List<String> names = new ArrayList<>(a.listTopics().names().get());
                    Collections.sort(names);
                    emit(map("topics", names));
                }
                case "create-topic" -> {
                    String t = arg(2);
                    var nt = new NewTopic(t, Optional.of(Integer.parseInt(opts.getOrDefault("partitions", "1"))),
                            Optional.of(Short.parseShort(opts.getOrDefault("replication-factor", "1"))));
                    a.createTopics(List.of(nt)).all().get();
                    emit(map("created", t));
                }
                case "describe-topic" -> {
                    String t = arg(2);
                    TopicDescription d = a.describeTopics(List.of(t)).allTopicNames().get().get(t);
                    List<Object> parts = new ArrayList<>();
                    for (TopicPartitionInfo p : d.partitions())
                        parts.add(map("partition", p.partition(),
                                "leader", p.leader() == null ? null : p.leader().id(),
                                "replicas", p.replicas().stream().map(n -> n.id()).toList(),
                                "isr", p.isr().stream().map(n -> n.id()).toList()));
                    emit(map("topic", t, "topic_id", d.topicId().toString(), "internal", d.isInternal(),
                            "partitions", parts));
                }
                case "delete-topic" -> {
                    String t = arg(2);
                    a.deleteTopics(List.of(t)).all().get();
                    emit(map("deleted", t));
                }
                case "alter-config" -> {
                    String t = arg(2);
                    String[] kv = arg(3).split("=", 2);
                    if (kv.length != 2) throw new UsageError("alter-config needs key=value");
                    var res = new ConfigResource(ConfigResource.Type.TOPIC, t);
                    var op = new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET);
                    a.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get();
                    emit(map("altered", t, "config", map(kv[0], kv[1])));
                }
                case "describe-config" -> {
                    String t = arg(2);
                    var res = new ConfigResource(ConfigResource.Type.TOPIC, t);
                    Config cfg = a.describeConfigs(List.of(res)).all().get().get(res);
                    Map<String, Object> values = new TreeMap<>(), sources = new TreeMap<>();
                    for (ConfigEntry e : cfg.entries()) {
                        values.put(e.name(), e.value());
                        sources.put(e.name(), e.source().name());
                    }
                    emit(map("topic", t, "configs", values, "sources", sources));
                }
                default -> throw new UsageError("unknown admin subcommand " + sub);
            }
        }
    }

    // ---------------------------------------------------------------- arguments

    static class UsageError extends RuntimeException {
        UsageError(String m) { super(m); }
    }

    static final Set<String> FLAGS = Set.of("headers", "abort");

    static void parse(String[] argv) {
        for (int i = 0; i < argv.length; i++) {
            String s = argv[i];
            if (!s.startsWith("--")) { positional.add(s); continue; }
            String k = s.substring(2);
            if (FLAGS.contains(k)) { opts.put(k, "true"); continue; }
            if (i + 1 >= argv.length) throw new UsageError(s + " needs a value");
            String v = argv[++i];
            if (k.equals("config")) {
                String[] kv = v.split("=", 2);
                if (kv.length != 2) throw new UsageError("--config needs key=value");
                props.put(kv[0], kv[1]);
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

    static String arg(int i) {
        if (positional.size() <= i) throw new UsageError("missing argument " + i + " of " + positional);
        return positional.get(i);
    }

    // ---------------------------------------------------------------- JSON output

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static void emit(Object o) {
        StringBuilder sb = new StringBuilder();
        json(sb, o);
        System.out.println(sb);
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
