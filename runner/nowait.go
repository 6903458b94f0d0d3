package runner

import (
	"reflect"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// noWaitOpt returns a FetchOpt that makes Fetch send a no-wait pull
// request, what FetchNoWait sends, while keeping Fetch's other options:
// nats.go's FetchNoWait takes none, so it cannot carry a byte limit, and an
// unbounded no-wait request for 100 messages of 1 MB gets the connection
// dropped as a slow consumer.
//
// nats.go offers no option for it. The option sets the exported NoWait and
// Expires fields of the request struct a FetchOpt receives (the struct type
// itself is unexported) through reflection. It returns nil when that struct
// has no such fields, as a future nats.go might; the runner then probes with
// a short expiry instead (probeWait). TestNoWaitOption pins the behaviour
// for the nats.go in go.mod.
func noWaitOpt() jetstream.FetchOpt {
	t := reflect.TypeFor[jetstream.FetchOpt]()
	if t.NumIn() != 1 || t.In(0).Kind() != reflect.Pointer || t.In(0).Elem().Kind() != reflect.Struct ||
		t.NumOut() != 1 || t.Out(0) != reflect.TypeFor[error]() {
		return nil
	}
	req := t.In(0).Elem()
	noWait, ok1 := req.FieldByName("NoWait")
	expires, ok2 := req.FieldByName("Expires")
	if !ok1 || !ok2 || !noWait.IsExported() || !expires.IsExported() ||
		noWait.Type != reflect.TypeFor[bool]() || expires.Type != reflect.TypeFor[time.Duration]() {
		return nil
	}
	noErr := reflect.Zero(t.Out(0))
	fn := reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		r := args[0].Elem()
		r.FieldByIndex(noWait.Index).SetBool(true)
		r.FieldByIndex(expires.Index).SetInt(0) // no expiry: a pure no-wait request
		return []reflect.Value{noErr}
	})
	return fn.Interface().(jetstream.FetchOpt)
}
