// jsonfilter: keeps the records whose value is a JSON object with a top-level field
// "level" equal to the string "error"; drops every other record (invalid JSON included).
package main

import (
	"encoding/json"

	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

func main() {
	transform.OnRecordWritten(filter)
}

func filter(e transform.WriteEvent, w transform.RecordWriter) error {
	r := e.Record()
	var doc map[string]json.RawMessage
	if r.Value == nil || json.Unmarshal(r.Value, &doc) != nil || doc == nil {
		return nil
	}
	var level string
	raw, ok := doc["level"]
	if !ok || json.Unmarshal(raw, &level) != nil || level != "error" {
		return nil
	}
	return w.Write(r)
}
