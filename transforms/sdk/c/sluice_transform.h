/*
 * Sluice batch-ABI SDK for C (transforms/ABI.md): include it once, define
 *
 *     void sluice_transform(const sluice_record *record);
 *
 * and call sluice_write* for each output record. Build (clang + lld, no libc):
 *
 *     clang --target=wasm32 -nostdlib -O2 -mbulk-memory -I transforms/sdk/c \
 *           -Wl,--no-entry -o my_transform.wasm my_transform.c
 *
 * The host hands the guest a whole batch per call; the SDK walks its records (Kafka's record
 * format, uncompressed), calls sluice_transform for each, and describes the output to the
 * host. No call crosses into the host per record.
 *
 * Memory: a bump allocator over linear memory, reset at each batch (sluice_alloc). Data that
 * must outlive a batch belongs in static storage. Define SLUICE_ON_START to the name of a
 * function to run once at start (it must not call sluice_alloc).
 */
#ifndef SLUICE_TRANSFORM_H
#define SLUICE_TRANSFORM_H

typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __SIZE_TYPE__ size_t;
typedef __UINTPTR_TYPE__ uintptr_t;
#ifndef NULL
#define NULL ((void *)0)
#endif

#define SLUICE_IMPORT(name) __attribute__((import_module("sluice_batch"), import_name(name)))
#define SLUICE_EXPORT(name) __attribute__((export_name(name)))
#define SLUICE_MAX_TOPICS 8

SLUICE_IMPORT("check_abi_version_1") void sluice_abi_check_abi_version_1(void);
SLUICE_IMPORT("fail") void sluice_abi_fail(const uint8_t *text, int32_t len);
SLUICE_IMPORT("log") void sluice_abi_log(int32_t stream, const uint8_t *text, int32_t len);

/* ------------------------------------------------------------------ values */

/* A byte string; len == -1 (data NULL) is null, len == 0 is empty. */
typedef struct {
    const uint8_t *data;
    int32_t len;
} sluice_bytes;

typedef struct {
    sluice_bytes key;
    sluice_bytes value;
} sluice_header;

typedef struct {
    int64_t offset;    /* absolute */
    int64_t timestamp; /* absolute, ms */
    uint8_t attributes;
    sluice_bytes key;
    sluice_bytes value;
    int32_t header_count;
    const uint8_t *headers;  /* header_count x (key, value), Kafka encoding: sluice_header_next */
    const uint8_t *payload;  /* key, value and headers as stored (sluice_write_record copies it) */
    int32_t payload_len;
} sluice_record;

typedef struct {
    const uint8_t *p;
    int32_t left;
} sluice_header_iter;

/* The batch being processed (the input header, ABI.md). */
typedef struct {
    int64_t base_offset;
    int32_t record_count;
    int32_t partition_leader_epoch;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t output_topic_count;
} sluice_batch_info;

static sluice_batch_info sluice_batch;

void sluice_transform(const sluice_record *record);

/* ------------------------------------------------------------------ memory */

void *memcpy(void *dst, const void *src, size_t n) {
    __builtin_memcpy(dst, src, n); /* memory.copy with -mbulk-memory */
    return dst;
}
void *memset(void *dst, int c, size_t n) {
    __builtin_memset(dst, c, n);
    return dst;
}

extern unsigned char __heap_base;
static uintptr_t sluice_heap_top;
static uintptr_t sluice_batch_mark;

__attribute__((noreturn)) static void sluice_fail(const char *text) {
    int32_t n = 0;
    while (text[n]) n++;
    sluice_abi_fail((const uint8_t *)text, n);
    __builtin_unreachable();
}

static void sluice_log(const char *text) {
    int32_t n = 0;
    while (text[n]) n++;
    sluice_abi_log(2, (const uint8_t *)text, n);
}

/* n bytes, 8-aligned, valid until the next batch starts */
static void *sluice_alloc(uint32_t n) {
    if (!sluice_heap_top) sluice_heap_top = (uintptr_t)&__heap_base;
    uintptr_t start = (sluice_heap_top + 7) & ~(uintptr_t)7;
    uintptr_t end = start + n;
    if (end < start) sluice_fail("sluice_alloc: size overflow");
    uintptr_t have = __builtin_wasm_memory_size(0) * 65536u;
    if (end > have) {
        uintptr_t pages = (end - have + 65535) / 65536;
        if (__builtin_wasm_memory_grow(0, pages) == (uintptr_t)-1) {
            sluice_fail("sluice_alloc: out of memory (transforms.memory.max.bytes)");
        }
    }
    sluice_heap_top = end;
    return (void *)start;
}

/* ------------------------------------------------------------------ varints */

static int64_t sluice_varint(const uint8_t **p, const uint8_t *end) {
    uint64_t raw = 0;
    int shift = 0;
    for (;;) {
        if (*p >= end || shift > 63) sluice_fail("malformed varint in the input");
        uint8_t b = *(*p)++;
        raw |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
    }
    return (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
}

static sluice_bytes sluice_read_bytes(const uint8_t **p, const uint8_t *end) {
    sluice_bytes b;
    int64_t n = sluice_varint(p, end);
    if (n < 0) {
        b.data = NULL;
        b.len = -1;
        return b;
    }
    if (n > end - *p) sluice_fail("a record field runs past its batch");
    b.data = *p;
    b.len = (int32_t)n;
    *p += n;
    return b;
}

static uint32_t sluice_varint_size(int64_t v) {
    uint64_t raw = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    uint32_t n = 1;
    while (raw >= 0x80) {
        raw >>= 7;
        n++;
    }
    return n;
}

static uint8_t *sluice_put_varint(uint8_t *p, int64_t v) {
    uint64_t raw = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (raw >= 0x80) {
        *p++ = (uint8_t)(raw | 0x80);
        raw >>= 7;
    }
    *p++ = (uint8_t)raw;
    return p;
}

static uint8_t *sluice_put_bytes(uint8_t *p, sluice_bytes b) {
    if (b.len < 0) return sluice_put_varint(p, -1);
    p = sluice_put_varint(p, b.len);
    __builtin_memcpy(p, b.data, (size_t)b.len);
    return p + b.len;
}

static uint32_t sluice_bytes_size(sluice_bytes b) {
    return b.len < 0 ? 1 : sluice_varint_size(b.len) + (uint32_t)b.len;
}

static sluice_header_iter sluice_headers(const sluice_record *r) {
    sluice_header_iter it = {r->headers, r->header_count};
    return it;
}

/* the next header into *h; 0 when there is none */
static int sluice_header_next(sluice_header_iter *it, sluice_header *h) {
    if (it->left <= 0) return 0;
    const uint8_t *end = (const uint8_t *)~(uintptr_t)0;
    h->key = sluice_read_bytes(&it->p, end);
    h->value = sluice_read_bytes(&it->p, end);
    it->left--;
    return 1;
}

/* ------------------------------------------------------------------ output */

/* Records in write order (Kafka framing), and per record its topic, start and length. */
typedef struct {
    uint32_t topic;
    uint32_t start;
    uint32_t len;
} sluice_out_entry;

static uint8_t *sluice_out;
static uint32_t sluice_out_len, sluice_out_cap;
static sluice_out_entry *sluice_index;
static uint32_t sluice_index_len, sluice_index_cap;
static uint32_t sluice_topic_count[SLUICE_MAX_TOPICS];

static void sluice_reserve_out(uint32_t n) {
    if (sluice_out_len + n <= sluice_out_cap) return;
    uint32_t cap = sluice_out_cap ? sluice_out_cap * 2 : 65536;
    while (cap < sluice_out_len + n) cap *= 2;
    uint8_t *bigger = (uint8_t *)sluice_alloc(cap);
    if (sluice_out_len) __builtin_memcpy(bigger, sluice_out, sluice_out_len);
    sluice_out = bigger;
    sluice_out_cap = cap;
}

static void sluice_add_entry(uint32_t topic, uint32_t start, uint32_t len) {
    if (sluice_index_len == sluice_index_cap) {
        uint32_t cap = sluice_index_cap ? sluice_index_cap * 2 : 1024;
        sluice_out_entry *bigger = (sluice_out_entry *)sluice_alloc(cap * sizeof(sluice_out_entry));
        if (sluice_index_len) {
            __builtin_memcpy(bigger, sluice_index, sluice_index_len * sizeof(sluice_out_entry));
        }
        sluice_index = bigger;
        sluice_index_cap = cap;
    }
    sluice_out_entry e = {topic, start, len};
    sluice_index[sluice_index_len++] = e;
}

/* Starts a record of `body` payload bytes for `topic`; returns where the payload goes. */
static uint8_t *sluice_begin_record(int32_t topic, uint32_t payload) {
    if (topic < 0 || topic >= SLUICE_MAX_TOPICS) sluice_fail("sluice_write: topic index out of range");
    uint32_t delta = sluice_topic_count[topic]++;
    uint32_t body = 2 + sluice_varint_size(delta) + payload;
    uint32_t total = sluice_varint_size(body) + body;
    sluice_reserve_out(total);
    uint32_t start = sluice_out_len;
    uint8_t *p = sluice_put_varint(sluice_out + start, body);
    *p++ = 0; /* attributes */
    *p++ = 0; /* timestamp delta */
    p = sluice_put_varint(p, delta);
    sluice_out_len = start + total;
    sluice_add_entry((uint32_t)topic, start, total);
    return p;
}

/* A record to output topic `topic` (0 = the first); headers may be NULL when n == 0. */
static void sluice_write(int32_t topic, sluice_bytes key, sluice_bytes value,
                         const sluice_header *headers, int32_t n) {
    uint32_t payload = sluice_bytes_size(key) + sluice_bytes_size(value) + sluice_varint_size(n);
    for (int32_t i = 0; i < n; i++) {
        payload += sluice_bytes_size(headers[i].key) + sluice_bytes_size(headers[i].value);
    }
    uint8_t *p = sluice_begin_record(topic, payload);
    p = sluice_put_bytes(p, key);
    p = sluice_put_bytes(p, value);
    p = sluice_put_varint(p, n);
    for (int32_t i = 0; i < n; i++) {
        p = sluice_put_bytes(p, headers[i].key);
        p = sluice_put_bytes(p, headers[i].value);
    }
}

/* The input record, unchanged, to `topic`. */
static void sluice_write_record(int32_t topic, const sluice_record *r) {
    uint8_t *p = sluice_begin_record(topic, (uint32_t)r->payload_len);
    __builtin_memcpy(p, r->payload, (size_t)r->payload_len);
}

/* The input record with a new value of value_len bytes (-1: null) to `topic`; returns where
 * to write the value (NULL for a null value). */
static uint8_t *sluice_write_with_value(int32_t topic, const sluice_record *r, int32_t value_len) {
    sluice_bytes value = {NULL, value_len < 0 ? -1 : value_len};
    const uint8_t *headers_end = r->payload + r->payload_len;
    uint32_t headers_len = (uint32_t)(headers_end - r->headers);
    uint32_t payload = sluice_bytes_size(r->key) + sluice_bytes_size(value) +
                       sluice_varint_size(r->header_count) + headers_len;
    uint8_t *p = sluice_begin_record(topic, payload);
    p = sluice_put_bytes(p, r->key);
    uint8_t *v = NULL;
    if (value_len < 0) {
        p = sluice_put_varint(p, -1);
    } else {
        p = sluice_put_varint(p, value_len);
        v = p;
        p += value_len;
    }
    p = sluice_put_varint(p, r->header_count);
    __builtin_memcpy(p, r->headers, headers_len);
    return v;
}

/* ------------------------------------------------------------------ the exports */

static uint8_t *sluice_input;
static int32_t sluice_input_cap;
static uint32_t sluice_descriptor[1 + 4 * SLUICE_MAX_TOPICS];

SLUICE_EXPORT("sluice_batch_input") uint8_t *sluice_batch_input(int32_t size) {
    /* between batches: nothing else is live, so start the heap over */
    sluice_heap_top = 0;
    sluice_input = (uint8_t *)sluice_alloc((uint32_t)size);
    sluice_input_cap = size;
    sluice_batch_mark = sluice_heap_top;
    return sluice_input;
}

static int64_t sluice_le64(const uint8_t *p) {
    int64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
}
static int32_t sluice_le32(const uint8_t *p) {
    int32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}
static int16_t sluice_le16(const uint8_t *p) {
    int16_t v;
    __builtin_memcpy(&v, p, 2);
    return v;
}

static uint32_t sluice_finish(void) {
    uint32_t used = 0, n = 0;
    for (int t = 0; t < SLUICE_MAX_TOPICS; t++) used += sluice_topic_count[t] != 0;
    uint8_t *gathered = sluice_out;
    if (used > 1) gathered = (uint8_t *)sluice_alloc(sluice_out_len);
    uint32_t pos = 0;
    for (uint32_t t = 0; t < SLUICE_MAX_TOPICS; t++) {
        if (!sluice_topic_count[t]) continue;
        uint32_t start = pos;
        if (used > 1) {
            for (uint32_t i = 0; i < sluice_index_len; i++) {
                if (sluice_index[i].topic != t) continue;
                __builtin_memcpy(gathered + pos, sluice_out + sluice_index[i].start, sluice_index[i].len);
                pos += sluice_index[i].len;
            }
        } else {
            pos = sluice_out_len;
        }
        uint32_t *d = &sluice_descriptor[1 + 4 * n++];
        d[0] = t;
        d[1] = sluice_topic_count[t];
        d[2] = (uint32_t)(uintptr_t)(gathered + start);
        d[3] = pos - start;
    }
    sluice_descriptor[0] = n;
    return (uint32_t)(uintptr_t)sluice_descriptor;
}

SLUICE_EXPORT("sluice_batch_process") uint32_t sluice_batch_process(int32_t len) {
    if (!sluice_input || len > sluice_input_cap || len < 64) sluice_fail("bad batch buffer");
    sluice_heap_top = sluice_batch_mark;
    sluice_out = NULL;
    sluice_out_len = sluice_out_cap = 0;
    sluice_index = NULL;
    sluice_index_len = sluice_index_cap = 0;
    for (int t = 0; t < SLUICE_MAX_TOPICS; t++) sluice_topic_count[t] = 0;

    const uint8_t *in = sluice_input;
    sluice_batch.base_offset = sluice_le64(in);
    sluice_batch.record_count = sluice_le32(in + 8);
    sluice_batch.partition_leader_epoch = sluice_le32(in + 12);
    sluice_batch.attributes = sluice_le16(in + 16);
    sluice_batch.last_offset_delta = sluice_le32(in + 20);
    sluice_batch.base_timestamp = sluice_le64(in + 24);
    sluice_batch.max_timestamp = sluice_le64(in + 32);
    sluice_batch.producer_id = sluice_le64(in + 40);
    sluice_batch.producer_epoch = sluice_le16(in + 48);
    sluice_batch.base_sequence = sluice_le32(in + 52);
    int32_t records_len = sluice_le32(in + 56);
    sluice_batch.output_topic_count = sluice_le32(in + 60);
    if (records_len < 0 || 64 + records_len > len) sluice_fail("bad batch length");

    const uint8_t *p = in + 64;
    const uint8_t *end = p + records_len;
    int log_append_time = (sluice_batch.attributes & 0x08) != 0;
    sluice_record r;
    while (p < end) {
        int64_t length = sluice_varint(&p, end);
        if (length < 0 || length > end - p) sluice_fail("a record runs past its batch");
        const uint8_t *rec_end = p + length;
        r.attributes = *p++;
        int64_t ts_delta = sluice_varint(&p, rec_end);
        int64_t offset_delta = sluice_varint(&p, rec_end);
        r.timestamp = log_append_time ? sluice_batch.max_timestamp
                                      : sluice_batch.base_timestamp + ts_delta;
        r.offset = sluice_batch.base_offset + offset_delta;
        r.payload = p;
        r.payload_len = (int32_t)(rec_end - p);
        r.key = sluice_read_bytes(&p, rec_end);
        r.value = sluice_read_bytes(&p, rec_end);
        r.header_count = (int32_t)sluice_varint(&p, rec_end);
        r.headers = p;
        sluice_transform(&r);
        p = rec_end;
    }
    return sluice_finish();
}

SLUICE_EXPORT("_start") void _start(void) {
    sluice_abi_check_abi_version_1();
#ifdef SLUICE_ON_START
    SLUICE_ON_START();
#endif
}

#endif /* SLUICE_TRANSFORM_H */
