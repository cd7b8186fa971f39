// loop: never returns from its first record (the CPU budget must stop it).
package main

import (
	"fmt"
	"os"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

var spins uint64

func main() {
	transform.OnRecordWritten(spin)
}

func spin(e transform.WriteEvent, w transform.RecordWriter) error {
	fmt.Fprintf(os.Stderr, "spinning on offset %d\n", e.Record().Offset)
	for {
		spins++
	}
}
