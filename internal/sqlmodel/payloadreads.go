package sqlmodel

import (
	"github.com/nats-sinks/nats-sink/internal/fields"
	"github.com/nats-sinks/nats-sink/internal/mapping"
	"github.com/nats-sinks/nats-sink/sqlconfig"
)

// PayloadReads returns the settings of a SQL sink's shared keys that read
// fields of the payload, for sink.PayloadReader: in layout mapped, each
// mapping item whose path is a JSON Pointer and the payload_field of
// strategy payload_field, for the sink's table and every route, as paths
// relative to the sink object. The loader refuses them on subjects that
// payload encryption applies to (docs/sql.md#mapped-layout): the sink would
// see only ciphertext.
func PayloadReads[R sqlconfig.Route](s sqlconfig.Shared[R]) []string {
	if s.Layout != "mapped" {
		return nil
	}
	var out []string
	add := func(idem *sqlconfig.Idempotency, idemPath string, items []sqlconfig.MappingItem, mappingPath string) {
		if idem != nil && idem.Strategy == sqlconfig.StrategyPayloadField {
			out = append(out, idemPath+".payload_field")
		}
		for i, it := range items {
			if mapping.ReadsPayload(it.Path) {
				out = append(out, fields.Index(mappingPath, i)+".path")
			}
		}
	}
	add(&s.Idempotency, "idempotency", s.Mapping, "mapping")
	for i, r := range s.TableRoutes {
		var idem *sqlconfig.Idempotency
		var items *[]sqlconfig.MappingItem
		switch r := any(r).(type) {
		case sqlconfig.UpsertRoute:
			idem, items = r.Idempotency, r.Mapping
		case sqlconfig.MergeRoute:
			idem, items = r.Idempotency, r.Mapping
		}
		rp := fields.Index("table_routes", i)
		var own []sqlconfig.MappingItem // a route without its own uses the sink's, listed above
		if items != nil {
			own = *items
		}
		add(idem, rp+".idempotency", own, rp+".mapping")
	}
	return out
}
