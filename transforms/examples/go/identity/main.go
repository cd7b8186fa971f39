// identity: every input record is written unchanged to the first output topic.
package main

import "github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"

func main() {
	transform.OnRecordWritten(identity)
}

func identity(e transform.WriteEvent, w transform.RecordWriter) error {
	return w.Write(e.Record())
}
