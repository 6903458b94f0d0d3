package ops

import (
	"sync"

	"github.com/nats-sinks/nats-sink/config"
	"github.com/nats-sinks/nats-sink/internal/dlq"
	"github.com/nats-sinks/nats-sink/internal/seal"
	"github.com/nats-sinks/nats-sink/internal/subject"
)

// Unsealer returns what a redrive decrypts with: the configuration's
// encryption policy decides which original subjects are encrypted (the
// first matching rule, else the top level), and a key is found by the
// envelope's key_id among extra (--key flags, first), the rules' and the
// top level's keys. Keys are resolved when first needed; one that cannot
// be resolved (variable unset, file unreadable) is unavailable, which
// refuses only the entries that need it.
func Unsealer(e *config.Encryption, env config.Env, extra []seal.Key) dlq.Unsealer {
	type source struct {
		id      string
		resolve func() ([]byte, bool, error)
	}
	var sources []source
	for i := range e.Rules {
		r := &e.Rules[i]
		if !r.Enabled {
			continue
		}
		id := e.KeyID
		if r.KeyID != nil {
			id = *r.KeyID
		}
		sources = append(sources, source{id, func() ([]byte, bool, error) { return e.RuleKey(i, env) }})
	}
	if e.HasKey() {
		sources = append(sources, source{e.KeyID, func() ([]byte, bool, error) { return e.EncryptionKey(env) }})
	}
	var mu sync.Mutex
	cache := map[string]*seal.Key{}
	return dlq.Unsealer{
		Encrypts: func(subj string) bool {
			for _, r := range e.Rules {
				if subject.Match(r.Subject, subj) {
					return r.Enabled
				}
			}
			return e.Enabled
		},
		Key: func(id string) (seal.Key, bool) {
			for _, k := range extra {
				if k.ID == id {
					return k, true
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if k, done := cache[id]; done {
				return deref(k)
			}
			var found *seal.Key
			for _, s := range sources {
				if s.id != id {
					continue
				}
				if raw, ok, err := s.resolve(); err == nil && ok && len(raw) == seal.KeySize {
					k := seal.Key{ID: id}
					copy(k.Secret[:], raw)
					clear(raw)
					found = &k
					break
				}
			}
			cache[id] = found
			return deref(found)
		},
	}
}

func deref(k *seal.Key) (seal.Key, bool) {
	if k == nil {
		return seal.Key{}, false
	}
	return *k, true
}
