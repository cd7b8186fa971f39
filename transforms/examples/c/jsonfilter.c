/* jsonfilter (batch ABI): keeps the records whose value is a JSON object with a top-level
 * field "level" equal to the string "error" (escapes decoded; the last of duplicate fields
 * counts); drops every other record, invalid JSON included. Nesting deeper than 512 levels
 * counts as invalid. */
#include "sluice_transform.h"

typedef struct {
    const uint8_t *p, *end;
    int depth;
} json;

static void ws(json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int hex(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* A string at j->p; when want != NULL, *equal says whether its decoded text is `want`
 * (ASCII). Returns 0 when malformed. */
static int string(json *j, const char *want, int *equal) {
    if (j->p >= j->end || *j->p != '"') return 0;
    j->p++;
    int i = 0, same = 1;
    for (;;) {
        if (j->p >= j->end) return 0;
        uint8_t c = *j->p++;
        int decoded;
        if (c == '"') break;
        if (c < 0x20) return 0;
        if (c == '\\') {
            if (j->p >= j->end) return 0;
            uint8_t e = *j->p++;
            switch (e) {
            case '"': case '\\': case '/': decoded = e; break;
            case 'b': decoded = '\b'; break;
            case 'f': decoded = '\f'; break;
            case 'n': decoded = '\n'; break;
            case 'r': decoded = '\r'; break;
            case 't': decoded = '\t'; break;
            case 'u': {
                if (j->end - j->p < 4) return 0;
                int v = 0;
                for (int k = 0; k < 4; k++) {
                    int h = hex(j->p[k]);
                    if (h < 0) return 0;
                    v = v * 16 + h;
                }
                j->p += 4;
                decoded = v < 0x80 ? v : 0x100; /* non-ASCII never equals an ASCII target */
                break;
            }
            default: return 0;
            }
        } else {
            decoded = c;
        }
        if (want) {
            if (!want[i] || want[i] != decoded) same = 0;
            if (want[i]) i++;
        }
    }
    if (want) *equal = same && !want[i];
    return 1;
}

static int value(json *j);

static int number(json *j) {
    const uint8_t *p = j->p, *e = j->end;
    if (p < e && *p == '-') p++;
    if (p >= e) return 0;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < e && *p >= '0' && *p <= '9') p++;
    } else {
        return 0;
    }
    if (p < e && *p == '.') {
        p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    j->p = p;
    return 1;
}

static int literal(json *j, const char *word) {
    for (int i = 0; word[i]; i++) {
        if (j->p >= j->end || *j->p != (uint8_t)word[i]) return 0;
        j->p++;
    }
    return 1;
}

/* An object; when level != NULL, *level is set to whether its last "level" is "error". */
static int object(json *j, int *level) {
    j->p++; /* { */
    if (++j->depth > 512) return 0;
    ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        j->depth--;
        return 1;
    }
    for (;;) {
        ws(j);
        int is_level = 0;
        if (!string(j, level ? "level" : NULL, &is_level)) return 0;
        ws(j);
        if (j->p >= j->end || *j->p != ':') return 0;
        j->p++;
        ws(j);
        if (level && is_level) {
            int is_error = 0;
            if (j->p < j->end && *j->p == '"') {
                if (!string(j, "error", &is_error)) return 0;
            } else if (!value(j)) {
                return 0;
            }
            *level = is_error;
        } else if (!value(j)) {
            return 0;
        }
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            j->depth--;
            return 1;
        }
        return 0;
    }
}

static int array(json *j) {
    j->p++; /* [ */
    if (++j->depth > 512) return 0;
    ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        j->depth--;
        return 1;
    }
    for (;;) {
        ws(j);
        if (!value(j)) return 0;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            j->depth--;
            return 1;
        }
        return 0;
    }
}

static int value(json *j) {
    if (j->p >= j->end) return 0;
    switch (*j->p) {
    case '{': return object(j, NULL);
    case '[': return array(j);
    case '"': return string(j, NULL, NULL);
    case 't': return literal(j, "true");
    case 'f': return literal(j, "false");
    case 'n': return literal(j, "null");
    default: return number(j);
    }
}

static int keep(sluice_bytes v) {
    if (v.len < 0) return 0;
    json j = {v.data, v.data + v.len, 0};
    ws(&j);
    if (j.p >= j.end || *j.p != '{') return 0;
    int level = 0;
    if (!object(&j, &level)) return 0;
    ws(&j);
    return j.p == j.end && level;
}

void sluice_transform(const sluice_record *r) {
    if (keep(r->value)) sluice_write_record(0, r);
}
