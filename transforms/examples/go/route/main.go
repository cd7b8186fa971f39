// route: every record goes to the first output topic; records whose key starts with "b"
// also go, with transform.ToTopic, to the topic named by the variable ROUTE_TO (default:
// the second output topic, REDPANDA_OUTPUT_TOPIC_1).
package main

import (
	"os"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

var target string

func main() {
	target = os.Getenv("ROUTE_TO")
	if target == "" {
		target = os.Getenv("REDPANDA_OUTPUT_TOPIC_1")
	}
	transform.OnRecordWritten(route)
}

func route(e transform.WriteEvent, w transform.RecordWriter) error {
	r := e.Record()
	if err := w.Write(r); err != nil {
		return err
	}
	if len(r.Key) > 0 && r.Key[0] == 'b' {
		return w.Write(r, transform.ToTopic(target))
	}
	return nil
}
