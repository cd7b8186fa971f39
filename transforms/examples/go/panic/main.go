// panic: writes records through until it meets a value equal to "boom", then panics
// with a message that names the record's offset.
package main

import (
	"fmt"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

func main() {
	transform.OnRecordWritten(explode)
}

func explode(e transform.WriteEvent, w transform.RecordWriter) error {
	r := e.Record()
	if string(r.Value) == "boom" {
		panic(fmt.Sprintf("boom at offset %d", r.Offset))
	}
	return w.Write(r)
}
