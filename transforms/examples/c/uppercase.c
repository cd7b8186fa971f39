/* uppercase (batch ABI): the value with ASCII a-z made upper case; key and headers kept;
 * a null value stays null. */
#include "sluice_transform.h"

void sluice_transform(const sluice_record *r) {
    uint8_t *v = sluice_write_with_value(0, r, r->value.len);
    for (int32_t i = 0; i < r->value.len; i++) {
        uint8_t b = r->value.data[i];
        v[i] = (b >= 'a' && b <= 'z') ? (uint8_t)(b - 32) : b;
    }
}
