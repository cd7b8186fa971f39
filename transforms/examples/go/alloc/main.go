// alloc: allocates (and keeps) 1 MiB per step without bound (the memory limit must stop it).
package main

import (
	"fmt"
	"os"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

var kept [][]byte

func main() {
	transform.OnRecordWritten(hoard)
}

func hoard(e transform.WriteEvent, w transform.RecordWriter) error {
	fmt.Fprintf(os.Stderr, "hoarding from offset %d\n", e.Record().Offset)
	for {
		b := make([]byte, 1<<20)
		b[0] = 1
		kept = append(kept, b)
	}
}
