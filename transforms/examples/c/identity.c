/* identity (batch ABI): every input record, unchanged, to the first output topic. */
#include "sluice_transform.h"

void sluice_transform(const sluice_record *r) { sluice_write_record(0, r); }
