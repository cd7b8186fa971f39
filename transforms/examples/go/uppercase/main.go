// uppercase: the value with ASCII letters a-z made upper case (other bytes unchanged);
// key and headers as they were; a null value stays null.
package main

import "github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"

func main() {
	transform.OnRecordWritten(uppercase)
}

func uppercase(e transform.WriteEvent, w transform.RecordWriter) error {
	r := e.Record()
	if r.Value != nil {
		v := make([]byte, len(r.Value))
		for i, b := range r.Value {
			if b >= 'a' && b <= 'z' {
				b -= 'a' - 'A'
			}
			v[i] = b
		}
		r.Value = v
	}
	return w.Write(r)
}
